"""matmul_elem_biasadd_fusion: Add(MatMul(x, W), bias) -> FusedMatMul(x, W, bias)."""
from __future__ import annotations

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node
from .matmul_models import INPUTS, W, mm


def test_biasadd():
    g = check_fusion(mm(), "matmul_elem_biasadd_fusion", feeds(INPUTS), ["FusedMatMul"])
    assert g.nodes[0].attrs == {"activation": "", "has_bias": 1}


def test_bias_that_enlarges_the_product():
    check_no_fusion(mm(bias_shape=(4, 2, 3, 5)), "matmul_elem_biasadd_fusion")


def test_product_used_elsewhere():
    check_no_fusion(mm(extra_use=True), "matmul_elem_biasadd_fusion")


def test_non_constant_bias():
    m = model([node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "b"], ["y"])], {"x": (2, 3, 8), "b": (5,)},
              ["y"], {"w": W})
    check_no_fusion(m, "matmul_elem_biasadd_fusion")
