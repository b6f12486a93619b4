"""matmul_elem_gelu_fusion: Gelu(MatMul [+ bias] | FusedMatMul) -> FusedMatMul(activation="Gelu")."""
from __future__ import annotations

import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds
from .matmul_models import INPUTS, check_after_biasadd, mm


@pytest.mark.parametrize("approximate", [None, "tanh"])
def test_gelu(approximate):
    g = check_fusion(mm(True, "Gelu", approximate=approximate), "matmul_elem_gelu_fusion", feeds(INPUTS),
                     ["FusedMatMul"])
    assert g.nodes[0].attrs["approximate"] == (approximate or "none")


def test_after_biasadd_fusion():
    check_after_biasadd("Gelu", "matmul_elem_gelu_fusion")


def test_product_used_elsewhere():
    check_no_fusion(mm(True, "Gelu", extra_use=True), "matmul_elem_gelu_fusion")
