"""Simplify-pass bugs found by the differential fuzzer (tests/fuzz), each as the minimal graph that showed it."""
import numpy as np
import onnx.helper as oh
from differential import check_case
from helpers import make_model, tensor_info

from converter_lite.passes.simplify.cse import const_key


def test_cse_keeps_0d_and_1_element_constants_apart():
    """const_key used np.ascontiguousarray, which makes a 0-d array shape [1], so CSE merged a scalar constant
    with a [1] one of the same value and the merged Add produced the wrong shape (passes/simplify/cse.py)."""
    assert const_key(np.array(0.5, np.float32)) != const_key(np.array([0.5], np.float32))
    nodes = [oh.make_node("Add", ["x", "c"], ["y1"]), oh.make_node("Add", ["x", "c2"], ["y2"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [])],
                       [tensor_info("y1", np.float32, []), tensor_info("y2", np.float32, [1])],
                       {"c": np.array(0.5, np.float32), "c2": np.array([0.5], np.float32)})
    check_case(model, {"x": np.array(1.0, np.float32)}, levels=(2,))
