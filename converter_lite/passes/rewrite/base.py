"""``RewritePass``: a named pattern fusion made of ``Rule`` objects (pattern / check / rewrite).

The rules run on the main graph (fusions create opaque ops, which do not belong inside fused kernels) to a
fixed point; every rewrite is counted under the pass name, and every rejected match is logged at DEBUG with
the reason its ``check`` gave (``MatchResult.fail``).
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ...ir.core import Graph, Node, Value
from ..base import Pass, PassContext
from ..simplify.pattern import Match, MatchResult
from ..simplify.rewriter import Rule, apply_rules


class RewritePass(Pass):
    rules: ClassVar[tuple[Rule, ...]] = ()

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        def on_fail(rule: Rule, node: Node, reason: str) -> None:
            ctx.log.debug("%s: rule %s at %s %r: %s", self.name, rule.name, node.op, node.name, reason)

        n = apply_rules(graph, self.rules, on_fail=on_fail)
        if n:
            ctx.count(self.name, n)
        return n > 0


# -- helpers shared by the fusions ------------------------------------------------------------------------
def const_axes(v: Value | None, rank: int) -> tuple[int, ...] | None:
    """Normalized sorted axes of a constant axes input (None if absent or not constant)."""
    if v is None or not v.is_const:
        return None
    return tuple(sorted({int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(v.const).reshape(-1)}))


def trailing_axes(m: Match, names: tuple[str, ...], x: Value) -> MatchResult | int:
    """The first axis if every ``axes`` input named in ``names`` is the same run ``[a, ..., rank-1]``."""
    rank = x.type.rank
    found = {const_axes(m[n], rank) for n in names}
    if len(found) != 1 or None in found:
        return MatchResult.fail("the reductions use different or non-constant axes")
    axes = found.pop()
    if not axes or axes != tuple(range(axes[0], rank)):
        return MatchResult.fail(f"axes {list(axes)} are not the trailing dims of a rank-{rank} tensor")
    return axes[0]


def keeps_dims(*nodes: Node) -> MatchResult:
    if any(n.attrs.get("keepdims", 1) != 1 for n in nodes):
        return MatchResult.fail("a reduction drops the reduced dims")
    return MatchResult()


def is_float(v: Value) -> bool:
    """float16/float32/float64; the low-precision floats (bfloat16, float8, float4) keep their ops as imported."""
    return v.type is not None and v.type.dtype.is_float and not v.type.dtype.is_low_precision


def scalar_value(v: Value | None) -> float | None:
    if v is None or not v.is_const or v.const.size != 1:
        return None
    return float(np.asarray(v.const).reshape(-1)[0])


def unused_extra_outputs(m: Match, node: Node) -> bool:
    """No output of ``node`` but the first is used or returned."""
    outs = {id(v) for v in m.graph.outputs} if m.graph is not None else set()
    return all(not o.uses and id(o) not in outs for o in node.outputs[1:])
