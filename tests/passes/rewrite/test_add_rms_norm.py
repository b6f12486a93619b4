"""add_rms_norm_fusion: RMSNormalization(a + b), or its decomposed form, -> AddRmsNorm with two outputs
(normalized value and sum); other users of the sum read the second output."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

RNG = np.random.default_rng(5)
INPUTS = {"a": (2, 4, 8), "b": (2, 4, 8)}
SCALE = RNG.uniform(0.5, 1.5, 8).astype(np.float32)


def add_rms(form="node", residual=True, square="pow", reciprocal=False, scale=True, axes=(-1,)):
    inits = {"scale": SCALE, "axes": np.array(axes, np.int64), "two": np.float32(2), "eps": np.float32(1e-6)}
    nodes = [node("Add", ["a", "b"], ["s"])]
    if form == "node":
        nodes.append(node("RMSNormalization", ["s", "scale"], ["y"], epsilon=1e-6))
        opset = 23
    else:
        opset = 21
        nodes += [node("Pow", ["s", "two"], ["sq"]) if square == "pow" else node("Mul", ["s", "s"], ["sq"]),
                  node("ReduceMean", ["sq", "axes"], ["ms"]), node("Add", ["ms", "eps"], ["mse"]),
                  node("Sqrt", ["mse"], ["r"])]
        if reciprocal:
            nodes += [node("Reciprocal", ["r"], ["ir"]), node("Mul", ["s", "ir"], ["n"])]
        else:
            nodes.append(node("Div", ["s", "r"], ["n"]))
        nodes.append(node("Mul", ["n", "scale"], ["y"]) if scale else node("Identity", ["n"], ["y"]))
    outs = ["y"] + (["s"] if residual else [])
    return model(nodes, INPUTS, outs, inits, opset=opset)


@pytest.mark.parametrize("residual", [True, False])
def test_add_rms_norm_node(residual):
    g = check_fusion(add_rms("node", residual), "add_rms_norm_fusion", feeds(INPUTS), ["AddRmsNorm"],
                     rtol=1e-4, atol=1e-5)
    assert g.nodes[0].attrs["epsilon"] == pytest.approx(1e-6)


@pytest.mark.parametrize("square,reciprocal", [("pow", False), ("mul", True)])
def test_add_rms_norm_decomposed(square, reciprocal):
    check_fusion(add_rms("decomposed", True, square, reciprocal), "add_rms_norm_fusion", feeds(INPUTS),
                 ["AddRmsNorm"], rtol=1e-4, atol=1e-5)


def test_add_rms_norm_decomposed_without_scale():
    check_fusion(add_rms("decomposed", scale=False), "add_rms_norm_fusion", feeds(INPUTS),
                 ["AddRmsNorm", "Identity"], rtol=1e-4, atol=1e-5)


def test_add_rms_norm_over_non_trailing_axis():
    check_no_fusion(add_rms("decomposed", axes=(1,)), "add_rms_norm_fusion")
