"""``matmul_elem_gelu_fusion``: ``Gelu`` of a MatMul (with or without its bias) -> ``FusedMatMul(...,
activation="Gelu", approximate=...)``.

    Gelu(MatMul(A, B))                -> FusedMatMul(A, B, activation="Gelu")
    Gelu(Add(MatMul(A, B), bias))     -> FusedMatMul(A, B, bias, activation="Gelu")
    Gelu(FusedMatMul(A, B, bias))     -> FusedMatMul(A, B, bias, activation="Gelu")

Gelu's ``approximate`` ("none" or "tanh") is kept.  Run ``gelu_fusion`` first so spelled-out GELU formulas
are ``Gelu`` nodes.  Constraints: as ``matmul_epilogue``; the product (and bias add) feed nothing else.
"""
from __future__ import annotations

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Match, op
from ..simplify.rewriter import Rule
from .base import RewritePass
from .matmul_epilogue import EPILOGUE_INPUT, check_product, fused_matmul


def rewrite(m: Match, b: GraphBuilder) -> Value:
    return fused_matmul(m, b, "Gelu", approximate=m.node("gelu").attrs.get("approximate", "none"))


@register_pass
class MatMulGeluFusionPass(RewritePass):
    name = "matmul_elem_gelu_fusion"
    rules = (Rule("matmul_gelu", op.Gelu(EPILOGUE_INPUT, bind="gelu"), rewrite, check=check_product),)
