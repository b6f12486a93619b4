"""Linear (de)quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear (integer types only; the
IR has no float8/int4 element types).

    QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
    DequantizeLinear: y = (x - zero_point) * scale

``scale``/``zero_point`` are per-tensor (one element), per-axis (1-D of the ``axis`` length) or blocked (the
input's rank, ``ceil(dim / block_size)`` along ``axis``; each entry covers ``block_size`` elements).
All three are OPAQUE: no native scalar emitters exist for them, so they never enter a fused kernel.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, normalize_axis, reference

_QUANT_TYPES = (DType.uint8, DType.int8, DType.uint16, DType.int16, DType.int32)


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
    if dt not in _QUANT_TYPES:
        raise KernelError(f"QuantizeLinear to {dt.name} is not supported (integer types only)")
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
    with np.errstate(all="ignore"):
        q = np.rint(x.astype(ct) / s) + np.asarray(zp, np.float64)
    info = np.iinfo(out.np)
    return np.clip(np.nan_to_num(q, nan=0.0), info.min, info.max).astype(out.np)


def _dequant_dtype(attrs, scale_dtype: DType) -> DType:
    code = attrs.get("output_dtype", 0)
    return DType(code) if code else scale_dtype


@reference("DequantizeLinear", infer=lambda n: [
    TensorType(_dequant_dtype(n.attrs, n.inputs[1].dtype), n.inputs[0].shape)])
def dequantize_linear(attrs, x, scale, zero_point=None):
    if not DType.from_np(x.dtype).is_int:
        raise KernelError(f"DequantizeLinear input must be an integer tensor, got {x.dtype}")
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    s = expand_param(scale, x.shape, axis, block, "DequantizeLinear scale")
    q = x.astype(np.int64)
    if zero_point is not None:
        q = q - expand_param(zero_point, x.shape, axis, block, "DequantizeLinear zero point").astype(np.int64)
    ct = np.float64 if s.dtype == np.float64 else np.float32
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
