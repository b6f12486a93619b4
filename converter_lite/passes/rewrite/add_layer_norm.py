"""``add_layer_norm_fusion``: ``LayerNormalization(A + B, scale, bias)`` -> ``AddLayerNorm(A, B, scale, bias)``
with two outputs, the normalized value and the sum (the residual stream of a transformer keeps using it).

Constraints: only LayerNormalization's first output is used; the sum is floating point.  Other users of
the sum read the fused op's second output.
"""
from __future__ import annotations

from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass, is_float, unused_extra_outputs

PATTERN = op.LayerNormalization(op.Add(Var("a"), Var("b"), bind="add"), Var("scale"), Opt("bias"), bind="ln")


def check(m: Match) -> MatchResult:
    if not is_float(m.node("add").outputs[0]):
        return MatchResult.fail("the sum is not floating point")
    if not unused_extra_outputs(m, m.node("ln")):
        return MatchResult.fail("LayerNormalization's Mean/InvStdDev outputs are used")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> dict:
    ln, add = m.node("ln"), m.node("add")
    ins = [m["a"], m["b"], m["scale"]] + ([m["bias"]] if m["bias"] is not None else [])
    attrs = {k: ln.attrs[k] for k in ("axis", "epsilon") if k in ln.attrs}
    fused = b.node("AddLayerNorm", *ins, n_outputs=2, **attrs)
    return {ln.outputs[0]: fused.outputs[0], add.outputs[0]: fused.outputs[1]}


@register_pass
class AddLayerNormFusionPass(RewritePass):
    name = "add_layer_norm_fusion"
    rules = (Rule("add_layer_norm", PATTERN, rewrite, check=check, shared=("add",)),)
