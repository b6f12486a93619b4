"""``add_rms_norm_fusion``: an Add feeding an RMS normalization -> ``AddRmsNorm(A, B, scale)`` with two
outputs, the normalized value and the sum.

1. ``RMSNormalization(A + B, scale)`` -> ``AddRmsNorm(A, B, scale, axis, epsilon)``.
2. The decomposed form: with ``S = A + B``,
   ``S / Sqrt(ReduceMean(S ** 2 | S * S, axes) + eps) * scale`` (also ``S * Reciprocal(Sqrt(...))``, and
   without ``* scale``) -> ``AddRmsNorm(A, B, scale or ones)``.

Constraints: the reduction keeps dims over trailing axes; ``eps`` is a one-element constant; a decomposed
``scale`` is a constant over the normalized dims; the sum is floating point.  Other users of the sum read the
fused op's second output; the other intermediates feed nothing else.
"""
from __future__ import annotations

import numpy as np

from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Alt, Const, Match, MatchResult, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass, is_float, keeps_dims, scalar_value, trailing_axes
from .layer_norm import param_shape

SUM = op.Add(Var("a"), Var("b"), bind="add")
NODE_FORM = op.RMSNormalization(SUM, Var("scale"), bind="rms")

MEAN_SQ = op.ReduceMean(Alt(op.Pow(SUM, 2), op.Mul(SUM, SUM)), Const("axes"), bind="mean")
ROOT = op.Sqrt(MEAN_SQ + Const("eps", scalar=True))
NORM = Alt(op.Div(SUM, ROOT), op.Mul(SUM, op.Reciprocal(ROOT)))
DECOMPOSED = Alt(NORM * Const("gamma"), NORM)


def check_node(m: Match) -> MatchResult:
    if not is_float(m.node("add").outputs[0]):
        return MatchResult.fail("the sum is not floating point")
    return MatchResult()


def rewrite_node(m: Match, b: GraphBuilder) -> dict:
    rms, add = m.node("rms"), m.node("add")
    attrs = {k: rms.attrs[k] for k in ("axis", "epsilon") if k in rms.attrs}
    fused = b.node("AddRmsNorm", m["a"], m["b"], m["scale"], n_outputs=2, **attrs)
    return {rms.outputs[0]: fused.outputs[0], add.outputs[0]: fused.outputs[1]}


def check_decomposed(m: Match) -> MatchResult:
    s = m.node("add").outputs[0]
    if not is_float(s):
        return MatchResult.fail("the sum is not floating point")
    ok = keeps_dims(m.node("mean"))
    if not ok:
        return ok
    axis = trailing_axes(m, ("axes",), s)
    if isinstance(axis, MatchResult):
        return axis
    if "gamma" in m.values and isinstance(param_shape(m, "gamma", s, axis), MatchResult):
        return param_shape(m, "gamma", s, axis)
    if m.root.outputs[0].type.shape != s.type.shape:
        return MatchResult.fail("the result is broadcast beyond the sum's shape")
    return MatchResult()


def rewrite_decomposed(m: Match, b: GraphBuilder) -> dict:
    add = m.node("add")
    s = add.outputs[0]
    axis = trailing_axes(m, ("axes",), s)
    if "gamma" in m.values:
        gamma = param_shape(m, "gamma", s, axis)
    else:
        gamma = np.ones(s.type.shape[axis:], s.type.dtype.np)
    fused = b.node("AddRmsNorm", m["a"], m["b"], b.const(gamma), n_outputs=2, axis=axis,
                   epsilon=scalar_value(m["eps"]))
    return {m.root.outputs[0]: fused.outputs[0], s: fused.outputs[1]}


@register_pass
class AddRmsNormFusionPass(RewritePass):
    name = "add_rms_norm_fusion"
    rules = (
        Rule("add_rms_norm", NODE_FORM, rewrite_node, check=check_node, shared=("add",)),
        Rule("add_rms_norm_decomposed", DECOMPOSED, rewrite_decomposed, check=check_decomposed,
             shared=("add",)),
    )
