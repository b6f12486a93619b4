"""``split_concat_fusion``: ``Concat(Split(x, axis)[0], ..., Split(x, axis)[n-1], axis)`` -> ``x``.

Constraints: the Concat inputs are all the outputs of one Split, in order, and both ops use the same axis.
The Split stays if its outputs have other users (it is removed as dead code otherwise).
"""
from __future__ import annotations

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Match, MatchResult, OpPattern
from ..simplify.rewriter import Rule
from .base import RewritePass

PATTERN = OpPattern("Concat", (...,))


def _axis(attrs: dict, rank: int, default: int) -> int:
    a = int(attrs.get("axis", default))
    return a + rank if a < 0 else a


def check(m: Match) -> MatchResult:
    concat = m.root
    first = concat.inputs[0] if concat.inputs else None
    split = first.producer if first is not None else None
    if split is None or split.op != "Split":
        return MatchResult.fail("the first Concat input is not a Split output")
    if len(concat.inputs) != len(split.outputs) or any(v is not o for v, o in zip(concat.inputs, split.outputs)):
        return MatchResult.fail("the Concat does not take every Split output in order")
    rank = split.inputs[0].type.rank
    if _axis(split.attrs, rank, 0) != _axis(concat.attrs, rank, 0):
        return MatchResult.fail("Split and Concat use different axes")
    return MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    return m.root.inputs[0].producer.inputs[0]


@register_pass
class SplitConcatFusionPass(RewritePass):
    name = "split_concat_fusion"
    rules = (Rule("split_concat", PATTERN, rewrite, check=check, exclusive=False),)
