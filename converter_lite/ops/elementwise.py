"""Elementwise reference kernels: unary math and activations (ELEMWISE), broadcasting arithmetic, comparison
and logic (BROADCAST), casts.

Dtype rules are ONNX's and are never widened: the result has the first input's dtype (Pow: the base's),
except comparisons, logic ops and IsNaN/IsInf (bool) and Cast/CastLike (the target type).

Numerics follow onnxruntime's CPU kernels where ONNX leaves a choice:

* float16 math is computed in float32 and rounded once, and so is that of the low-precision float types
  (bfloat16, float8, float4e2m1: ml_dtypes arrays); float32 and float64 are computed in their own type.
* Integer Div truncates toward zero (C), Mod with ``fmod=0`` takes the divisor's sign (Python), ``fmod=1``
  the dividend's (C ``fmod``).  Integer division by zero gives 0 here (undefined in ONNX and ORT).
* Pow of an integer base: exact integer power for non-negative integer exponents, otherwise computed in
  float64 and truncated (ORT uses ``std::pow`` and ``static_cast``).
* Float -> integer casts truncate toward zero; types narrower than 32 bits go through int32 so that
  out-of-range values wrap as in C on x86 (-3.7 -> uint8 253).  NaN -> bool is True.  A low-precision source
  is first widened exactly (floats to float32, int4/uint4 to int8/uint8), so the same rules apply to it.
* Casts to the low-precision types round to nearest even (ml_dtypes, as onnx's reference does).  Cast's
  ``saturate`` (default 1) concerns the float8 targets (``FLOAT8_MAX``): with it, values beyond the largest
  finite value, infinities included, become +-that value; without it they overflow as the type defines (inf for
  float8e5m2, NaN for the others, which have no inf).  NaN stays NaN; float4e2m1 always saturates (no inf/NaN:
  NaN becomes -0, as in ml_dtypes); float -> int4/uint4 truncates and wraps like the other narrow integers.
* Max/Min (variadic) and Clip propagate NaN; Sign(NaN) = NaN; Round is half-to-even.
* Dropout is inference-only: output = input, mask all True, even when ``training_mode`` is true (a random
  mask would make the reference non-deterministic).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from . import erf_math
from .registry import (
    KernelError,
    OpKind,
    broadcast_shapes,
    infer_broadcast,
    infer_broadcast_bool,
    infer_same,
    reference,
)

Array = np.ndarray


# -- dtype helpers (also used by reduce.py) ----------------------------------------------------------------
# the float types whose math runs in float32: float16 and the low-precision floats
WIDENED_FLOATS = frozenset([np.dtype(np.float16)] + [d.np for d in DType if d.is_low_precision and d.is_float])
# exact widening of a low-precision source before a cast
_WIDEN = {d.np: np.dtype(np.float32) for d in DType if d.is_low_precision and d.is_float} | {
    DType.int4.np: np.dtype(np.int8), DType.uint4.np: np.dtype(np.uint8)}
# largest finite value of each float8 type: the bound of a saturating Cast (see the module docstring)
FLOAT8_MAX = {d.np: float(ml_dtypes.finfo(d.np).max)
              for d in (DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz)}


def is_float_dtype(dtype: np.dtype) -> bool:
    """A float type: numpy's (kind "f") or a low-precision one (ml_dtypes: bfloat16, float4 and most float8 types
    have numpy kind "V")."""
    return dtype.kind == "f" or dtype in WIDENED_FLOATS


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The type float math runs in: float32 for float16 and the low-precision floats, float64 for integers/bool,
    else the type itself."""
    dtype = np.dtype(dtype)
    if dtype in WIDENED_FLOATS:
        return np.dtype(np.float32)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def cast_to(x: Array, dtype, saturate: bool = True) -> Array:
    """ONNX Cast of ``x`` to numpy ``dtype`` with C/x86 semantics; ``saturate`` as Cast's attribute (see the
    module docstring)."""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype in _WIDEN:
        x = x.astype(_WIDEN[x.dtype])
        if x.dtype == dtype:
            return x
    if dtype == np.bool_:
        return x != 0
    with np.errstate(all="ignore"):
        if saturate and dtype in FLOAT8_MAX:
            x = np.clip(x, -FLOAT8_MAX[dtype], FLOAT8_MAX[dtype])
        if x.dtype.kind == "f" and dtype.kind in "iu":
            if dtype.itemsize < 4:
                return x.astype(np.int32).astype(dtype)
            if dtype == np.uint32:
                return x.astype(np.int64).astype(dtype)
        return x.astype(dtype)


def _float_math(fn: Callable[[Array, dict], Array]) -> Callable:
    """Kernel running ``fn(x, attrs)`` in ``work_dtype`` and casting the result back to x's dtype."""
    def kernel(attrs, x):
        with np.errstate(all="ignore"):
            return cast_to(fn(x.astype(work_dtype(x.dtype), copy=False), attrs), x.dtype)
    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


