"""MindSpore's arithmetic-simplification rules (graph_kernel/core/arithmetic_simplify.cc), with their ids.

Each rule is ``Rule(id, pattern, rewrite)``; single capital letters are any value, ``c1``/``c2`` constants,
numbers literal constants; ``Add``/``Mul`` match commutatively.  MindSpore op names are spelled the ONNX way:
``RealDiv`` -> ``Div``, ``Select`` -> ``Where``, and ``Rsqrt(x)`` (no ONNX op) is matched as
``Reciprocal(Sqrt(x))`` or ``1 / Sqrt(x)`` and built as ``Reciprocal(Sqrt(x))``.  Rules 61-64 (complex
numbers, Ascend layout transforms) have no ONNX counterpart; the transpose/reshape rules (65, 66) live in
``transform_op_optimizer``.

Differences from MindSpore, for correctness:

* rule 9 is written ``A*C - A*B -> A*(C - B)`` (MindSpore's right-hand side ``A*(B - C)`` flips the sign);
* a rule applies only to floating-point results, except the type-agnostic 23, 24 and 55-57 (``x / c`` ->
  ``x * (1/c)`` would be wrong for integers), and not to the low-precision floats (bfloat16, float8, float4:
  with 2 to 8 significant bits, a reassociation would visibly change the result);
* 59/60 need a one-element constant (a per-element constant does not commute with the reduction);
* rule 101 (``A * 1 -> A``) is ours: it cleans up after 48 when ``A`` is the literal 1.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Value
from ...ops.builder import GraphBuilder
from .pattern import Alt, Const, Lit, Match, MatchResult, Opt, Var, op
from .rewriter import Rule

A, B, C, D = Var("A"), Var("B"), Var("C"), Var("D")
c1, c2 = Const("c1"), Const("c2")
AXES, AXES2 = Opt("axes"), Opt("axes2")


def rsqrt(x):
    """Pattern of MindSpore's Rsqrt in ONNX spelling."""
    return Alt(op.Reciprocal(op.Sqrt(x)), op.Div(1, op.Sqrt(x)))


def rsqrt_t(x):
    """Template of Rsqrt."""
    return op.Reciprocal(op.Sqrt(x))


def is_float(m: Match) -> MatchResult:
    dtype = m.root.outputs[0].type.dtype
    if not dtype.is_float or dtype.is_low_precision:
        return MatchResult.fail("arithmetic rules apply to float16/float32/float64 results only")
    return MatchResult()


def scalar_c1(m: Match) -> MatchResult:
    if not is_float(m):
        return is_float(m)
    if m.const("c1").size != 1:
        return MatchResult.fail("the constant must have one element to commute with the reduction")
    return MatchResult()


def _axes(v: Value | None, rank: int) -> list[int] | None:
    if v is None:
        return None
    return sorted({int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(v.const).reshape(-1)})


def same_reduce(m: Match) -> MatchResult:
    outer, inner = m.node("r"), m.node("q")
    if outer.attrs.get("keepdims", 1) != inner.attrs.get("keepdims", 1):
        return MatchResult.fail("the two reductions differ in keepdims")
    for n in (outer, inner):
        if n.attrs.get("noop_with_empty_axes", 0):
            return MatchResult.fail("noop_with_empty_axes is set")
    for name in ("axes", "axes2"):
        v = m[name]
        if v is not None and (not v.is_const or v.const.size == 0):
            return MatchResult.fail("reduction axes are not a non-empty constant")
    return MatchResult()


def merge_reduce(m: Match, b: GraphBuilder) -> Value:
    """Reduce(Reduce(A, axes), axes2) -> Reduce(A, union of axes), mapping axes2 through keepdims=0."""
    outer, x = m.node("r"), m["A"]
    rank = x.type.rank
    first = _axes(m["axes"], rank)
    first = list(range(rank)) if first is None else first
    keep = outer.attrs.get("keepdims", 1)
    kept = list(range(rank)) if keep else [d for d in range(rank) if d not in first]
    second = _axes(m["axes2"], len(kept))
    second = list(range(len(kept))) if second is None else second
    union = sorted(set(first) | {kept[a] for a in second})
    return b.node(outer.op, x, b.const(np.array(union, dtype=np.int64)), keepdims=keep).outputs[0]


