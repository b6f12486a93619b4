"""``pad_conv_fusion``: ``Conv(Pad(x, pads, 0), W, b)`` -> ``Conv(x, W, b)`` with the Pad's amounts added to the
Conv's own ``pads`` (MindSpore Lite's ConvPadFusion, onnxruntime's PadFusion).

A convolution pads with zeros itself, so a zero Pad of the spatial axes in front of it is the same as a larger
``pads`` attribute: the padded copy is never made, and the native convolution drivers read the unpadded input
with the combined borders.  The converter decides this here, in the graph the ``.ms`` stores; the runtime
runs the Conv as it finds it.

Constraints: the Pad is ``mode="constant"`` with a constant zero value (or none), constant non-negative amounts
on the spatial axes only (batch and channel axes unpadded); the Conv's ``auto_pad`` is ``NOTSET`` or ``VALID``
(``SAME_*`` derives its borders from the padded input's size).  Other readers of the Pad's output keep it.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ...ops.registry import KernelError
from ...ops.tensor_pad import pad_amounts
from ..registry import register_pass
from ..simplify.pattern import Const, Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass

PATTERN = op.Conv(op.Pad(Var("x"), Const("pads"), Opt("value"), Opt("axes"), bind="pad"), Var("w"), Opt("b"),
                  bind="conv")


def spatial_amounts(m: Match) -> list[tuple[int, int]] | None:
    """(begin, end) per spatial axis of the Pad, or None when it pads the batch/channel axes, crops, or its
    axes are not constant."""
    x = m["x"]
    if m["axes"] is not None and not m["axes"].is_const:
        return None
    try:
        amounts = pad_amounts(x.type.rank, m.const("pads"), None if m["axes"] is None else m.const("axes"))
    except KernelError:
        return None
    if amounts[0] != (0, 0) or amounts[1] != (0, 0) or min(min(a) for a in amounts) < 0:
        return None
    return amounts[2:]


def check(m: Match) -> MatchResult:
    pad, conv = m.node("pad"), m.node("conv")
    if pad.attrs.get("mode", "constant") != "constant":
        return MatchResult.fail(f"the Pad's mode is {pad.attrs.get('mode')!r}, not constant")
    value = m["value"]
    if value is not None:
        if not value.is_const:
            return MatchResult.fail("the Pad's value is computed at run time")
        v = np.asarray(value.const).reshape(-1)
        if v.size and not v[0] == 0:
            return MatchResult.fail(f"the Pad fills with {v[0]}, not zero")
    if m["x"].type is None or m["x"].type.rank < 3:
        return MatchResult.fail("the Conv input has no spatial axes")
    if conv.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return MatchResult.fail(f"the Conv's auto_pad is {conv.attrs.get('auto_pad')}")
    if spatial_amounts(m) is None:
        return MatchResult.fail("the Pad pads the batch or channel axes, crops, or has non-constant axes")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    conv = m.node("conv")
    amounts = spatial_amounts(m)
    k = len(amounts)
    attrs = dict(conv.attrs)
    own = list(attrs.get("pads", [0] * 2 * k)) if attrs.get("auto_pad", "NOTSET") == "NOTSET" else [0] * 2 * k
    attrs["pads"] = [int(own[i]) + amounts[i][0] for i in range(k)] + \
                    [int(own[k + i]) + amounts[i][1] for i in range(k)]
    attrs["auto_pad"] = "NOTSET"
    inputs = [m["x"], m["w"]] + ([m["b"]] if m["b"] is not None else [])
    return b.node("Conv", *inputs, **attrs).outputs[0]


@register_pass
class PadConvFusionPass(RewritePass):
    name = "pad_conv_fusion"
    rules = (Rule("pad_conv", PATTERN, rewrite, check=check, exclusive=False),)
