"""``matmul_integer_to_float``: ``MatMulInteger -> Cast(float32) -> Mul(scale) [-> Add(bias)]`` becomes one
``MatMulIntegerToFloat`` (onnxruntime's fusion of the same name; the form its ``quantize_dynamic`` writes, and
our DYNAMIC_QUANT), which the native int8 GEMM runs with the scaling and the bias in its epilogue
(kernels/qgemm/): no int32 tensor is written and read back.

The scale is split as the kernel computes it, ``a_scale * b_scale`` per column:

* ``Mul(p, q)`` with ``p`` one element (DynamicQuantizeLinear's scale, or a constant) and ``q`` a constant of
  one element or one per column: ``a_scale = p``, ``b_scale = q`` (the same float32 product the Mul made);
* one element: ``a_scale`` = it, ``b_scale = 1``;
* a constant per column: ``a_scale = 1``, ``b_scale`` = it.

The ``Add`` of a constant bias (one per column, or one) after such a node becomes its ``bias`` input.

A QDQ model's ``MatMul(DequantizeLinear(a uint8, scale, zero point), W)`` becomes ``MatMulIntegerToFloat(a, Wq,
scale, w_scale, zero point)`` too, when the constant float32 ``W`` (the importer folded its DequantizeLinear) is
int8 values times a scale per column bit for bit (passes/rewrite/quantized_conv.py ``int8_weights``): the int8
GEMM then sums what the float MatMul would, in integers.  Exact:
``float(int32) * (a * b) + bias`` is what the chain computes, in the same order.  Other scales (per row, computed
per column) keep the chain.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ir.dtype import DType
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Const, Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass

CHAIN = op.Mul(op.Cast(op.MatMulInteger(Var("a"), Var("b"), Opt("az"), Opt("bz"), bind="mm"), bind="cast"),
               Var("s"), bind="mul")
QDQ = op.MatMul(op.DequantizeLinear(Var("a"), Const("sa"), Opt("az"), bind="dq"), Const("w"), bind="mm")
BIAS = op.Add(op.MatMulIntegerToFloat(Var("a"), Var("b"), Var("sa"), Var("sb"), Opt("az"), Opt("bz"), bind="mm"),
              Const("bias"), bind="add")


def _columns(m: Match) -> int | None:
    shape = m["b"].type.shape if m["b"].type is not None else None
    return None if shape is None or len(shape) != 2 else int(shape[1])


def _one(v: Value | None) -> bool:
    return v is not None and v.type is not None and v.type.shape is not None and \
        all(d == 1 for d in v.type.shape) and len(v.type.shape) <= 1


def _per_column(v: Value, n: int | None) -> bool:
    return v.is_const and v.const.dtype == np.float32 and (v.const.size == 1 and v.const.ndim <= 1 or
                                                           (n is not None and v.const.shape == (n,)))


def _split_scale(m: Match) -> tuple[Value | None, Value | None, str]:
    """(a_scale, b_scale, why not) of the Mul's scale (see the module doc); a None names a constant 1."""
    s, n = m["s"], _columns(m)
    if s.type is None or s.type.dtype is not DType.float32:
        return None, None, "the scale is not float32"
    node = s.producer
    if node is not None and node.op == "Mul" and len(s.uses) == 1:
        p, q = node.inputs
        for x, y in ((p, q), (q, p)):
            if _one(x) and _per_column(y, n):
                return x, y, ""
    if _one(s):
        return s, None, ""
    if _per_column(s, n):
        return None, s, ""
    return None, None, "the scale is neither one element nor a constant per column"


def check(m: Match) -> MatchResult:
    if m.node("cast").attrs.get("to") != int(DType.float32):
        return MatchResult.fail("the Cast is not to float32")
    if _columns(m) is None:
        return MatchResult.fail("B is not a matrix")
    out, acc = m.node("mul").outputs[0].type, m.node("mm").outputs[0].type
    if out is None or acc is None or out.shape != acc.shape:
        return MatchResult.fail("the scale broadcasts the product")
    why = _split_scale(m)[2]
    return MatchResult.fail(why) if why else MatchResult()


def rewrite(m: Match, b: GraphBuilder) -> Value:
    sa, sb, _ = _split_scale(m)
    one = b.const(np.float32(1.0))
    return b.node("MatMulIntegerToFloat", m["a"], m["b"], sa if sa is not None else one,
                  sb if sb is not None else one, m["az"], m["bz"]).outputs[0]


def check_bias(m: Match) -> MatchResult:
    mm = m.node("mm")
    if len(mm.inputs) > 6 and mm.inputs[6] is not None:
        return MatchResult.fail("the product has a bias already")
    if not _per_column(m["bias"], _columns(m)):
        return MatchResult.fail("the bias is not float32, one per column or one")
    out, acc = m.node("add").outputs[0].type, mm.outputs[0].type
    if out is None or acc is None or out.shape != acc.shape:
        return MatchResult.fail("the bias broadcasts the product")
    return MatchResult()


def rewrite_bias(m: Match, b: GraphBuilder) -> Value:
    return b.node("MatMulIntegerToFloat", m["a"], m["b"], m["sa"], m["sb"], m["az"], m["bz"],
                  m["bias"]).outputs[0]


def _column_weights(m: Match):
    """(int8 [K, N], float32 scale per column) of the MatMul's constant float32 weights, when they are int8 values
    times a scale per column bit for bit (a QDQ model's folded DequantizeLinear), else None."""
    from .quantized_conv import int8_weights
    if hasattr(m, "int8"):                             # (found once per match: its check and its rewrite ask)
        return m.int8
    w = m["w"].const
    got = None if w.ndim != 2 or w.dtype != np.float32 else int8_weights(np.ascontiguousarray(w.T))
    m.int8 = None if got is None else (np.ascontiguousarray(got[0].T), got[1])
    return m.int8


def check_qdq(m: Match) -> MatchResult:
    a, sa, az = m["a"], m["sa"].const, m["az"]
    if a.type is None or a.type.dtype is not DType.uint8:
        return MatchResult.fail("the activations are not uint8")
    if sa.size != 1 or sa.dtype != np.float32 or (az is not None and (az.const is None or az.const.size != 1)):
        return MatchResult.fail("not one float32 scale and one constant zero point")
    if "block_size" in m.node("dq").attrs or m.node("dq").outputs[0].type.dtype is not DType.float32:
        return MatchResult.fail("blocked or not float32")
    if _column_weights(m) is None:
        return MatchResult.fail("the weights are not int8 values times a scale per column")
    return MatchResult()


def rewrite_qdq(m: Match, b: GraphBuilder) -> Value:
    wq, ws = _column_weights(m)
    sa = b.const(np.asarray(m["sa"].const, np.float32).reshape(()))
    az = None if m["az"] is None else b.const(np.asarray(m["az"].const).reshape(()))
    return b.node("MatMulIntegerToFloat", m["a"], b.const(wq), sa, b.const(ws), az, None).outputs[0]


@register_pass
class MatMulIntegerToFloatPass(RewritePass):
    name = "matmul_integer_to_float"
    rules = (Rule("matmul_integer_to_float", CHAIN, rewrite, check=check, dynamic_ok=True),
             Rule("qdq_matmul", QDQ, rewrite_qdq, check=check_qdq, exclusive=False, dynamic_ok=True),
             Rule("matmul_integer_bias", BIAS, rewrite_bias, check=check_bias, dynamic_ok=True))
