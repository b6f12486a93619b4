"""``matmul_elem_relu_fusion``: ``Relu`` of a MatMul (with or without its bias) -> ``FusedMatMul(...,
activation="Relu")``.

    Relu(MatMul(A, B))                -> FusedMatMul(A, B, activation="Relu")
    Relu(Add(MatMul(A, B), bias))     -> FusedMatMul(A, B, bias, activation="Relu")
    Relu(FusedMatMul(A, B, bias))     -> FusedMatMul(A, B, bias, activation="Relu")

Constraints: as ``matmul_epilogue``; the product (and bias add) feed nothing else.
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
    return fused_matmul(m, b, "Relu")


@register_pass
class MatMulReluFusionPass(RewritePass):
    name = "matmul_elem_relu_fusion"
    rules = (Rule("matmul_relu", op.Relu(EPILOGUE_INPUT), rewrite, check=check_product),)
