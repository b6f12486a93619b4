"""Shared pieces of the ``matmul_elem_*`` fusions: a MatMul with its elementwise epilogue becomes one
``FusedMatMul(A, B, bias?, activation=..., has_bias=...)`` (reference kernel in ops/fused_ops.py).

Accepted producers of the epilogue's input:

* ``MatMul(A, B)``;
* ``Add(MatMul(A, B), bias)`` with a constant bias that does not enlarge the product;
* ``FusedMatMul(A, B[, bias])`` without an activation yet (made by ``matmul_elem_biasadd_fusion``).
"""
from __future__ import annotations

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from ..simplify.pattern import Alt, Const, Match, MatchResult, Opt, Pattern, Var, op
from .base import is_float

A, B = Var("a"), Var("b")
BIAS = Const("bias")
PRODUCT = op.MatMul(A, B, bind="mm")
BIASED = op.Add(PRODUCT, BIAS, bind="add")
PLAIN_FUSED = op.FusedMatMul(A, B, Opt("fbias"), activation=lambda a: not a, bind="fused")
EPILOGUE_INPUT: Pattern = Alt(PLAIN_FUSED, BIASED, PRODUCT)


def check_product(m: Match) -> MatchResult:
    mm = m.named.get("mm") or m.named.get("fused")
    out = mm.outputs[0]
    if not is_float(out):
        return MatchResult.fail("the product is not floating point")
    if "add" in m.named and m.node("add").outputs[0].type.shape != out.type.shape:
        return MatchResult.fail("the bias enlarges the product")
    return MatchResult()


def fused_matmul(m: Match, b: GraphBuilder, activation: str = "", **act_attrs) -> Value:
    bias = m.values.get("bias") or m.values.get("fbias")
    ins = [m["a"], m["b"]] + ([bias] if bias is not None else [])
    attrs = {"activation": activation, "has_bias": int(bias is not None), **act_attrs}
    return b.node("FusedMatMul", *ins, **attrs).outputs[0]
