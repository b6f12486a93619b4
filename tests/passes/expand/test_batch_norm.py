import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, tensor_info

from .expand_testing import expand_and_compare

C = 3


def _params(rng):
    return {"scale": rng.standard_normal(C).astype(np.float32), "bias": rng.standard_normal(C).astype(np.float32),
            "mean": rng.standard_normal(C).astype(np.float32), "var": rng.random(C).astype(np.float32) + 0.5}


@pytest.mark.parametrize("shape", [(2, C, 4, 5), (4, C)])
def test_batch_norm_constant_params_fold(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    node = oh.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)
    model = make_model([node], [tensor_info("x", np.float32, list(shape))],
                       [tensor_info("y", np.float32, list(shape))], _params(rng))
    graph = expand_and_compare(model, {"x": x}, gone=["BatchNormalization"])
    assert graph.op_counts() == {"Mul": 1, "Add": 1}       # s and t folded into constants


def test_batch_norm_runtime_params(rng):
    x = rng.standard_normal((2, C, 4)).astype(np.float32)
    params = _params(rng)
    node = oh.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"])
    inputs = [tensor_info("x", np.float32, [2, C, 4])] + [tensor_info(k, np.float32, [C]) for k in params]
    model = make_model([node], inputs, [tensor_info("y", np.float32, [2, C, 4])])
    expand_and_compare(model, {"x": x, **params}, gone=["BatchNormalization"])
