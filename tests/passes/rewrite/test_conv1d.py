"""conv1d_as_conv2d: a 1-D Conv -> Reshape + 2-D Conv on a one-row image + Reshape (kernel sizes, strides,
dilations, pads, auto_pad, groups, bias or not); 2-D Convs and non-constant weights are left alone."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

rng = np.random.default_rng(0)


def conv1d(x_shape, w_shape, bias=True, **attrs):
    inits = {"w": rng.standard_normal(w_shape).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(w_shape[0]).astype(np.float32)
        ins.append("b")
    return model([node("Conv", ins, ["c"], **attrs), node("Relu", ["c"], ["y"])], {"x": x_shape}, ["y"], inits)


@pytest.mark.parametrize("x_shape, w_shape, bias, attrs", [
    ((1, 1, 400), (8, 1, 10), False, {"strides": [5]}),                                # wav2vec2's first layer
    ((2, 8, 41), (8, 8, 3), True, {"strides": [2], "pads": [1, 0]}),
    ((1, 16, 37), (16, 4, 16), True, {"pads": [8, 8], "group": 4}),                   # a positional conv
    ((1, 6, 30), (4, 6, 3), True, {"dilations": [2], "kernel_shape": [3]}),
    ((1, 6, 31), (4, 6, 4), False, {"strides": [2], "auto_pad": "SAME_UPPER"}),
    ((1, 6, 31), (4, 6, 4), True, {"auto_pad": "VALID"}),
])
def test_fuses(x_shape, w_shape, bias, attrs):
    check_fusion(conv1d(x_shape, w_shape, bias, **attrs), "conv1d_as_conv2d", feeds({"x": x_shape}),
                 ["Conv", "Relu", "Reshape", "Reshape"], rtol=1e-4, atol=1e-4)


def test_2d_conv_is_left_alone():
    m = model([node("Conv", ["x", "w"], ["y"])], {"x": (1, 3, 8, 8)}, ["y"],
              {"w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32)})
    check_no_fusion(m, "conv1d_as_conv2d")


def test_weights_from_an_input_are_left_alone():
    m = model([node("Conv", ["x", "w"], ["y"])], {"x": (1, 3, 8), "w": (4, 3, 3)}, ["y"])
    check_no_fusion(m, "conv1d_as_conv2d")
