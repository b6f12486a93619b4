"""Elementwise reference kernels vs onnxruntime (single-op models), and inference vs the kernels' outputs.

Where onnxruntime has no kernel for a dtype ONNX allows (e.g. float64 Erf, int PRelu), the oracle is ORT on
float32 inputs, cast back (``_oracle``); such cases use the float32 tolerance.
"""
from __future__ import annotations

import numpy as np
import onnx.defs
import pytest
from helpers import assert_close, check_infer, run_ort, single_op_model

import converter_lite.ops  # noqa: F401  (registers the op table)
from converter_lite.ops.elementwise import BINARY, COMPARE, UNARY_FLOAT, UNARY_NUMERIC
from converter_lite.ops.registry import OPS, KernelError, OpKind, evaluate

F16, F32, F64 = np.float16, np.float32, np.float64
FLOATS = (F32, F16, F64)
INTS = (np.int8, np.uint8, np.int32, np.int64)
TOL = {np.dtype(F16): (2e-3, 2e-3), np.dtype(F32): (2e-5, 2e-6), np.dtype(F64): (1e-12, 1e-13)}
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0]
# onnxruntime computes these in float64 with float32 constants or intermediates
F32_PRECISE = {"Gelu", "Shrink"}
SHAPES = [(), (1,), (7, 13), (2, 1, 5, 3), (0, 4)]
BROADCAST_PAIRS = [((2, 3, 4), (4,)), ((3, 1), (1, 4)), ((), (5,)), ((7, 13), (7, 13)), ((0, 3), (1, 3)),
                   ((2, 1, 5), (1, 6, 1))]


# -- the oracle check (tests/ops/test_reduce.py has its twin) ----------------------------------------------
def _oracle(op, inputs, n_outputs, opset, const, attrs, fallback=F32):
    """ORT outputs, and whether they came from the fallback (non-bool inputs cast to ``fallback``)."""
    feeds = {k: v for k, v in inputs.items() if v is not None}
    try:
        return run_ort(single_op_model(op, inputs, n_outputs, opset, const, **attrs), feeds), False
    except Exception as e:  # ORT raises its own exception types
        if "NOT_IMPLEMENTED" not in str(e):
            raise
    cast = {k: (v if v is None or v.dtype == bool else v.astype(fallback)) for k, v in inputs.items()}
    outs = run_ort(single_op_model(op, cast, n_outputs, opset, const, **attrs),
                   {k: v for k, v in cast.items() if v is not None})
    return outs, True


def check(op, inputs: dict, n_outputs=1, opset=21, const=(), tol=None, fallback=F32, **attrs):
    """Kernel == onnxruntime (dtype, shape, values) and infer_types == the kernel's output types."""
    ours = evaluate(op, attrs, list(inputs.values()), n_outputs)
    theirs, fallback = _oracle(op, inputs, n_outputs, opset, const, attrs, fallback)
    for i, (a, e) in enumerate(zip(ours, theirs)):
        if fallback:
            e = e.astype(a.dtype)
        rtol, atol = tol or TOL.get(np.dtype(F32) if fallback and a.dtype == F64 else a.dtype, (0, 0))
        if not tol and a.dtype == F64 and op in F32_PRECISE:
            rtol, atol = TOL[np.dtype(F32)]
        assert_close(a, e, rtol, atol, what=f"{op} output {i}")
    check_infer(op, inputs, const, attrs, ours)
    return ours



def allowed(op, dtype, opset=21, constraint=0) -> bool:
    """Whether ONNX allows ``dtype`` for ``op``'s type constraint number ``constraint``."""
    name = {"float32": "float", "float64": "double"}.get(np.dtype(dtype).name, np.dtype(dtype).name)
    return f"tensor({name})" in onnx.defs.get_schema(op, opset).type_constraints[constraint].allowed_type_strs


def data(rng, shape, dtype, lo=-5.0, hi=5.0):
    dtype = np.dtype(dtype)
    if dtype == bool:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        lo = max(lo, np.iinfo(dtype).min, -100)
        return np.asarray(rng.integers(int(np.ceil(lo)), int(min(hi, 100)) + 1, size=shape), dtype)
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype)


