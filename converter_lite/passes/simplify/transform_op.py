"""``transform_op_optimizer``: removes and merges Transpose/Reshape ops (MindSpore TransformOpOptimizer and
arithmetic rules 65/66), in the main graph and inside fused kernels.

Cases:

1. ``Transpose(Transpose(x, p1), p2)`` -> ``Transpose(x, q)`` with ``q[i] = p1[p2[i]]``; nothing if ``q`` is
   the identity.
2. ``Transpose(x, identity)`` -> ``x``.
3. A Transpose that keeps the order of the dims larger than 1 (it only moves size-1 dims) -> ``Reshape``.
4. A chain of reshape-like ops (Reshape, Flatten, Squeeze, Unsqueeze) -> one ``Reshape`` to the final shape.
5. A reshape-like op whose output shape equals its input shape -> its input.
6. An elementwise/broadcast op whose every non-constant input is ``Transpose(x_i, p)`` with the same ``p``
   (each used only by this op) -> the op on the ``x_i`` followed by one ``Transpose(p)``; constant inputs
   are transposed back at conversion time.  Done when it removes transposes (two or more inputs) or when
   every user of the result is a Transpose (which case 1 then merges or cancels) or an elementwise op (so
   the transpose keeps moving towards one).  Transposes only ever move towards the outputs and their
   number never grows, so this terminates.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Graph, Node, Value
from ...ir.dce import remove_dead_nodes
from ...ops.builder import GraphBuilder
from ...ops.registry import OPS, OpKind
from ..base import Pass, PassContext
from ..registry import register_pass
from .pattern import Match, MatchResult, OpPattern, Var, op
from .rewriter import Rule, all_graphs, apply_rules

RESHAPE_LIKE = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")
X = Var("x")


def perm_of(node: Node) -> tuple[int, ...]:
    rank = node.inputs[0].type.rank
    perm = node.attrs.get("perm")
    if perm is None:
        return tuple(range(rank - 1, -1, -1))
    return tuple(int(p) + rank if int(p) < 0 else int(p) for p in perm)


def reshape_to(b: GraphBuilder, x: Value, shape: tuple[int, ...]) -> Value:
    attrs = {"allowzero": 1} if 0 in shape else {}
    return b.node("Reshape", x, b.const(np.array(shape, dtype=np.int64)), **attrs).outputs[0]


# -- cases 1-3: transposes -------------------------------------------------------------------------------
def merge_transposes(m: Match, b: GraphBuilder) -> Value:
    p1, p2 = perm_of(m.node("t1")), perm_of(m.node("t2"))
    q = tuple(p1[i] for i in p2)
    if q == tuple(range(len(q))):
        return m["x"]
    return b.node("Transpose", m["x"], perm=q).outputs[0]


def is_identity_perm(m: Match) -> MatchResult:
    p = perm_of(m.root)
    return MatchResult() if p == tuple(range(len(p))) else MatchResult.fail("not an identity permutation")


def moves_only_unit_dims(m: Match) -> MatchResult:
    shape = m["x"].type.shape
    big = [d for d in perm_of(m.root) if shape[d] != 1]
    if big != sorted(big):
        return MatchResult.fail("the transpose reorders dims larger than 1")
    return MatchResult()


# -- cases 4-5: reshapes -----------------------------------------------------------------------------------
def same_shape(m: Match) -> MatchResult:
    if m.root.outputs[0].type.shape != m["x"].type.shape:
        return MatchResult.fail("the shape changes")
    return MatchResult()


def to_final_shape(m: Match, b: GraphBuilder) -> Value:
    return reshape_to(b, m["x"], m.root.outputs[0].type.shape)


# -- case 6: transposes through elementwise ops ---------------------------------------------------------------
def sink_check(m: Match) -> MatchResult:
    node = m.root
    if len(node.outputs) != 1 or "axis" in node.attrs or "axes" in node.attrs:
        return MatchResult.fail("not a plain elementwise op")
    rank = node.outputs[0].type.rank
    perms, transposes = set(), []
    for v in node.inputs:
        if v is None or v.is_const:
            if v is not None and v.type.rank > rank:
                return MatchResult.fail("a constant has a higher rank than the result")
            continue
        t = v.producer
        if t is None or t.op != "Transpose" or v.type.rank != rank:
            return MatchResult.fail("an input is not a transpose of the result's rank")
        if any(user is not node for user, _ in v.uses):
            return MatchResult.fail("a transposed input has other users")
        perms.add(perm_of(t))
        transposes.append(t)
    if len(perms) != 1:
        return MatchResult.fail("inputs are transposed differently (or not at all)")
    users = node.outputs[0].uses
    onward = users and all(u.op == "Transpose" or _is_elementwise(u) for u, _ in users)
    if len({id(t) for t in transposes}) < 2 and not onward:
        return MatchResult.fail("moving the transpose would not remove one, nor bring it closer to one")
    return MatchResult()


def _is_elementwise(node: Node) -> bool:
    d = OPS.get(node.op)
    return d is not None and d.kind <= OpKind.BROADCAST and len(node.outputs) == 1


def sink_transposes(m: Match, b: GraphBuilder) -> Value:
    node = m.root
    rank = node.outputs[0].type.rank
    perm = next(perm_of(v.producer) for v in node.inputs if v is not None and not v.is_const)
    inverse = tuple(int(i) for i in np.argsort(perm))
    ins = []
    for v in node.inputs:
        if v is None or not v.is_const:
            ins.append(None if v is None else v.producer.inputs[0])
            continue
        c = v.const.reshape((1,) * (rank - v.const.ndim) + v.const.shape) if v.const.ndim else v.const
        ins.append(b.const(np.ascontiguousarray(np.transpose(c, inverse)) if c.ndim else c))
    inner = b.node(node.op, *ins, **node.attrs).outputs[0]
    return b.node("Transpose", inner, perm=perm).outputs[0]


RESHAPE_RULES = (      # cases 5 and 4
    Rule("identity_reshape", OpPattern(RESHAPE_LIKE, (X, ...)), X, check=same_shape),
    Rule("merge_reshapes", OpPattern(RESHAPE_LIKE, (OpPattern(RESHAPE_LIKE, (X, ...)), ...)),
         to_final_shape, exclusive=False),
)


def transform_rules() -> list[Rule]:
    elementwise = tuple(name for name, d in OPS.items() if d.kind <= OpKind.BROADCAST)
    inner_t = op.Transpose(X, bind="t1")
    return [
        Rule("merge_transposes", op.Transpose(inner_t, bind="t2"), merge_transposes, exclusive=False),
        Rule("identity_transpose", op.Transpose(X), X, check=is_identity_perm),
        Rule("transpose_to_reshape", op.Transpose(X), to_final_shape, check=moves_only_unit_dims),
        *RESHAPE_RULES,
        Rule("sink_transposes", OpPattern(elementwise, (...,)), sink_transposes, check=sink_check,
             exclusive=False),
    ]


def optimize_transform_ops(graph: Graph) -> int:
    """Cases 1-6 on ``graph`` only, to a fixed point; returns the number of rewrites."""
    n = apply_rules(graph, transform_rules())
    remove_dead_nodes(graph, recursive=False)
    return n


@register_pass
class TransformOpOptimizerPass(Pass):
    name = "transform_op_optimizer"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        n = sum(optimize_transform_ops(g) for g in all_graphs(graph))
        if n:
            ctx.count(self.name, n)
        return n > 0
