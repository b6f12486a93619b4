"""``layer_norm_fusion``: the decomposed LayerNorm exporters produce -> ``LayerNormalization``.

    mean = ReduceMean(x, axes)                     d   = x - mean
    var  = ReduceMean(d ** 2  |  d * d, axes)      std = Sqrt(var + eps)
    y    = (d / std  |  d * Reciprocal(std)) [* gamma] [+ beta]
    ->  LayerNormalization(x, gamma or ones, beta, axis=axes[0], epsilon=eps)

Constraints: both reductions keep dims and use the same trailing axes ``[a, ..., rank-1]``; ``eps`` is a
one-element constant; ``gamma``/``beta`` are constants that broadcast over the normalized dims only (they
are reshaped to those dims); x is floating point; the intermediates feed nothing else.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Alt, Const, Match, MatchResult, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass, is_float, keeps_dims, scalar_value, trailing_axes

X = Var("x")
EPS = Const("eps", scalar=True)
GAMMA, BETA = Const("gamma"), Const("beta")

MEAN = op.ReduceMean(X, Const("axes"), bind="mean")
D = op.Sub(X, MEAN, bind="d")
VAR = op.ReduceMean(Alt(op.Pow(D, 2), op.Mul(D, D)), Const("axes2"), bind="var")
STD = op.Sqrt(VAR + EPS)
NORM = Alt(op.Div(D, STD, bind="norm"), op.Mul(D, op.Reciprocal(STD), bind="norm"))
PATTERN = Alt(NORM * GAMMA + BETA, NORM * GAMMA, NORM)


def param_shape(m: Match, name: str, x: Value, axis: int) -> MatchResult | np.ndarray:
    """``gamma``/``beta`` as an array of the normalized shape ``x.shape[axis:]``."""
    norm_shape = x.type.shape[axis:]
    c = m.const(name)
    lead = c.shape[:max(c.ndim - len(norm_shape), 0)]
    if any(d != 1 for d in lead):
        return MatchResult.fail(f"{name} {list(c.shape)} varies outside the normalized dims")
    c = c.reshape(c.shape[len(lead):])
    try:
        return np.ascontiguousarray(np.broadcast_to(c, norm_shape)).astype(x.type.dtype.np)
    except ValueError:
        return MatchResult.fail(f"{name} {list(c.shape)} does not broadcast to {list(norm_shape)}")


def check(m: Match) -> MatchResult:
    x = m["x"]
    if not is_float(x):
        return MatchResult.fail("x is not floating point")
    ok = keeps_dims(m.node("mean"), m.node("var"))
    if not ok:
        return ok
    axis = trailing_axes(m, ("axes", "axes2"), x)
    if isinstance(axis, MatchResult):
        return axis
    for name in ("gamma", "beta"):
        if name in m.values and isinstance(param_shape(m, name, x, axis), MatchResult):
            return param_shape(m, name, x, axis)
    if m.root.outputs[0].type.shape != x.type.shape:
        return MatchResult.fail("the result is broadcast beyond x's shape")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    x = m["x"]
    axis = trailing_axes(m, ("axes", "axes2"), x)
    norm_shape = x.type.shape[axis:]
    gamma = param_shape(m, "gamma", x, axis) if "gamma" in m.values else np.ones(norm_shape, x.type.dtype.np)
    inputs = [x, b.const(gamma)]
    if "beta" in m.values:
        inputs.append(b.const(param_shape(m, "beta", x, axis)))
    return b.node("LayerNormalization", *inputs, axis=axis, epsilon=scalar_value(m["eps"])).outputs[0]


@register_pass
class LayerNormFusionPass(RewritePass):
    name = "layer_norm_fusion"
    rules = (Rule("layer_norm", PATTERN, rewrite, check=check),)
