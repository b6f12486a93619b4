"""Every scalar emitter x dtype, compiled natively (one shared object for the whole module) and compared with
the reference kernels (eval_graph) on random inputs with NaN/±inf/±0/denormals/huge values, broadcasting
shapes and odd sizes (not multiples of the vector width)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from codegen_testutil import (
    BOOL,
    F16,
    F32,
    F64,
    I8,
    I32,
    I64,
    U8,
    Case,
    check_case,
    make_graph,
    random_array,
    shared_library,
)

from converter_lite.codegen import SCALAR_EMITTERS
from converter_lite.ir.dtype import DType

pytestmark = pytest.mark.needs_cc
FLOATS = (F32, F64, F16)
INTS = (I32, I64)
SHAPE = (3, 37)                       # odd inner size: vector body plus a scalar remainder

UNARY_FLOAT = {
    "Exp": {}, "Log": {}, "Tanh": {}, "Sigmoid": {}, "Erf": {}, "Sqrt": {}, "Reciprocal": {}, "Sinh": {}, "Cosh": {}, "Floor": {}, "Ceil": {}, "Round": {}, "Softplus": {}, "Softsign": {},
    "Elu": {"alpha": 0.7}, "Selu": {}, "Celu": {"alpha": 1.5}, "LeakyRelu": {"alpha": 0.1},
    "ThresholdedRelu": {"alpha": 0.5}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4}, "HardSwish": {}, "Mish": {},
    "Gelu": {}, "Swish": {"alpha": 1.3}, "Shrink": {"lambd": 0.6, "bias": 0.2},
    "Atan": {}, "Asin": {}, "Acos": {}, "Asinh": {}, "Acosh": {}, "Atanh": {},
}
UNARY_ANY = {"Abs": {}, "Neg": {}, "Sign": {}, "Relu": {}, "Identity": {}}
BINARY_ARITH = ("Add", "Sub", "Mul", "Div", "Max", "Min")
COMPARE = ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")


def _cases() -> list[Case]:
    cases = []

    def add(name, in_types, fn, **kw):
        cases.append(Case(name, make_graph(name, in_types, fn), **kw))

    for op, attrs in UNARY_FLOAT.items():
        for dt in FLOATS:
            add(f"{op}_{dt.name}", [(dt, SHAPE)], lambda b, x, op=op, attrs=attrs: b.op(op, x, **attrs))
    for op in ("Sin", "Cos", "Tan"):         # accurate range of the inline reduction: |x| < 2**24
        for dt in FLOATS:
            add(f"{op}_wide_{dt.name}", [(dt, (4, 33))], lambda b, x, op=op: b.op(op, x),
                inputs=lambda rng, dt=dt: [(rng.uniform(-1, 1, (4, 33)) * np.logspace(0, 7 if dt is not F16 else 4, 33)).astype(dt.np)],
                atol=1e-6 if dt is not F16 else 2e-3)
    for dt in FLOATS:
        add(f"Gelu_tanh_{dt.name}", [(dt, SHAPE)], lambda b, x: b.op("Gelu", x, approximate="tanh"))
        add(f"IsNaN_{dt.name}", [(dt, SHAPE)], lambda b, x: b.op("IsNaN", x))
        add(f"IsInf_{dt.name}", [(dt, SHAPE)], lambda b, x: b.op("IsInf", x, detect_negative=0))
    for op, attrs in UNARY_ANY.items():
        for dt in FLOATS + INTS:
            add(f"{op}_{dt.name}", [(dt, SHAPE)], lambda b, x, op=op, attrs=attrs: b.op(op, x, **attrs))
    for op in BINARY_ARITH:                  # broadcasting [3,1,5] x [4,1] -> [3,4,5]
        for dt in FLOATS + INTS:
            add(f"{op}_{dt.name}", [(dt, (3, 1, 5)), (dt, (4, 1))], lambda b, x, y, op=op: b.op(op, x, y))
    for op in COMPARE:
        for dt in FLOATS + INTS:
            add(f"{op}_{dt.name}", [(dt, (3, 1, 5)), (dt, (4, 1))], lambda b, x, y, op=op: b.op(op, x, y))
    for op in ("And", "Or", "Xor"):
        add(f"{op}_bool", [(BOOL, (2, 17)), (BOOL, (17,))], lambda b, x, y, op=op: b.op(op, x, y))
    add("Not_bool", [(BOOL, (2, 17))], lambda b, x: b.op("Not", x))
    add("Equal_bool", [(BOOL, (2, 17)), (BOOL, (2, 17))], lambda b, x, y: b.op("Equal", x, y))
    for fmod in (0, 1):
        for dt in (F32, F64) + INTS:
            add(f"Mod{fmod}_{dt.name}", [(dt, (5, 19)), (dt, (19,))], lambda b, x, y, f=fmod: b.op("Mod", x, y, fmod=f))
    for dt in FLOATS:
        add(f"Pow_{dt.name}", [(dt, (4, 21)), (dt, (21,))], lambda b, x, y: b.op("Pow", x, y),
            inputs=lambda rng, dt=dt: [random_array(rng, dt, (4, 21)),
                                       np.round(random_array(rng, dt, (21,), specials=False))
                                       .astype(dt.np) * np.where(np.arange(21) % 2, 1, 0.5).astype(dt.np)])
        for k in (2.0, 3.0, 0.5, -1.0, 1.7):
            add(f"Pow{k}_{dt.name}", [(dt, SHAPE)], lambda b, x, k=k, dt=dt: b.op("Pow", x, b.const(k, dt)))
        add(f"PRelu_{dt.name}", [(dt, (3, 4, 5)), (dt, (4, 1))], lambda b, x, s: b.op("PRelu", x, s))
        add(f"Clip_{dt.name}", [(dt, SHAPE)], lambda b, x, dt=dt: b.op("Clip", x, b.const(-1.5, dt), b.const(2.0, dt)))
        add(f"ClipMax_{dt.name}", [(dt, SHAPE)], lambda b, x, dt=dt: b.op("Clip", x, None, b.const(0.5, dt)))
        add(f"Where_{dt.name}", [(BOOL, (3, 1)), (dt, (1, 7)), (dt, (3, 7))], lambda b, c, x, y: b.op("Where", c, x, y))
        add(f"Sum3_{dt.name}", [(dt, (2, 9)), (dt, (9,)), (dt, (2, 1))], lambda b, x, y, z: b.op("Sum", x, y, z))
        add(f"Mean3_{dt.name}", [(dt, (2, 9)), (dt, (9,)), (dt, (2, 1))], lambda b, x, y, z: b.op("Mean", x, y, z))
        add(f"Max3_{dt.name}", [(dt, (2, 9)), (dt, (9,)), (dt, (2, 1))], lambda b, x, y, z: b.op("Max", x, y, z))
    for dt in INTS:
        add(f"Pow_{dt.name}", [(dt, (4, 21)), (dt, (21,))], lambda b, x, y: b.op("Pow", x, y),
            inputs=lambda rng, dt=dt: [random_array(rng, dt, (4, 21)) // 3, rng.integers(-2, 9, 21).astype(dt.np)])
        add(f"Clip_{dt.name}", [(dt, SHAPE)], lambda b, x, dt=dt: b.op("Clip", x, b.const(-3, dt), b.const(5, dt)))
        add(f"Div0_{dt.name}", [(dt, (2, 11)), (dt, (11,))], lambda b, x, y: b.op("Div", x, y),
            inputs=lambda rng, dt=dt: [random_array(rng, dt, (2, 11)), np.arange(-5, 6).astype(dt.np)])
    for dt in (U8, DType.uint32):
        for d in ("LEFT", "RIGHT"):
            add(f"BitShift{d}_{dt.name}", [(dt, (3, 8)), (dt, (8,))], lambda b, x, y, d=d: b.op("BitShift", x, y, direction=d),
                inputs=lambda rng, dt=dt: [rng.integers(0, 200, (3, 8)).astype(dt.np), np.arange(8).astype(dt.np) * 5])
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        add(f"{op}_int32", [(I32, (3, 8)), (I32, (8,))], lambda b, x, y, op=op: b.op(op, x, y))
    add("BitwiseNot_int32", [(I32, (3, 8))], lambda b, x: b.op("BitwiseNot", x))
    # Cast between every pair of representative dtypes (NaN/inf/out-of-range included for float sources)
    for src in (F32, F64, F16, I32, I64, I8, U8, BOOL):
        for dst in (F32, F64, F16, I32, I64, I8, U8, BOOL):
            if src is not dst:
                add(f"Cast_{src.name}_{dst.name}", [(src, (2, 23))], lambda b, x, d=dst: b.op("Cast", x, to=int(d)))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "scalar", CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_emitter_matches_reference(lib, case, rng):
    check_case(lib, case, rng)


def test_every_emitter_is_exercised():
    ops = {n.op for c in CASES for n in c.graph.nodes}
    missing = set(SCALAR_EMITTERS) - ops - {"CastLike"}    # CastLike is legalized to Cast before fusion
    assert not missing, f"emitters without a test case: {sorted(missing)}"


def test_tanh_gelu_chain_large_values(lib, rng):
    """Saturation: Tanh/Sigmoid/Erf of huge arguments are exactly ±1/0/1 (no NaN from inf/inf)."""
    case = next(c for c in CASES if c.name == "Tanh_float32")
    x = np.array([[1e30, -1e30, 50, -50, 9.1, -9.1, math.inf, -math.inf] + [0.0] * 29] * 3, np.float32)
    out = np.empty_like(x)
    lib.kernel(case.name)([x], [out])
    assert list(out[0, :8]) == [1, -1, 1, -1, 1, -1, 1, -1]