def _native(fn: Callable[..., Array]) -> Callable:
    """Kernel running ``fn(*inputs, attrs)`` on the inputs as they are; result cast to input 0's dtype."""
    def kernel(attrs, *inputs):
        with np.errstate(all="ignore"):
            return cast_to(fn(*inputs, attrs), inputs[0].dtype)
    return kernel


# -- unary float math and activations ----------------------------------------------------------------------
def erf(x: Array) -> Array:
    """Error function in float64: ``math.erf`` per element for float64 (and integer) inputs; FDLIBM's erf
    vectorised (``erf_math``, < 1 ulp of float64, so identical once rounded) for float32/float16 inputs."""
    if np.asarray(x).dtype in (np.float32, np.float16):
        return erf_math.erf(np.asarray(x, np.float64))
    flat = np.fromiter(map(math.erf, np.asarray(x, np.float64).ravel().tolist()), np.float64, np.size(x))
    return flat.reshape(np.shape(x))


def sigmoid(x: Array) -> Array:
    """1 / (1 + exp(-x)), without overflow and with full relative precision for large negative x."""
    e = np.exp(-np.abs(x))
    r = 1 / (1 + e)
    return np.where(x >= 0, r, e * r)


def _gelu(x: Array, a: dict) -> Array:
    approximate = a.get("approximate", "none")
    if approximate == "tanh":   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if approximate == "none":   # 0.5 x (1 + erf(x / sqrt(2)))
        return 0.5 * x * (1 + erf(x / math.sqrt(2)).astype(x.dtype))
    raise KernelError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


_SELU_ALPHA = 1.67326319217681884765625   # ONNX defaults (float32-exact)
_SELU_GAMMA = 1.05070102214813232421875

UNARY_FLOAT: dict[str, Callable[[Array, dict], Array]] = {
    "Sqrt": lambda x, a: np.sqrt(x),
    "Exp": lambda x, a: np.exp(x),
    "Log": lambda x, a: np.log(x),
    "Reciprocal": lambda x, a: 1 / x,
    "Floor": lambda x, a: np.floor(x),
    "Ceil": lambda x, a: np.ceil(x),
    "Round": lambda x, a: np.round(x),   # half to even
    "Sin": lambda x, a: np.sin(x),
    "Cos": lambda x, a: np.cos(x),
    "Tan": lambda x, a: np.tan(x),
    "Asin": lambda x, a: np.arcsin(x),
    "Acos": lambda x, a: np.arccos(x),
    "Atan": lambda x, a: np.arctan(x),
    "Sinh": lambda x, a: np.sinh(x),
    "Cosh": lambda x, a: np.cosh(x),
    "Asinh": lambda x, a: np.arcsinh(x),
    "Acosh": lambda x, a: np.arccosh(x),
    "Atanh": lambda x, a: np.arctanh(x),
    "Erf": lambda x, a: erf(x),
    "Tanh": lambda x, a: np.tanh(x),
    "Sigmoid": lambda x, a: sigmoid(x),
    "Softplus": lambda x, a: np.logaddexp(0, x),                        # log(1 + exp(x))
    "Softsign": lambda x, a: x / (1 + np.abs(x)),
    "Elu": lambda x, a: np.where(x > 0, x, a.get("alpha", 1.0) * np.expm1(x)),
    "Selu": lambda x, a: a.get("gamma", _SELU_GAMMA) * np.where(x > 0, x, a.get("alpha", _SELU_ALPHA) * np.expm1(x)),
    "Celu": lambda x, a: (np.maximum(x, 0)                              # max(0,x) + min(0, alpha (exp(x/alpha)-1))
                          + np.minimum(0, a.get("alpha", 1.0) * np.expm1(x / a.get("alpha", 1.0)))),
    "ThresholdedRelu": lambda x, a: np.where(x > a.get("alpha", 1.0), x, 0),
    "LeakyRelu": lambda x, a: np.where(x >= 0, x, a.get("alpha", 0.01) * x),
    "HardSigmoid": lambda x, a: np.minimum(np.maximum(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0), 1),
    "HardSwish": lambda x, a: x * np.minimum(np.maximum(x * (1 / 6) + 0.5, 0), 1),
    "Gelu": _gelu,
    "Mish": lambda x, a: x * np.tanh(np.logaddexp(0, x)),               # x tanh(softplus(x))
    "Swish": lambda x, a: x * sigmoid(a.get("alpha", 1.0) * x),
}
for _name, _fn in UNARY_FLOAT.items():
    reference(_name, kind=OpKind.ELEMWISE, infer=infer_same)(_float_math(_fn))


