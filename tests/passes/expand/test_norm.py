import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, single_op_model, tensor_info

from .expand_testing import expand_and_compare


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(rng, axis, with_bias):
    x = rng.standard_normal((2, 4, 8)).astype(np.float32) * 3 + 1
    norm_shape = x.shape[axis:]
    scale = rng.standard_normal(norm_shape).astype(np.float32)
    bias = rng.standard_normal(norm_shape).astype(np.float32) if with_bias else None
    model = single_op_model("LayerNormalization", {"x": x, "scale": scale, "bias": bias},
                            const_inputs=("scale", "bias"), axis=axis, epsilon=1e-3)
    graph = expand_and_compare(model, {"x": x}, gone=["LayerNormalization", "ReduceMean"])
    assert "ReduceSum" in graph.op_counts()


def test_layer_norm_statistics_outputs(rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    scale = rng.standard_normal((16,)).astype(np.float32)
    node = oh.make_node("LayerNormalization", ["x", "scale"], ["y", "mean", "inv_std"], axis=1)
    model = make_model([node], [tensor_info("x", np.float32, [3, 16])],
                       [tensor_info("y", np.float32, [3, 16]), tensor_info("mean", np.float32, [3, 1]),
                        tensor_info("inv_std", np.float32, [3, 1])], {"scale": scale})
    expand_and_compare(model, {"x": x}, gone=["LayerNormalization"])


def test_rms_norm(rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    scale = rng.standard_normal((8,)).astype(np.float32)
    model = single_op_model("RMSNormalization", {"x": x, "scale": scale}, opset=23, const_inputs=("scale",))
    expand_and_compare(model, {"x": x}, gone=["RMSNormalization"])


def test_instance_norm(rng):
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32) * 2 + 0.5
    scale, bias = rng.standard_normal((2, 3)).astype(np.float32)
    model = single_op_model("InstanceNormalization", {"x": x, "scale": scale, "bias": bias},
                            const_inputs=("scale", "bias"), epsilon=1e-4)
    expand_and_compare(model, {"x": x}, gone=["InstanceNormalization"])


@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 3), 3), ((2, 4, 5), 2), ((3, 4), 4)])
def test_group_norm(rng, shape, groups):
    x = rng.standard_normal(shape).astype(np.float32)
    scale, bias = rng.standard_normal((2, shape[1])).astype(np.float32)
    model = single_op_model("GroupNormalization", {"x": x, "scale": scale, "bias": bias},
                            const_inputs=("scale", "bias"), num_groups=groups)
    expand_and_compare(model, {"x": x}, gone=["GroupNormalization"])
