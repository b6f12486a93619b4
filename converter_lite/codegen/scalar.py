"""SCALAR_EMITTERS: op type -> emitter of one output element from its input elements.

An emitter is ``fn(sc: ScalarCall, *args) -> ir.Value``: ``args`` are the input scalars in their compute types
(types.compute_type), already broadcast; the result has the compute type of ``sc.out_dtype``.  float16 math runs
in float32 (the lowering rounds after each op).  Semantics follow the reference kernels (ONNX, numpy): NaN
propagates through Max/Min/Clip/Relu, comparisons with NaN are false, integer division truncates and division
by zero gives 0 instead of trapping, float -> int casts of NaN/out-of-range values give the x86 "integer
indefinite" value as numpy does.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from ..ir.core import Node
from ..ir.dtype import DType
from ..tables import registrar
from .cast import cast_scalar, float_to_int
from .mathfn import MathEmitter
from .types import F32, F64, I1, is_unsigned


@dataclass
class ScalarCall:
    """What an emitter may use: the builder, the math library, the node, and its dtypes."""
    b: ir.IRBuilder
    math: MathEmitter
    node: Node
    in_dtypes: list[DType]
    out_dtype: DType
    # compile-time value of each input that is a scalar constant (else None): lets Pow(x, 2) become x*x
    const_args: list[Any] = field(default_factory=list)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.node.attrs.get(key, default)

    @property
    def dtype(self) -> DType:
        return self.in_dtypes[0]

    @property
    def is_float(self) -> bool:
        return self.in_dtypes[0].is_float

    def fconst(self, v: float, like: ir.Value) -> ir.Constant:
        return ir.Constant(like.type, v)

    def zero(self, like: ir.Value) -> ir.Constant:
        return ir.Constant(like.type, 0.0 if isinstance(like.type, (ir.FloatType, ir.DoubleType)) else 0)


Emitter = Callable[..., ir.Value]
SCALAR_EMITTERS: dict[str, Emitter] = {}


emitter = registrar(SCALAR_EMITTERS, "scalar emitter of")


class NoEmitterError(NotImplementedError):
    """The op exists in the table but not for this dtype/attribute combination."""


def _float_only(sc: ScalarCall) -> None:
    if not sc.is_float:
        raise NoEmitterError(f"{sc.node.op} on {sc.dtype.name}")


# -- arithmetic ------------------------------------------------------------------------------------------------
@emitter("Add")
def _add(sc, x, y):
    return sc.b.fadd(x, y) if sc.is_float else sc.b.add(x, y)


@emitter("Sub")
def _sub(sc, x, y):
    return sc.b.fsub(x, y) if sc.is_float else sc.b.sub(x, y)


@emitter("Mul")
def _mul(sc, x, y):
    if sc.dtype is DType.bool:
        return sc.b.and_(x, y)
    return sc.b.fmul(x, y) if sc.is_float else sc.b.mul(x, y)


def _safe_int_div(sc: ScalarCall, x, y, rem: bool):
    """x / y (or x % y, C semantics) without trapping: y == 0 -> 0, INT_MIN / -1 -> INT_MIN."""
    b = sc.b
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    bad = b.icmp_signed("==", y, zero)
    if not is_unsigned(sc.dtype):
        bad = b.or_(bad, b.icmp_signed("==", y, ir.Constant(x.type, -1)))
    ys = b.select(bad, one, y)
    if is_unsigned(sc.dtype):
        q = b.urem(x, ys) if rem else b.udiv(x, ys)
        return b.select(bad, zero, q)
    q = b.srem(x, ys) if rem else b.sdiv(x, ys)
    minus_one = b.icmp_signed("==", y, ir.Constant(x.type, -1))
    special = zero if rem else b.sub(zero, x)                       # x / -1 == -x (wraps for INT_MIN)
    return b.select(bad, b.select(minus_one, special, zero), q)


@emitter("Div")
def _div(sc, x, y):
    return sc.b.fdiv(x, y) if sc.is_float else _safe_int_div(sc, x, y, rem=False)


@emitter("Mod")
def _mod(sc, x, y):
    b = sc.b
    if sc.is_float:
        r = b.frem(x, y)
        if sc.attr("fmod", 0):
            return r
        fix = b.and_(b.fcmp_ordered("!=", r, sc.zero(r)),
                     b.xor(b.fcmp_ordered("<", r, sc.zero(r)), b.fcmp_ordered("<", y, sc.zero(y))))
        return b.select(fix, b.fadd(r, y), r)
    r = _safe_int_div(sc, x, y, rem=True)
    if sc.attr("fmod", 0) or is_unsigned(sc.dtype):
        return r
    zero = ir.Constant(r.type, 0)
    fix = b.and_(b.icmp_signed("!=", r, zero),
                 b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", y, zero)))
    return b.select(fix, b.add(r, y), r)


def _pow_int(sc: ScalarCall, x, e):
    """Integer x**e by square-and-multiply over the bits of e (wrapping); negative e as the reference does:
    float64 pow truncated back."""
    b = sc.b
    ty = x.type
    acc, base = ir.Constant(ty, 1), x
    ee = e if e.type == ty else (b.sext(e, ty) if e.type.width < ty.width else b.trunc(e, ty))
    for bit in range(ty.width - 1):
        take = b.trunc(b.lshr(ee, ir.Constant(ty, bit)), I1)
        acc = b.select(take, b.mul(acc, base), acc)
        base = b.mul(base, base)
    neg = b.icmp_signed("<", ee, ir.Constant(ty, 0))
    xf = b.uitofp(x, F64) if is_unsigned(sc.in_dtypes[0]) else b.sitofp(x, F64)
    ef = b.uitofp(e, F64) if is_unsigned(sc.in_dtypes[1]) else b.sitofp(e, F64)
    as_float = float_to_int(sc, sc.math.pow(xf, ef), sc.in_dtypes[0])       # negative powers: via float64
    return b.select(neg, as_float, acc)


@emitter("Pow")
def _pow(sc, x, y):
    b = sc.b
    xd, yd = sc.in_dtypes
    if not xd.is_float:
        if yd.is_float:                                            # int ** float: computed in double
            xf = b.uitofp(x, F64) if is_unsigned(xd) else b.sitofp(x, F64)
            yf = b.fpext(y, F64) if y.type == F32 else y
            return float_to_int(sc, sc.math.pow(xf, yf), xd)
        return _pow_int(sc, x, y)
    if not yd.is_float:
        y = b.uitofp(y, x.type) if is_unsigned(yd) else b.sitofp(y, x.type)
    elif y.type != x.type:
        y = b.fptrunc(y, x.type) if y.type == F64 and x.type == F32 else b.fpext(y, x.type)
    k = sc.const_args[1] if len(sc.const_args) > 1 else None
    if k is not None:
        k = float(k)
        one = sc.fconst(1.0, x)
        if k == 1.0:
            return x
        if k == 2.0:
            return b.fmul(x, x)
        if k == 3.0:
            return b.fmul(b.fmul(x, x), x)
        if k == -1.0:
            return b.fdiv(one, x)
        if k == 0.5:                                          # numpy's scalar fast path: sqrt(-inf) = NaN
            return sc.math.call1("llvm.sqrt", x)
    return sc.math.pow(x, y)


@emitter("Neg")
def _neg(sc, x):
    return sc.b.fneg(x) if sc.is_float else sc.b.sub(sc.zero(x), x)


@emitter("Abs")
def _abs(sc, x):
    if sc.is_float:
        return sc.math.call1("llvm.fabs", x)
    if is_unsigned(sc.dtype):
        return x
    return sc.b.select(sc.b.icmp_signed("<", x, sc.zero(x)), sc.b.sub(sc.zero(x), x), x)


@emitter("Sign")
def _sign(sc, x):
    b = sc.b
    if sc.is_float:
        one = sc.fconst(1.0, x)
        return b.select(b.fcmp_ordered(">", x, sc.zero(x)), one,
                        b.select(b.fcmp_ordered("<", x, sc.zero(x)), b.fneg(one), x))
    one = ir.Constant(x.type, 1)
    pos = b.select(b.icmp_unsigned("!=", x, sc.zero(x)), one, sc.zero(x))
    if is_unsigned(sc.dtype):
        return pos
    return b.select(b.icmp_signed("<", x, sc.zero(x)), ir.Constant(x.type, -1), pos)


def _unary_intrinsic(name: str):
    def fn(sc, x):
        if not sc.is_float:
            return x                                               # Floor/Ceil/Round of an integer
        return sc.math.call1(name, x)
    return fn


SCALAR_EMITTERS["Floor"] = _unary_intrinsic("llvm.floor")
SCALAR_EMITTERS["Ceil"] = _unary_intrinsic("llvm.ceil")
SCALAR_EMITTERS["Round"] = _unary_intrinsic("llvm.roundeven")


@emitter("Sqrt")
def _sqrt(sc, x):
    _float_only(sc)
    return sc.math.call1("llvm.sqrt", x)


@emitter("Reciprocal")
def _reciprocal(sc, x):
    _float_only(sc)
    return sc.b.fdiv(sc.fconst(1.0, x), x)


def _math_unary(method: str):
    def fn(sc, x):
        _float_only(sc)
        return getattr(sc.math, method)(x)
    return fn


for _op, _m in (("Exp", "exp"), ("Log", "log"), ("Tanh", "tanh"), ("Sigmoid", "sigmoid"), ("Erf", "erf"),
               ("Atan", "atan"), ("Asin", "asin"), ("Acos", "acos"), ("Asinh", "asinh"), ("Acosh", "acosh"),
               ("Atanh", "atanh")):
    SCALAR_EMITTERS[_op] = _math_unary(_m)


@emitter("Sin")
def _sin(sc, x):
    _float_only(sc)
    return sc.math.sincos(x, want_cos=False)


@emitter("Cos")
def _cos(sc, x):
    _float_only(sc)
    return sc.math.sincos(x, want_cos=True)


@emitter("Tan")
def _tan(sc, x):
    _float_only(sc)
    return sc.b.fdiv(sc.math.sincos(x, False), sc.math.sincos(x, True))


@emitter("Sinh", "Cosh")
def _sinh_cosh(sc, x):
    _float_only(sc)
    b, half = sc.b, sc.fconst(0.5, x)
    e, ei = sc.math.exp(x), sc.math.exp(b.fneg(x))
    return b.fmul(half, b.fsub(e, ei) if sc.node.op == "Sinh" else b.fadd(e, ei))


def _softplus(sc, x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) (no overflow, exact for very negative x)."""
    b, m = sc.b, sc.math
    t = m.log1p(m.exp(b.fneg(m.call1("llvm.fabs", x))))
    pos = b.select(b.fcmp_ordered(">", x, sc.zero(x)), x, sc.zero(x))
    return b.select(m.isnan(x), x, b.fadd(pos, t))


