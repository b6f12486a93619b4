"""Data-dependent indexing ops (kind OPAQUE): Gather, GatherElements, GatherND, ScatterElements, ScatterND,
TensorScatter, OneHot, Compress, NonZero, ReverseSequence, Trilu.

Negative indices count from the end of their axis (index + dim); an index still out of range after that is a
KernelError, as in onnxruntime.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from .registry import (
    DynamicShapeError,
    KernelError,
    infer_same,
    normalize_axis,
    reference,
)
from .tensor import as_ints, const_input, same_dtype


def wrap_indices(idx, dim, what: str) -> np.ndarray:
    """int64 copy of ``idx`` with negative entries wrapped; raises if any entry is out of [-dim, dim)."""
    idx = np.asarray(idx).astype(np.int64)
    if idx.ndim == 0 and isinstance(dim, (int, np.integer)):     # (shape arithmetic: one index, checked cheaply)
        i, d = int(idx), int(dim)
        if not -d <= i < d:
            raise KernelError(f"{what}: index out of range for dim {d}")
        return np.array(i + d if i < 0 else i, np.int64)
    dim = np.asarray(dim, np.int64)
    if idx.size and (np.any(idx < -dim) or np.any(idx >= dim)):
        raise KernelError(f"{what}: index out of range for dim {dim.tolist()}")
    return np.where(idx < 0, idx + dim, idx)


# -- Gather family -------------------------------------------------------------------------------------------
def _gather_infer(node):
    data, idx = node.inputs[0].shape, node.inputs[1].shape
    axis = normalize_axis(node.attrs.get("axis", 0), len(data), "Gather axis")
    return same_dtype(node, data[:axis] + idx + data[axis + 1:])


@reference("Gather", infer=_gather_infer)
def gather(attrs, x, indices):
    axis = normalize_axis(attrs.get("axis", 0), x.ndim, "Gather axis")
    return np.take(x, wrap_indices(indices, x.shape[axis], "Gather"), axis=axis)


def _gather_elements_infer(node):
    data, idx = node.inputs[0].shape, node.inputs[1].shape
    if len(data) != len(idx):
        raise KernelError(f"GatherElements: data rank {len(data)} != indices rank {len(idx)}")
    normalize_axis(node.attrs.get("axis", 0), len(data), "GatherElements axis")
    return same_dtype(node, idx)


@reference("GatherElements", infer=_gather_elements_infer)
def gather_elements(attrs, x, indices):
    axis = normalize_axis(attrs.get("axis", 0), x.ndim, "GatherElements axis")
    if indices.ndim != x.ndim:
        raise KernelError(f"GatherElements: data rank {x.ndim} != indices rank {indices.ndim}")
    if any(i > d for a, (i, d) in enumerate(zip(indices.shape, x.shape)) if a != axis):
        raise KernelError(f"GatherElements: indices {list(indices.shape)} exceed data {list(x.shape)}")
    # indices address data[j0, .., idx, .., jn] with j taken directly: trim data to the indices' extent first
    view = x[tuple(slice(None) if a == axis else slice(0, i) for a, i in enumerate(indices.shape))]
    return np.take_along_axis(view, wrap_indices(indices, x.shape[axis], "GatherElements"), axis=axis)


def gather_nd_shape(data, idx, batch_dims: int) -> tuple[int, ...]:
    k = idx[-1] if idx else None
    if k is None or k > len(data) - batch_dims or data[:batch_dims] != idx[:batch_dims]:
        raise KernelError(f"GatherND: indices {list(idx)} do not fit data {list(data)} (batch_dims={batch_dims})")
    return tuple(idx[:-1]) + tuple(data[batch_dims + k:])


def _nd_index(data_shape, indices, batch_dims, what):
    """Flattens the batch dims: returns (batch-flat data shape, index tuple of (B, N) arrays, k)."""
    b = batch_dims
    k = indices.shape[-1]
    batch = int(np.prod(data_shape[:b], dtype=np.int64))
    n = int(np.prod(indices.shape[b:-1], dtype=np.int64))
    flat = indices.reshape(batch, n, k)
    wrapped = wrap_indices(flat, np.array(data_shape[b:b + k], np.int64), what)
    rows = np.broadcast_to(np.arange(batch)[:, None], (batch, n))
    return (batch,) + tuple(data_shape[b:]), (rows,) + tuple(wrapped[..., j] for j in range(k))


@reference("GatherND", infer=lambda n: same_dtype(n, gather_nd_shape(
    n.inputs[0].shape, n.inputs[1].shape, n.attrs.get("batch_dims", 0))))
def gather_nd(attrs, x, indices):
    b = attrs.get("batch_dims", 0)
    shape = gather_nd_shape(x.shape, indices.shape, b)
    flat_shape, index = _nd_index(x.shape, indices, b, "GatherND")
    return x.reshape(flat_shape)[index].reshape(shape)


# -- Scatter family ------------------------------------------------------------------------------------------
_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out, index, updates, reduction: str, op: str):
    """out[index] (op)= updates, with repeated indices applied in order."""
    if reduction == "none":
        out[index] = updates
    elif reduction in _REDUCTIONS:
        _REDUCTIONS[reduction].at(out, index, updates)
    else:
        raise KernelError(f"{op} reduction {reduction!r} is not one of none/add/mul/max/min")
    return out


@reference("ScatterElements", infer=infer_same)
def scatter_elements(attrs, x, indices, updates):
    axis = normalize_axis(attrs.get("axis", 0), x.ndim, "ScatterElements axis")
    if indices.shape != updates.shape or indices.ndim != x.ndim:
        raise KernelError(f"ScatterElements: indices {list(indices.shape)} and updates "
                          f"{list(updates.shape)} must have the same shape and the data's rank")
    idx = wrap_indices(indices, x.shape[axis], "ScatterElements")
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = idx
    index = tuple(np.broadcast_to(g, indices.shape) for g in grid)
    return _scatter(x.copy(), index, updates, attrs.get("reduction", "none"), "ScatterElements")


@reference("ScatterND", infer=infer_same)
def scatter_nd(attrs, x, indices, updates):
    k = indices.shape[-1] if indices.ndim else -1
    if not 0 <= k <= x.ndim or updates.shape != indices.shape[:-1] + x.shape[k:]:
        raise KernelError(f"ScatterND: indices {list(indices.shape)}, updates {list(updates.shape)} do not fit "
                          f"data {list(x.shape)}")
    flat_shape, index = _nd_index(x.shape, indices, 0, "ScatterND")
    out = x.copy().reshape(flat_shape)
    n = int(np.prod(indices.shape[:-1], dtype=np.int64))
    _scatter(out, index, updates.reshape((1, n) + x.shape[k:]), attrs.get("reduction", "none"), "ScatterND")
    return out.reshape(x.shape)


@reference("TensorScatter", infer=infer_same)
def tensor_scatter(attrs, cache, update, write_indices=None):
    """present = past_cache with ``update`` written along ``axis`` at each batch row's write index
    (``mode`` linear, or circular: positions wrap modulo the cache length)."""
    axis = normalize_axis(attrs.get("axis", -2), cache.ndim, "TensorScatter axis")
    if axis == 0 or update.ndim != cache.ndim:
        raise KernelError("TensorScatter: axis must not be the batch axis and ranks must agree")
    mode = attrs.get("mode", "linear")
    batch, length, seq = cache.shape[0], cache.shape[axis], update.shape[axis]
    starts = np.zeros(batch, np.int64) if write_indices is None else np.asarray(write_indices, np.int64)
    out = cache.copy()
    for b in range(batch):
        pos = int(starts[b]) + np.arange(seq)
        if mode == "circular":
            pos %= max(length, 1)
        elif mode != "linear":
            raise KernelError(f"TensorScatter mode {mode!r} is not linear/circular")
        if seq and (pos.min() < 0 or pos.max() >= length):
            raise KernelError(f"TensorScatter: write index {int(starts[b])} + {seq} exceeds cache length {length}")
        np.moveaxis(out[b], axis - 1, 0)[pos] = np.moveaxis(update[b], axis - 1, 0)
    return out


# -- OneHot --------------------------------------------------------------------------------------------------
def _one_hot_depth(depth) -> int:
    d = np.asarray(depth).reshape(-1)
    if d.size != 1:
        raise KernelError("OneHot depth must hold one value")
    return int(d[0])


def _one_hot_shape(idx_shape, depth: int, axis: int) -> tuple[int, ...]:
    r = len(idx_shape) + 1
    axis = normalize_axis(axis, r, "OneHot axis")
    return tuple(idx_shape[:axis]) + (depth,) + tuple(idx_shape[axis:])


def _one_hot_infer(node):
    shape = _one_hot_shape(node.inputs[0].shape, _one_hot_depth(const_input(node, 1)), node.attrs.get("axis", -1))
    return [TensorType(node.inputs[2].dtype, shape)]


@reference("OneHot", infer=_one_hot_infer, static_inputs=(1,))
def one_hot(attrs, indices, depth, values):
    depth = _one_hot_depth(depth)
    values = np.asarray(values).reshape(-1)
    if values.size != 2:
        raise KernelError("OneHot values must be [off_value, on_value]")
    axis = normalize_axis(attrs.get("axis", -1), indices.ndim + 1, "OneHot axis")
    idx = np.asarray(indices).astype(np.int64)   # float indices truncate toward zero, as onnxruntime does
    idx = np.where(idx < 0, idx + depth, idx)
    hot = np.expand_dims(idx, axis) == np.arange(depth).reshape((-1,) + (1,) * (indices.ndim - axis))
    return np.where(hot, values[1], values[0]).astype(values.dtype)


# -- Compress / NonZero --------------------------------------------------------------------------------------
def _compress_shape(shape, cond, axis):
    kept = int(np.count_nonzero(np.asarray(cond).reshape(-1)))
    if axis is None:
        return (kept,)
    axis = normalize_axis(axis, len(shape), "Compress axis")
    return tuple(shape[:axis]) + (kept,) + tuple(shape[axis + 1:])


@reference("Compress", static_inputs=(1,), infer=lambda n: same_dtype(
    n, _compress_shape(n.inputs[0].shape, const_input(n, 1), n.attrs.get("axis"))))
def compress(attrs, x, condition):
    cond = np.asarray(condition).reshape(-1).astype(bool)
    axis = attrs.get("axis")
    length = x.size if axis is None else x.shape[normalize_axis(axis, x.ndim, "Compress axis")]
    if cond.size > length and cond[length:].any():
        raise KernelError(f"Compress condition selects beyond the axis length {length}")
    cond = cond[:length]
    if axis is None:
        return np.compress(cond, x.reshape(-1))
    return np.compress(cond, x, axis=normalize_axis(axis, x.ndim))


def _nonzero_infer(node):
    v = node.inputs[0]
    if v.const is None:
        raise DynamicShapeError(f"NonZero node {node.name!r}: the output shape depends on run-time data")
    return [TensorType.of(nonzero({}, v.const))]


@reference("NonZero", infer=_nonzero_infer)
def nonzero(attrs, x):
    if x.ndim == 0:
        return np.zeros((0, int(bool(x))), np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


# -- ReverseSequence / Trilu ---------------------------------------------------------------------------------
@reference("ReverseSequence", infer=infer_same)
def reverse_sequence(attrs, x, sequence_lens):
    batch_axis, time_axis = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    if {batch_axis, time_axis} != {0, 1} or x.ndim < 2:
        raise KernelError("ReverseSequence: batch_axis and time_axis must be 0 and 1 in some order")
    lens = as_ints(sequence_lens, "ReverseSequence sequence_lens")
    if len(lens) != x.shape[batch_axis] or any(not 0 <= n <= x.shape[time_axis] for n in lens):
        raise KernelError(f"ReverseSequence: sequence_lens {lens} do not fit shape {list(x.shape)}")
    out = x.copy()
    xt = np.moveaxis(x, (batch_axis, time_axis), (0, 1))
    ot = np.moveaxis(out, (batch_axis, time_axis), (0, 1))
    for b, n in enumerate(lens):
        ot[b, :n] = xt[b, :n][::-1]
    return out


def _trilu_infer(node):
    if node.inputs[0].type.rank < 2:
        raise KernelError("Trilu input must have rank >= 2")
    return [node.inputs[0].type]


@reference("Trilu", infer=_trilu_infer)
def trilu(attrs, x, k=None):
    if x.ndim < 2:
        raise KernelError("Trilu input must have rank >= 2")
    k = 0 if k is None else as_ints(k, "Trilu k")[0]
    return np.triu(x, k) if attrs.get("upper", 1) else np.tril(x, k)

