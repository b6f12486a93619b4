"""Codegen bugs found by the differential fuzzer (tests/fuzz), each as the minimal graph that showed it."""
import numpy as np
import onnx.helper as oh
import pytest
from differential import check_case
from helpers import make_model, tensor_info


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes", [None, [1], [0, 1]])
def test_bool_reduce_max_min_in_a_fused_kernel(op, axes):
    """bool computes as i1 and the reduction compared it signed (true = -1 < false), so ReduceMax/ReduceMin of
    bools swapped any/all (codegen/reduce.py)."""
    x = np.array([[True, False], [True, True], [False, False]])
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    nodes = [oh.make_node("Not", ["x"], ["t"]),
             oh.make_node(op, ["t"] + ([] if axes is None else ["axes"]), ["y"], keepdims=0)]
    out_shape = [] if axes in (None, [0, 1]) else [3]
    model = make_model(nodes, [tensor_info("x", np.bool_, [3, 2])], [tensor_info("y", np.bool_, out_shape)], inits)
    check_case(model, {"x": x}, levels=(1,))


def test_bool_reduce_without_axes_and_noop_is_identity():
    nodes = [oh.make_node("Not", ["x"], ["t"]), oh.make_node("ReduceMax", ["t"], ["y"], noop_with_empty_axes=1)]
    model = make_model(nodes, [tensor_info("x", np.bool_, [2, 2])], [tensor_info("y", np.bool_, [2, 2])])
    check_case(model, {"x": np.array([[True, False], [True, True]])}, levels=(1,))


@pytest.mark.parametrize("start, end, step", [(-3, -3, -1), (-7, -7, -2), (-3, -7, -1), (-7, 1, -1)])
def test_slice_negative_step_with_start_before_the_beginning(start, end, step):
    """ONNX clamps a negative-step start below -dim to 0; the index map used Python's slice.indices, which gives
    -1, and the fused kernel read the element before the tensor (codegen/index.py)."""
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Slice", ["r", "s", "e", "a", "st"], ["y"]),
             oh.make_node("Neg", ["y"], ["z"])]
    inits = {"s": np.array([start]), "e": np.array([end]), "a": np.array([1]), "st": np.array([step])}
    model = make_model(nodes, [tensor_info("x", np.float32, [3, 2])], [tensor_info("z", np.float32, ["n", "m"])],
                       inits)
    check_case(model, {"x": np.arange(6, dtype=np.float32).reshape(3, 2)}, levels=(1,))
