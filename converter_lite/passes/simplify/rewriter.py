"""The rule driver shared by ``arithmetic_simplify`` and the named pattern fusions.

A ``Rule`` is ``pattern`` + optional ``check`` + ``rewrite`` (a template pattern or a function building the
replacement with a ``GraphBuilder``).  ``apply_rules`` visits nodes from the last to the first, tries the rules
whose pattern is rooted at the node's op type in order, applies the first that matches, and repeats until
nothing changes.  Guarantees of every applied rewrite:

0. Nodes with a dynamic-shape input or output are never part of a match.
1. It is skipped when an intermediate matched node is used outside the match (MindSpore ``OutsideRely``),
   unless the rule says its rewrite also covers those uses (``exclusive=False``).
2. A rewrite may replace several values (it returns ``{old: new}``), e.g. an intermediate that also has
   outside users (named in ``shared``); the node order is then re-sorted.
3. The replacement has the replaced value's dtype; a smaller, broadcastable shape gets an ``Expand``.  Any
   other mismatch, or a builder error, rolls the rewrite back (the graph is left exactly as it was).
4. Graph outputs keep their names and a producing node: a graph output is only replaced by a node output
   that is not already a graph output (it takes the output's name); a rewrite that would make an output a
   graph input or a constant is rolled back.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ...ir.core import Graph, Node, Value
from ...ir.dce import remove_dead_nodes
from ...ops.builder import GraphBuilder
from ...ops.registry import KernelError, broadcast_shapes
from .pattern import Match, MatchResult, OpPattern, Pattern, instantiate, match

RewriteFn = Callable[[Match, GraphBuilder], Value | dict | None]
FailFn = Callable[["Rule", Node, str], None]
MAX_ROUNDS = 64          # a safety net: every rule set here reaches its fixed point in a few rounds


@dataclass(frozen=True)
class Rule:
    """One rewrite.  ``name`` is the rule id (arithmetic rules) or a descriptive name."""
    name: int | str
    pattern: Pattern
    rewrite: Pattern | RewriteFn
    check: Callable[[Match], MatchResult | bool] | None = None
    exclusive: bool | None = None     # None: intermediates must be exclusive unless the rewrite is a bare Var
    shared: tuple[str, ...] = ()      # bound nodes whose outputs may have outside uses (the rewrite covers them)
    dynamic_ok: bool = False          # the rewrite is right whatever the shapes (it may match dynamic values)

    @property
    def needs_exclusive(self) -> bool:
        if self.exclusive is not None:
            return self.exclusive
        return not isinstance(self.rewrite, Pattern) or isinstance(self.rewrite, OpPattern)


def all_graphs(graph: Graph) -> list[Graph]:
    """``graph`` followed by the sub-graphs of its fused kernels (recursively)."""
    out = [graph]
    for node in graph.nodes:
        sub = node.attrs.get("graph")
        if isinstance(sub, Graph):
            out.extend(all_graphs(sub))
    return out


def is_dead(graph: Graph, node: Node) -> bool:
    return not any(o.uses or any(o is g for g in graph.outputs) for o in node.outputs)


def apply_rules(graph: Graph, rules: Iterable[Rule], max_rounds: int = MAX_ROUNDS,
                on_fail: FailFn | None = None) -> int:
    """Applies ``rules`` to ``graph`` (not its sub-graphs) until a fixed point; returns the rewrite count."""
    by_op: dict[str, list[Rule]] = {}
    for rule in rules:
        for op_type in dict.fromkeys(rule.pattern.root_ops()):
            by_op.setdefault(op_type, []).append(rule)
    total = 0
    for _ in range(max_rounds):
        count = 0
        for node in reversed(list(graph.nodes)):
            candidates = by_op.get(node.op)
            if not candidates or is_dead(graph, node):
                continue
            if any(try_rule(graph, rule, node, on_fail) for rule in candidates):
                count += 1
        if not count:
            break
        total += count
        remove_dead_nodes(graph, recursive=False)
    return total


def try_rule(graph: Graph, rule: Rule, node: Node, on_fail: FailFn | None = None) -> bool:
    """Matches ``rule`` at ``node`` and applies the first acceptable match."""
    for m in match(rule.pattern, node.outputs[0]):
        m.graph = graph
        if not rule.dynamic_ok and not all_static(m.nodes):
            if on_fail:
                on_fail(rule, node, "a matched value has a dynamic shape")
            continue
        if rule.needs_exclusive and outside_use(graph, m, rule.shared):
            if on_fail:
                on_fail(rule, node, "an intermediate value is used outside the pattern")
            continue
        if rule.check is not None:
            result = rule.check(m)
            if not result:
                if on_fail:
                    on_fail(rule, node, getattr(result, "reason", "") or "check failed")
                continue
        if apply_match(graph, rule.rewrite, m, on_fail=lambda why: on_fail and on_fail(rule, node, why),
                       dynamic=rule.dynamic_ok):
            return True
    return False


def all_static(nodes: Iterable[Node]) -> bool:
    """Every input and output of ``nodes`` has a static shape (dynamic values are never rewritten)."""
    return all(v is None or v.type is None or v.type.is_static for n in nodes for v in (*n.inputs, *n.outputs))


def outside_use(graph: Graph, m: Match, shared: tuple[str, ...] = ()) -> bool:
    """True if a matched node other than the root (and the ``shared`` bound nodes) feeds a node outside the
    match or a graph output."""
    inside = {id(n) for n in m.nodes}
    outs = {id(v) for v in graph.outputs}
    skip = {id(m.root)} | {id(m.named[name]) for name in shared if name in m.named}
    for n in m.nodes:
        if id(n) in skip:
            continue
        for o in n.outputs:
            if id(o) in outs or any(id(user) not in inside for user, _ in o.uses):
                return True
    return False


def apply_match(graph: Graph, rewrite: Pattern | RewriteFn, m: Match,
                on_fail: Callable[[str], object] | None = None, dynamic: bool = False) -> bool:
    """Builds the replacement of ``m`` before its root and rewires the uses; rolls back on any mismatch.
    ``dynamic``: the rule may build nodes of dynamic shape (``Rule.dynamic_ok``)."""
    root_out = m.root.outputs[0]
    b = GraphBuilder(graph, insert_before=m.root, name_prefix=m.root.name or m.root.op, dynamic=dynamic)
    try:
        if isinstance(rewrite, Pattern):
            out = instantiate(rewrite, m, b, like=root_out)
        else:
            out = rewrite(m, b)
        repl = {} if out is None else ({root_out: out} if isinstance(out, Value) else dict(out))
        why = _fix_types(repl, b) if repl else "the rewrite declined"
    except (KernelError, KeyError, IndexError, ValueError) as e:
        why = f"the replacement could not be built: {e}"
    if not why:
        why = _check_outputs(graph, repl)
    if why:
        for n in reversed(b.new_nodes):
            graph.remove_node(n)
        if on_fail:
            on_fail(why)
        return False
    for old, new in repl.items():
        replace_value(graph, old, new)
    if any(old is not root_out for old in repl):
        graph.toposort()      # users of a replaced intermediate may sit before the new nodes
    return True


def _fix_types(repl: dict, b: GraphBuilder) -> str:
    for old, new in list(repl.items()):
        if new is old or new is None:
            return "the rewrite returned the value it replaces"
        if new.type.dtype != old.type.dtype:
            return f"dtype changes from {old.type.dtype.name} to {new.type.dtype.name}"
        if new.type.shape != old.type.shape:
            if not (new.type.is_static and old.type.is_static):
                return "a dynamic shape would change"
            try:
                ok = broadcast_shapes(new.type.shape, old.type.shape) == old.type.shape
            except KernelError:
                ok = False
            if not ok:
                return f"shape changes from {list(old.type.shape)} to {list(new.type.shape)}"
            shape = b.const(np.array(old.type.shape, dtype=np.int64))
            repl[old] = b.node("Expand", new, shape).outputs[0]
    return ""


def _check_outputs(graph: Graph, repl: dict) -> str:
    for old, new in repl.items():
        is_output = any(o is old for o in graph.outputs)
        if is_output and (new.producer is None or any(o is new for o in graph.outputs)):
            return f"graph output {old.name!r} would lose its producer"
    return ""


def replace_value(graph: Graph, old: Value, new: Value) -> None:
    """Redirects every use of ``old`` to ``new``; a replaced graph output lends its name to ``new``."""
    if any(o is old for o in graph.outputs):
        old_name = old.name
        old.name = new.name
        new.name = old_name
    graph.replace_all_uses(old, new)
