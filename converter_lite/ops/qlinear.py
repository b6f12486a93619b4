"""Quantized operator-format ops (QOperator models): QLinearMatMul, ConvInteger, QLinearConv.  OPAQUE.

    ConvInteger:   y = Conv(x - x_zp, w - w_zp)                                     (int32)
    QLinearConv:   y = saturate(round((Conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)
    QLinearMatMul: y = saturate(round(((a - a_zp) @ (b - b_zp)) * a_scale * b_scale / y_scale) + y_zp)

The integer products are exact (float64 holds every int8/uint8 dot product of realistic length); the
convolution geometry (pads, strides, dilations, groups, auto_pad) is the registered ``Conv`` kernel's, run on
the zero-point-shifted values.  Weight scales/zero points may be per output channel (``[M]``); QLinearMatMul's
``a`` parameters may be per row and ``b``'s per column.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType, Value
from ..ir.dtype import DType
from .registry import OPS, KernelError, evaluate, reference

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _conv_attrs(attrs) -> dict:
    return {k: v for k, v in attrs.items() if k in _CONV_ATTRS}


def _conv_shape(node, x: Value, w: Value) -> tuple[int, ...]:
    """Output shape of the float Conv with the same geometry (the registered Conv inference)."""
    ins = [Value("x", TensorType(DType.float32, x.shape)), Value("w", TensorType(DType.float32, w.shape))]
    probe = Node("Conv", ins, [Value("y")], _conv_attrs(node.attrs), name=node.name)
    return OPS["Conv"].infer(probe)[0].shape


def _shifted(v: np.ndarray, zp, channel_axis: int | None = None) -> np.ndarray:
    """v - zp in float64; a 1-D zero point runs along ``channel_axis``."""
    out = v.astype(np.float64)
    if zp is None:
        return out
    zp = np.asarray(zp, np.float64)
    if zp.size == 1:
        return out - zp.reshape(())
    if channel_axis is None or zp.ndim != 1 or zp.size != v.shape[channel_axis]:
        raise KernelError(f"zero point of shape {list(zp.shape)} does not fit input {list(v.shape)}")
    return out - zp.reshape((-1,) + (1,) * (v.ndim - channel_axis - 1))


def _check_int8(*arrays) -> None:
    for a in arrays:
        if a is not None and np.asarray(a).dtype not in (np.int8, np.uint8):
            raise KernelError(f"quantized input must be int8 or uint8, got {np.asarray(a).dtype}")


def _requantize(acc: np.ndarray, multiplier, y_zero_point) -> np.ndarray:
    out = np.dtype(np.uint8) if y_zero_point is None else np.asarray(y_zero_point).dtype
    info = np.iinfo(out)
    zp = 0 if y_zero_point is None else np.asarray(y_zero_point, np.float64)
    # onnxruntime forms the multiplier in float32
    return np.clip(np.rint(acc * np.asarray(multiplier, np.float32).astype(np.float64)) + zp, info.min,
                   info.max).astype(out)


# -- ConvInteger / QLinearConv ---------------------------------------------------------------------------------
@reference("ConvInteger", infer=lambda n: [TensorType(DType.int32, _conv_shape(n, n.inputs[0], n.inputs[1]))])
def conv_integer(attrs, x, w, x_zero_point=None, w_zero_point=None):
    _check_int8(x, w, x_zero_point, w_zero_point)
    if x_zero_point is not None and np.size(x_zero_point) != 1:
        raise KernelError("ConvInteger x_zero_point must be a scalar")
    y = evaluate("Conv", _conv_attrs(attrs), [_shifted(x, x_zero_point), _shifted(w, w_zero_point, 0)])[0]
    return np.rint(y).astype(np.int32)


def _qlinear_conv_infer(node):
    zp = node.inputs[7] if len(node.inputs) > 7 else None
    dtype = DType.uint8 if zp is None else zp.dtype
    return [TensorType(dtype, _conv_shape(node, node.inputs[0], node.inputs[3]))]


@reference("QLinearConv", infer=_qlinear_conv_infer)
def qlinear_conv(attrs, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point=None, b=None):
    _check_int8(x, w, x_zero_point, w_zero_point, y_zero_point)
    acc = evaluate("Conv", _conv_attrs(attrs), [_shifted(x, x_zero_point), _shifted(w, w_zero_point, 0)])[0]
    nsp = acc.ndim - 2
    if b is not None:
        acc = acc + np.asarray(b, np.float64).reshape((-1,) + (1,) * nsp)
    ws = np.asarray(w_scale, np.float32)
    ws = ws.reshape((-1,) + (1,) * nsp) if ws.ndim == 1 and ws.size > 1 else ws.reshape(())
    multiplier = np.asarray(x_scale, np.float32).reshape(()) * ws / np.asarray(y_scale, np.float32).reshape(())
    return _requantize(acc, multiplier, y_zero_point)


# -- QLinearMatMul ---------------------------------------------------------------------------------------------
def _qlinear_matmul_infer(node):
    a, b = node.inputs[0].type, node.inputs[3].type
    ins = [Value("a", TensorType(DType.float32, a.shape)), Value("b", TensorType(DType.float32, b.shape))]
    probe = Node("MatMul", ins, [Value("y")], {}, name=node.name)
    zp = node.inputs[7] if len(node.inputs) > 7 else None
    return [TensorType(DType.uint8 if zp is None else zp.dtype, OPS["MatMul"].infer(probe)[0].shape)]


def _row_param(p, v: np.ndarray, axis: int):
    """A per-tensor or per-row (axis -2) / per-column (axis -1) parameter, broadcastable against ``v``."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if p.ndim != 1 or v.ndim < 2 or p.size != v.shape[axis]:
        raise KernelError(f"QLinearMatMul parameter of shape {list(p.shape)} does not fit {list(v.shape)}")
    return p.reshape(-1, 1) if axis == -2 else p


@reference("QLinearMatMul", infer=_qlinear_matmul_infer)
def qlinear_matmul(attrs, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point=None):
    _check_int8(a, b, a_zero_point, b_zero_point, y_zero_point)
    az = 0 if a_zero_point is None else _row_param(a_zero_point, a, -2).astype(np.float64)
    bz = 0 if b_zero_point is None else _row_param(b_zero_point, b, -1).astype(np.float64)
    acc = np.matmul(a.astype(np.float64) - az, b.astype(np.float64) - bz)
    sa = _row_param(a_scale, a, -2).astype(np.float32)
    sb = _row_param(b_scale, b, -1).astype(np.float32)
    multiplier = sa * sb / np.asarray(y_scale, np.float32).reshape(())
    return _requantize(acc, multiplier, y_zero_point)
