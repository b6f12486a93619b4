"""Reference kernels: pooling over the spatial dims of ``X[N, C, D...]`` (1-D, 2-D, 3-D, ...).

* ``MaxPool``: ``Y = max`` over each window (padding never wins); ``Indices`` (int64) is the flat index of
  the first maximum in ``X`` (row-major, or with ``storage_order=1`` column-major over the spatial dims,
  the ``n * C + c`` part always row-major), as onnxruntime produces.
* ``AveragePool``: window sum / count, where count includes the explicit pads only with
  ``count_include_pad=1`` (never the overhang that ``ceil_mode`` adds).
* ``LpPool``: ``(sum |x|^p)^(1/p)`` over each window (pads contribute 0).
* ``GlobalAveragePool`` / ``GlobalMaxPool`` / ``GlobalLpPool``: the same over all spatial dims, kept as 1s.

Window geometry (strides, dilations, pads, auto_pad, ceil_mode) is ``nn_window.resolve_window``.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .nn_window import Window, compute_dtype, resolve_window, windows
from .registry import KernelError, reference


def _pool_geometry(op: str, attrs: dict, x_shape) -> Window:
    if len(x_shape) < 3:
        raise KernelError(f"{op}: input rank {len(x_shape)} < 3")
    if "kernel_shape" not in attrs:
        raise KernelError(f"{op}: attribute kernel_shape is required")
    kernel = tuple(int(k) for k in attrs["kernel_shape"])
    return resolve_window(op, attrs, tuple(x_shape[2:]), kernel, ceil_mode=bool(attrs.get("ceil_mode", 0)))


def _infer_pool(op: str):
    def infer(node: Node) -> list[TensorType]:
        x = node.inputs[0].type
        shape = tuple(x.shape[:2]) + _pool_geometry(op, node.attrs, x.shape).out
        types = [TensorType(x.dtype, shape), TensorType(DType.int64, shape)]
        return types[:len(node.outputs)]
    return infer


def _lowest(dt: np.dtype):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _taps(v: np.ndarray, kernel: tuple[int, ...]):
    """``(tap number, view)`` for every kernel tap of a ``windows`` view (tap loops beat reductions over the
    strided trailing window axes by an order of magnitude)."""
    for i, tap in enumerate(np.ndindex(*kernel)):
        yield i, v[(Ellipsis,) + tap]


def _window_sum(v: np.ndarray, kernel: tuple[int, ...], fn=None) -> np.ndarray:
    total = None
    for _, tap in _taps(v, kernel):
        tap = tap if fn is None else fn(tap)
        total = np.array(tap) if total is None else np.add(total, tap, out=total)
    return total


@reference("MaxPool", infer=_infer_pool("MaxPool"))
def max_pool(attrs, x):
    win = _pool_geometry("MaxPool", attrs, x.shape)
    n_sp = len(win.out)
    v = windows(x, win, _lowest(x.dtype))                            # N, C, O..., K...
    y, arg = None, None
    for i, tap in _taps(v, win.kernel):
        if y is None:
            y, arg = np.array(tap), np.zeros(tap.shape, np.int64)
        else:
            better = tap > y                                          # strict: the first maximum wins
            np.copyto(y, tap, where=better)
            np.copyto(arg, i, where=better)
    # window tap -> input coordinate on each spatial axis
    taps = np.unravel_index(arg, win.kernel)
    spatial = x.shape[2:]
    index = np.zeros(arg.shape, np.int64)
    order = range(n_sp - 1, -1, -1) if attrs.get("storage_order", 0) else range(n_sp)
    for i in order:
        o = np.arange(win.out[i]).reshape((-1,) + (1,) * (n_sp - 1 - i))
        pos = o * win.strides[i] + taps[i] * win.dilations[i] - win.pads_begin[i]
        index = index * spatial[i] + pos
    plane = int(np.prod(spatial))
    nc = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * n_sp)
    return y, index + nc * plane


def _axis_counts(win: Window, spatial, include_pad: bool) -> np.ndarray:
    """Number of window taps inside the counted region, as a broadcastable product over the spatial axes."""
    n_sp = len(win.out)
    total = np.ones((1,) * n_sp, np.int64)
    for i in range(n_sp):
        lo, hi = (-win.pads_begin[i], spatial[i] + win.pads_end[i]) if include_pad else (0, spatial[i])
        pos = (np.arange(win.out[i])[:, None] * win.strides[i] + np.arange(win.kernel[i])[None, :] * win.dilations[i]
               - win.pads_begin[i])
        count = ((pos >= lo) & (pos < hi)).sum(axis=1)
        total = total * count.reshape((-1,) + (1,) * (n_sp - 1 - i))
    return total


@reference("AveragePool", infer=_infer_pool("AveragePool"))
def average_pool(attrs, x):
    win = _pool_geometry("AveragePool", attrs, x.shape)
    ct = compute_dtype(x.dtype)
    s = _window_sum(windows(x.astype(ct, copy=False), win, 0), win.kernel)
    count = _axis_counts(win, x.shape[2:], bool(attrs.get("count_include_pad", 0)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (s / count.astype(ct)).astype(x.dtype, copy=False)


@reference("LpPool", infer=_infer_pool("LpPool"))
def lp_pool(attrs, x):
    win = _pool_geometry("LpPool", attrs, x.shape)
    p = float(attrs.get("p", 2))
    ct = compute_dtype(x.dtype)
    s = _window_sum(windows(x.astype(ct, copy=False), win, 0), win.kernel, lambda t: np.abs(t) ** p)
    return (s ** (1.0 / p)).astype(x.dtype, copy=False)


# -- global pools ---------------------------------------------------------------------------------------------
def _infer_global(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    if x.rank < 3:
        raise KernelError(f"{node.op}: input rank {x.rank} < 3")
    return [TensorType(x.dtype, tuple(x.shape[:2]) + (1,) * (x.rank - 2))]


def _spatial_axes(x: np.ndarray, op: str) -> tuple[int, ...]:
    if x.ndim < 3:
        raise KernelError(f"{op}: input rank {x.ndim} < 3")
    return tuple(range(2, x.ndim))


@reference("GlobalAveragePool", infer=_infer_global)
def global_average_pool(attrs, x):
    ct = compute_dtype(x.dtype)
    axes = _spatial_axes(x, "GlobalAveragePool")
    return x.astype(ct, copy=False).mean(axis=axes, keepdims=True).astype(x.dtype, copy=False)


@reference("GlobalMaxPool", infer=_infer_global)
def global_max_pool(attrs, x):
    return x.max(axis=_spatial_axes(x, "GlobalMaxPool"), keepdims=True)


@reference("GlobalLpPool", infer=_infer_global)
def global_lp_pool(attrs, x):
    p = float(attrs.get("p", 2))
    ct = compute_dtype(x.dtype)
    axes = _spatial_axes(x, "GlobalLpPool")
    s = (np.abs(x.astype(ct, copy=False)) ** p).sum(axis=axes, keepdims=True)
    return (s ** (1.0 / p)).astype(x.dtype, copy=False)
