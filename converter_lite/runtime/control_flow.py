"""Control-flow steps: If, Loop, Scan and SequenceMap run their bodies as plans of their own.

Each body becomes a ``Plan`` when the model loads (its own arena, native kernels, fast kernels), made by the
``subplan`` factory the plan hands down, so a body's fused kernels run native code like the main graph's.
The semantics (which branch, trip count and condition, scan axes and directions, stacking) are those of
``ops.control_flow``, written once for the reference kernels and this runtime; here a body run is one call
of its plan (``Plan.execute``: inputs copied into the body's buffers, outputs returned as new arrays).

A failure inside a body names the control-flow node and the body's node; a Loop with no trip count stops
with an error after ``max_iterations`` iterations.  Either way the model stays usable for the next call.
"""
from __future__ import annotations

from collections.abc import Callable

from ..errors import RET_OP_EXECUTE_FAILURE, ConverterError
from ..ir.core import Graph, Node
from ..ops.control_flow import BODY_ATTRS, DEFAULT_MAX_ITERATIONS, RUNNERS
from .program import Impl

CONTROL_FLOW = frozenset(RUNNERS)


def control_flow_impl(node: Node, subplan: Callable[[Graph], object],
                      max_iterations: int = DEFAULT_MAX_ITERATIONS) -> Impl:
    """The step running control-flow ``node``; ``subplan(graph)`` builds a body's plan."""
    plans = {key: subplan(node.attrs[key]) for key in BODY_ATTRS[node.op]}
    runner, attrs = RUNNERS[node.op], node.attrs
    extra = {"max_iterations": max_iterations} if node.op == "Loop" else {}

    def run(key: str, ins: list) -> list:
        try:
            return plans[key].execute(ins)
        except ConverterError as e:
            raise ConverterError(e.code, f"{node.op} node {node.name!r}, body {key!r}: {e.message}") from None

    def call(ins: list) -> list:
        return runner(attrs, list(ins), run, **extra)
    impl = Impl(call=call)
    impl.bodies = plans
    return impl


__all__ = ["CONTROL_FLOW", "control_flow_impl"]
