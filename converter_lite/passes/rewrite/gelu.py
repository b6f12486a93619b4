"""``gelu_fusion``: the two GELU formulas exporters spell out -> ``Gelu``.

1. erf form:  ``x * 0.5 * (1 + Erf(x / √2))`` (also ``x * (1/√2)`` inside, and the three ways of grouping
   the product: ``(x*0.5)*(1+e)``, ``(x*(1+e))*0.5``, ``x*((1+e)*0.5)``) -> ``Gelu(x)``.
2. tanh form: ``x * 0.5 * (1 + Tanh(√(2/π) * (x + 0.044715 * x³)))`` with ``x³`` as ``Pow(x, 3)`` or
   ``x*x*x``, grouped the same three ways -> ``Gelu(x, approximate="tanh")``.

Constants are matched with a relative tolerance of 1e-3 (exporters round √2 and √(2/π) differently).
Add and Mul match in either operand order; the intermediates must feed nothing else.
"""
from __future__ import annotations

import math

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Alt, Lit, Match, MatchResult, Pattern, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass, is_float

X = Var("x")
RTOL = 1e-3


def _near(value: float) -> Lit:
    return Lit(value, rtol=RTOL)


def _gelu_products(one_plus: Pattern) -> Pattern:
    """``x * 0.5 * one_plus`` in the three groupings exporters emit."""
    half = _near(0.5)
    return Alt((X * half) * one_plus, (X * one_plus) * half, X * (one_plus * half))


ERF_ARG = Alt(X / _near(math.sqrt(2.0)), X * _near(1.0 / math.sqrt(2.0)))
ERF_FORM = _gelu_products(op.Erf(ERF_ARG) + _near(1.0))

CUBE = Alt(op.Pow(X, _near(3.0)), X * (X * X), (X * X) * X)
TANH_ARG = _near(math.sqrt(2.0 / math.pi)) * (X + _near(0.044715) * CUBE)
TANH_FORM = _gelu_products(op.Tanh(TANH_ARG) + _near(1.0))


def check(m: Match) -> MatchResult:
    if not is_float(m["x"]):
        return MatchResult.fail("x is not floating point")
    if m.root.outputs[0].type.shape != m["x"].type.shape:
        return MatchResult.fail("the result is broadcast beyond x's shape")
    return MatchResult()


def gelu(approximate: str):
    def rewrite(m: Match, b: GraphBuilder) -> Value:
        attrs = {"approximate": approximate} if approximate != "none" else {}
        return b.node("Gelu", m["x"], **attrs).outputs[0]
    return rewrite


@register_pass
class GeluFusionPass(RewritePass):
    name = "gelu_fusion"
    rules = (
        Rule("gelu_erf", ERF_FORM, gelu("none"), check=check),
        Rule("gelu_tanh", TANH_FORM, gelu("tanh"), check=check),
    )
