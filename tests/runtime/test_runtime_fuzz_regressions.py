"""Runtime bugs found by the differential fuzzer (tests/fuzz), each as the minimal graph that showed it."""
import numpy as np
import onnx.helper as oh
from differential import check_case
from helpers import make_model, tensor_info


def test_native_kernel_gets_0d_inputs_as_0d():
    """A fused kernel reading a 0-d graph input: np.ascontiguousarray made it shape [1] and the native kernel
    refused it (runtime/model.py)."""
    nodes = [oh.make_node("Add", ["x", "c"], ["t"]), oh.make_node("Add", ["t", "c2"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [])], [tensor_info("y", np.float32, [])],
                       {"c": np.array(0.5, np.float32), "c2": np.array(0.25, np.float32)})
    check_case(model, {"x": np.array(0.8, np.float32)}, levels=(1,))