# -- unary float ops ---------------------------------------------------------------------------------------
DOMAIN = {"Sqrt": (0, 10), "Log": (0.01, 10), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99),
          "Atanh": (-0.99, 0.99), "Acosh": (1.01, 10), "Tan": (-1.4, 1.4), "Reciprocal": (0.1, 10)}
UNARY_ATTRS = {"Elu": [{}, {"alpha": 0.5}], "LeakyRelu": [{}, {"alpha": 0.2}], "Celu": [{}, {"alpha": 2.0}],
               "Selu": [{}, {"alpha": 1.5, "gamma": 2.0}], "HardSigmoid": [{}, {"alpha": 0.3, "beta": 0.4}],
               "ThresholdedRelu": [{}, {"alpha": 0.5}], "Gelu": [{}, {"approximate": "tanh"}],
               "Swish": [{}, {"alpha": 2.0}]}
OPSET = {"Swish": 24}


def _unary_cases():
    for op in UNARY_FLOAT:
        opset = OPSET.get(op, 21)
        for dtype in FLOATS:
            if allowed(op, dtype, opset):
                for attrs in UNARY_ATTRS.get(op, [{}]):
                    yield pytest.param(op, dtype, attrs, opset, id=f"{op}-{np.dtype(dtype).name}-{attrs}")


@pytest.mark.parametrize("op,dtype,attrs,opset", list(_unary_cases()))
def test_unary_float(op, dtype, attrs, opset, rng):
    lo, hi = DOMAIN.get(op, (-5.0, 5.0))
    for shape in SHAPES:
        check(op, {"x": data(rng, shape, dtype, lo, hi)}, opset=opset, **attrs)
    if op in ("Tan", "Acosh"):   # values where float32 and float64 results differ by more than rounding
        return
    check(op, {"x": np.array(SPECIALS, dtype)}, opset=opset, **attrs)


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 1e7 + 0.5], F32)
    assert check("Round", {"x": x})[0].tolist() == [0, 2, 2, -0, -2, -2, 2, 1e7]


def test_erf_is_accurate_in_float64():
    import math
    x = np.linspace(-6, 6, 101)
    np.testing.assert_array_equal(evaluate("Erf", {}, [x])[0], [math.erf(v) for v in x])


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(KernelError):
        evaluate("Gelu", {"approximate": "fast"}, [np.ones(2, F32)])


# -- unary numeric ops -----------------------------------------------------------------------------------
NUMERIC_ATTRS = {"Shrink": [{}, {"lambd": 1.5, "bias": 1.0}]}


def _numeric_cases():
    for op in UNARY_NUMERIC:
        for dtype in FLOATS + INTS + (np.bool_,):
            if allowed(op, dtype):
                for attrs in NUMERIC_ATTRS.get(op, [{}]):
                    yield pytest.param(op, dtype, attrs, id=f"{op}-{np.dtype(dtype).name}-{attrs}")


