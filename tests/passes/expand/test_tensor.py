import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, single_op_model, tensor_info

from converter_lite.frontend.onnx_import import import_model

from .expand_testing import expand_and_compare, run_expander


@pytest.mark.parametrize("shape,repeats", [((1, 4), (3, 1)), ((2, 1, 3), (1, 5, 1)), ((1, 1), (2, 3))])
def test_tile_as_broadcast(rng, shape, repeats):
    x = rng.standard_normal(shape).astype(np.float32)
    model = single_op_model("Tile", {"x": x, "r": np.array(repeats, np.int64)}, const_inputs=("r",))
    graph = expand_and_compare(model, {"x": x}, gone=["Tile"])
    assert graph.op_counts() == {"Expand": 1}


def test_tile_real_repeat_declined(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    graph = import_model(single_op_model("Tile", {"x": x, "r": np.array([2, 1], np.int64)}, const_inputs=("r",)))
    assert not run_expander(graph)
    assert graph.op_counts() == {"Tile": 1}


@pytest.mark.parametrize("op", ["Identity", "Dropout"])
def test_removed(rng, op):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    nodes = [oh.make_node("Neg", ["x"], ["a"]), oh.make_node(op, ["a"], ["b"]), oh.make_node("Abs", ["b"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [2, 3])], [tensor_info("y", np.float32, [2, 3])])
    graph = expand_and_compare(model, {"x": x}, gone=[op])
    assert graph.op_counts() == {"Neg": 1, "Abs": 1}


def test_removed_op_feeding_graph_output_keeps_name(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    nodes = [oh.make_node("Neg", ["x"], ["a"]), oh.make_node("Identity", ["a"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [2, 3])], [tensor_info("y", np.float32, [2, 3])])
    graph = expand_and_compare(model, {"x": x}, gone=["Identity"])
    assert graph.nodes[0].outputs[0].name == "y"


def test_identity_of_graph_input_stays(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    graph = import_model(single_op_model("Identity", {"x": x}))
    assert not run_expander(graph)
    assert graph.op_counts() == {"Identity": 1}


def test_dropout_mask_used_declined():
    node = oh.make_node("Dropout", ["x"], ["y", "mask"])
    model = make_model([node], [tensor_info("x", np.float32, [2, 3])],
                       [tensor_info("y", np.float32, [2, 3]), tensor_info("mask", np.bool_, [2, 3])])
    graph = import_model(model)
    assert not run_expander(graph)
