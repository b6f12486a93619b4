"""matmul_elem_relu_fusion: Relu(MatMul [+ bias] | FusedMatMul) -> FusedMatMul(activation="Relu")."""
from __future__ import annotations

import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds
from .matmul_models import INPUTS, check_after_biasadd, mm


@pytest.mark.parametrize("bias", [True, False])
def test_relu(bias):
    g = check_fusion(mm(bias, "Relu"), "matmul_elem_relu_fusion", feeds(INPUTS), ["FusedMatMul"])
    assert g.nodes[0].attrs["activation"] == "Relu" and g.nodes[0].attrs["has_bias"] == int(bias)


def test_after_biasadd_fusion():
    check_after_biasadd("Relu", "matmul_elem_relu_fusion")


def test_product_used_elsewhere():
    check_no_fusion(mm(True, "Relu", extra_use=True), "matmul_elem_relu_fusion")


def test_other_activation():
    check_no_fusion(mm(True, "Sigmoid"), "matmul_elem_relu_fusion")