@emitter("Softplus")
def _softplus_op(sc, x):
    _float_only(sc)
    return _softplus(sc, x)


@emitter("Softsign")
def _softsign(sc, x):
    _float_only(sc)
    one = sc.fconst(1.0, x)
    return sc.b.fdiv(x, sc.b.fadd(one, sc.math.call1("llvm.fabs", x)))


@emitter("Mish")
def _mish(sc, x):
    _float_only(sc)
    return sc.b.fmul(x, sc.math.tanh(_softplus(sc, x)))


@emitter("Gelu")
def _gelu(sc, x):
    _float_only(sc)
    b, m = sc.b, sc.math
    one = sc.fconst(1.0, x)
    if sc.attr("approximate", "none") == "tanh":   # x / (1 + exp(-2u)): see passes/expand/gelu.py
        minus_2u = b.fmul(sc.fconst(-2.0 * math.sqrt(2.0 / math.pi), x),
                          b.fadd(x, b.fmul(sc.fconst(0.044715, x), b.fmul(x, b.fmul(x, x)))))
        return b.fdiv(x, b.fadd(m.exp(minus_2u), one))
    t = m.erf(b.fmul(x, sc.fconst(1.0 / math.sqrt(2.0), x)))
    return b.fmul(b.fmul(sc.fconst(0.5, x), x), b.fadd(one, t))


