"""Gelu (opset 20) -> basic ops.

* ``approximate="none"``: Gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2)))
* ``approximate="tanh"``: Gelu(x) = x * 0.5 * (1 + tanh(u)), u = sqrt(2/pi) * (x + 0.044715 * x^3), emitted as
  x / (1 + exp(-2u)), the same function (0.5 * (1 + tanh(u)) = 1 / (1 + exp(-2u))) with one exp and one
  division instead of a tanh (an exp, a division and a polynomial, both computed and one selected) plus the
  sum: about half the vector instructions per element.  It is also the more accurate spelling: for negative x,
  1 + tanh(u) cancels (float32 1 + tanh(-4) keeps 3 significant digits), 1 + exp(-2u) does not.  Infinities
  and NaN give what the tanh form gives (-inf: -inf / inf = NaN like -inf * 0; +inf: inf / 1; large negative
  x: x / inf = -0).

Source: Hendrycks & Gimpel, "Gaussian Error Linear Units", arXiv:1606.08415; MindSpore's CPU/GPU ``gelu``
expander spells out the tanh (x^3 computed as x*x*x, constant sqrt(2/pi) = 0.7978845608).
"""
from __future__ import annotations

import math

from ...ir.core import Node
from ...ops.builder import GraphBuilder
from .emit import erf, exp, input_value, require_float
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
        minus_2u = (x + x * x * x * GELU_CUBIC) * (-2.0 * SQRT_2_OVER_PI)
        return [x / (exp(minus_2u) + 1.0)]
    raise Declined(f"unknown approximate={approximate!r}")
