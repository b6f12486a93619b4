"""shape_reshape: Shape/Size chains fold to constants; reshapes to the same shape vanish."""
from __future__ import annotations

import numpy as np

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

INPUTS = {"x": (2, 3, 4)}


def test_shape_chain_folds_and_reshape_disappears():
    # y = Reshape(x, Concat(Shape(x)[0:1], [-1]))  then back to x's shape: both reshapes fold away
    m = model([node("Shape", ["x"], ["s"]),
               node("Gather", ["s", "i0"], ["d0"]),
               node("Concat", ["d0", "m1"], ["shape"], axis=0),
               node("Reshape", ["x", "shape"], ["flat"]),
               node("Shape", ["x"], ["s2"]),
               node("Reshape", ["flat", "s2"], ["back"]),
               node("Relu", ["back"], ["y"])],
              INPUTS, ["y"], {"i0": np.array([0], np.int64), "m1": np.array([-1], np.int64)})
    check_fusion(m, "shape_reshape", feeds(INPUTS), ["Relu"])


def test_size_folds():
    m = model([node("Size", ["x"], ["n"]), node("Cast", ["n"], ["nf"], to=1), node("Div", ["x", "nf"], ["y"])],
              INPUTS, ["y"])
    g = check_fusion(m, "shape_reshape", feeds(INPUTS), ["Div"])
    assert g.nodes[0].inputs[1].const == 24


def test_nothing_shape_related():
    check_no_fusion(model([node("Relu", ["x"], ["y"])], INPUTS, ["y"]), "shape_reshape")
