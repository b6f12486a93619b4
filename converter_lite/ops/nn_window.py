"""Sliding-window geometry shared by Conv, ConvTranspose, Col2Im and the pooling ops.

A window op over input spatial sizes ``in_i`` with kernel ``k_i``, stride ``s_i`` and dilation ``d_i`` has
effective kernel ``e_i = (k_i - 1) * d_i + 1`` and, per ``auto_pad`` (ONNX / onnxruntime rules):

* ``NOTSET``: explicit ``pads`` (begins then ends); ``out = floor((in + pb + pe - e) / s) + 1``
  (``ceil`` with ``ceil_mode``, dropping a last window that would start inside the end padding);
* ``VALID``: no padding; same formula with zero pads;
* ``SAME_UPPER`` / ``SAME_LOWER``: ``out = ceil(in / s)``; the total padding
  ``max(0, (out - 1) * s + e - in)`` is split evenly, the odd element going to the end (UPPER) or the
  begin (LOWER).

Output element ``o`` of axis ``i`` reads padded input positions ``o * s + t * d - pb`` for ``t < k``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .elementwise import WIDENED_FLOATS
from .registry import KernelError

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


@dataclass(frozen=True)
class Window:
    """Resolved geometry of a window op over ``len(kernel)`` spatial axes."""
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def effective(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def int_tuple(attrs: dict, key: str, default: tuple[int, ...], n: int, op: str) -> tuple[int, ...]:
    """Reads an INTS attribute that must have ``n`` entries (absent -> ``default``)."""
    v = tuple(int(x) for x in attrs.get(key, default))
    if len(v) != n:
        raise KernelError(f"{op}: attribute {key}={list(v)} must have {n} entries")
    return v


def resolve_window(op: str, attrs: dict, spatial: tuple[int, ...], kernel: tuple[int, ...],
                   ceil_mode: bool = False) -> Window:
    """Strides, dilations, effective pads and output sizes of a Conv/Pool-like op (see the module doc)."""
    # the key: the op, the shapes and every attribute ``_resolve`` reads (spelled out, no loop: a plan asks this
    # for every Conv, twice, and every pool)
    get = attrs.get
    s, d, p = get("strides"), get("dilations"), get("pads")
    try:
        key = (op, tuple(spatial), tuple(kernel), bool(ceil_mode), tuple(s) if isinstance(s, (list, tuple)) else s,
               tuple(d) if isinstance(d, (list, tuple)) else d, tuple(p) if isinstance(p, (list, tuple)) else p,
               get("auto_pad"))
        hash(key)
    except TypeError:                                   # (an attribute of an unexpected type: not cached)
        return _resolve(op, attrs, spatial, kernel, ceil_mode)
    return _resolved(key, op, attrs, spatial, kernel, ceil_mode)


def _resolved(key, op, attrs, spatial, kernel, ceil_mode) -> Window:
    """``_resolve`` memoised by ``key`` (the op, shapes and every attribute it reads): a model's plan for a new
    shape resolves each Conv's window twice (shape inference, then the driver), its pools too."""
    got = _WINDOWS.get(key)
    if got is None:
        got = _resolve(op, attrs, spatial, kernel, ceil_mode)
        if len(_WINDOWS) >= _WINDOWS_MAX:
            _WINDOWS.clear()
        _WINDOWS[key] = got
    return got


_WINDOWS: dict = {}
_WINDOWS_MAX = 4096


