"""Control-flow steps: If, Loop, Scan and SequenceMap run their bodies as plans of their own.

Each body becomes a ``Plan`` when the model loads (its own arena, native kernels, fast kernels), made by the
``subplan`` factory the plan hands down, so a body's fused kernels run native code like the main graph's.
The semantics (which branch, trip count and condition, scan axes and directions, stacking) are those of
``ops.control_flow``, written once for the reference kernels and this runtime; here a body run is one call
of its plan on an executor the node holds for the whole call (``Executor.run_in_place``): a Loop's captured
values are copied into the body's buffers once, not every iteration, and a carried value goes from the body's
output buffer straight into its input buffer (one copy); what the node returns is copied out at the end.

A failure inside a body names the control-flow node and the body's node; a Loop with no trip count stops
with an error after ``max_iterations`` iterations.  Either way the model stays usable for the next call.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ConverterError
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

    def call(ins: list) -> list:
        held: dict = {}

        def run(key: str, body_ins: list, invariant: int = 0) -> list:
            ex = held.get(key)
            if ex is None:
                ex = held[key] = plans[key].acquire()
                invariant = 0                      # a fresh executor has none of the inputs yet
            try:
                return ex.run_in_place(body_ins, plans[key].run_threads, invariant)
            except ConverterError as e:
                raise ConverterError(e.code, f"{node.op} node {node.name!r}, body {key!r}: {e.message}") from None
        try:
            return [_owned(v) for v in runner(attrs, list(ins), run, **extra)]
        finally:
            for key, ex in held.items():
                plans[key].release(ex)
    return Impl(call=call, bodies=plans)


def _owned(v):
    """``v`` as the caller's own value (a body's output buffer is copied; lists hold owned arrays already)."""
    if isinstance(v, np.ndarray) and not v.flags.owndata:
        return v.copy()
    return v


__all__ = ["CONTROL_FLOW", "control_flow_impl"]
