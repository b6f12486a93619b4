import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, single_op_model, tensor_info

from converter_lite.frontend.onnx_import import import_model

from .expand_testing import expand_and_compare, run_expander


@pytest.mark.parametrize("e,ops", [(2.0, {"Mul": 1}), (3.0, {"Mul": 2}), (0.5, {"Sqrt": 1}),
                                   (-1.0, {"Reciprocal": 1}), (-0.5, {"Sqrt": 1, "Reciprocal": 1})])
def test_pow_by_constant(rng, e, ops):
    x = (rng.random((4, 6)) * 3 + 0.1).astype(np.float32)
    model = single_op_model("Pow", {"x": x, "e": np.array(e, np.float32)}, const_inputs=("e",))
    graph = expand_and_compare(model, {"x": x}, gone=["Pow"])
    assert graph.op_counts() == ops


def test_pow_by_one_disappears(rng):
    x = rng.random((2, 3)).astype(np.float32)
    nodes = [oh.make_node("Pow", ["x", "e"], ["p"]), oh.make_node("Neg", ["p"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [2, 3])], [tensor_info("y", np.float32, [2, 3])],
                       {"e": np.array(1, np.int64)})
    graph = expand_and_compare(model, {"x": x}, gone=["Pow"])
    assert graph.op_counts() == {"Neg": 1}


def test_squared_difference_form(rng):
    """(a - b)^2 as exported by frameworks without SquaredDifference -> d * d."""
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes = [oh.make_node("Sub", ["a", "b"], ["d"]), oh.make_node("Pow", ["d", "two"], ["y"])]
    model = make_model(nodes, [tensor_info("a", np.float32, [3, 4]), tensor_info("b", np.float32, [3, 4])],
                       [tensor_info("y", np.float32, [3, 4])], {"two": np.array(2.0, np.float32)})
    graph = expand_and_compare(model, {"a": a, "b": b}, gone=["Pow"])
    assert graph.op_counts() == {"Sub": 1, "Mul": 1}


@pytest.mark.parametrize("e", [1.5, 4.0])
def test_pow_other_exponents_declined(rng, e):
    x = rng.random((2, 3)).astype(np.float32)
    graph = import_model(single_op_model("Pow", {"x": x, "e": np.array(e, np.float32)}, const_inputs=("e",)))
    assert not run_expander(graph)
    assert graph.op_counts() == {"Pow": 1}


def test_pow_integer_sqrt_declined(rng):
    x = rng.integers(0, 9, (2, 3)).astype(np.int32)
    graph = import_model(single_op_model("Pow", {"x": x, "e": np.array(0.5, np.float32)}, const_inputs=("e",)))
    assert not run_expander(graph)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
@pytest.mark.parametrize("n", [1, 2, 4])
def test_variadic(rng, op, n):
    shapes = [(3, 4), (4,), (1, 4), (3, 1)][:n]
    feeds = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    node = oh.make_node(op, list(feeds), ["pre"])
    model = make_model([node, oh.make_node("Neg", ["pre"], ["y"])],
                       [tensor_info(k, np.float32, list(v.shape)) for k, v in feeds.items()],
                       [tensor_info("y", np.float32, None)])
    graph = expand_and_compare(model, feeds, gone=[op])
    assert graph.op_counts().get("Add", 0) == n - 1
