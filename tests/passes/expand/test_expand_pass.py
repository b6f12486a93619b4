"""ExpandOpsPass: the op lists of the config, the shape/dtype invariant, declines."""
import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, tensor_info

from converter_lite.config import GraphKernelConfig, parse_flags
from converter_lite.frontend.onnx_import import import_model
from converter_lite.passes.expand import (
    DEFAULT_EXPAND,
    EXPANDERS,
    Declined,
    ExpandError,
)
from converter_lite.passes.expand.emit import input_value

from .expand_testing import run_expander


def _model():
    """y = Neg(Sigmoid(Gelu(x)))"""
    nodes = [oh.make_node("Gelu", ["x"], ["g"]), oh.make_node("Sigmoid", ["g"], ["s"]),
             oh.make_node("Neg", ["s"], ["y"])]
    return make_model(nodes, [tensor_info("x", np.float32, [2, 3])], [tensor_info("y", np.float32, [2, 3])],
                      opset=20)


def _ops_after(config: GraphKernelConfig) -> dict[str, int]:
    graph = import_model(_model())
    run_expander(graph, config)
    return graph.op_counts()


def test_default_list_expands_both():
    ops = _ops_after(GraphKernelConfig(opt_level=1))
    assert not set(ops) & {"Gelu", "Sigmoid"}


def test_disable_expand_ops():
    ops = _ops_after(parse_flags("--opt_level=1 --disable_expand_ops=Gelu"))
    assert "Gelu" in ops and "Sigmoid" not in ops


def test_enable_expand_ops_only_with_mindspore_spelling():
    ops = _ops_after(parse_flags("--opt_level=1 --enable_expand_ops_only=GeLU"))
    assert "Gelu" not in ops and "Sigmoid" in ops


def test_enable_expand_ops_adds_an_op(monkeypatch):
    def neg_as_mul(b, node):
        return [input_value(b, node, 0) * -1.0]
    monkeypatch.setitem(EXPANDERS, "Neg", neg_as_mul)      # an expander outside the default list
    assert "Neg" not in DEFAULT_EXPAND
    # Sigmoid's expansion emits one Neg; the model's own Neg is expanded only when enabled
    assert _ops_after(GraphKernelConfig(opt_level=1))["Neg"] == 2
    assert _ops_after(parse_flags("--opt_level=1 --enable_expand_ops=Neg"))["Neg"] == 1


def test_shape_dtype_invariant_is_checked(monkeypatch):
    def wrong_shape(b, node):
        x = input_value(b, node, 0)
        return [b.op("ReduceSum", x, b.const(np.array([1], np.int64)))]
    monkeypatch.setitem(EXPANDERS, "Sigmoid", wrong_shape)
    graph = import_model(_model())
    with pytest.raises(ExpandError, match="changed output 0"):
        run_expander(graph, GraphKernelConfig(opt_level=1))


def test_declined_expansion_leaves_graph_unchanged(monkeypatch):
    def emits_then_declines(b, node):
        input_value(b, node, 0) * 2.0
        raise Declined("not today")
    monkeypatch.setitem(EXPANDERS, "Gelu", emits_then_declines)
    node = oh.make_node("Gelu", ["x"], ["y"])
    graph = import_model(make_model([node], [tensor_info("x", np.float32, [2, 3])],
                                    [tensor_info("y", np.float32, [2, 3])], opset=20), fold=False)
    before = [(n.op, n.name) for n in graph.nodes]
    assert not run_expander(graph)
    assert [(n.op, n.name) for n in graph.nodes] == before
    assert [(n, i) for n, i in graph.inputs[0].uses] == [(graph.nodes[0], 0)]   # emitted ops were removed


REQUIRED = {"Gelu", "LayerNormalization", "Softmax", "LogSoftmax", "BatchNormalization", "InstanceNormalization",
            "GroupNormalization", "Sigmoid", "HardSigmoid", "HardSwish", "Softplus", "Mish", "Elu", "Selu", "Celu",
            "LeakyRelu", "PRelu", "Clip", "Relu", "ReduceMean", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare",
            "ReduceL1", "Pow", "Tile", "Dropout", "Identity", "Swish", "Softsign", "ThresholdedRelu", "Shrink",
            "Sum", "Mean"}


def test_default_list_covers_the_issue():
    assert REQUIRED <= DEFAULT_EXPAND <= set(EXPANDERS)


def test_dynamic_shape_nodes_are_not_expanded():
    from converter_lite.ir.core import Graph, Node, TensorType, Value
    from converter_lite.ir.dtype import DType
    x = Value("x", TensorType(DType.float32, None))
    y = Value("y", TensorType(DType.float32, None))
    g = Graph("g", [x], [y], [Node("Sigmoid", [x], [y], name="s")])
    assert not run_expander(g)
    assert g.op_counts() == {"Sigmoid": 1}
