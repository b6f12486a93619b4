"""Gelu (opset 20) -> basic ops.

* ``approximate="none"``: Gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2)))
* ``approximate="tanh"``: Gelu(x) = x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

Source: Hendrycks & Gimpel, "Gaussian Error Linear Units", arXiv:1606.08415; the tanh form is MindSpore's
CPU/GPU ``gelu`` expander (x^3 computed as x*x*x, constant sqrt(2/pi) = 0.7978845608).
"""
from __future__ import annotations

import math

from ...ir.builder import GraphBuilder
from ...ir.core import Node
from .emit import erf, input_value, require_float, tanh
from .registry import Declined, expander

SQRT_HALF = math.sqrt(0.5)              # 1 / sqrt(2)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
GELU_CUBIC = 0.044715


@expander("Gelu")
def gelu(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "Gelu")
    approximate = node.attrs.get("approximate", "none")
    if approximate == "none":
        return [x * 0.5 * (erf(x * SQRT_HALF) + 1.0)]
    if approximate == "tanh":
        inner = (x + x * x * x * GELU_CUBIC) * SQRT_2_OVER_PI
        return [x * 0.5 * (tanh(inner) + 1.0)]
    raise Declined(f"unknown approximate={approximate!r}")
