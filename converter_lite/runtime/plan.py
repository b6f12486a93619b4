"""A flat execution plan for a static graph: graph walking happens once, at load time.

``Plan(graph, resolve)`` numbers every value with an integer slot and turns each node into a ``Step``::

    Step(fn, inputs=(slot, ...), outputs=(slot, ...), release=(slot, ...), node)

``fn(list_of_input_arrays) -> list_of_output_arrays``.  ``execute`` copies a template slot list (constants are
pre-filled, slot 0 is always ``None`` and stands for omitted optional inputs), writes the inputs, runs the steps
in order and, after each step, drops the buffers whose last use that step was (``release``: liveness computed at
plan time), so peak memory follows the live set rather than the whole graph.

Kernel choice, per node: ``resolve(node)`` may return a callable (a native kernel); otherwise ``GraphKernel``
nodes run their sub-graph through a nested ``Plan`` (same resolver), and every other op runs its reference
kernel from ``converter_lite.ops.registry.OPS`` with its attributes pre-bound.

Thread safety: a Plan is immutable after construction and ``execute`` keeps all per-run state in locals, so
one Plan may execute concurrently in several threads (given reentrant kernels).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import RET_NOT_FIND_OP, RET_OP_EXECUTE_FAILURE, ConverterError
from ..ir.core import Graph, Node
from ..ops.registry import OPS

Kernel = Callable[[list], list]
Resolver = Callable[[Node], "Kernel | None"]
NULL_SLOT = 0


@dataclass(frozen=True)
class Step:
    fn: Kernel
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    release: tuple[int, ...]
    node: Node
    native: bool = False


class Plan:
    """Executable form of ``graph``; see the module docstring."""

    def __init__(self, graph: Graph, resolve: Resolver | None = None):
        self.graph = graph
        slots: dict[int, int] = {}
        template: list = [None]

        def slot(v) -> int:
            if v is None:
                return NULL_SLOT
            s = slots.get(id(v))
            if s is None:
                s = slots[id(v)] = len(template)
                template.append(v.const)          # None for non-constants
            return s

        self.input_slots = tuple(slot(v) for v in graph.inputs)
        raw = []
        for node in graph.nodes:
            fn = resolve(node) if resolve is not None else None
            native = fn is not None
            if fn is None:
                fn = _reference_kernel(node, resolve)
            raw.append((fn, tuple(slot(v) for v in node.inputs), tuple(slot(v) for v in node.outputs), node,
                        native))
        self.output_slots = tuple(slot(v) for v in graph.outputs)
        self.template = template
        self.steps = _with_liveness(raw, keep=set(self.output_slots) | {NULL_SLOT} |
                                    {i for i, c in enumerate(template) if c is not None})

    def execute(self, inputs: Sequence[np.ndarray], timings: list[float] | None = None) -> list[np.ndarray]:
        """Runs the plan on ``inputs`` (graph-input order).  With ``timings`` (one float per step), adds each
        step's wall time in seconds to it."""
        env = self.template.copy()
        for s, a in zip(self.input_slots, inputs):
            env[s] = a
        step = None
        try:
            if timings is None:
                for step in self.steps:
                    outs = step.fn([env[i] for i in step.inputs])
                    for s, a in zip(step.outputs, outs):
                        env[s] = a
                    for s in step.release:
                        env[s] = None
            else:
                clock = time.perf_counter
                for k, step in enumerate(self.steps):
                    t0 = clock()
                    outs = step.fn([env[i] for i in step.inputs])
                    timings[k] += clock() - t0
                    for s, a in zip(step.outputs, outs):
                        env[s] = a
                    for s in step.release:
                        env[s] = None
        except ConverterError:
            raise
        except Exception as e:
            node = step.node
            raise ConverterError(RET_OP_EXECUTE_FAILURE, f"node {node.name!r} ({node.op}) failed: "
                                                         f"{type(e).__name__}: {e}") from e
        return [env[s] for s in self.output_slots]


def _with_liveness(raw: list[tuple], keep: set[int]) -> list[Step]:
    """Attaches to each step the slots last used by it (outputs nobody reads are released at once)."""
    last: dict[int, int] = {}
    for k, (_, ins, outs, _, _) in enumerate(raw):
        for s in outs:
            last[s] = k
        for s in ins:
            last[s] = k
    release: list[list[int]] = [[] for _ in raw]
    for s, k in last.items():
        if s not in keep:
            release[k].append(s)
    return [Step(fn, ins, outs, tuple(sorted(rel)), node, native)
            for (fn, ins, outs, node, native), rel in zip(raw, release)]


def _reference_kernel(node: Node, resolve: Resolver | None) -> Kernel:
    """``node``'s reference kernel with attrs bound; outputs are cast to and checked against the node's types."""
    if node.op == "GraphKernel" and "graph" in node.attrs:
        return _checked(Plan(node.attrs["graph"], resolve).execute, node)
    op = OPS.get(node.op)
    if op is None:
        raise ConverterError(RET_NOT_FIND_OP, f"node {node.name!r} uses op {node.op!r}, which the runtime does "
                                              "not implement")
    compute, attrs, n = op.compute, node.attrs, len(node.outputs)

    def run(ins: list) -> list:
        out = compute(attrs, *ins)
        if isinstance(out, (tuple, list)):
            return list(out[:n])
        return [out]
    return _checked(run, node)


def _checked(fn: Kernel, node: Node) -> Kernel:
    """Wraps ``fn`` so that its outputs are ndarrays of the declared dtype and shape."""
    specs = [(None, None) if o.type is None else (o.type.dtype.np, o.type.shape) for o in node.outputs]

    def run(ins: list) -> list:
        outs = fn(ins)
        if len(outs) < len(specs):
            raise ValueError(f"kernel produced {len(outs)} outputs, expected {len(specs)}")
        result = []
        for a, (dtype, shape) in zip(outs, specs):
            if not isinstance(a, np.ndarray) or (dtype is not None and a.dtype != dtype):
                a = np.asarray(a, dtype=dtype)
            if shape is not None and a.shape != shape:
                raise ValueError(f"kernel produced shape {list(a.shape)}, the model declares {list(shape)}")
            result.append(a)
        return result
    return run
