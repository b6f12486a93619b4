"""kernels/transpose: the native copy of a permuted view (the Transpose steps a dynamic-shape plan keeps) against
numpy, bit for bit, and the model-level choice of it."""
import itertools
import os

import numpy as np
import onnx.helper as oh
import pytest
from helpers import all_drivers_library
from onnx import TensorProto as TP

import converter_lite
from converter_lite.kernels.transpose.abi import SYMBOL
from converter_lite.kernels.transpose.bind import merged_dims, transpose_step


@pytest.fixture(scope="module", params=["linked", "jit"])
def lib(request):
    linked = request.param == "linked"
    lib = all_drivers_library(link=linked, trust=linked)
    assert lib.support(SYMBOL)
    yield lib
    del lib


def test_merged_dims():
    x = np.zeros((2, 8, 4, 16), np.float32).transpose(0, 2, 1, 3)
    assert merged_dims(x.shape, tuple(s // 4 for s in x.strides)) == ([2, 4, 8, 16], [512, 16, 64, 1])
    x = np.zeros((1, 8, 1, 16), np.float32).transpose(0, 2, 1, 3)          # size-1 dims go, the rest merge
    assert merged_dims(x.shape, tuple(s // 4 for s in x.strides)) == ([128], [1])


CASES = [((5,), (0,)), ((3, 7), (1, 0)), ((2, 9, 4, 16), (0, 2, 1, 3)), ((1, 37, 3, 5), (0, 2, 3, 1)),
         ((4, 3, 2, 5, 6), (4, 0, 2, 1, 3)), ((2, 3, 1, 4, 1, 5), (5, 3, 1, 0, 2, 4)), ((64, 300, 33), (2, 0, 1)),
         ((300, 257), (1, 0)), ((0, 4, 3), (1, 2, 0))]


@pytest.mark.parametrize("shape, perm", CASES)
@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_matches_numpy_bit_for_bit(lib, shape, perm, nt, dtype):
    rng = np.random.default_rng(len(shape) * 7 + nt)
    x = rng.integers(-2 ** 31, 2 ** 31 - 1, shape, dtype=np.int64).astype(np.int32).view(dtype)   # NaN bits too
    want = np.ascontiguousarray(x.transpose(perm))
    y = np.full(want.shape, -1, dtype)
    step = transpose_step(lib.support(SYMBOL), x, y, perm, nt)
    view = x.transpose(perm)
    if x.size == 0 or len(merged_dims(view.shape, tuple(s // 4 for s in view.strides))[0]) > 4:
        assert step is None                                 # (the numpy copy runs these)
        return
    step()
    np.testing.assert_array_equal(y.view(np.int32), want.view(np.int32))


def test_declines_what_it_cannot_copy(lib):
    addr = lib.support(SYMBOL)
    x = np.zeros((2, 3, 2, 3, 2, 3), np.float32)          # six dims no merge can join
    assert transpose_step(addr, x, np.zeros((3, 2, 3, 2, 3, 2), np.float32), (5, 4, 3, 2, 1, 0), 1) is None
    assert transpose_step(addr, x.astype(np.float64), np.zeros((3, 2, 3, 2, 3, 2)), (5, 4, 3, 2, 1, 0), 1) is None
    assert transpose_step(addr, x[:, ::2], np.zeros((2, 2, 2, 3, 2, 3), np.float32)[:, :, :, :, :, :],
                          (1, 0, 2, 3, 4, 5), 1) is None                    # not contiguous


def test_dynamic_head_split_runs_natively(tmp_path):
    """A Transpose of dynamic shape (a head split the converter could not fuse) records the driver and runs on
    it at every shape, merged with the native steps around it."""
    g = oh.make_graph([oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
                       oh.make_node("Relu", ["t"], ["y"])], "heads",
                      [oh.make_tensor_value_info("x", TP.FLOAT, ["b", "s", 4, 16])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, ["b", 4, "s", 16])])
    src = os.path.join(tmp_path, "heads.onnx")
    with open(src, "wb") as f:
        f.write(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=10).SerializeToString())
    model = converter_lite.load(converter_lite.convert(src, str(tmp_path / "heads"), graph_kernel_flags="--opt_level=2"))
    assert any(SYMBOL in (n.attrs.get("native_drivers") or ()) for n in model.graph.nodes if n.op == "Transpose")
    for b, s in itertools.product((1, 3), (1, 7, 130)):
        x = np.random.default_rng(b * s).standard_normal((b, s, 4, 16)).astype(np.float32)
        np.testing.assert_array_equal(model.run({"x": x})["y"], np.maximum(x, 0).transpose(0, 2, 1, 3))
