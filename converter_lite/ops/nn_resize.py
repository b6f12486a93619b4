"""Reference kernel: Resize (opset 19), separable over the resized axes.

Geometry: with ``scales``, ``out[a] = floor(in[a] * scale[a])``; with ``sizes``, ``scale = sizes / in``
(``stretch``), or one common scale ``min`` (``not_larger``) / ``max`` (``not_smaller``) of those with
``out = round_half_up(scale * in)``.  ``axes`` restricts scales/sizes/roi to some axes.

Each resized axis maps output index ``x`` to a source coordinate ``x_orig`` (``coordinate_transformation_mode``,
float32 arithmetic like onnxruntime), e.g. half_pixel ``(x + 0.5) / scale - 0.5``, align_corners
``x * (in - 1) / (out - 1)`` (the integer output length, as onnxruntime; ONNX's reference implementation
uses ``scale * in`` there), tf_crop_and_resize ``start * (in - 1) + x * (end - start) * (in - 1) / (out - 1)``
(coordinates outside ``[0, in - 1]`` give ``extrapolation_value``).  The axis is then resampled by a small
filter: ``out = sum_t w[x, t] * in[idx[x, t]]``:

* nearest: one tap, ``idx = nearest_mode(x_orig)`` clamped to the axis;
* linear: two taps ``floor(x_orig)``, ``+1`` with weights ``1 - f``, ``f`` (``x_orig`` clamped to the axis);
* cubic: four taps ``floor(x_orig) - 1 .. + 2`` with Keys weights (``cubic_coeff_a``); out-of-range taps
  repeat the edge, or get weight 0 with the rest renormalized when ``exclude_outside=1``;
* ``antialias=1`` (linear/cubic, down-scaling): the filter is stretched by ``1 / scale`` (more taps) and
  its weights normalized to sum 1 (onnxruntime's PIL-style resampler); out-of-range taps repeat the edge or,
  with ``exclude_outside=1``, are dropped.

Integer results are truncated toward zero (rounded half away from zero with antialias) and saturated,
as onnxruntime does.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from .nn_window import compute_dtype
from .registry import KernelError, normalize_axis, reference

F32 = np.float32


def _optional(v, dtype) -> np.ndarray | None:
    return None if v is None or np.asarray(v).size == 0 else np.asarray(v).astype(dtype).reshape(-1)


CHOICES = {
    "mode": ("nearest", "linear", "cubic"),
    "coordinate_transformation_mode": ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                       "align_corners", "asymmetric", "tf_crop_and_resize"),
    "nearest_mode": ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"),
    "keep_aspect_ratio_policy": ("stretch", "not_larger", "not_smaller"),
}


def resize_geometry(attrs: dict, shape, roi, scales, sizes):
    """Returns ``(out_shape, scale per axis (float32), roi start per axis, roi end per axis)``."""
    for key, allowed in CHOICES.items():
        if attrs.get(key, allowed[0]) not in allowed:
            raise KernelError(f"Resize: {key} {attrs[key]!r} is not one of {allowed}")
    r = len(shape)
    axes = [normalize_axis(int(a), r, "Resize axis") for a in attrs.get("axes", range(r))]
    scales, sizes = _optional(scales, F32), _optional(sizes, np.int64)
    if (scales is None) == (sizes is None):
        raise KernelError("Resize: exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        raise KernelError(f"Resize: {len(given)} scales/sizes for {len(axes)} axes")
    scale = [F32(1.0)] * r
    out = [int(d) for d in shape]
    if scales is not None:
        for a, s in zip(axes, scales):
            if s <= 0:
                raise KernelError(f"Resize: scale {s} must be positive")
            scale[a], out[a] = F32(s), int(np.floor(F32(s) * F32(shape[a])))
    else:
        ratios = [F32(sz) / F32(shape[a]) if shape[a] else F32(1.0) for a, sz in zip(axes, sizes)]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s, sz in zip(axes, ratios, sizes):
                scale[a], out[a] = s, int(sz)
        elif policy in ("not_larger", "not_smaller"):
            common = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                scale[a], out[a] = common, int(np.floor(common * F32(shape[a]) + F32(0.5)))
        else:
            raise KernelError(f"Resize: keep_aspect_ratio_policy {policy!r} is not supported")
    start, end = [F32(0.0)] * r, [F32(1.0)] * r
    roi = _optional(roi, F32)
    if roi is not None and attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        if len(roi) != 2 * len(axes):
            raise KernelError(f"Resize: roi has {len(roi)} values for {len(axes)} axes")
        for i, a in enumerate(axes):
            start[a], end[a] = roi[i], roi[len(axes) + i]
    return tuple(out), scale, start, end


def _source_coords(mode: str, n_out: int, n_in: int, scale, start, end) -> np.ndarray:
    """``x_orig`` for every output index of one axis (float32, evaluated in onnxruntime's order)."""
    x = np.arange(n_out, dtype=F32)
    one, half = F32(1.0), F32(0.5)
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "half_pixel_symmetric":
        adjustment = F32(n_out) / (scale * F32(n_in))
        offset = F32(n_in) / F32(2.0) * (one - adjustment)
        return offset + ((x + half) / scale - half)
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if n_out > 1 else np.zeros(n_out, F32)
    if mode == "align_corners":
        return x * F32(n_in - 1) / F32(n_out - 1) if n_out > 1 else np.zeros(n_out, F32)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        if n_out > 1:
            return start * F32(n_in - 1) + x * (end - start) * F32(n_in - 1) / F32(n_out - 1)
        return np.full(n_out, half * (start + end) * F32(n_in - 1), F32)
    raise KernelError(f"Resize: coordinate_transformation_mode {mode!r} is not supported")


def _nearest(xo: np.ndarray, mode: str) -> np.ndarray:
    if mode == "round_prefer_floor":
        return np.ceil(xo - F32(0.5))
    if mode == "round_prefer_ceil":
        return np.floor(xo + F32(0.5))
    if mode == "floor":
        return np.floor(xo)
    if mode == "ceil":
        return np.ceil(xo)
    raise KernelError(f"Resize: nearest_mode {mode!r} is not supported")


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic convolution kernel at distance ``t``."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _axis_filter(attrs: dict, xo: np.ndarray, n_in: int, scale) -> tuple[np.ndarray, np.ndarray | None]:
    """Taps ``idx[out, T]`` (already clamped into the axis) and weights ``w[out, T]`` (None = nearest)."""
    mode = attrs.get("mode", "nearest")
    x = xo.astype(np.float64)
    if mode == "nearest":
        idx = _nearest(xo, attrs.get("nearest_mode", "round_prefer_floor")).astype(np.int64)
        return np.clip(idx, 0, n_in - 1)[:, None], None
    if mode not in ("linear", "cubic"):
        raise KernelError(f"Resize: mode {mode!r} is not supported")
    a = float(attrs.get("cubic_coeff_a", -0.75))
    kernel = (lambda t: np.clip(1.0 - np.abs(t), 0.0, None)) if mode == "linear" else (lambda t: _cubic(t, a))
    antialias = bool(attrs.get("antialias", 0)) and scale < 1
    if antialias:
        support = (1.0 if mode == "linear" else 2.0) / float(scale)
        centre = x + 0.5
        first = np.floor(centre - support + 0.5).astype(np.int64)
        taps = first[:, None] + np.arange(int(np.ceil(support)) * 2 + 1)[None, :]
        in_window = taps < np.floor(centre + support + 0.5)[:, None]
        w = np.where(in_window, kernel((taps - x[:, None]) * float(scale)), 0.0)
    elif mode == "linear":
        x = np.clip(x, 0, n_in - 1)
        lo = np.floor(x)
        taps = lo.astype(np.int64)[:, None] + np.arange(2)[None, :]
        w = np.stack([1.0 - (x - lo), x - lo], axis=1)
    else:
        taps = np.floor(x).astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
        w = kernel(taps - x[:, None])
    if attrs.get("exclude_outside", 0):
        w = np.where((taps >= 0) & (taps < n_in), w, 0.0)
    if antialias or attrs.get("exclude_outside", 0):
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(taps, 0, n_in - 1), w


def axis_taps(attrs: dict, n_in: int, n_out: int, scale, start, end
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One resized axis: the source coordinate of every output index, then its taps and weights
    (``_axis_filter``).  The reference kernel, the nearest-repeat expander and the native linear Resize all read
    the geometry through this."""
    xo = _source_coords(attrs.get("coordinate_transformation_mode", "half_pixel"), n_out, n_in, scale, start, end)
    idx, w = _axis_filter(attrs, xo, n_in, scale)
    return xo, idx, w


def _infer_resize(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    consts = [None if v is None else v.const for v in (node.inputs + [None] * 4)[1:4]]
    out, _, _, _ = resize_geometry(node.attrs, x.shape, *consts)
    return [TensorType(x.dtype, out)]


@reference("Resize", infer=_infer_resize, static_inputs=(1, 2, 3))
def resize(attrs, x, roi=None, scales=None, sizes=None):
    out, scale, start, end = resize_geometry(attrs, x.shape, roi, scales, sizes)
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
    ct = compute_dtype(x.dtype) if x.dtype.kind == "f" else np.dtype(np.float32)
    y = x.astype(ct, copy=False)
    outside = np.zeros((1,) * x.ndim, bool)
    for axis in range(x.ndim):
        if out[axis] == x.shape[axis] and scale[axis] == 1 and ctm != "tf_crop_and_resize":
            continue
        if x.shape[axis] == 0:
            raise KernelError(f"Resize: cannot resize empty axis {axis}")
        xo, idx, w = axis_taps(attrs, x.shape[axis], out[axis], scale[axis], start[axis], end[axis])
        if w is None:
            y = np.take(y, idx[:, 0], axis=axis)
        else:
            wshape = (1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1)
            w = w.astype(ct)
            acc = np.take(y, idx[:, 0], axis=axis) * w[:, 0].reshape(wshape)
            for t in range(1, idx.shape[1]):           # tap by tap: no [..., out, taps, ...] temporary
                acc += np.take(y, idx[:, t], axis=axis) * w[:, t].reshape(wshape)
            y = acc
        if ctm == "tf_crop_and_resize":
            bad = (xo < 0) | (xo > F32(x.shape[axis] - 1))
            outside = outside | bad.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
    if outside.any():
        y = np.where(outside, ct.type(attrs.get("extrapolation_value", 0.0)), y)
    if x.dtype.kind in "iu":
        # onnxruntime: the antialias resampler rounds half away from zero, the plain ones truncate
        y = np.trunc(y + np.copysign(0.5, y)) if attrs.get("antialias", 0) else np.trunc(y)
        info = np.iinfo(x.dtype)
        y = np.clip(y, info.min, info.max)
    return np.ascontiguousarray(y, dtype=x.dtype)
