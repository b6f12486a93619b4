"""Expansion then clustering of real-model blocks, compared with onnxruntime."""
import numpy as np
import onnx.helper as oh
from helpers import assert_close, make_model, run_ort, tensor_info

from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.registry import OPS, OpKind
from converter_lite.passes.expand import ExpandOpsPass

from .fuse_testing import cluster, context, kernel_nodes


def _transformer_mlp(rng, d=16, h=32):
    """LayerNorm -> MatMul + bias -> Gelu -> MatMul + bias -> residual add -> Softmax."""
    inits = {"g": rng.standard_normal(d).astype(np.float32), "b": rng.standard_normal(d).astype(np.float32),
             "w1": rng.standard_normal((d, h)).astype(np.float32) * 0.3, "b1": rng.standard_normal(h).astype(np.float32),
             "w2": rng.standard_normal((h, d)).astype(np.float32) * 0.3, "b2": rng.standard_normal(d).astype(np.float32)}
    nodes = [oh.make_node("LayerNormalization", ["x", "g", "b"], ["ln"], name="ln", axis=-1),
             oh.make_node("MatMul", ["ln", "w1"], ["m1"], name="fc1"),
             oh.make_node("Add", ["m1", "b1"], ["a1"], name="bias1"),
             oh.make_node("Gelu", ["a1"], ["g1"], name="gelu"),
             oh.make_node("MatMul", ["g1", "w2"], ["m2"], name="fc2"),
             oh.make_node("Add", ["m2", "b2"], ["a2"], name="bias2"),
             oh.make_node("Add", ["a2", "x"], ["r"], name="residual"),
             oh.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1)]
    return make_model(nodes, [tensor_info("x", np.float32, [4, d])], [tensor_info("y", np.float32, [4, d])],
                      inits, opset=20)


def test_transformer_block_numerics_and_no_loose_elementwise_op(rng):
    model = _transformer_mlp(rng)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    graph = import_model(model)
    ExpandOpsPass().run(graph, context())
    cluster(graph)
    assert_close(eval_graph(graph, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)
    loose = [n.op for n in graph.nodes if n.op != "GraphKernel" and OPS[n.op].kind < OpKind.OPAQUE]
    assert loose == []
    assert [n.op for n in graph.nodes if n.op != "GraphKernel"] == ["MatMul", "MatMul"]
    epilogues = [k.attrs.get("epilogue_of") for k in kernel_nodes(graph)]
    assert "fc1" in epilogues
