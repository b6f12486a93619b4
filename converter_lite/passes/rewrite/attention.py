"""``attention_fusion``: scaled dot-product attention -> one ``Attention`` node.

    MatMul(Softmax(MatMul(Q, Kt) [* s | / s] [+ mask], axis=-1), V)  ->  Attention(Q, Kt, V[, mask], scale)

``scale`` is ``s`` (or ``1/s`` for the division form, 1 when absent); ``Kt`` is whatever value feeds the
product (usually ``Transpose(K)``).  The ``Attention`` reference kernel (ops/fused_ops.py) computes exactly
these ops with their own kernels, so numerics are unchanged up to ``x/s`` vs ``x*(1/s)`` rounding.

Constraints: ``s`` is a one-element constant; the mask is floating point of the scores' dtype and does not
enlarge the scores; Softmax normalizes the last axis; the intermediates feed nothing else.
"""
from __future__ import annotations

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Alt, Const, Match, MatchResult, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass, is_float, scalar_value

Q, KT, V, MASK = Var("q"), Var("kt"), Var("v"), Var("mask")
S = Const("s", scalar=True)

SCORES = op.MatMul(Q, KT, bind="qk")
SCALED = Alt(op.Mul(SCORES, S, bind="mul"), op.Div(SCORES, S, bind="div"), SCORES)
MASKED = Alt(op.Add(SCALED, MASK, bind="add"), SCALED)
PATTERN = op.MatMul(op.Softmax(MASKED, bind="softmax"), V)


def check(m: Match) -> MatchResult:
    scores = m.node("qk").outputs[0]
    if not is_float(scores):
        return MatchResult.fail("the scores are not floating point")
    sm = m.node("softmax")
    rank = sm.inputs[0].type.rank
    axis = sm.attrs.get("axis", -1)
    if axis not in (-1, rank - 1):
        return MatchResult.fail(f"Softmax normalizes axis {axis}, not the last one")
    if "s" in m.values and scalar_value(m["s"]) in (None, 0.0):
        return MatchResult.fail("the scale is not a non-zero scalar")
    if "mask" in m.values:
        mask = m["mask"]
        if mask.type.dtype != scores.type.dtype:
            return MatchResult.fail("the mask's dtype differs from the scores'")
        if m.node("add").outputs[0].type.shape != scores.type.shape:
            return MatchResult.fail("the mask enlarges the scores")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    scale = 1.0
    if "mul" in m.named:
        scale = scalar_value(m["s"])
    elif "div" in m.named:
        scale = 1.0 / scalar_value(m["s"])
    ins = [m["q"], m["kt"], m["v"]] + ([m["mask"]] if "mask" in m.values else [])
    return b.node("FusedAttention", *ins, scale=float(scale)).outputs[0]


@register_pass
class AttentionFusionPass(RewritePass):
    name = "attention_fusion"
    rules = (Rule("attention", PATTERN, rewrite, check=check),)
