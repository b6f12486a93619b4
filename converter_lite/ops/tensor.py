"""Layout ops (pure index maps, kind INJECTIVE): Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat,
Split, Slice, Expand, Tile.

Inputs that decide the output shape (Reshape's ``shape``, Slice's ``starts``/``ends``/``axes``/``steps``, ...)
are ``static_inputs``: constants in the static-shape IR.  Each op's output shape comes from one shape
function shared by its kernel and its inference, so the two cannot disagree.

The small helpers at the top (``const_input``, ``as_ints``, ``same_dtype``) are shared by the other
``tensor_*`` and ``misc*`` modules.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .registry import KernelError, OpKind, normalize_axis, reference


# -- helpers shared by the tensor/misc modules ---------------------------------------------------------------
def const_input(node: Node, i: int) -> np.ndarray | None:
    """The constant data of input ``i`` of ``node`` (None when the optional input is omitted)."""
    if i >= len(node.inputs) or node.inputs[i] is None:
        return None
    v = node.inputs[i]
    if v.const is None:
        raise KernelError(f"input {i} ({v.name!r}) of {node.op} node {node.name!r} must be a constant")
    return v.const


def as_ints(arr, what: str = "input") -> list[int]:
    """A 0-D/1-D integer array (or sequence) as a list of Python ints."""
    a = np.asarray(arr)
    if a.ndim > 1:
        raise KernelError(f"{what} must be a scalar or 1-D, got shape {list(a.shape)}")
    if a.size and a.dtype.kind not in "iub":
        raise KernelError(f"{what} must hold integers, got {a.dtype}")
    return [int(v) for v in a.reshape(-1)]


def typed(dtype, shape) -> TensorType:
    """TensorType from a numpy dtype (or DType) and a shape."""
    dt = dtype if isinstance(dtype, DType) else DType.from_np(dtype)
    return TensorType(dt, tuple(int(d) for d in shape))


def same_dtype(node: Node, shape) -> list[TensorType]:
    """One output with the first input's dtype and ``shape``."""
    return [TensorType(node.inputs[0].type.dtype, tuple(int(d) for d in shape))]


