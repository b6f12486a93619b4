import numpy as np
import pytest
from helpers import make_model, single_op_model, tensor_info

from .expand_testing import expand_and_compare

CASES = [
    ("Relu", {}),
    ("LeakyRelu", {}),
    ("LeakyRelu", {"alpha": 0.2}),
    ("Elu", {}),
    ("Elu", {"alpha": 0.5}),
    ("Selu", {}),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}),
    ("Celu", {}),
    ("Celu", {"alpha": 2.0}),
    ("ThresholdedRelu", {}),
    ("ThresholdedRelu", {"alpha": 0.5}),
    ("Shrink", {}),
    ("Shrink", {"lambd": 1.0, "bias": 0.25}),
]


@pytest.mark.parametrize("op,attrs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_activation(rng, op, attrs):
    x = (rng.standard_normal((4, 9)) * 2).astype(np.float32)
    x.flat[:3] = [0.0, 1.0, -0.5]
    expand_and_compare(single_op_model(op, {"x": x}, **attrs), {"x": x}, gone=[op])


def test_relu_int32(rng):
    x = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    expand_and_compare(single_op_model("Relu", {"x": x}), {"x": x}, gone=["Relu"])


@pytest.mark.parametrize("slope_shape", [(1,), (6,), (3, 1, 1)])
def test_prelu(rng, slope_shape):
    x = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    slope = rng.random(slope_shape).astype(np.float32)
    model = single_op_model("PRelu", {"x": x, "slope": slope}, const_inputs=("slope",))
    expand_and_compare(model, {"x": x}, gone=["PRelu"])


@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-1.0, None), (None, 0.5)], ids=["relu6", "min", "max"])
def test_clip_constant_bounds(rng, bounds):
    x = (rng.standard_normal((5, 6)) * 4).astype(np.float32)
    lo, hi = (None if v is None else np.array(v, np.float32) for v in bounds)
    model = single_op_model("Clip", {"x": x, "lo": lo, "hi": hi}, const_inputs=("lo", "hi"))
    expand_and_compare(model, {"x": x}, gone=["Clip"])


def test_clip_runtime_bounds(rng):
    import onnx.helper as oh
    x = (rng.standard_normal((5, 6)) * 4).astype(np.float32)
    feeds = {"x": x, "lo": np.array(-1.0, np.float32), "hi": np.array(2.0, np.float32)}
    model = make_model([oh.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                       [tensor_info("x", np.float32, [5, 6]), tensor_info("lo", np.float32, []),
                        tensor_info("hi", np.float32, [])],
                       [tensor_info("y", np.float32, [5, 6])])
    expand_and_compare(model, feeds, gone=["Clip"])
