"""``conv1d_as_conv2d``: a 1-D ``Conv(x[N, C, L], W[M, C/g, k], b?)`` -> ``Reshape(Conv(Reshape(x, [0, 0, 1, -1]),
W[M, C/g, 1, k], b), [0, 0, -1])``: the same convolution on a one-row image.

The runtime's convolution paths (native im2col/direct drivers, patch GEMMs) are 2-D; a 1-D Conv (audio front
ends such as wav2vec2's feature encoder and positional convolution, Whisper's stem) otherwise runs the
reference kernel.  The reshapes are views (no copy).  Attributes map as ``kernel_shape [k] -> [1, k]``,
``strides [s] -> [1, s]``, ``dilations [d] -> [1, d]``, ``pads [p0, p1] -> [0, p0, 0, p1]``; ``auto_pad`` and
``group`` are kept (SAME/VALID pad nothing along the added axis, whose kernel size is 1).

Constraints: the weights are a constant of rank 3 (the new ones are a reshaped constant), the bias is absent
or a constant, ``x`` has rank 3 (or a dynamic shape: ONNX makes it the weights' rank, and the reshapes' 0 and -1
take its sizes at run time).
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Const, Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass

PATTERN = op.Conv(Var("x"), Const("w"), Opt("b"), bind="conv")


def check(m: Match) -> MatchResult:
    x, w = m["x"], m["w"]
    if x.type is None or (x.type.shape is not None and x.type.rank != 3) or np.ndim(m.const("w")) != 3:
        return MatchResult.fail("not a 1-D convolution")
    if m["b"] is not None and not m["b"].is_const:
        return MatchResult.fail("the bias is not a constant")
    if w.type.dtype.np.kind != "f":
        return MatchResult.fail("the weights are not floating point")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    a = dict(m.node("conv").attrs)
    w = m.const("w")
    for name in ("kernel_shape", "strides", "dilations"):
        if name in a:
            a[name] = [1] + [int(v) for v in a[name]]
    if "pads" in a:
        p0, p1 = (int(v) for v in a["pads"])
        a["pads"] = [0, p0, 0, p1]
    x4 = b.node("Reshape", m["x"], b.const(np.array([0, 0, 1, -1], np.int64))).outputs[0]
    bias = () if m["b"] is None else (m["b"],)
    y4 = b.node("Conv", x4, b.const(w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])), *bias, **a).outputs[0]
    return b.node("Reshape", y4, b.const(np.array([0, 0, -1], np.int64))).outputs[0]


@register_pass
class Conv1dAsConv2dPass(RewritePass):
    name = "conv1d_as_conv2d"
    rules = (Rule("conv1d_as_conv2d", PATTERN, rewrite, check=check, dynamic_ok=True),)