def _reduce_rule(rid: int, op_type: str) -> Rule:
    inner = getattr(op, op_type)(A, AXES, bind="q")
    return Rule(rid, getattr(op, op_type)(inner, AXES2, bind="r"), merge_reduce, check=same_reduce)


R = Rule
RULES: tuple[Rule, ...] = (
    # add
    R(1, A + 0, A, is_float),                                         # x+0 -> x
    R(2, A * C + A * B, A * (B + C), is_float),                       # a·c+a·b -> a·(b+c)
    R(3, (A + c1) + c2, A + (c1 + c2), is_float),                     # (x+c1)+c2 -> x+(c1+c2)
    R(4, A + (-A), Lit(0.0), is_float),                               # x+(−x) -> 0
    R(5, (A + B) + (-A), B, is_float),                                # (x+y)+(−x) -> y
    R(6, (A + B) + ((-A) + C), B + C, is_float),                      # (x+y)+((−x)+z) -> y+z
    # sub
    R(7, A - 0, A, is_float),                                         # x−0 -> x
    R(8, A - c1, A + (-c1), is_float),                                # x−c -> x+(−c)
    R(9, A * C - A * B, A * (C - B), is_float),                       # a·c−a·b -> a·(c−b)
    R(10, A * C - B * C, (A - B) * C, is_float),                      # a·c−b·c -> (a−b)·c
    # log
    R(11, op.Log(op.Exp(A)), A, is_float),                            # log(exp x) -> x
    R(12, op.Log(op.Pow(A, B)), B * op.Log(op.Abs(A)), is_float),     # log(x^y) -> y·log|x|
    R(13, op.Log(op.Sqrt(A)), 0.5 * op.Log(A), is_float),             # log √x -> 0.5·log x
    R(14, op.Log(rsqrt(A)), -0.5 * op.Log(A), is_float),              # log rsqrt x -> −0.5·log x
    # pow
    R(15, op.Pow(A, 1), A, is_float),                                 # x^1 -> x
    R(16, op.Pow(op.Exp(A), B), op.Exp(A * B), is_float),             # (e^a)^b -> e^(a·b)
    R(17, op.Pow(A, 2), A * A, is_float),                             # x^2 -> x·x
    R(18, op.Pow(A, -1), op.Reciprocal(A), is_float),                 # x^−1 -> 1/x
    # sqrt
    R(19, op.Sqrt(A * A), op.Abs(A), is_float),                       # √(x·x) -> |x|
    R(20, rsqrt(op.Pow(A, -2)), op.Abs(A), is_float),                 # rsqrt(x^−2) -> |x|
    R(21, rsqrt(1 / A), op.Sqrt(A), is_float),                        # rsqrt(1/x) -> √x
    R(22, rsqrt(op.Reciprocal(A)), op.Sqrt(A)),                       # rsqrt(Reciprocal x) -> √x
    # select, neg
    R(23, op.Where(C, B, B), B),                                      # select(c,b,b) -> b
    R(24, op.Neg(op.Neg(A)), A),                                      # −(−x) -> x
    # mul
    R(25, (A * c1) * (B * c2), (A * B) * (c1 * c2), is_float),        # (a·c1)·(b·c2) -> (a·b)·(c1·c2)
    R(26, (A * c1) * c2, A * (c1 * c2), is_float),                    # (a·c1)·c2 -> a·(c1·c2)
    R(27, op.Exp(A) * op.Exp(B), op.Exp(A + B), is_float),            # e^a·e^b -> e^(a+b)
    R(28, (op.Exp(A) * C) * op.Exp(B), op.Exp(A + B) * C, is_float),  # (e^a·c)·e^b -> e^(a+b)·c
    R(29, (op.Exp(A) * C) * (op.Exp(B) * D), op.Exp(A + B) * (C * D), is_float),
    R(30, op.Sqrt(A) * op.Sqrt(A), A, is_float),                      # √x·√x -> x
    R(31, (A * op.Sqrt(B)) * (C * op.Sqrt(B)), (A * B) * C, is_float),
    R(32, (A * op.Sqrt(B)) * op.Sqrt(B), A * B, is_float),            # (a·√b)·√b -> a·b
    R(33, op.Sqrt(A) * op.Sqrt(B), op.Sqrt(A * B), is_float),         # √a·√b -> √(a·b)
    R(34, rsqrt(A) * rsqrt(A), op.Reciprocal(A), is_float),           # rsqrt x·rsqrt x -> 1/x
    R(35, (A * rsqrt(B)) * rsqrt(B), A / B, is_float),                # (a·rsqrt b)·rsqrt b -> a/b
    R(36, (A * rsqrt(B)) * (C * rsqrt(B)), (A * C) / B, is_float),
    R(37, rsqrt(A) * rsqrt(B), rsqrt_t(A * B), is_float),             # rsqrt a·rsqrt b -> rsqrt(a·b)
    R(38, A * rsqrt(A), op.Sqrt(A), is_float),                        # x·rsqrt x -> √x
    R(39, op.Abs(A) * op.Abs(B), op.Abs(A * B), is_float),            # |a|·|b| -> |a·b|
    R(40, (op.Abs(A) * C) * op.Abs(B), op.Abs(A * B) * C, is_float),
    R(41, (op.Abs(A) * C) * (op.Abs(B) * D), op.Abs(A * B) * (C * D), is_float),
    R(42, (-A) * c1, A * (-c1), is_float),                            # (−x)·c -> x·(−c)
    # div
    R(43, A / 1, A, is_float),                                        # x/1 -> x
    R(44, op.Exp(A) / op.Exp(B), op.Exp(A - B), is_float),            # e^a/e^b -> e^(a−b)
    R(45, A / op.Exp(B), A * op.Exp(-B), is_float),                   # x/e^b -> x·e^(−b)
    R(46, A / op.Pow(B, c1), A * op.Pow(B, -c1), is_float),           # x/y^c -> x·y^(−c)
    R(47, A / op.Sqrt(A), op.Sqrt(A), is_float),                      # x/√x -> √x
    R(48, A / op.Sqrt(B), A * rsqrt_t(B), is_float),                  # x/√y -> x·rsqrt y
    R(49, A / rsqrt(B), A * op.Sqrt(B), is_float),                    # x/rsqrt y -> x·√y
    R(50, A / c1, A * op.Reciprocal(c1), is_float),                   # x/c -> x·(1/c)
    R(51, (A / B) / (C / D), (A * D) / (B * C), is_float),            # (a/b)/(c/d) -> (a·d)/(b·c)
    R(52, (-A) / c1, A / (-c1), is_float),                            # (−x)/c -> x/(−c)
    R(53, (A / B) / C, A / (B * C), is_float),                        # (a/b)/c -> a/(b·c)
    R(54, A / (B / C), (A * C) / B, is_float),                        # a/(b/c) -> (a·c)/b
    # reduce
    _reduce_rule(55, "ReduceSum"),                                    # Σ(Σ x) -> Σ x over the union
    _reduce_rule(56, "ReduceMin"),
    _reduce_rule(57, "ReduceMax"),
    R(58, op.ReduceSum(-A, AXES, bind="r"), -op.ReduceSum(A, AXES, like="r"), is_float),
    R(59, op.ReduceSum(A / c1, AXES, bind="r"), op.ReduceSum(A, AXES, like="r") / c1, scalar_c1),
    R(60, op.ReduceSum(A * c1, AXES, bind="r"), op.ReduceSum(A, AXES, like="r") * c1, scalar_c1),
    # ours
    R(101, A * 1, A, is_float),                                       # x·1 -> x
)
