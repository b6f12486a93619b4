"""The rectifier family of activations and Clip -> basic ops (Max/Min/Where/Exp).

* Relu(x)            = max(x, 0)                                  (MindSpore ``relu`` expander: a Max here)
* LeakyRelu(x)       = where(x < 0, alpha * x, x)                 alpha=0.01
* PRelu(x, slope)    = where(x < 0, slope * x, x)                 slope broadcasts to x
* Elu(x)             = where(x > 0, x, alpha * (exp(x) - 1))      alpha=1
* Selu(x)            = gamma * where(x > 0, x, alpha * (exp(x) - 1))
* Celu(x)            = max(x, 0) + min(0, alpha * (exp(x / alpha) - 1))
* ThresholdedRelu(x) = where(x > alpha, x, 0)                     alpha=1
* Shrink(x)          = where(x < -lambd, x + bias, where(x > lambd, x - bias, 0))   lambd=0.5, bias=0
* Clip(x, lo, hi)    = min(max(x, lo), hi)   (absent bounds are skipped; Relu6 is Clip(x, 0, 6))

Constants are ONNX's defaults (Selu's in float32-exact form).  Source: the ONNX operator definitions.
"""
from __future__ import annotations

from ...ir.core import Node
from ...ops.builder import BValue, GraphBuilder
from .emit import (
    as_scalar,
    cast,
    exp,
    greater,
    input_value,
    less,
    maximum,
    minimum,
    require_float,
    where,
)
from .registry import expander

LEAKY_RELU_ALPHA = 0.01
SELU_ALPHA = 1.67326319217681884765625
SELU_GAMMA = 1.05070102214813232421875


def _float_input(b: GraphBuilder, node: Node) -> BValue:
    x = input_value(b, node, 0)
    require_float(x, node.op)
    return x


def _alpha(node: Node, default: float = 1.0) -> float:
    return float(node.attrs.get("alpha", default))


@expander("Relu")
def expand_relu(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    return [maximum(x, 0)]


@expander("LeakyRelu")
def expand_leaky_relu(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    return [where(less(x, 0.0), x * _alpha(node, LEAKY_RELU_ALPHA), x)]


@expander("PRelu")
def expand_prelu(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    slope = cast(input_value(b, node, 1), x.dtype)
    return [where(less(x, 0.0), x * slope, x)]


@expander("Elu")
def expand_elu(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    return [where(greater(x, 0.0), x, (exp(x) - 1.0) * _alpha(node))]


@expander("Selu")
def expand_selu(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    alpha, gamma = _alpha(node, SELU_ALPHA), float(node.attrs.get("gamma", SELU_GAMMA))
    return [where(greater(x, 0.0), x, (exp(x) - 1.0) * alpha) * gamma]


@expander("Celu")
def expand_celu(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    alpha = _alpha(node)
    return [maximum(x, 0.0) + minimum((exp(x * (1.0 / alpha)) - 1.0) * alpha, 0.0)]


@expander("ThresholdedRelu")
def expand_thresholded_relu(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    return [where(greater(x, _alpha(node)), x, 0.0)]


@expander("Shrink")
def expand_shrink(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)     # integer Shrink compares against a float lambd: not expressible exactly
    lambd, bias = float(node.attrs.get("lambd", 0.5)), float(node.attrs.get("bias", 0.0))
    return [where(less(x, -lambd), x + bias, where(greater(x, lambd), x - bias, 0.0))]


@expander("Clip")
def expand_clip(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    lo, hi = input_value(b, node, 1), input_value(b, node, 2)
    y = x
    if lo is not None:
        y = maximum(y, as_scalar(lo))
    if hi is not None:
        y = minimum(y, as_scalar(hi))
    return [y]
