"""conv_bn_fusion: Conv + inference BatchNormalization with constant parameters -> one Conv."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

RNG = np.random.default_rng(1)
C_OUT = 4
BN = {"scale": RNG.uniform(0.5, 2, C_OUT), "bias": RNG.normal(size=C_OUT),
      "mean": RNG.normal(size=C_OUT), "var": RNG.uniform(0.5, 2, C_OUT)}
W = RNG.normal(size=(C_OUT, 3, 3, 3)).astype(np.float32)
INPUTS = {"x": (1, 3, 8, 8)}


def conv_bn(with_bias=True, bn_params=None, extra_use=False):
    inits = {k: v.astype(np.float32) for k, v in (bn_params or BN).items()}
    inits["w"] = W
    conv_ins = ["x", "w"]
    if with_bias:
        inits["b"] = RNG.normal(size=C_OUT).astype(np.float32)
        conv_ins.append("b")
    nodes = [node("Conv", conv_ins, ["c"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)]
    outs = ["y"]
    if extra_use:
        nodes.append(node("Relu", ["c"], ["r"]))
        outs.append("r")
    return model(nodes, INPUTS, outs, inits)


@pytest.mark.parametrize("with_bias", [True, False])
def test_fuses(with_bias):
    g = check_fusion(conv_bn(with_bias), "conv_bn_fusion", feeds(INPUTS), ["Conv"], rtol=1e-4, atol=1e-4)
    assert len(g.nodes[0].inputs) == 3 and g.nodes[0].attrs["pads"] == (1, 1, 1, 1)


def test_conv_output_used_elsewhere():
    check_no_fusion(conv_bn(extra_use=True), "conv_bn_fusion")


def test_non_constant_weights():
    m = model([node("Conv", ["x", "w"], ["c"]),
               node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"])],
              {"x": (1, 3, 8, 8), "w": (4, 3, 3, 3)}, ["y"], {k: v.astype(np.float32) for k, v in BN.items()})
    check_no_fusion(m, "conv_bn_fusion")
