"""Reduction reference kernels: Reduce* and ArgMax/ArgMin (REDUCE), and the reduction-based composites
Softmax, LogSoftmax, Hardmax, CumSum, TopK, LpNormalization and MeanVarianceNormalization.

The composites are OPAQUE, not REDUCE: their outputs are not a reduced shape and no scalar emitter can compute
them, so (as STYLE.md asks of composite ops) an unexpanded one falls back instead of being silently fused.

Reduce* semantics (opset 18+): ``axes`` is optional input 1 and must be constant; no axes means all axes,
unless ``noop_with_empty_axes=1``, in which case nothing is reduced but the per-element part still applies
(ReduceSumSquare squares, ReduceL1 takes |x|, ReduceLogSum takes the log), as in onnxruntime.
Empty reductions follow onnxruntime: Sum/L1/L2/SumSquare/Mean -> 0, Prod -> 1, Max -> -inf (the dtype's
minimum for integers), Min -> +inf (maximum), LogSum/LogSumExp -> -inf.

Numerics: float16 and the low-precision floats (bfloat16, float8, float4) accumulate in float32; integers reduce
in their own type (wrapping), except that ReduceMean truncates toward zero and L2/LogSum/LogSumExp are computed
in float64 and truncated back, as ORT does.
NaN propagates through ReduceMax/ReduceMin and wins ArgMax/ArgMin/Hardmax (numpy's rule); onnxruntime's
result for NaN there depends on the NaN's position, so it is not followed.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .elementwise import WIDENED_FLOATS, cast_to, trunc_div, work_dtype
from .registry import KernelError, OpKind, infer_same, normalize_axis, reference

Array = np.ndarray


# -- axes ----------------------------------------------------------------------------------------------------
def reduce_axes(rank: int, axes, noop_with_empty_axes: int = 0) -> tuple[int, ...]:
    """Sorted non-negative reduction axes; ``()`` means "reduce nothing"."""
    if axes is None or np.size(axes) == 0:
        return () if noop_with_empty_axes else tuple(range(rank))
    out = {normalize_axis(int(a), rank, "reduction axis") for a in np.ravel(axes)}
    if len(out) != np.size(axes):
        raise KernelError(f"reduction axes {list(np.ravel(axes))} repeat an axis")
    return tuple(sorted(out))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: int) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _node_axes(node: Node) -> tuple[int, ...]:
    x = node.inputs[0].type
    axes_v = node.inputs[1] if len(node.inputs) > 1 else None
    axes = None if axes_v is None else axes_v.const
    return reduce_axes(x.rank, axes, node.attrs.get("noop_with_empty_axes", 0))


def _infer_reduce(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    return [TensorType(x.dtype, reduced_shape(x.shape, _node_axes(node), node.attrs.get("keepdims", 1)))]


# -- Reduce* ---------------------------------------------------------------------------------------------------
def _acc(dtype: np.dtype) -> np.dtype:
    """Accumulation type: float32 for float16 and the low-precision floats, else the type itself (integers
    wrap like ORT's)."""
    return np.dtype(np.float32) if dtype in WIDENED_FLOATS else dtype


def _lowest(dtype: np.dtype):
    if dtype.kind == "f":
        return -np.inf
    return False if dtype == np.bool_ else np.iinfo(dtype).min


def _highest(dtype: np.dtype):
    if dtype.kind == "f":
        return np.inf
    return True if dtype == np.bool_ else np.iinfo(dtype).max


def _sum(x: Array, ax: tuple[int, ...]) -> Array:
    return np.sum(x, axis=ax, keepdims=True, dtype=_acc(x.dtype))


def _mean(x: Array, ax: tuple[int, ...]) -> Array:
    n = max(math.prod(x.shape[a] for a in ax), 1)   # an empty mean is 0 in ORT
    s = _sum(x, ax)
    return s / n if s.dtype.kind == "f" else trunc_div(s, s.dtype.type(n))


def _log_sum_exp(x: Array, ax: tuple[int, ...]) -> Array:
    """m + log(sum(exp(x - m))) with m the finite max (so all -inf gives -inf, not NaN).  For integers each
    exp term is truncated to an integer as in ORT, so only the maxima count: trunc(m + log(#maxima))."""
    is_int = x.dtype.kind in "iub"
    w = x.astype(np.float64) if is_int else x
    m = np.max(w, axis=ax, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(w.dtype)
    terms = np.trunc(np.exp(w - m)) if is_int else np.exp(w - m)
    return np.log(np.sum(terms, axis=ax, keepdims=True)) + m


# name -> (fn(x, axes) with keepdims, computes integers in float64?)
REDUCERS: dict[str, tuple[Callable[[Array, tuple[int, ...]], Array], bool]] = {
    "ReduceSum": (_sum, False),
    "ReduceMean": (_mean, False),
    "ReduceMax": (lambda x, ax: np.max(x, axis=ax, keepdims=True, initial=_lowest(x.dtype)), False),
    "ReduceMin": (lambda x, ax: np.min(x, axis=ax, keepdims=True, initial=_highest(x.dtype)), False),
    "ReduceProd": (lambda x, ax: np.prod(x, axis=ax, keepdims=True, dtype=_acc(x.dtype)), False),
    "ReduceL1": (lambda x, ax: _sum(np.abs(x), ax), False),
    "ReduceL2": (lambda x, ax: np.sqrt(_sum(x * x, ax)), True),
    "ReduceSumSquare": (lambda x, ax: _sum(x * x, ax), False),
    "ReduceLogSum": (lambda x, ax: np.log(_sum(x, ax)), True),
    "ReduceLogSumExp": (_log_sum_exp, False),
}


def _reducer(fn: Callable[[Array, tuple[int, ...]], Array], int_as_float: bool) -> Callable:
    def kernel(attrs, x, axes=None):
        ax = reduce_axes(x.ndim, axes, attrs.get("noop_with_empty_axes", 0))
        w = x
        if x.dtype in WIDENED_FLOATS or (int_as_float and x.dtype.kind in "iub"):
            w = x.astype(work_dtype(x.dtype))
        with np.errstate(all="ignore"):
            out = cast_to(fn(w, ax), x.dtype)
        return out.reshape(reduced_shape(x.shape, ax, attrs.get("keepdims", 1)))
    return kernel


for _name, (_fn, _int_as_float) in REDUCERS.items():
    reference(_name, kind=OpKind.REDUCE, infer=_infer_reduce, static_inputs=(1,))(_reducer(_fn, _int_as_float))


# -- ArgMax / ArgMin -------------------------------------------------------------------------------------------
def _infer_arg(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    axis = normalize_axis(node.attrs.get("axis", 0), x.rank)
    return [TensorType(DType.int64, reduced_shape(x.shape, (axis,), node.attrs.get("keepdims", 1)))]


def _arg(fn: Callable) -> Callable:
    """First index of the extreme value (last with ``select_last_index=1``); NaN counts as extreme."""
    def kernel(attrs, x):
        axis = normalize_axis(attrs.get("axis", 0), x.ndim)
        if x.shape[axis] == 0:
            raise KernelError(f"ArgMax/ArgMin over the empty axis {axis} of shape {list(x.shape)}")
        if attrs.get("select_last_index", 0):
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis, keepdims=True)
        else:
            idx = fn(x, axis=axis, keepdims=True)
        return idx.astype(np.int64).reshape(reduced_shape(x.shape, (axis,), attrs.get("keepdims", 1)))
    return kernel


reference("ArgMax", kind=OpKind.REDUCE, infer=_infer_arg)(_arg(np.argmax))
reference("ArgMin", kind=OpKind.REDUCE, infer=_infer_arg)(_arg(np.argmin))


# -- Softmax family (opset 13: one axis, default -1) --------------------------------------------------------
def _along_axis(fn: Callable[[Array, int], Array]) -> Callable:
    """Kernel applying ``fn(x_work, axis)``; float16 runs in float32; empty tensors pass through."""
    def kernel(attrs, x):
        axis = normalize_axis(attrs.get("axis", -1), x.ndim)
        if x.size == 0:
            return x.copy()
        with np.errstate(all="ignore"):
            return cast_to(fn(x.astype(work_dtype(x.dtype), copy=False), axis), x.dtype)
    return kernel


def _softmax(x: Array, axis: int) -> Array:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax(x: Array, axis: int) -> Array:
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def _hardmax(x: Array, axis: int) -> Array:
    out = np.zeros_like(x)
    np.put_along_axis(out, np.argmax(x, axis=axis, keepdims=True), 1, axis=axis)
    return out


def _lp_normalization(attrs, x):
    """x / ||x||_p along ``axis`` (p in {1, 2}); zero vectors stay zero as in ORT."""
    p = attrs.get("p", 2)
    if p not in (1, 2):
        raise KernelError(f"LpNormalization: p must be 1 or 2, got {p}")

    def fn(w, axis):
        n = np.sum(np.abs(w), axis=axis, keepdims=True) if p == 1 else np.sqrt(np.sum(w * w, axis=axis, keepdims=True))
        return np.where(n == 0, 0, w / n)
    return _along_axis(fn)(attrs, x)


reference("Softmax", kind=OpKind.OPAQUE, infer=infer_same)(_along_axis(_softmax))
reference("LogSoftmax", kind=OpKind.OPAQUE, infer=infer_same)(_along_axis(_log_softmax))
reference("Hardmax", kind=OpKind.OPAQUE, infer=infer_same)(_along_axis(_hardmax))
reference("LpNormalization", kind=OpKind.OPAQUE, infer=infer_same)(_lp_normalization)


_MVN_EPSILON = 1e-9   # from the ONNX function body of MeanVarianceNormalization


@reference("MeanVarianceNormalization", kind=OpKind.OPAQUE, infer=infer_same)
def mean_variance_normalization(attrs, x):
    """(x - E[x]) / (sqrt(E[(x - E[x])^2]) + 1e-9) over ``axes`` (default [0, 2, 3]).

    The ONNX function computes the variance as E[x^2] - E[x]^2; the centred form is equal in exact arithmetic
    and never negative.  onnxruntime omits the epsilon, so it gives NaN where we give 0 on constant slices.
    """
    ax = reduce_axes(x.ndim, attrs.get("axes", (0, 2, 3)))
    w = x.astype(work_dtype(x.dtype), copy=False)
    with np.errstate(all="ignore"):
        d = w - np.mean(w, axis=ax, keepdims=True)
        std = np.sqrt(np.mean(d * d, axis=ax, keepdims=True))
        return cast_to(d / (std + _MVN_EPSILON), x.dtype)


# -- CumSum ----------------------------------------------------------------------------------------------------
def _scalar_int(v, what: str) -> int:
    if v is None or np.size(v) != 1:
        raise KernelError(f"{what} must be a one-element tensor, got {None if v is None else list(np.shape(v))}")
    return int(np.ravel(v)[0])


@reference("CumSum", kind=OpKind.OPAQUE, infer=infer_same, static_inputs=(1,))
def cum_sum(attrs, x, axis):
    """Inclusive (or ``exclusive``) running sum along ``axis``, optionally from the end (``reverse``)."""
    ax = normalize_axis(_scalar_int(axis, "CumSum axis"), x.ndim)
    reverse = attrs.get("reverse", 0)
    w = np.flip(x, ax) if reverse else x
    with np.errstate(all="ignore"):
        c = np.cumsum(w, axis=ax, dtype=_acc(x.dtype))
    if attrs.get("exclusive", 0):
        shifted = np.zeros_like(c)
        dst = [slice(None)] * x.ndim
        src = [slice(None)] * x.ndim
        dst[ax], src[ax] = slice(1, None), slice(None, -1)
        shifted[tuple(dst)] = c[tuple(src)]
        c = shifted
    return cast_to(np.flip(c, ax) if reverse else c, x.dtype)


# -- TopK ------------------------------------------------------------------------------------------------------
def _infer_top_k(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    axis = normalize_axis(node.attrs.get("axis", -1), x.rank)
    k = _scalar_int(node.inputs[1].const, "TopK k")
    if not 0 <= k <= x.shape[axis]:
        raise KernelError(f"TopK: k={k} is out of range for axis {axis} of shape {list(x.shape)}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [TensorType(x.dtype, shape), TensorType(DType.int64, shape)]


def _top_k_order(x: Array, axis: int, largest: int) -> Array:
    """Stable order (ties keep the lower index first); with ``largest`` NaN counts as the largest value."""
    if not largest:
        return np.argsort(x, axis=axis, kind="stable")   # NaN last
    if x.dtype.kind == "f":
        return np.lexsort((-x, ~np.isnan(x)), axis=axis)   # primary key last: NaN first, then descending
    return np.argsort(np.invert(x), axis=axis, kind="stable")   # ~x reverses integer order without overflow


@reference("TopK", kind=OpKind.OPAQUE, infer=_infer_top_k, static_inputs=(1,))
def top_k(attrs, x, k):
    """(values, int64 indices) of the k largest (``largest=0``: smallest) along ``axis``.  Always returns
    them sorted: with ``sorted=0`` any order is valid."""
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    k = _scalar_int(k, "TopK k")
    if not 0 <= k <= x.shape[axis]:
        raise KernelError(f"TopK: k={k} is out of range for axis {axis} of shape {list(x.shape)}")
    order = _top_k_order(x, axis, attrs.get("largest", 1))
    idx = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx
