"""``arithmetic_simplify``: constant folding plus MindSpore's numbered rewrite rules, to a fixed point.

Cases, repeated on every graph (each fused kernel's sub-graph and the main graph) until nothing changes:

1. Constant sub-expressions are folded (``fold_constants``), so rules that produce ``Neg(c)`` or
   ``c1 * c2`` leave plain constants for the next round.
2. The rules of ``arith_rules.RULES`` enabled by the configuration (``enable_simplify_exprs_only`` /
   ``disable_simplify_exprs`` through ``config.simplify_rule_enabled(id)``) are applied from the last node
   to the first; per node the lowest-numbered matching rule wins.
3. Dead nodes are removed.
"""
from __future__ import annotations

from collections.abc import Iterable

from ...ir.core import Graph
from ...ir.dce import remove_dead_nodes
from ..base import Pass, PassContext
from ..registry import register_pass
from .arith_rules import RULES
from .constant_fold import fold_constants
from .rewriter import MAX_ROUNDS, FailFn, Rule, all_graphs, apply_rules


def simplify_graph(graph: Graph, rules: Iterable[Rule], on_fail: FailFn | None = None) -> int:
    """Cases 1-3 on ``graph`` only; returns the number of folds and rewrites."""
    rules = list(rules)
    total = 0
    for _ in range(MAX_ROUNDS):
        n = fold_constants(graph) + apply_rules(graph, rules, max_rounds=1, on_fail=on_fail)
        if not n:
            break
        total += n
        remove_dead_nodes(graph, recursive=False)
    return total


def enabled_rules(config) -> list[Rule]:
    return [r for r in RULES if config is None or config.simplify_rule_enabled(r.name)]


@register_pass
class ArithmeticSimplifyPass(Pass):
    """MindSpore ArithmeticSimplify, on fused kernels and on the main graph."""
    name = "arithmetic_simplify"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        rules = enabled_rules(ctx.config)

        def on_fail(rule: Rule, node, reason: str) -> None:
            ctx.log.debug("arithmetic_simplify rule %s at %s: %s", rule.name, node.name, reason)

        n = sum(simplify_graph(g, rules, on_fail) for g in all_graphs(graph))
        if n:
            ctx.count(self.name, n)
        return n > 0