def _resolve(op: str, attrs: dict, spatial: tuple[int, ...], kernel: tuple[int, ...],
             ceil_mode: bool = False) -> Window:
    n = len(spatial)
    if len(kernel) != n:
        raise KernelError(f"{op}: kernel_shape {list(kernel)} does not match {n} spatial dims")
    strides = int_tuple(attrs, "strides", (1,) * n, n, op)
    dilations = int_tuple(attrs, "dilations", (1,) * n, n, op)
    if min(strides + dilations + kernel, default=1) < 1:
        raise KernelError(f"{op}: kernel_shape, strides and dilations must be positive")
    auto_pad = attrs.get("auto_pad", "NOTSET")
    eff = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("NOTSET", "VALID"):
        pads = int_tuple(attrs, "pads", (0,) * (2 * n), 2 * n, op) if auto_pad == "NOTSET" else (0,) * (2 * n)
        pb, pe = pads[:n], pads[n:]
        out = []
        for i in range(n):
            span = spatial[i] + pb[i] + pe[i] - eff[i]
            if span < 0:
                raise KernelError(f"{op}: kernel {eff[i]} (dilated) larger than padded input "
                                  f"{spatial[i] + pb[i] + pe[i]} on spatial axis {i}")
            o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            if ceil_mode and (o - 1) * strides[i] >= spatial[i] + pb[i]:
                o -= 1      # the last window would start in the end padding
            out.append(o)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-spatial[i] // strides[i]) for i in range(n)]
        total = [max(0, (out[i] - 1) * strides[i] + eff[i] - spatial[i]) for i in range(n)]
        if auto_pad == "SAME_UPPER":
            pb = tuple(t // 2 for t in total)
        else:
            pb = tuple(t - t // 2 for t in total)
        pe = tuple(t - b for t, b in zip(total, pb))
    else:
        raise KernelError(f"{op}: auto_pad {auto_pad!r} is not one of {AUTO_PADS}")
    return Window(tuple(kernel), strides, dilations, tuple(pb), tuple(pe), tuple(out))


def windows(x: np.ndarray, w: Window, fill) -> np.ndarray:
    """Strided view of shape ``x.shape[:-n] + w.out + w.kernel`` over ``x`` padded with ``fill``: element
    ``[..., o, t]`` is padded input ``o * s + t * d`` (begin padding ``pb``; extended with ``fill`` past the end
    when ``ceil_mode`` windows overhang)."""
    n = len(w.kernel)
    lead = x.ndim - n
    pad_width = [(0, 0)] * lead
    crop = [slice(None)] * lead
    for i in range(n):
        need = max(w.out[i] - 1, 0) * w.strides[i] + w.effective[i]      # padded length the windows read
        pad_width.append((w.pads_begin[i], max(0, need - w.pads_begin[i] - x.shape[lead + i])))
        crop.append(slice(0, need))
    if any(p != (0, 0) for p in pad_width):
        x = np.pad(x, pad_width, mode="constant", constant_values=fill)
    x = x[tuple(crop)]
    axes = tuple(range(lead, lead + n))
    v = sliding_window_view(x, w.effective, axis=axes)
    index = ((slice(None),) * lead + tuple(slice(None, o * s, s) for o, s in zip(w.out, w.strides))
             + tuple(slice(None, None, d) for d in w.dilations))
    return v[index]


def compute_dtype(dt: np.dtype) -> np.dtype:
    """Accumulation type of the float kernels: float16 is computed in float32 (as onnxruntime does), and so are
    the low-precision floats (bfloat16, float8, float4)."""
    return np.dtype(np.float32) if dt in WIDENED_FLOATS else dt


def prod(xs) -> int:
    return math.prod(int(v) for v in xs)


def scatter_windows(cols: np.ndarray, spatial: tuple[int, ...], w: Window) -> np.ndarray:
    """Inverse of ``windows`` (col2im): ``cols`` has shape ``lead + w.kernel + w.out``; returns the padded
    buffer of shape ``lead + spatial`` where every ``cols[..., t, o]`` was added at ``o * s + t * d``.
    ``spatial`` must be at least ``(out - 1) * s + e`` on every axis."""
    n = len(w.kernel)
    lead = cols.shape[: cols.ndim - 2 * n]
    buf = np.zeros(lead + tuple(spatial), cols.dtype)
    base = (slice(None),) * len(lead)
    for t in np.ndindex(*w.kernel):
        dst = base + tuple(slice(ti * d, ti * d + (o - 1) * s + 1, s)
                           for ti, d, o, s in zip(t, w.dilations, w.out, w.strides))
        buf[dst] += cols[base + t]
    return buf