# -- activations -----------------------------------------------------------------------------------------------
def _lt0(sc, x):
    if sc.is_float:
        return sc.b.fcmp_ordered("<", x, sc.zero(x))
    return sc.b.icmp_signed("<", x, sc.zero(x)) if not is_unsigned(sc.dtype) else ir.Constant(I1, 0)


@emitter("Relu")
def _relu(sc, x):
    return sc.b.select(_lt0(sc, x), sc.zero(x), x)


@emitter("Swish")
def _swish(sc, x):
    _float_only(sc)
    return sc.b.fmul(x, sc.math.sigmoid(sc.b.fmul(x, sc.fconst(sc.attr("alpha", 1.0), x))))


@emitter("LeakyRelu")
def _leaky_relu(sc, x):
    _float_only(sc)
    return sc.b.select(_lt0(sc, x), sc.b.fmul(x, sc.fconst(sc.attr("alpha", 0.01), x)), x)


@emitter("PRelu")
def _prelu(sc, x, slope):
    mul = sc.b.fmul(x, slope) if sc.is_float else sc.b.mul(x, slope)
    return sc.b.select(_lt0(sc, x), mul, x)


@emitter("ThresholdedRelu")
def _thresholded_relu(sc, x):
    _float_only(sc)
    return sc.b.select(sc.b.fcmp_ordered(">", x, sc.fconst(sc.attr("alpha", 1.0), x)), x, sc.zero(x))