def norm_axes(axes, rank: int, what: str = "axes") -> list[int]:
    out = [normalize_axis(int(a), rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise KernelError(f"{what} {list(axes)} repeat an axis")
    return out


def _prod(dims) -> int:
    return math.prod(int(d) for d in dims)


# -- Reshape -------------------------------------------------------------------------------------------------
def reshape_shape(in_shape, shape, allowzero: int = 0) -> tuple[int, ...]:
    """ONNX Reshape: 0 copies the input dim (unless ``allowzero``), one -1 is inferred."""
    out = list(shape)
    if out.count(-1) > 1:
        raise KernelError(f"Reshape shape {out} has more than one -1")
    if any(d < -1 for d in out):
        raise KernelError(f"Reshape shape {out} has a negative dim")
    if allowzero and 0 in out and -1 in out:
        raise KernelError(f"Reshape shape {out} mixes 0 and -1 with allowzero=1")
    if not allowzero:
        for i, d in enumerate(out):
            if d == 0:
                if i >= len(in_shape):
                    raise KernelError(f"Reshape shape {out}: 0 at dim {i} but the input has rank {len(in_shape)}")
                out[i] = in_shape[i]
    total = _prod(in_shape)
    if -1 in out:
        known = _prod(d for d in out if d != -1)
        if known == 0 or total % known:
            raise KernelError(f"cannot reshape {list(in_shape)} to {list(shape)}")
        out[out.index(-1)] = total // known
    if _prod(out) != total:
        raise KernelError(f"cannot reshape {list(in_shape)} ({total} elements) to {list(shape)}")
    return tuple(out)


def _reshape_infer(node):
    shape = as_ints(const_input(node, 1), "Reshape shape")
    return same_dtype(node, reshape_shape(node.inputs[0].shape, shape, node.attrs.get("allowzero", 0)))


@reference("Reshape", kind=OpKind.INJECTIVE, infer=_reshape_infer, static_inputs=(1,))
def reshape(attrs, x, shape):
    return x.reshape(reshape_shape(x.shape, as_ints(shape, "Reshape shape"), attrs.get("allowzero", 0)))


# -- Flatten -------------------------------------------------------------------------------------------------
def flatten_shape(in_shape, axis: int) -> tuple[int, int]:
    r = len(in_shape)
    if not -r <= axis <= r:
        raise KernelError(f"Flatten axis {axis} is out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    return _prod(in_shape[:axis]), _prod(in_shape[axis:])


@reference("Flatten", kind=OpKind.INJECTIVE, infer=lambda n: same_dtype(
    n, flatten_shape(n.inputs[0].shape, n.attrs.get("axis", 1))))
def flatten(attrs, x):
    return x.reshape(flatten_shape(x.shape, attrs.get("axis", 1)))


# -- Transpose -----------------------------------------------------------------------------------------------
def transpose_perm(rank: int, perm) -> tuple[int, ...]:
    if perm is None:
        return tuple(range(rank - 1, -1, -1))
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(rank)):
        raise KernelError(f"Transpose perm {list(perm)} is not a permutation of {rank} axes")
    return perm


def _transpose_infer(node):
    shape = node.inputs[0].shape
    return same_dtype(node, [shape[p] for p in transpose_perm(len(shape), node.attrs.get("perm"))])


@reference("Transpose", kind=OpKind.INJECTIVE, infer=_transpose_infer)
def transpose(attrs, x):
    return np.transpose(x, transpose_perm(x.ndim, attrs.get("perm"))).copy()


# -- Squeeze / Unsqueeze -------------------------------------------------------------------------------------
def squeeze_shape(in_shape, axes) -> tuple[int, ...]:
    """Drops the listed unit axes; without axes (or with an empty list, as onnxruntime) every unit axis."""
    axes = [] if axes is None else as_ints(axes, "Squeeze axes")
    if not axes:
        return tuple(d for d in in_shape if d != 1)
    axes = norm_axes(axes, len(in_shape), "Squeeze axes")
    for a in axes:
        if in_shape[a] != 1:
            raise KernelError(f"Squeeze axis {a} has size {in_shape[a]}, not 1")
    return tuple(d for i, d in enumerate(in_shape) if i not in axes)


def unsqueeze_shape(in_shape, axes) -> tuple[int, ...]:
    axes = as_ints(axes, "Unsqueeze axes")
    rank = len(in_shape) + len(axes)
    axes = set(norm_axes(axes, rank, "Unsqueeze axes"))
    dims = iter(in_shape)
    return tuple(1 if i in axes else next(dims) for i in range(rank))


def _squeeze_infer(node):
    return same_dtype(node, squeeze_shape(node.inputs[0].shape, const_input(node, 1)))


def _unsqueeze_infer(node):
    return same_dtype(node, unsqueeze_shape(node.inputs[0].shape, const_input(node, 1)))


@reference("Squeeze", kind=OpKind.INJECTIVE, infer=_squeeze_infer, static_inputs=(1,))
def squeeze(attrs, x, axes=None):
    return x.reshape(squeeze_shape(x.shape, axes))


@reference("Unsqueeze", kind=OpKind.INJECTIVE, infer=_unsqueeze_infer, static_inputs=(1,))
def unsqueeze(attrs, x, axes):
    return x.reshape(unsqueeze_shape(x.shape, axes))


# -- Concat --------------------------------------------------------------------------------------------------
def concat_shape(shapes, axis: int) -> tuple[int, ...]:
    if not shapes:
        raise KernelError("Concat needs at least one input")
    rank = len(shapes[0])
    axis = normalize_axis(axis, rank, "Concat axis")
    for s in shapes:
        if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis):
            raise KernelError("Concat inputs " + ", ".join(str(list(t)) for t in shapes) + f" differ off axis {axis}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return tuple(out)


def _concat_infer(node):
    ins = [v for v in node.inputs if v is not None]
    if len({v.dtype for v in ins}) > 1:
        raise KernelError("Concat inputs have different dtypes")
    return same_dtype(node, concat_shape([v.shape for v in ins], node.attrs["axis"]))


@reference("Concat", kind=OpKind.INJECTIVE, infer=_concat_infer)
def concat(attrs, *xs):
    xs = [x for x in xs if x is not None]
    if "axis" not in attrs:
        raise KernelError("Concat needs the axis attribute")
    axis = normalize_axis(attrs["axis"], xs[0].ndim, "Concat axis")
    concat_shape([x.shape for x in xs], axis)
    return np.concatenate(xs, axis=axis)


# -- Split ---------------------------------------------------------------------------------------------------
def split_sizes(dim: int, split, num_outputs: int | None) -> list[int]:
    """Chunk sizes along the split axis: explicit ``split``, or ``num_outputs`` chunks of ceil(dim/n) with a
    smaller last chunk (opset 18)."""
    if split is not None:
        sizes = as_ints(split, "Split split")
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise KernelError(f"Split sizes {sizes} do not add up to the axis length {dim}")
        return sizes
    if num_outputs is None:
        raise KernelError("Split needs the split input or the num_outputs attribute")
    if num_outputs < 1:
        raise KernelError(f"Split num_outputs {num_outputs} must be positive")
    chunk = -(-dim // num_outputs)
    sizes = [chunk] * (num_outputs - 1) + [dim - chunk * (num_outputs - 1)]
    if sizes[-1] < 0:
        raise KernelError(f"cannot split {dim} elements into {num_outputs} chunks of {chunk}")
    return sizes


def _split_infer(node):
    shape = node.inputs[0].shape
    axis = normalize_axis(node.attrs.get("axis", 0), len(shape), "Split axis")
    # the pre-18 form (equal parts, one per output) must be given num_outputs by the importer: the kernel
    # cannot see how many outputs the node has
    sizes = split_sizes(shape[axis], const_input(node, 1), node.attrs.get("num_outputs"))
    if len(sizes) != len(node.outputs):
        raise KernelError(f"Split node {node.name!r} makes {len(sizes)} parts for {len(node.outputs)} outputs")
    return [TensorType(node.inputs[0].dtype, shape[:axis] + (s,) + shape[axis + 1:]) for s in sizes]


@reference("Split", kind=OpKind.INJECTIVE, infer=_split_infer, static_inputs=(1,))
def split(attrs, x, split=None):
    axis = normalize_axis(attrs.get("axis", 0), x.ndim, "Split axis")
    sizes = split_sizes(x.shape[axis], split, attrs.get("num_outputs"))
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


# -- Slice ---------------------------------------------------------------------------------------------------
def slice_params(in_shape, starts, ends, axes=None, steps=None) -> tuple[tuple[slice, ...], tuple[int, ...]]:
    """ONNX Slice: clamps starts/ends per axis (ends may be INT64_MAX/MIN) and returns numpy slices plus the
    output shape."""
    starts, ends = as_ints(starts, "Slice starts"), as_ints(ends, "Slice ends")
    rank = len(in_shape)
    axes = list(range(len(starts))) if axes is None else as_ints(axes, "Slice axes")
    steps = [1] * len(starts) if steps is None else as_ints(steps, "Slice steps")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise KernelError("Slice starts, ends, axes and steps have different lengths")
    slices = [slice(None)] * rank
    out = list(in_shape)
    for a, s, e, st in zip(norm_axes(axes, rank, "Slice axes"), starts, ends, steps):
        dim = in_shape[a]
        if st == 0:
            raise KernelError("Slice step 0")
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
            out[a] = max(0, -(-(e - s) // st))
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
            out[a] = max(0, -(-(s - e) // -st))
        slices[a] = slice(s, None if e < 0 else e, st)
    return tuple(slices), tuple(out)


def _slice_infer(node):
    args = [const_input(node, i) for i in range(1, 5)]
    return same_dtype(node, slice_params(node.inputs[0].shape, *args)[1])


@reference("Slice", kind=OpKind.INJECTIVE, infer=_slice_infer, static_inputs=(1, 2, 3, 4))
def slice_(attrs, x, starts, ends, axes=None, steps=None):
    slices, shape = slice_params(x.shape, starts, ends, axes, steps)
    out = x[slices]
    assert out.shape == shape, (out.shape, shape)
    return out.copy()


# -- Expand / Tile -------------------------------------------------------------------------------------------
def expand_shape(in_shape, shape) -> tuple[int, ...]:
    shape = as_ints(shape, "Expand shape")
    try:
        return tuple(int(d) for d in np.broadcast_shapes(tuple(in_shape), tuple(shape)))
    except ValueError as e:
        if "too large" in str(e):
            raise KernelError(f"Expand: {list(in_shape)} to {shape} is too large for any tensor") from None
        raise KernelError(f"Expand: {list(in_shape)} cannot be broadcast with {shape}") from None


def tile_shape(in_shape, repeats) -> tuple[int, ...]:
    repeats = as_ints(repeats, "Tile repeats")
    if len(repeats) != len(in_shape) or any(r < 0 for r in repeats):
        raise KernelError(f"Tile repeats {repeats} do not fit input shape {list(in_shape)}")
    return tuple(d * r for d, r in zip(in_shape, repeats))


@reference("Expand", kind=OpKind.INJECTIVE, static_inputs=(1,),
           infer=lambda n: same_dtype(n, expand_shape(n.inputs[0].shape, const_input(n, 1))))
def expand(attrs, x, shape):
    return np.array(np.broadcast_to(x, expand_shape(x.shape, shape)))


@reference("Tile", kind=OpKind.INJECTIVE, static_inputs=(1,),
           infer=lambda n: same_dtype(n, tile_shape(n.inputs[0].shape, const_input(n, 1))))
def tile(attrs, x, repeats):
    shape = tile_shape(x.shape, repeats)
    return np.tile(x, as_ints(repeats)).reshape(shape)
