import numpy as np
import pytest
from helpers import single_op_model

from converter_lite.frontend.onnx_import import import_model
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType

from .expand_testing import expand_and_compare, run_expander

OPS = ["ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes,keepdims", [((1,), 1), ((0, 2), 0), ((-1,), 0), (None, 1)])
def test_reduce(rng, op, axes, keepdims):
    x = (rng.standard_normal((3, 4, 5)) * 2).astype(np.float32)
    inputs = {"x": x, "axes": None if axes is None else np.array(axes, np.int64)}
    model = single_op_model(op, inputs, const_inputs=("axes",), keepdims=keepdims)
    graph = expand_and_compare(model, {"x": x}, gone=[op])
    assert "ReduceSum" in graph.op_counts()


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceSumSquare"])
def test_reduce_int(rng, op):
    x = rng.integers(-4, 5, (3, 4)).astype(np.int32)
    model = single_op_model(op, {"x": x, "axes": np.array([1], np.int64)}, const_inputs=("axes",))
    expand_and_compare(model, {"x": x}, gone=[op])


def test_reduce_mean_int_declined(rng):
    x = rng.integers(-4, 5, (3, 4)).astype(np.int32)
    graph = import_model(single_op_model("ReduceMean", {"x": x, "axes": np.array([1], np.int64)},
                                         const_inputs=("axes",)))
    assert not run_expander(graph)
    assert graph.op_counts() == {"ReduceMean": 1}


def test_reduce_runtime_axes_declined():
    g = Graph("g")
    x = Value("x", TensorType(DType.float32, (3, 4)))
    axes = Value("axes", TensorType(DType.int64, (1,)))
    g.inputs = [x, axes]
    y = Value("y", TensorType(DType.float32, (3, 1)))
    g.nodes.append(Node("ReduceMean", [x, axes], [y], name="rm"))
    g.outputs = [y]
    assert not run_expander(g)
    assert [n.op for n in g.nodes] == ["ReduceMean"]
