"""attention_fusion: Softmax(Q·Kᵀ·scale [+ mask])·V -> Attention."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

INPUTS = {"q": (2, 4, 6, 8), "k": (2, 4, 6, 8), "v": (2, 4, 6, 8), "mask": (2, 1, 1, 6)}


def attention(scale="div", mask=True, axis=-1, extra_use=False):
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]), node("MatMul", ["q", "kt"], ["s"])]
    cur = "s"
    if scale:
        nodes.append(node("Div" if scale == "div" else "Mul", [cur, "c"], ["ss"]))
        cur = "ss"
    if mask:
        nodes.append(node("Add", ["mask", cur], ["sm"]))
        cur = "sm"
    nodes += [node("Softmax", [cur], ["p"], axis=axis), node("MatMul", ["p", "v"], ["y"])]
    inputs = dict(INPUTS) if mask else {k: v for k, v in INPUTS.items() if k != "mask"}
    c = np.float32(np.sqrt(8) if scale == "div" else 1 / np.sqrt(8))
    return model(nodes, inputs, ["y"] + (["s"] if extra_use else []), {"c": c}), inputs


@pytest.mark.parametrize("scale", ["div", "mul", None])
@pytest.mark.parametrize("mask", [True, False])
def test_fuses(scale, mask):
    m, inputs = attention(scale, mask)
    g = check_fusion(m, "attention_fusion", feeds(inputs), ["FusedAttention", "Transpose"])
    att = next(n for n in g.nodes if n.op == "FusedAttention")
    assert len(att.inputs) == (4 if mask else 3)
    assert att.attrs["scale"] == pytest.approx(1 / np.sqrt(8) if scale else 1.0, rel=1e-6)


def test_softmax_over_other_axis():
    m, _ = attention(axis=2)
    check_no_fusion(m, "attention_fusion")


def test_scores_used_elsewhere():
    m, _ = attention(extra_use=True)
    check_no_fusion(m, "attention_fusion")
