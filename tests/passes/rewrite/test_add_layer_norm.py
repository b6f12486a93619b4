"""add_layer_norm_fusion: LayerNormalization(a + b) -> AddLayerNorm with two outputs (normalized value and
sum); other users of the sum read the second output."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

RNG = np.random.default_rng(5)
INPUTS = {"a": (2, 4, 8), "b": (2, 4, 8)}
SCALE = RNG.uniform(0.5, 1.5, 8).astype(np.float32)
BIAS = RNG.normal(size=8).astype(np.float32)


def add_ln(residual=True, bias=True, ln_extra=False):
    ln_ins = ["s", "scale"] + (["bias"] if bias else [])
    ln_outs = ["n"] + (["mean"] if ln_extra else [])
    nodes = [node("Add", ["a", "b"], ["s"]), node("LayerNormalization", ln_ins, ln_outs, epsilon=1e-5)]
    outs = ["n"] + (["s"] if residual else []) + (["mean"] if ln_extra else [])
    return model(nodes, INPUTS, outs, {"scale": SCALE, "bias": BIAS})


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_add_layer_norm(residual, bias):
    g = check_fusion(add_ln(residual, bias), "add_layer_norm_fusion", feeds(INPUTS), ["AddLayerNorm"],
                     rtol=1e-4, atol=1e-5)
    fused = g.nodes[0]
    assert len(fused.outputs) == 2 and fused.attrs["epsilon"] == pytest.approx(1e-5)
    if residual:
        assert g.outputs[1] is fused.outputs[1]


def test_add_layer_norm_with_used_statistics():
    check_no_fusion(add_ln(ln_extra=True), "add_layer_norm_fusion")
