"""split_concat_fusion: Concat of all Split parts, in order, on the same axis -> the Split input."""
from __future__ import annotations

import numpy as np

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

INPUTS = {"x": (2, 6)}


def split_concat(order=(0, 1, 2), split_axis=1, concat_axis=-1):
    parts = ["p0", "p1", "p2"]
    return model([node("Split", ["x"], parts, axis=split_axis, num_outputs=3),
                  node("Concat", [parts[i] for i in order], ["c"], axis=concat_axis),
                  node("Relu", ["c"], ["y"])], INPUTS, ["y"])


def test_fuses():
    check_fusion(split_concat(), "split_concat_fusion", feeds(INPUTS), ["Relu"])


def test_with_split_sizes_input():
    m = model([node("Split", ["x", "sizes"], ["p0", "p1"], axis=1), node("Concat", ["p0", "p1"], ["c"], axis=1),
               node("Relu", ["c"], ["y"])], INPUTS, ["y"], {"sizes": np.array([2, 4], np.int64)})
    check_fusion(m, "split_concat_fusion", feeds(INPUTS), ["Relu"])


def test_wrong_order():
    check_no_fusion(split_concat(order=(1, 0, 2)), "split_concat_fusion")


def test_different_axis():
    m = model([node("Split", ["x"], ["p0", "p1"], axis=0, num_outputs=2), node("Concat", ["p0", "p1"], ["c"], axis=1),
               node("Relu", ["c"], ["y"])], INPUTS, ["y"])
    check_no_fusion(m, "split_concat_fusion")
