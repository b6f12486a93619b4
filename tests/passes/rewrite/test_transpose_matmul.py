"""transpose_matmul_fusion: cases 1-3 of the module docstring."""
from __future__ import annotations

import numpy as np

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

W = np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32)


def test_matmul_with_transposed_constant_weight():
    m = model([node("Transpose", ["w"], ["wt"], perm=[1, 0]), node("MatMul", ["x", "wt"], ["y"])],
              {"x": (2, 3, 4)}, ["y"], {"w": W})
    g = check_fusion(m, "transpose_matmul_fusion", feeds({"x": (2, 3, 4)}), ["MatMul"])
    np.testing.assert_array_equal(g.nodes[0].inputs[1].const, W.T)


def test_gemm_with_transposed_constant_weight():
    m = model([node("Transpose", ["w"], ["wt"]), node("Gemm", ["x", "wt", "c"], ["y"], alpha=0.5)],
              {"x": (3, 4)}, ["y"], {"w": W, "c": np.ones(5, np.float32)})
    check_fusion(m, "transpose_matmul_fusion", feeds({"x": (3, 4)}), ["Gemm"])


def test_gemm_flips_trans_flags():
    inputs = {"a": (4, 3), "b": (5, 4)}
    m = model([node("Transpose", ["a"], ["at"]), node("Transpose", ["b"], ["bt"]),
               node("Gemm", ["at", "bt"], ["y"], transB=0)], inputs, ["y"])
    g = check_fusion(m, "transpose_matmul_fusion", feeds(inputs), ["Gemm"])
    assert g.nodes[0].attrs["transA"] == 1 and g.nodes[0].attrs["transB"] == 1


def test_matmul_with_2d_transpose_becomes_gemm():
    inputs = {"a": (3, 4), "b": (5, 4)}
    m = model([node("Transpose", ["b"], ["bt"]), node("MatMul", ["a", "bt"], ["y"])], inputs, ["y"])
    g = check_fusion(m, "transpose_matmul_fusion", feeds(inputs), ["Gemm"])
    assert g.nodes[0].attrs["transB"] == 1


def test_batched_transpose_of_activation_is_kept():
    inputs = {"a": (2, 3, 4), "b": (2, 5, 4)}
    m = model([node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]), node("MatMul", ["a", "bt"], ["y"])],
              inputs, ["y"])
    check_no_fusion(m, "transpose_matmul_fusion")


def test_shared_transposed_weight_is_kept():
    m = model([node("Transpose", ["w"], ["wt"]), node("MatMul", ["x", "wt"], ["y"]),
               node("Relu", ["wt"], ["r"])], {"x": (3, 4)}, ["y", "r"], {"w": W})
    check_no_fusion(m, "transpose_matmul_fusion")