def _expm1_scaled(sc, x, alpha: float):
    return sc.b.fmul(sc.fconst(alpha, x), sc.math.expm1(x))


@emitter("Elu")
def _elu(sc, x):
    _float_only(sc)
    return sc.b.select(_lt0(sc, x), _expm1_scaled(sc, x, sc.attr("alpha", 1.0)), x)


@emitter("Selu")
def _selu(sc, x):
    _float_only(sc)
    alpha = sc.attr("alpha", 1.67326319217681884765625)
    gamma = sc.fconst(sc.attr("gamma", 1.05070102214813232421875), x)
    b = sc.b
    return b.fmul(gamma, b.select(b.fcmp_ordered("<=", x, sc.zero(x)), _expm1_scaled(sc, x, alpha), x))


@emitter("Celu")
def _celu(sc, x):
    _float_only(sc)
    alpha = sc.attr("alpha", 1.0)
    b = sc.b
    neg = b.fmul(sc.fconst(alpha, x), sc.math.expm1(b.fdiv(x, sc.fconst(alpha, x))))
    pos = b.select(b.fcmp_ordered(">", x, sc.zero(x)), x, sc.zero(x))
    negp = b.select(b.fcmp_ordered("<", neg, sc.zero(x)), neg, sc.zero(x))
    return b.select(sc.math.isnan(x), x, b.fadd(pos, negp))


def _clamp01(sc, v):
    b = sc.b
    v = b.select(b.fcmp_ordered("<", v, sc.zero(v)), sc.zero(v), v)
    return b.select(b.fcmp_ordered(">", v, sc.fconst(1.0, v)), sc.fconst(1.0, v), v)


@emitter("HardSigmoid")
def _hard_sigmoid(sc, x):
    _float_only(sc)
    b = sc.b
    v = b.fadd(b.fmul(x, sc.fconst(sc.attr("alpha", 0.2), x)), sc.fconst(sc.attr("beta", 0.5), x))
    return _clamp01(sc, v)


@emitter("HardSwish")
def _hard_swish(sc, x):
    _float_only(sc)
    b = sc.b
    v = b.fadd(b.fmul(x, sc.fconst(1.0 / 6.0, x)), sc.fconst(0.5, x))
    return b.fmul(x, _clamp01(sc, v))


@emitter("Shrink")
def _shrink(sc, x):
    b = sc.b
    lambd, bias = sc.attr("lambd", 0.5), sc.attr("bias", 0.0)
    if not sc.is_float:
        raise NoEmitterError(f"Shrink on {sc.dtype.name}")
    lo = b.fcmp_ordered("<", x, sc.fconst(-lambd, x))
    hi = b.fcmp_ordered(">", x, sc.fconst(lambd, x))
    return b.select(lo, b.fadd(x, sc.fconst(bias, x)), b.select(hi, b.fsub(x, sc.fconst(bias, x)), sc.zero(x)))


# -- min / max / clip ------------------------------------------------------------------------------------------
def _max2(sc, x, y, is_max: bool):
    if sc.is_float:
        return sc.math.call2("llvm.maximum" if is_max else "llvm.minimum", x, y)
    if sc.dtype is DType.bool:
        return sc.b.or_(x, y) if is_max else sc.b.and_(x, y)
    op = (">" if is_max else "<")
    cmp = sc.b.icmp_unsigned(op, x, y) if is_unsigned(sc.dtype) else sc.b.icmp_signed(op, x, y)
    return sc.b.select(cmp, x, y)