@pytest.mark.parametrize("op,dtype,attrs", list(_numeric_cases()))
def test_unary_numeric(op, dtype, attrs, rng):
    lo = 0 if op == "Shrink" and np.dtype(dtype).kind == "u" else -50
    for shape in SHAPES:
        check(op, {"x": data(rng, shape, dtype, lo, 50)}, **attrs)
    if np.dtype(dtype).kind == "f":
        x = np.array(SPECIALS, dtype)
        if op == "Sign" and dtype == F16:   # ORT's float16 Sign maps NaN to 0 (its float32 one keeps NaN)
            x = x[1:]
        check(op, {"x": x}, **attrs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_is_nan_is_inf(dtype):
    x = np.array(SPECIALS, dtype).reshape(2, 5)
    check("IsNaN", {"x": x})
    for pos, neg in [(1, 1), (0, 1), (1, 0), (0, 0)]:
        check("IsInf", {"x": x}, detect_positive=pos, detect_negative=neg)
    check("IsInf", {"x": np.zeros((0, 3), dtype)})


# -- binary arithmetic ---------------------------------------------------------------------------------------
def _nonzero(rng, shape, dtype):
    b = data(rng, shape, dtype, 1, 9)
    if np.dtype(dtype).kind != "u":
        b = np.asarray(b * np.where(rng.random(shape) < 0.5, -1, 1).astype(dtype))
    return b


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_arithmetic(op, dtype, rng):
    small = np.dtype(dtype).itemsize == 1   # keep int8/uint8 products and sums in range
    for sa, sb in BROADCAST_PAIRS:
        a = data(rng, sa, dtype, 0 if small and op == "Sub" else -50, 10 if small else 50)
        b = _nonzero(rng, sb, dtype) if op == "Div" else data(rng, sb, dtype, 0 if small else -50, 10 if small else 50)
        check(op, {"a": a, "b": b})
        check(op, {"a": b, "b": a} if op != "Div" else {"a": b, "b": _nonzero(rng, sa, dtype)})
    if np.dtype(dtype).kind == "f":
        x = np.array(SPECIALS, dtype)
        check(op, {"a": x, "b": x[::-1].copy()})
        check(op, {"a": x[:, None], "b": x[None, :]})


def test_integer_div_truncates():
    a, b = np.array([7, -7, 7, -7, 0, -1, 1], np.int32), np.array([2, 2, -2, -2, 3, 4, -4], np.int32)
    assert check("Div", {"a": a, "b": b})[0].tolist() == [3, -3, -3, 3, 0, 0, 0]


@pytest.mark.parametrize("dtype", FLOATS + INTS)
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod(dtype, fmod, rng):
    if np.dtype(dtype).kind == "f" and not fmod:
        pytest.skip("ONNX requires fmod=1 for floating-point Mod (onnxruntime rejects fmod=0)")
    for sa, sb in BROADCAST_PAIRS:
        check("Mod", {"a": data(rng, sa, dtype, -50, 50), "b": _nonzero(rng, sb, dtype)}, fmod=fmod)
    a, b = np.array([7, -7, 7, -7, 0], dtype=np.int8).astype(dtype), np.array([2, 2, -2, -2, 3], np.int8).astype(dtype)
    if np.dtype(dtype).kind != "u":
        check("Mod", {"a": a, "b": b}, fmod=fmod)


@pytest.mark.parametrize("base,exp", [(F32, F32), (F16, F16), (F64, F64), (F32, np.int64), (F16, F32),
                                      (np.int32, np.int32), (np.int64, np.int64), (np.int32, F32), (np.int64, F64)])
def test_pow(base, exp, rng):
    for sa, sb in BROADCAST_PAIRS:
        x = data(rng, sa, base, 0.1 if np.dtype(exp).kind == "f" else -4, 4)
        y = data(rng, sb, exp, -3 if np.dtype(base).kind == "f" else 0, 3)
        check("Pow", {"x": x, "y": y})
    if np.dtype(base).kind in "iu" and np.dtype(exp).kind in "iu":   # negative exponents truncate
        check("Pow", {"x": np.array([1, -1, 2, -2, 3, 1], base), "y": np.array([-1, -3, -1, -2, 0, 5], exp)})
    if np.dtype(base).kind == "f":
        check("Pow", {"x": np.array(SPECIALS, base), "y": np.array([2, 0.5, -1, 3, 2, 0, 1, 2, 2, -2], exp)})


@pytest.mark.parametrize("dtype", FLOATS + (np.int32, np.int64))
def test_prelu(dtype, rng):
    for sx, ss in [((2, 3, 4), (4,)), ((2, 3, 4), (3, 1)), ((2, 3, 4), (1,)), ((7, 13), (7, 13)), ((0, 3), (3,)),
                   ((5,), ())]:
        check("PRelu", {"x": data(rng, sx, dtype, -20, 20), "slope": data(rng, ss, dtype, -3, 3)})
    if np.dtype(dtype).kind == "f":
        check("PRelu", {"x": np.array(SPECIALS, dtype), "slope": np.array([0.25], dtype)})


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(dtype, direction, rng):
    bits = np.dtype(dtype).itemsize * 8
    for sa, sb in BROADCAST_PAIRS:
        a = np.asarray(rng.integers(0, 2 ** min(bits, 62), size=sa, dtype=np.uint64), dtype)
        b = np.asarray(rng.integers(0, bits, size=sb), dtype)
        check("BitShift", {"a": a, "b": b}, direction=direction, fallback=np.uint32)  # ORT lacks uint16


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", INTS + (np.uint64,))
def test_bitwise(op, dtype, rng):
    for sa, sb in BROADCAST_PAIRS:
        check(op, {"a": data(rng, sa, dtype, -100, 100), "b": data(rng, sb, dtype, -100, 100)})


# -- comparison and logic ---------------------------------------------------------------------------------------
def _compare_cases():
    for op in COMPARE:
        for dtype in FLOATS + INTS + (np.bool_,):
            if allowed(op, dtype):
                yield pytest.param(op, dtype, id=f"{op}-{np.dtype(dtype).name}")


@pytest.mark.parametrize("op,dtype", list(_compare_cases()))
def test_compare_and_logic(op, dtype, rng):
    for sa, sb in BROADCAST_PAIRS:
        # a small value range makes equal elements common
        a, b = data(rng, sa, dtype, -3, 3), data(rng, sb, dtype, -3, 3)
        if np.dtype(dtype).kind == "f":
            a, b = np.asarray(np.round(a)), np.asarray(np.round(b))
        check(op, {"a": a, "b": b})
    if np.dtype(dtype).kind == "f":
        x = np.array(SPECIALS, dtype)
        check(op, {"a": x[:, None], "b": x[None, :]})


# -- variadic ---------------------------------------------------------------------------------------------------
VARIADIC_SHAPES = [[(2, 3, 4)], [(2, 3, 4), (4,)], [(3, 1), (1, 4), ()], [(7, 13), (7, 13), (1, 13), (7, 1)],
                   [(0, 3), (1, 3)]]


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_variadic(op, dtype, rng):
    if not allowed(op, dtype):
        pytest.skip(f"ONNX {op} does not take {np.dtype(dtype).name}")
    for shapes in VARIADIC_SHAPES:
        check(op, {f"x{i}": data(rng, s, dtype) for i, s in enumerate(shapes)})
    if np.dtype(dtype).kind == "f":   # NaN propagates through Max/Min like ORT
        x = np.array(SPECIALS, dtype)
        check(op, {"a": x[:, None], "b": x[None, :]})
        check(op, {"a": x, "b": x[::-1].copy(), "c": np.roll(x, 3)})


# -- selection, clipping, casts, dropout -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + INTS + (np.bool_,))
def test_where(dtype, rng):
    for sc, sx, sy in [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((4,), (2, 3, 4), ()), ((3, 1), (1, 4), (3, 4)),
                       ((), (5,), (5,)), ((0, 3), (1, 3), (3,))]:
        inputs = {"c": data(rng, sc, bool), "x": data(rng, sx, dtype), "y": data(rng, sy, dtype)}
        if dtype == np.bool_:   # ORT has no bool Where: compare with numpy instead
            out = evaluate("Where", {}, list(inputs.values()))[0]
            assert_close(out, np.where(*inputs.values()))
            check_infer("Where", inputs, (), {}, [out])
        else:
            check("Where", inputs)


@pytest.mark.parametrize("dtype", FLOATS + INTS + (np.uint64,))
def test_clip(dtype, rng):
    lo, hi = np.array(-3, dtype=np.int8).astype(dtype), np.array(20, dtype)
    if np.dtype(dtype).kind == "u":
        lo = np.array(3, dtype)
    for shape in SHAPES:
        x = data(rng, shape, dtype, -50, 50)
        check("Clip", {"x": x, "min": lo, "max": hi})
        check("Clip", {"x": x, "min": lo, "max": None})
        check("Clip", {"x": x, "min": None, "max": hi})
        check("Clip", {"x": x}, )
        check("Clip", {"x": x, "min": hi, "max": lo})   # min > max: everything becomes max
    if np.dtype(dtype).kind == "f":
        check("Clip", {"x": np.array(SPECIALS, dtype), "min": lo, "max": hi})


CAST_TYPES = (F32, F16, F64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32, np.uint64, np.bool_)
_CODE = {np.dtype(t): onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in CAST_TYPES}


@pytest.mark.parametrize("src", CAST_TYPES)
def test_cast(src, rng):
    for dst in CAST_TYPES:
        signed = np.dtype(src).kind != "u" and np.dtype(dst).kind != "u"
        for shape in [(), (7, 13), (0, 2)]:
            x = data(rng, shape, src, -100 if signed else 0, 100)
            if np.dtype(src).kind == "f":
                x = np.asarray(x + (rng.uniform(-0.99, 0.99, shape).astype(src) if signed else np.asarray(0.75, src)))
            check("Cast", {"x": x}, to=_CODE[np.dtype(dst)])
        if np.dtype(src).kind == "f" and np.dtype(dst).kind == "f":
            big = [70000.0, 1e-8] if src != F16 else [65504.0, 6e-8]   # overflow / underflow in float16
            check("Cast", {"x": np.array(SPECIALS + big, src)}, to=_CODE[np.dtype(dst)])
        if np.dtype(src).kind == "f" and dst == np.bool_:
            check("Cast", {"x": np.array(SPECIALS, src)}, to=_CODE[np.dtype(dst)])


def test_cast_wraps_like_c():
    x = np.array([-3.7, -1, 0, 1, 3.9, 300], F32)
    assert check("Cast", {"x": x}, to=_CODE[np.dtype(np.uint8)])[0].tolist() == [253, 255, 0, 1, 3, 44]
    check("Cast", {"x": np.array([-3, -1, 0, 1, 300, 70000], np.int32)}, to=_CODE[np.dtype(np.int8)])


def test_cast_rejects_strings():
    with pytest.raises(KernelError):
        evaluate("Cast", {"to": 8}, [np.ones(2, F32)])


@pytest.mark.parametrize("src,dst", [(F32, F16), (F16, F32), (F32, np.int32), (np.int64, F64), (np.int32, np.bool_),
                                     (np.bool_, F32)])
def test_cast_like(src, dst, rng):
    for shape in [(), (2, 3), (0, 5)]:
        check("CastLike", {"x": data(rng, shape, src, -100, 100), "like": np.zeros((1,), dst)})


@pytest.mark.parametrize("dtype", FLOATS)
def test_dropout_is_identity_with_true_mask(dtype, rng):
    x = data(rng, (3, 7), dtype)
    check("Dropout", {"x": x})
    for inputs in [{"x": x}, {"x": x, "ratio": np.array(0.3, dtype)},
                   {"x": x, "ratio": np.array(0.3, dtype), "training_mode": np.array(False)}]:
        check("Dropout", inputs, n_outputs=2, const=("ratio", "training_mode"))
    # training_mode=True would be random in ORT; the reference stays the identity
    out, mask = evaluate("Dropout", {}, [x, None, np.array(True)], 2)
    assert_close(out, x)
    assert mask.dtype == bool and mask.all()


# -- the table itself --------------------------------------------------------------------------------------------
ALL = (list(UNARY_FLOAT) + list(UNARY_NUMERIC) + list(BINARY) + list(COMPARE)
       + ["IsNaN", "IsInf", "Max", "Min", "Sum", "Mean", "Where", "Clip", "Cast", "CastLike", "Dropout"])


@pytest.mark.parametrize("op", ALL)
def test_registered_with_kind_and_infer(op):
    d = OPS[op]
    assert d.infer is not None
    assert d.kind in (OpKind.ELEMWISE, OpKind.BROADCAST) or op == "CastLike"
