"""No-op elimination: nodes that return their input unchanged are bypassed (exporters leave many of them, and
they hide patterns such as attention's ``Softmax -> Cast(to=float) -> MatMul``).

Cases (each -> its data input):

1. ``Identity(x)``;
2. ``Cast(x, to=T)`` when x already has dtype T;
3. ``Concat(x)``, ``Sum(x)``, ``Max(x)``, ``Min(x)``, ``Mean(x)`` with a single input;
4. ``Dropout(x, ...)`` in inference (no ``training_mode``, or a constant false one) whose mask is unused;
5. ``Expand(x, shape)`` / ``Tile(x, repeats)`` whose output shape equals x's shape.

A graph output keeps its producing node when its input is a graph input or constant (rewriter case 4).
"""
from __future__ import annotations

from ...ir.core import Graph
from .pattern import Match, MatchResult, OpPattern, Var, op
from .rewriter import Rule, apply_rules

X = Var("x")


def same_dtype(m: Match) -> MatchResult:
    if m.root.outputs[0].type.dtype != m["x"].type.dtype:
        return MatchResult.fail("the Cast changes the dtype")
    return MatchResult()


def same_shape(m: Match) -> MatchResult:
    if m.root.outputs[0].type.shape != m["x"].type.shape:
        return MatchResult.fail("the output shape differs from the input's")
    return MatchResult()


def inference_dropout(m: Match) -> MatchResult:
    node = m.root
    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is not None and (not training.is_const or bool(training.const.reshape(-1)[0])):
        return MatchResult.fail("Dropout may be in training mode")
    if any(o.uses for o in node.outputs[1:]) or (m.graph is not None and any(
            o is g for o in node.outputs[1:] for g in m.graph.outputs)):
        return MatchResult.fail("the Dropout mask is used")
    return MatchResult()


NOOP_RULES = (
    Rule("identity", op.Identity(X), X),
    Rule("cast_to_same_dtype", op.Cast(X), X, check=same_dtype),
    Rule("single_input_variadic", OpPattern(("Concat", "Sum", "Max", "Min", "Mean"), (X,)), X),
    Rule("inference_dropout", op.Dropout(X, ...), X, check=inference_dropout),
    Rule("expand_or_tile_to_same_shape", OpPattern(("Expand", "Tile"), (X, ...)), X, check=same_shape),
)


def remove_noops(graph: Graph) -> int:
    """Cases 1-5 on ``graph`` only; returns the number of nodes bypassed."""
    return apply_rules(graph, NOOP_RULES)
