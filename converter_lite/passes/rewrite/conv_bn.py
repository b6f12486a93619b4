"""``conv_bn_fusion``: ``BatchNormalization(Conv(x, W, b), scale, bias, mean, var)`` -> ``Conv(x, W', b')``
(inference BatchNorm folded into the convolution weights).

    s  = scale / sqrt(var + epsilon)          (per output channel)
    W' = W * s[:, None, None, ...]
    b' = (b - mean) * s + bias                (b = 0 when the Conv has no bias)

Constraints: W, b and the four BatchNorm parameters are constants; BatchNorm is in inference mode and only
its first output is used; the Conv output feeds nothing else.  The folding is done in float64 and stored in
W's dtype.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Const, Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass, unused_extra_outputs

PATTERN = op.BatchNormalization(op.Conv(Var("x"), Const("w"), Opt("b"), bind="conv"),
                                Const("scale"), Const("bias"), Const("mean"), Const("var"), bind="bn")


def check(m: Match) -> MatchResult:
    bn = m.node("bn")
    if bn.attrs.get("training_mode", 0):
        return MatchResult.fail("BatchNormalization is in training mode")
    if not unused_extra_outputs(m, bn):
        return MatchResult.fail("BatchNormalization's running statistics are used")
    if m["b"] is not None and not m["b"].is_const:
        return MatchResult.fail("the Conv bias is not a constant")
    channels = m["w"].type.shape[0]
    for name in ("scale", "bias", "mean", "var"):
        if m.const(name).size != channels:
            return MatchResult.fail(f"BatchNorm {name} does not have one value per output channel")
    if m["w"].type.dtype.np.kind != "f":
        return MatchResult.fail("the weights are not floating point")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    w = m.const("w")
    eps = m.node("bn").attrs.get("epsilon", 1e-5)
    s = m.const("scale").astype(np.float64).reshape(-1) / np.sqrt(
        m.const("var").astype(np.float64).reshape(-1) + eps)
    bias = np.zeros(w.shape[0]) if m["b"] is None else m.const("b").astype(np.float64).reshape(-1)
    new_w = (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    new_b = ((bias - m.const("mean").astype(np.float64).reshape(-1)) * s
             + m.const("bias").astype(np.float64).reshape(-1)).astype(w.dtype)
    conv = m.node("conv")
    return b.node("Conv", m["x"], b.const(new_w), b.const(new_b), **conv.attrs).outputs[0]


@register_pass
class ConvBnFusionPass(RewritePass):
    name = "conv_bn_fusion"
    rules = (Rule("conv_bn", PATTERN, rewrite, check=check),)
