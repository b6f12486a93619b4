"""``transpose_matmul_fusion``: a transpose feeding a matrix product is absorbed.

Cases:

1. ``MatMul(x, Transpose(W))`` / ``Gemm(x, Transpose(W))`` with a constant ``W`` -> the product with the
   pre-transposed constant (the Transpose is evaluated now; only when it feeds nothing else).
2. ``Gemm(Transpose(A), B)`` / ``Gemm(A, Transpose(B))`` with 2-D transposes -> ``Gemm`` with ``transA`` /
   ``transB`` flipped (no data is moved at all).
3. ``MatMul(A, Transpose(B))`` with 2-D ``A`` and ``B`` -> ``Gemm(A, B, transB=1)``.

Any other Transpose of a constant is plain constant folding (``constant_folding``).
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Const, Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from ..simplify.transform_op import perm_of
from .base import RewritePass

X, Y = Var("x"), Var("y")
C, W = Opt("c"), Const("w")


def fold_weight(m: Match, b: GraphBuilder) -> Value:
    node = m.root
    w = np.ascontiguousarray(np.transpose(m.const("w"), perm_of(m.node("t"))))
    ins = list(node.inputs)
    ins[1] = b.const(w)
    return b.node(node.op, *ins, **node.attrs).outputs[0]


def is_2d_swap(m: Match) -> MatchResult:
    t = m.node("t")
    if t.inputs[0].type.rank != 2 or perm_of(t) != (1, 0):
        return MatchResult.fail("not a 2-D transpose")
    return MatchResult()


def flip_gemm(index: int):
    def rewrite(m: Match, b: GraphBuilder) -> Value:
        node = m.root
        key = "transA" if index == 0 else "transB"
        ins = list(node.inputs)
        ins[index] = m.node("t").inputs[0]
        attrs = dict(node.attrs)
        attrs[key] = 1 - attrs.get(key, 0)
        return b.node("Gemm", *ins, **attrs).outputs[0]
    return rewrite


def matmul_both_2d(m: Match) -> MatchResult:
    if m["x"].type.rank != 2:
        return MatchResult.fail("the left operand is not 2-D")
    return is_2d_swap(m)


def matmul_to_gemm(m: Match, b: GraphBuilder) -> Value:
    return b.node("Gemm", m["x"], m.node("t").inputs[0], transB=1).outputs[0]


@register_pass
class TransposeMatMulFusionPass(RewritePass):
    name = "transpose_matmul_fusion"
    rules = (
        Rule("matmul_const_weight", op.MatMul(X, op.Transpose(W, bind="t")), fold_weight),
        Rule("gemm_const_weight", op.Gemm(X, op.Transpose(W, bind="t"), C), fold_weight),
        Rule("gemm_trans_a", op.Gemm(op.Transpose(X, bind="t"), Y, C), flip_gemm(0), check=is_2d_swap),
        Rule("gemm_trans_b", op.Gemm(X, op.Transpose(Y, bind="t"), C), flip_gemm(1), check=is_2d_swap),
        Rule("matmul_to_gemm", op.MatMul(X, op.Transpose(Y, bind="t")), matmul_to_gemm,
             check=matmul_both_2d),
    )
