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

The uint8 hand-off between two int8 convolutions (passes/rewrite/quantized_handoff.py) uses two variants, each
the float form with one QuantizeLinear or DequantizeLinear moved across the edge, so the values are the same:

* a **uint8 input** ``x`` holds ``QuantizeLinear(x_float, x_scale, x_zero_point)`` already: the convolution
  reads ``DequantizeLinear(x, x_scale, x_zero_point)``;
* ``uint8_out`` = 1: the output is ``QuantizeLinear(y, s, z)`` (uint8) of the float result ``y`` above with its
  last quantization pair ``(s, z)`` -- ``silu_product_q`` with a SiLU, else ``y_scale``/``y_zero_point``.  ``y``
  is ``DequantizeLinear(QuantizeLinear(v))`` of that pair, so ``DequantizeLinear`` of the uint8 output is ``y``
  bit for bit.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType, Value
from ..ir.dtype import DType
from .nn_conv import conv
from .quantize import dequantize_linear, quantize_linear
from .registry import OPS, KernelError, reference

CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _infer(node: Node):
    x, w = node.inputs[0], node.inputs[3]
    stand_in = Node("Conv", [Value("x", TensorType(DType.float32, x.type.shape)),
                             Value("w", TensorType(DType.float32, w.type.shape))], [Value("y")],
                    {k: v for k, v in node.attrs.items() if k in CONV_ATTRS})
    (t,) = OPS["Conv"].infer(stand_in)
    return [TensorType(DType.uint8, t.shape) if node.attrs.get("uint8_out") else t]


@reference("QuantizedConv", infer=_infer)
def quantized_conv(attrs, x, x_scale, x_zero_point, w, w_scale, b=None, y_scale=None, y_zero_point=None):
    xq = x if x.dtype == np.uint8 else quantize_linear({}, x, x_scale, x_zero_point)
    xd = dequantize_linear({}, xq, x_scale, x_zero_point)
    ws = np.asarray(w_scale, np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
    wd = (w.astype(np.float32) * ws).astype(np.float32)
    y = conv({k: v for k, v in attrs.items() if k in CONV_ATTRS}, xd, wd, b)
    clamp = attrs.get("clamp")
    if clamp is not None:
        y = np.minimum(np.maximum(y, np.float32(clamp[0])), np.float32(clamp[1])).astype(y.dtype)
    if y_scale is not None:
        y = dequantize_linear({}, quantize_linear({}, y, y_scale, y_zero_point), y_scale, y_zero_point)
    if attrs.get("silu"):
        sig = OPS["Sigmoid"].compute({}, y)
        y = (y * _round_trip(sig, attrs.get("silu_sigmoid_q"))).astype(y.dtype)
        y = _round_trip(y, attrs.get("silu_product_q"))
    if attrs.get("uint8_out"):
        s, z = output_pair(attrs, y_scale, y_zero_point)
        return quantize_linear({}, y, s, z)
    return y


def output_pair(attrs, y_scale, y_zero_point) -> tuple[np.float32, np.uint8]:
    """The last quantization pair of the output (``uint8_out``'s): the SiLU product's, else ``y_scale``'s."""
    if attrs.get("silu"):
        q = attrs.get("silu_product_q")
        if q is None:
            raise KernelError("QuantizedConv uint8_out with a SiLU needs silu_product_q")
        return np.float32(q[0]), np.uint8(q[1])
    if y_scale is None or y_zero_point is None:
        raise KernelError("QuantizedConv uint8_out needs y_scale and y_zero_point")
    return np.float32(np.asarray(y_scale).reshape(())), np.uint8(np.asarray(y_zero_point).reshape(()))


def round_trips(scale) -> bool:
    """Whether ``QuantizeLinear(DequantizeLinear(q)) == q`` for every uint8 ``q`` and zero point with this float32
    scale: a positive one with ``255 * scale`` finite (float32 ``(q - z) * s / s`` is then within a few ulps of
    ``q - z``, which rounds back; past it ``(q - z) * s`` overflows).  What the uint8 hand-off between
    convolutions rests on (passes/rewrite/quantized_handoff.py, passes/expand/quantize.py)."""
    s = np.float32(np.asarray(scale).reshape(()))
    with np.errstate(over="ignore"):
        return bool(s > 0 and np.isfinite(s * np.float32(255)))


def _round_trip(v, q):
    """DequantizeLinear(QuantizeLinear(v)) with ``q`` = [scale, uint8 zero point], or ``v`` when q is None."""
    if q is None:
        return v
    s, z = np.float32(q[0]), np.uint8(q[1])
    return dequantize_linear({}, quantize_linear({}, v, s, z), s, z)
