"""``QuantizedConv`` (made by passes/rewrite/quantized_conv.py, run natively by kernels/qconv/): a 2-D convolution
of a float32 input quantized to uint8 on the way in, with int8 weights.  OPAQUE.

    QuantizedConv(x, x_scale, x_zero_point, w, w_scale, B?, y_scale?, y_zero_point?)  (Conv's attributes, clamp?)
      = Conv(DequantizeLinear(QuantizeLinear(x, x_scale, x_zero_point), x_scale, x_zero_point),
             w * w_scale[output channel], B)
        then clamped to ``clamp`` = [lo, hi] (a Relu or Clip taken in), then, with ``y_scale``,
        DequantizeLinear(QuantizeLinear(., y_scale, y_zero_point), y_scale, y_zero_point), then, with
        ``silu`` = 1, times its Sigmoid -- the Sigmoid through ``silu_sigmoid_q`` = [scale, zero point] and the
        product through ``silu_product_q`` when given (a QDQ model's SiLU: Sigmoid and Mul each quantized)

the form a QDQ model gives its convolutions (QuantizeLinear -> DequantizeLinear -> Conv with dequantized int8
weights).  ``x_scale``/``x_zero_point`` are scalars, ``w_scale`` one per output channel or one.  This reference
computes that float graph; the native driver computes the same sums exactly in integers, then scales them (a
float32 rounding apart).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType, Value
from .nn_conv import conv
from .quantize import dequantize_linear, quantize_linear
from .registry import OPS, reference

CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _infer(node: Node):
    x, w = node.inputs[0], node.inputs[3]
    stand_in = Node("Conv", [Value("x", x.type), Value("w", TensorType(x.type.dtype, w.type.shape))], [Value("y")],
                    {k: v for k, v in node.attrs.items() if k in CONV_ATTRS})
    return OPS["Conv"].infer(stand_in)


@reference("QuantizedConv", infer=_infer)
def quantized_conv(attrs, x, x_scale, x_zero_point, w, w_scale, b=None, y_scale=None, y_zero_point=None):
    xd = dequantize_linear({}, quantize_linear({}, x, x_scale, x_zero_point), x_scale, x_zero_point)
    ws = np.asarray(w_scale, np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
    wd = (w.astype(np.float32) * ws).astype(np.float32)
    y = conv({k: v for k, v in attrs.items() if k in CONV_ATTRS}, xd.astype(x.dtype, copy=False), wd, b)
    clamp = attrs.get("clamp")
    if clamp is not None:
        y = np.minimum(np.maximum(y, np.float32(clamp[0])), np.float32(clamp[1])).astype(y.dtype)
    if y_scale is not None:
        y = dequantize_linear({}, quantize_linear({}, y, y_scale, y_zero_point), y_scale, y_zero_point)
    if attrs.get("silu"):
        sig = OPS["Sigmoid"].compute({}, y)
        y = (y * _round_trip(sig, attrs.get("silu_sigmoid_q"))).astype(y.dtype)
        y = _round_trip(y, attrs.get("silu_product_q"))
    return y


def _round_trip(v, q):
    """DequantizeLinear(QuantizeLinear(v)) with ``q`` = [scale, uint8 zero point], or ``v`` when q is None."""
    if q is None:
        return v
    s, z = np.float32(q[0]), np.uint8(q[1])
    return dequantize_linear({}, quantize_linear({}, v, s, z), s, z)
