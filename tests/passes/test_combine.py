"""graph_kernel_op_combiner: parallel MatMul/Gemm/FusedMatMul on one input with constant weights -> one wider
product and a Split (cases 1-4 of the module docstring)."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite.passes.pipeline  # noqa: F401  (registers every pass)
from converter_lite.config import GraphKernelConfig
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.registry import PASSES

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 3, 8)).astype(np.float32)


def combine(graph) -> PassContext:
    ctx = PassContext(GraphKernelConfig(opt_level=3))
    PASSES["graph_kernel_op_combiner"]().run(graph, ctx)
    verify(graph)
    return ctx


def qkv(widths=(8, 8, 4), bias=True, shared_extra=False, gemm=False):
    nodes, inits, outs = [], {}, []
    for i, n in enumerate(widths):
        inits[f"w{i}"] = RNG.normal(size=(n, 8) if gemm else (8, n)).astype(np.float32)
        inits[f"b{i}"] = RNG.normal(size=n).astype(np.float32)
        if gemm:
            nodes.append(oh.make_node("Gemm", ["x", f"w{i}"] + ([f"b{i}"] if bias else []), [f"y{i}"], transB=1,
                                      alpha=0.5))
        else:
            nodes.append(oh.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"]))
            nodes.append(oh.make_node("Add", [f"m{i}", f"b{i}"] if bias else [f"m{i}", f"m{i}"], [f"y{i}"]))
        outs.append(f"y{i}")
    if shared_extra:
        nodes.append(oh.make_node("Relu", ["m0"], ["r"]))
        outs.append("r")
    shape = [6, 8] if gemm else [2, 3, 8]
    m = make_model(nodes, [tensor_info("x", np.float32, shape)],
                   [oh.make_value_info(o, oh.make_empty_tensor_value_info(o).type) for o in outs], inits)
    return m, (X.reshape(6, 8) if gemm else X)


def check(m, x, expect_ops):
    want = run_ort(m, {"x": x})
    g = import_model(m, fold=False)
    names = [v.name for v in g.outputs]
    ctx = combine(g)
    assert sorted(n.op for n in g.nodes) == sorted(expect_ops)
    assert [v.name for v in g.outputs] == names
    for a, e in zip(eval_graph(g, {"x": x}), want):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)
    return g, ctx


def test_matmul_with_bias():
    g, ctx = check(*qkv(), ["MatMul", "Add", "Split"])
    assert ctx.stats["graph_kernel_op_combiner"] == 1
    mm = next(n for n in g.nodes if n.op == "MatMul")
    assert mm.inputs[1].const.shape == (8, 20)


def test_matmul_without_bias():
    check(*qkv(bias=False), ["MatMul", "Split", "Add", "Add", "Add"])


def test_gemm():
    g, _ = check(*qkv(gemm=True), ["Gemm", "Split"])
    assert g.nodes[0].attrs["alpha"] == 0.5


def test_fused_matmul_after_biasadd_fusion():
    m, x = qkv()
    want = run_ort(m, {"x": x})
    g = import_model(m, fold=False)
    PASSES["matmul_elem_biasadd_fusion"]().run(g, PassContext(GraphKernelConfig(opt_level=3)))
    combine(g)
    assert sorted(n.op for n in g.nodes) == ["FusedMatMul", "Split"]
    for a, e in zip(eval_graph(g, {"x": x}), want):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5)


def test_bias_not_combined_when_product_is_shared():
    # MatMul 0 also feeds a Relu: its Add cannot be folded in, so it stays apart from the biased group
    check(*qkv(widths=(8, 8), shared_extra=True), ["MatMul", "MatMul", "Add", "Add", "Relu"])


@pytest.mark.parametrize("widths", [(8,)])
def test_single_product_is_left_alone(widths):
    m, _ = qkv(widths)
    g = import_model(m, fold=False)
    ctx = combine(g)
    assert "graph_kernel_op_combiner" not in ctx.stats and sorted(n.op for n in g.nodes) == ["Add", "MatMul"]