# -- unary ops on any numeric type, computed natively --------------------------------------------------------
def _shrink(x: Array, a: dict) -> Array:
    lambd, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
    xf = x.astype(work_dtype(x.dtype), copy=False)   # ORT adds the float bias before casting back
    return np.where(xf < -lambd, xf + bias, np.where(xf > lambd, xf - bias, 0))


UNARY_NUMERIC: dict[str, Callable[[Array, dict], Array]] = {
    "Identity": lambda x, a: x,
    "Neg": lambda x, a: np.negative(x),
    "Abs": lambda x, a: np.abs(x),
    "Sign": lambda x, a: np.sign(x),
    "Relu": lambda x, a: np.maximum(x, 0),
    "Shrink": _shrink,
    "BitwiseNot": lambda x, a: np.invert(x),
    "Not": lambda x, a: np.logical_not(x),
}
for _name, _fn in UNARY_NUMERIC.items():
    if _name != "Identity":
        reference(_name, kind=OpKind.ELEMWISE, infer=infer_same)(_native(_fn))


@reference("Identity", kind=OpKind.ELEMWISE, infer=infer_same)
def identity(attrs, x):
    """Any kind: a tensor, a sequence (list) or an optional (None) passes through."""
    return (x,) if x is None or isinstance(x, list) else x


def _infer_bool_same(node: Node) -> list[TensorType]:
    return [TensorType(DType.bool, node.inputs[0].type.shape)]


@reference("IsNaN", kind=OpKind.ELEMWISE, infer=_infer_bool_same)
def is_nan(attrs, x):
    return np.isnan(x) if is_float_dtype(x.dtype) else np.zeros(x.shape, bool)


@reference("IsInf", kind=OpKind.ELEMWISE, infer=_infer_bool_same)
def is_inf(attrs, x):
    if not is_float_dtype(x.dtype):
        return np.zeros(x.shape, bool)
    pos = np.isposinf(x) if attrs.get("detect_positive", 1) else False
    neg = np.isneginf(x) if attrs.get("detect_negative", 1) else False
    return np.asarray(pos | neg) & np.ones(x.shape, bool)


# -- binary arithmetic (broadcasting, result in input 0's dtype) ----------------------------------------------
def trunc_div(a: Array, b) -> Array:
    """Integer division rounding toward zero, as in C (numpy's // floors)."""
    q = a // b
    return q + ((q < 0) & (q * b != a)).astype(q.dtype)


def _div(a: Array, b: Array, attrs: dict) -> Array:
    if a.dtype.kind in "iu":
        return trunc_div(a, b.astype(a.dtype, copy=False))
    return a / b.astype(a.dtype, copy=False)


def _mod(a: Array, b: Array, attrs: dict) -> Array:
    b = b.astype(a.dtype, copy=False)
    return np.fmod(a, b) if attrs.get("fmod", 0) else np.mod(a, b)


def _pow(x: Array, y: Array, attrs: dict) -> Array:
    if is_float_dtype(x.dtype):
        w = work_dtype(x.dtype)
        return np.power(x.astype(w, copy=False), y.astype(w))
    as_float = cast_to(np.power(x.astype(np.float64), y.astype(np.float64)), x.dtype)
    if y.dtype.kind not in "iub":
        return as_float
    nonneg = y >= 0
    exact = np.power(x, np.where(nonneg, y, 0).astype(x.dtype))   # integer power, wraps like C
    return np.where(nonneg, exact, as_float)


def _bit_shift(a: Array, b: Array, attrs: dict) -> Array:
    direction = attrs.get("direction")
    b = b.astype(a.dtype, copy=False)
    if direction == "LEFT":
        return np.left_shift(a, b)
    if direction == "RIGHT":
        return np.right_shift(a, b)
    raise KernelError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")


def _prelu(x: Array, slope: Array, attrs: dict) -> Array:
    return np.where(x < 0, x * slope.astype(x.dtype, copy=False), x)


BINARY: dict[str, Callable[[Array, Array, dict], Array]] = {
    "Add": lambda a, b, at: np.add(a, b),
    "Sub": lambda a, b, at: np.subtract(a, b),
    "Mul": lambda a, b, at: np.multiply(a, b),
    "Div": _div,
    "Mod": _mod,
    "Pow": _pow,
    "PRelu": _prelu,
    "BitShift": _bit_shift,
    "BitwiseAnd": lambda a, b, at: np.bitwise_and(a, b),
    "BitwiseOr": lambda a, b, at: np.bitwise_or(a, b),
    "BitwiseXor": lambda a, b, at: np.bitwise_xor(a, b),
}
for _name, _fn in BINARY.items():
    reference(_name, kind=OpKind.BROADCAST, infer=infer_broadcast)(_native(_fn))


# -- comparison and logic (broadcasting, bool result) ----------------------------------------------------------
COMPARE: dict[str, Callable[[Array, Array], Array]] = {
    "Equal": np.equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}


