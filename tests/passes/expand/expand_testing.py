"""Shared check for the expander tests: import an ONNX model, expand, compare with onnxruntime."""
from __future__ import annotations

import logging

import numpy as np
from helpers import assert_close, run_ort

from converter_lite.config import GraphKernelConfig
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ir.core import Graph
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.base import PassContext
from converter_lite.passes.expand import ExpandOpsPass
from converter_lite.passes.fuse import DEFAULT_CLUSTER


def run_expander(graph: Graph, config: GraphKernelConfig | None = None) -> bool:
    ctx = PassContext(config or GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    return ExpandOpsPass().run(graph, ctx)


def expand_and_compare(model, feeds: dict[str, np.ndarray], gone=(), rtol: float = 1e-5, atol: float = 1e-6,
                       config: GraphKernelConfig | None = None) -> Graph:
    """Imports ``model``, expands it, checks that no op of ``gone`` remains, and that the expanded graph's
    outputs (eval_graph) match onnxruntime's on ``feeds`` (same dtype and shape, values close)."""
    graph = import_model(model)
    ops_before = set(graph.op_counts())
    names = [v.name for v in graph.outputs]
    types = [v.type for v in graph.outputs]
    assert run_expander(graph, config)
    ops = graph.op_counts()
    for op in gone:
        assert op not in ops, f"{op} left after expansion: {ops}"
    emitted = set(ops) - ops_before
    assert emitted <= DEFAULT_CLUSTER, f"expansion emitted unclusterable ops {emitted - DEFAULT_CLUSTER}"
    assert [v.name for v in graph.outputs] == names, "graph output names changed"
    assert [v.type for v in graph.outputs] == types, "graph output types changed"
    got = eval_graph(graph, feeds)
    want = run_ort(model, feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol=rtol, atol=atol, what=f"output {names[i]}")
    return graph
