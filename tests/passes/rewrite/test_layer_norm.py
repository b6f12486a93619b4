"""layer_norm_fusion: the decomposed LayerNorm (PyTorch-export form and variants) -> LayerNormalization."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

INPUTS = {"x": (2, 5, 8)}
RNG = np.random.default_rng(3)
GAMMA = RNG.uniform(0.5, 1.5, 8).astype(np.float32)
BETA = RNG.normal(size=8).astype(np.float32)


def decomposed(square="pow", divide=True, affine=(True, True), axes=(-1,), axes2=None, extra_use=False):
    inits = {"axes": np.array(axes, np.int64), "axes2": np.array(axes2 or axes, np.int64),
             "two": np.float32(2), "eps": np.float32(1e-5), "gamma": GAMMA, "beta": BETA}
    nodes = [node("ReduceMean", ["x", "axes"], ["mean"]), node("Sub", ["x", "mean"], ["d"]),
             node("Pow", ["d", "two"], ["sq"]) if square == "pow" else node("Mul", ["d", "d"], ["sq"]),
             node("ReduceMean", ["sq", "axes2"], ["var"]), node("Add", ["var", "eps"], ["ve"]),
             node("Sqrt", ["ve"], ["std"])]
    if divide:
        nodes.append(node("Div", ["d", "std"], ["n"]))
    else:
        nodes += [node("Reciprocal", ["std"], ["inv"]), node("Mul", ["d", "inv"], ["n"])]
    out = "n"
    if affine[0]:
        nodes.append(node("Mul", ["gamma", out], ["g"]))
        out = "g"
    if affine[1]:
        nodes.append(node("Add", [out, "beta"], ["y"]))
        out = "y"
    outs = [out] + (["d"] if extra_use else [])
    return model(nodes, INPUTS, outs, inits)


@pytest.mark.parametrize("square,divide,affine", [
    ("pow", True, (True, True)), ("mul", False, (True, True)), ("pow", True, (True, False)),
    ("mul", True, (False, False)),
])
def test_fuses(square, divide, affine):
    g = check_fusion(decomposed(square, divide, affine), "layer_norm_fusion", feeds(INPUTS),
                     ["LayerNormalization"], rtol=1e-4, atol=1e-5)
    ln = g.nodes[0]
    assert ln.attrs["axis"] == 2 and ln.attrs["epsilon"] == pytest.approx(1e-5)
    assert len(ln.inputs) == (3 if affine[1] else 2)


def test_two_trailing_axes():
    g = check_fusion(decomposed(axes=(1, 2), affine=(False, False)), "layer_norm_fusion", feeds(INPUTS),
                     ["LayerNormalization"], rtol=1e-4, atol=1e-5)
    assert g.nodes[0].attrs["axis"] == 1


@pytest.mark.parametrize("kw", [{"axes": (1,)}, {"axes2": (1,)}, {"extra_use": True}])
def test_not_fused(kw):
    check_no_fusion(decomposed(**kw), "layer_norm_fusion")