def _compare(fn: Callable[[Array, Array], Array]) -> Callable:
    def kernel(attrs, a, b):
        return np.asarray(fn(a, b), dtype=bool)
    return kernel


for _name, _fn in COMPARE.items():
    reference(_name, kind=OpKind.BROADCAST, infer=infer_broadcast_bool)(_compare(_fn))


# -- variadic (broadcasting) -----------------------------------------------------------------------------------
def _variadic(fn: Callable[[Array, Array], Array], mean: bool = False) -> Callable:
    """Left fold of ``fn`` over the present inputs; Sum/Mean accumulate float16 (and the low-precision floats)
    in float32."""
    def kernel(attrs, *inputs):
        xs = [x for x in inputs if x is not None]
        if not xs:
            raise KernelError("variadic op needs at least one input")
        dtype = xs[0].dtype
        acc = work_dtype(dtype) if is_float_dtype(dtype) else dtype
        with np.errstate(all="ignore"):
            out = functools.reduce(fn, [x.astype(acc, copy=False) for x in xs])
            if mean:
                out = out / len(xs) if acc.kind == "f" else trunc_div(out, len(xs))
            return cast_to(out, dtype)
    return kernel


reference("Max", kind=OpKind.BROADCAST, infer=infer_broadcast)(_variadic(np.maximum))   # NaN propagates
reference("Min", kind=OpKind.BROADCAST, infer=infer_broadcast)(_variadic(np.minimum))
reference("Sum", kind=OpKind.BROADCAST, infer=infer_broadcast)(_variadic(np.add))
reference("Mean", kind=OpKind.BROADCAST, infer=infer_broadcast)(_variadic(np.add, mean=True))


# -- selection, clipping, casts, dropout -------------------------------------------------------------------
def _infer_where(node: Node) -> list[TensorType]:
    shapes = [v.type.shape for v in node.inputs]
    return [TensorType(node.inputs[1].type.dtype, broadcast_shapes(*shapes))]


@reference("Where", kind=OpKind.BROADCAST, infer=_infer_where)
def where(attrs, cond, x, y):
    return cast_to(np.where(cond.astype(bool, copy=False), x, y), x.dtype)


def _scalar_bound(v: Array | None, dtype: np.dtype, what: str):
    if v is None:
        return None
    if np.size(v) != 1:
        raise KernelError(f"Clip: {what} must be a scalar, got shape {list(np.shape(v))}")
    return np.asarray(v).reshape(()).astype(dtype)


@reference("Clip", kind=OpKind.BROADCAST, infer=infer_same)
def clip(attrs, x, lo=None, hi=None):
    """min(max(x, lo), hi): NaN propagates; when lo > hi every element becomes hi (as in ORT)."""
    lo, hi = _scalar_bound(lo, x.dtype, "min"), _scalar_bound(hi, x.dtype, "max")
    out = x if lo is None else np.maximum(x, lo)
    return out if hi is None else np.minimum(out, hi)


def _target_np(code) -> np.dtype:
    try:
        dtype = DType(int(code))
    except ValueError:
        raise KernelError(f"Cast: unsupported target type code {code!r}") from None
    if dtype is DType.string:
        raise KernelError("Cast: string casts are not supported")
    return dtype.np


def _infer_cast(node: Node) -> list[TensorType]:
    _target_np(node.attrs["to"])
    return [TensorType(DType(int(node.attrs["to"])), node.inputs[0].type.shape)]


@reference("Cast", kind=OpKind.ELEMWISE, infer=_infer_cast)
def cast(attrs, x):
    """``saturate`` concerns the float8 targets only (see the module docstring)."""
    if "to" not in attrs:
        raise KernelError("Cast: attribute 'to' is required")
    return cast_to(x, _target_np(attrs["to"]), bool(attrs.get("saturate", 1)))


def _infer_cast_like(node: Node) -> list[TensorType]:
    return [TensorType(node.inputs[1].type.dtype, node.inputs[0].type.shape)]


# OPAQUE: input 1 contributes only its dtype, not elements; the importer/legalizer turns CastLike into Cast.
@reference("CastLike", kind=OpKind.OPAQUE, infer=_infer_cast_like)
def cast_like(attrs, x, target):
    return cast_to(x, target.dtype, bool(attrs.get("saturate", 1)))


def _infer_dropout(node: Node) -> list[TensorType]:
    t = node.inputs[0].type
    return [t, TensorType(DType.bool, t.shape)]


@reference("Dropout", kind=OpKind.ELEMWISE, infer=_infer_dropout)
def dropout(attrs, x, ratio=None, training_mode=None):
    """Inference semantics: (x, all-True mask).  A true ``training_mode`` is not emulated (see module doc)."""
    return x, np.ones(x.shape, dtype=bool)
