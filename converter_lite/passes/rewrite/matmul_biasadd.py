"""``matmul_elem_biasadd_fusion``: ``Add(MatMul(A, B), bias)`` with a constant bias -> ``FusedMatMul(A, B, bias)``.

Constraints: the bias is a constant that broadcasts to the product without enlarging it; the product is
floating point and feeds nothing else.
"""
from __future__ import annotations

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Match
from ..simplify.rewriter import Rule
from .base import RewritePass
from .matmul_epilogue import BIASED, check_product, fused_matmul


def rewrite(m: Match, b: GraphBuilder) -> Value:
    return fused_matmul(m, b)


@register_pass
class MatMulBiasAddFusionPass(RewritePass):
    name = "matmul_elem_biasadd_fusion"
    rules = (Rule("matmul_biasadd", BIASED, rewrite, check=check_product),)