@emitter("Max", "Min")
def _max(sc, *xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = _max2(sc, acc, x, sc.node.op == "Max")
    return acc


@emitter("Sum")
def _sum(sc, *xs):
    acc = xs[0]
    for x in xs[1:]:
        acc = _add(sc, acc, x)
    return acc


@emitter("Mean")
def _mean(sc, *xs):
    _float_only(sc)
    return sc.b.fdiv(_sum(sc, *xs), sc.fconst(float(len(xs)), xs[0]))


@emitter("Clip")
def _clip(sc, x, lo=None, hi=None):
    """min(max(x, lo), hi) with NaN in x kept (numpy.clip); omitted bounds are None."""
    b = sc.b
    for bound, op in ((lo, "<"), (hi, ">")):
        if bound is None:
            continue
        if sc.is_float:
            x = b.select(b.fcmp_ordered(op, x, bound), bound, x)
        elif is_unsigned(sc.dtype):
            x = b.select(b.icmp_unsigned(op, x, bound), bound, x)
        else:
            x = b.select(b.icmp_signed(op, x, bound), bound, x)
    return x


# -- comparisons and logic -------------------------------------------------------------------------------------
def _compare(op: str):
    def fn(sc, x, y):
        if sc.is_float:
            return sc.b.fcmp_ordered(op, x, y)
        if is_unsigned(sc.dtype) or sc.dtype is DType.bool:
            return sc.b.icmp_unsigned(op, x, y)
        return sc.b.icmp_signed(op, x, y)
    return fn


for _op, _c in (("Equal", "=="), ("Less", "<"), ("Greater", ">"), ("LessOrEqual", "<="), ("GreaterOrEqual", ">=")):
    SCALAR_EMITTERS[_op] = _compare(_c)


@emitter("And", "BitwiseAnd")
def _and(sc, x, y):
    return sc.b.and_(x, y)


@emitter("Or", "BitwiseOr")
def _or(sc, x, y):
    return sc.b.or_(x, y)


@emitter("Xor", "BitwiseXor")
def _xor(sc, x, y):
    return sc.b.xor(x, y)


@emitter("BitShift")
def _bit_shift(sc, x, y):
    """Shifts by the type width or more give 0 (LLVM would give poison)."""
    b = sc.b
    if sc.is_float:
        raise NoEmitterError("BitShift on floats")
    big = b.icmp_unsigned(">=", y, ir.Constant(y.type, y.type.width))
    left = sc.attr("direction") == "LEFT"
    shifted = b.shl(x, y) if left else (b.lshr(x, y) if is_unsigned(sc.dtype) else b.ashr(x, y))
    return b.select(big, ir.Constant(x.type, 0), shifted)


@emitter("Not", "BitwiseNot")
def _not(sc, x):
    return sc.b.not_(x)


@emitter("Where")
def _where(sc, c, x, y):
    return sc.b.select(c, x, y)


@emitter("IsNaN")
def _isnan(sc, x):
    return sc.math.isnan(x) if sc.is_float else ir.Constant(I1, 0)


@emitter("IsInf")
def _isinf(sc, x):
    if not sc.is_float:
        return ir.Constant(I1, 0)
    b = sc.b
    pos = b.fcmp_ordered("==", x, sc.fconst(math.inf, x))
    neg = b.fcmp_ordered("==", x, sc.fconst(-math.inf, x))
    want_pos, want_neg = sc.attr("detect_positive", 1), sc.attr("detect_negative", 1)
    if want_pos and want_neg:
        return b.or_(pos, neg)
    if want_pos:
        return pos
    if want_neg:
        return neg
    return ir.Constant(I1, 0)


@emitter("Identity")
def _identity(sc, x):
    return x


@emitter("Cast")
def _cast(sc, x):
    return cast_scalar(sc, x, sc.in_dtypes[0], sc.out_dtype)


@emitter("CastLike")
def _cast_like(sc, x, _like):
    return cast_scalar(sc, x, sc.in_dtypes[0], sc.out_dtype)
