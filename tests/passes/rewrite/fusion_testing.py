"""Helpers for the named-fusion tests: ONNX models (onnx.helper) imported without folding, the pass run on
them, the resulting op list asserted, and outputs compared with onnxruntime (optimizer off) and with the
reference interpreter before the pass."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
from helpers import make_model, run_ort, tensor_info

import converter_lite.passes.pipeline  # noqa: F401  (registers every pass)
from converter_lite.config import GraphKernelConfig
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ir.core import Graph
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.registry import PASSES

F = np.float32


def model(nodes, inputs: dict, outputs: list[str], inits: dict | None = None, opset: int = 21):
    """``inputs``: name -> shape (float32); ``outputs``: names (types left to inference)."""
    import onnx

    ins = [tensor_info(k, F, list(s)) for k, s in inputs.items()]
    outs = [oh.make_value_info(o, onnx.TypeProto()) for o in outputs]
    return make_model(nodes, ins, outs, {k: np.asarray(v) for k, v in (inits or {}).items()}, opset=opset)


def feeds(inputs: dict, seed: int = 0, low: float = -2.0, high: float = 2.0) -> dict:
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(low, high, s).astype(F) for k, s in inputs.items()}


def node(op, ins, outs, **attrs):
    return oh.make_node(op, ins, outs, **attrs)


def ops(graph: Graph) -> list[str]:
    return sorted(n.op for n in graph.nodes)


def run(pass_name: str, graph: Graph) -> bool:
    changed = PASSES[pass_name]().run(graph, PassContext(config=GraphKernelConfig(opt_level=3)))
    verify(graph)
    return changed


def check_fusion(m, pass_name: str, data: dict, expect_ops: list[str], rtol=1e-5, atol=1e-5) -> Graph:
    """The pass fires, leaves exactly ``expect_ops``, and keeps the outputs (vs ORT and vs the IR before)."""
    want = run_ort(m, data)
    g = import_model(m, fold=False)
    before = eval_graph(g, data)
    names = [v.name for v in g.outputs]
    assert run(pass_name, g), f"{pass_name} did not fire"
    assert ops(g) == sorted(expect_ops)
    assert [v.name for v in g.outputs] == names
    got = eval_graph(g, data)
    for a, e, b in zip(got, want, before):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return g


def check_no_fusion(m, pass_name: str) -> Graph:
    g = import_model(m, fold=False)
    before = ops(g)
    assert not run(pass_name, g), f"{pass_name} fired unexpectedly"
    assert ops(g) == before
    return g
