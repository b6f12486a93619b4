"""Shared helpers for the clustering tests: small graphs built with GraphBuilder, running the passes, and
reading back the clusters."""
from __future__ import annotations

import logging

import numpy as np
from helpers import assert_close

import converter_lite.ops  # noqa: F401  (op table)
from converter_lite.config import GraphKernelConfig
from converter_lite.ops.builder import BValue, GraphBuilder
from converter_lite.ir.core import Graph, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.fuse import (
    EliminateRedundantOutputPass,
    GraphKernelClusterPass,
)


def new_graph(*specs: tuple[str, tuple[int, ...]]) -> tuple[Graph, GraphBuilder, list[BValue]]:
    g = Graph("g")
    b = GraphBuilder(g, name_prefix="t")
    xs = [Value(name, TensorType(DType.float32, shape)) for name, shape in specs]
    g.inputs = xs
    return g, b, [b.wrap(x) for x in xs]


def const(b: GraphBuilder, array) -> Value:
    return b.const(np.asarray(array, np.float32))


def axes(b: GraphBuilder, *a: int) -> Value:
    return b.const(np.asarray(a, np.int64))


def context(**flags) -> PassContext:
    return PassContext(GraphKernelConfig(opt_level=1, **flags), log=logging.getLogger("converter_lite"))


def cluster(graph: Graph, ctx: PassContext | None = None, **flags) -> PassContext:
    ctx = ctx or context(**flags)
    GraphKernelClusterPass().run(graph, ctx)
    verify(graph)
    return ctx


def eliminate(graph: Graph) -> bool:
    changed = EliminateRedundantOutputPass().run(graph, context())
    verify(graph)
    return changed


def kernels(graph: Graph) -> list[tuple[str, ...]]:
    """The source node names of every GraphKernel, in graph order."""
    return [tuple(n.attrs["source_nodes"]) for n in graph.nodes if n.op == "GraphKernel"]


def kernel_nodes(graph: Graph):
    return [n for n in graph.nodes if n.op == "GraphKernel"]


def basic_ops(graph: Graph) -> list[str]:
    """Names of the nodes left outside any kernel."""
    return [n.name for n in graph.nodes if n.op != "GraphKernel"]


def random_feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.type.shape).astype(v.type.dtype.np) for v in graph.inputs}


def check_same_results(before: list[np.ndarray], graph: Graph, feeds) -> None:
    after = eval_graph(graph, feeds)
    assert len(after) == len(before)
    for i, (a, w) in enumerate(zip(after, before)):
        assert_close(a, w, rtol=1e-6, atol=1e-6, what=f"output {i}")
