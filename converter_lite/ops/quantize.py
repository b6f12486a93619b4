"""Linear (de)quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.

    QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
    DequantizeLinear: y = (x - zero_point) * scale

The quantized types (``QUANT_TYPES``) are the integer ones, int4/uint4 included, whose QuantizeLinear rounds
and then saturates to the type's range (int4 [-8, 7], uint4 [0, 15]), and the float8/float4e2m1 ones, whose
QuantizeLinear is a Cast of ``x / scale + zero_point`` (rounded to nearest even in the type; the ``saturate``
attribute as Cast's for float8, float4e2m1 always saturating).  Their zero point is usually 0.

``scale``/``zero_point`` are per-tensor (one element), per-axis (1-D of the ``axis`` length) or blocked (the
input's rank, ``ceil(dim / block_size)`` along ``axis``; each entry covers ``block_size`` elements).
All three are OPAQUE: no native scalar emitters exist for them, so they never enter a fused kernel.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .elementwise import cast_to
from .registry import KernelError, normalize_axis, reference

# quantized type -> its range (min, max) when it is an integer type, None for a float type (module docstring)
QUANT_TYPES: dict[DType, tuple[int, int] | None] = {
    **{d: (int(ml_dtypes.iinfo(d.np).min), int(ml_dtypes.iinfo(d.np).max))
       for d in (DType.uint8, DType.int8, DType.uint16, DType.int16, DType.int32, DType.uint4, DType.int4)},
    **dict.fromkeys((DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz,
                     DType.float4e2m1)),
}


def expand_param(p: np.ndarray, x_shape, axis: int, block_size: int, what: str) -> np.ndarray:
    """``p`` (a scale or zero point) broadcastable against an input of ``x_shape``."""
    p = np.asarray(p)
    rank = len(x_shape)
    if p.size == 1 and p.ndim <= 1:
        return p.reshape(())
    axis = normalize_axis(axis, rank, f"{what} axis")
    if block_size <= 0:
        if p.ndim != 1 or p.shape[0] != x_shape[axis]:
            raise KernelError(f"{what} of shape {list(p.shape)} is neither per-tensor nor per-axis for input "
                              f"{list(x_shape)} (axis {axis})")
        return p.reshape((-1,) + (1,) * (rank - axis - 1))
    blocks = -(-x_shape[axis] // block_size)
    if p.ndim != rank or p.shape[axis] != blocks or any(
            a != b for i, (a, b) in enumerate(zip(p.shape, x_shape)) if i != axis):
        raise KernelError(f"{what} of shape {list(p.shape)} does not block input {list(x_shape)} by {block_size} "
                          f"on axis {axis}")
    return np.take(np.repeat(p, block_size, axis=axis), np.arange(x_shape[axis]), axis=axis)


def _quant_dtype(attrs, zero_point_dtype: DType | None) -> DType:
    code = attrs.get("output_dtype", 0)
    if zero_point_dtype is not None:
        if code and DType(code) != zero_point_dtype:
            raise KernelError(f"QuantizeLinear output_dtype {DType(code).name} != zero point {zero_point_dtype.name}")
        dt = zero_point_dtype
    else:
        dt = DType(code) if code else DType.uint8
    if dt not in QUANT_TYPES:
        raise KernelError(f"QuantizeLinear to {dt.name} is not supported (not a quantized type)")
    return dt


def _compute_dtype(attrs, scale: np.ndarray):
    """Division precision: the ``precision`` attribute, else the scale's type (float16 is widened to float32,
    as onnxruntime does)."""
    code = attrs.get("precision", 0)
    dt = DType(code).np if code else scale.dtype
    return np.float64 if dt == np.float64 else np.float32


def _quantize_infer(node):
    zp = node.inputs[2] if len(node.inputs) > 2 else None
    return [TensorType(_quant_dtype(node.attrs, None if zp is None else zp.dtype), node.inputs[0].shape)]


@reference("QuantizeLinear", infer=_quantize_infer)
def quantize_linear(attrs, x, scale, zero_point=None):
    out = _quant_dtype(attrs, None if zero_point is None else DType.from_np(zero_point.dtype))
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    ct = _compute_dtype(attrs, scale)
    s = expand_param(scale, x.shape, axis, block, "QuantizeLinear scale").astype(ct)
    zp = 0 if zero_point is None else expand_param(zero_point, x.shape, axis, block, "QuantizeLinear zero point")
    bounds = QUANT_TYPES[out]
    with np.errstate(all="ignore"):
        if bounds is None:
            return cast_to(x.astype(ct) / s + np.asarray(zp, ct), out.np, bool(attrs.get("saturate", 1)))
        q = np.rint(x.astype(ct) / s) + np.asarray(zp, np.float64)
    return np.clip(np.nan_to_num(q, nan=0.0), *bounds).astype(out.np)


def _dequant_dtype(attrs, scale_dtype: DType) -> DType:
    code = attrs.get("output_dtype", 0)
    return DType(code) if code else scale_dtype


@reference("DequantizeLinear", infer=lambda n: [
    TensorType(_dequant_dtype(n.attrs, n.inputs[1].dtype), n.inputs[0].shape)])
def dequantize_linear(attrs, x, scale, zero_point=None):
    """Integer inputs (any, int32 included) subtract the zero point exactly (int64); float8/float4e2m1 ones in
    the computation type."""
    xt = DType.from_np(x.dtype)
    if not xt.is_int and xt not in QUANT_TYPES:
        raise KernelError(f"DequantizeLinear input must be a quantized type, got {xt.name}")
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    s = expand_param(scale, x.shape, axis, block, "DequantizeLinear scale")
    ct = np.float64 if s.dtype == np.float64 else np.float32
    q = x.astype(np.int64 if xt.is_int else ct)
    if zero_point is not None:
        q = q - expand_param(zero_point, x.shape, axis, block, "DequantizeLinear zero point").astype(q.dtype)
    return (q.astype(ct) * s.astype(ct)).astype(_dequant_dtype(attrs, DType.from_np(scale.dtype)).np)


@reference("DynamicQuantizeLinear", infer=lambda n: [
    TensorType(DType.uint8, n.inputs[0].shape), TensorType(DType.float32, ()), TensorType(DType.uint8, ())])
def dynamic_quantize_linear(attrs, x):
    """uint8 quantization with the range [min(0, min x), max(0, max x)] mapped onto [0, 255]."""
    if x.dtype != np.float32:
        raise KernelError(f"DynamicQuantizeLinear input must be float32, got {x.dtype}")
    lo = min(0.0, float(x.min())) if x.size else 0.0
    hi = max(0.0, float(x.max())) if x.size else 0.0
    scale = np.float32((hi - lo) / 255.0) if hi != lo else np.float32(1.0)   # onnxruntime's guard for all-zero x
    zp = np.float32(np.clip(np.rint(np.float32(0.0) - np.float32(lo) / scale), 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.array(scale, np.float32), np.array(zp, np.uint8)
