"""Accuracy of the inline math approximations (mathfn.py) over wide ranges, measured against float64 numpy /
math (correctly rounded references).  The bounds below are the measured maxima (rounded up), in units of
relative error of the float32 result: 1 ulp of float32 is 1.19e-7 relative at worst."""
from __future__ import annotations

import math

import numpy as np
import pytest
from codegen_testutil import F32, F64, Case, make_graph, shared_library

pytestmark = pytest.mark.needs_cc
N = 1 << 20


def _all_floats32(rng) -> np.ndarray:
    """Random bit patterns: every exponent, denormals, both signs, plus the special values."""
    bits = rng.integers(0, 1 << 32, N, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    specials = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 88.72283, 88.72284,
                         -87.33654, -103.972, -104.0, 89.0, 1.0, -1.0], np.float32)
    return np.concatenate([x, specials])


def _rel_err(actual, exact) -> float:
    actual = actual.astype(np.float64)
    same = (actual == exact) | (np.isnan(actual) & np.isnan(exact))
    denom = np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    with np.errstate(all="ignore"):
        err = np.where(same, 0.0, np.abs(actual - exact) / denom)
    return float(np.nan_to_num(err, nan=np.inf).max())


FUNCS = {"Exp": F32, "Log": F32, "Tanh": F32, "Sigmoid": F32, "Erf": F32, "Sin": F32, "Cos": F32, "Softplus": F32,
         "Exp64": F64, "Log64": F64, "Tanh64": F64, "GeluTanh": F32}
ATTRS = {"GeluTanh": ("Gelu", {"approximate": "tanh"})}


# every bound holds for both ways of scaling exp's result: llvm.ldexp (vscalefps) on AVX-512 targets and the
# two-factor bit trick elsewhere (the second library is built for this host without AVX-512F)
@pytest.fixture(scope="module", params=["host", "no-avx512f"])
def lib(tmp_path_factory, request):
    cases = []
    for name, dt in FUNCS.items():
        op, attrs = ATTRS.get(name, (name.rstrip("64"), {}))
        cases.append(Case(name, make_graph(name, [(dt, (N + 16,))], lambda b, x, op=op, a=attrs: b.op(op, x, **a))))
    target = {"cpu_feature": "-avx512f"} if request.param == "no-avx512f" else None
    return shared_library(tmp_path_factory, f"mathfn-{request.param}", cases, num_threads=1, target=target)


def test_exp_scaling_follows_the_target():
    """float32 exp scales with llvm.ldexp only for targets with AVX-512F (elsewhere it would become libm calls)."""
    from converter_lite.codegen.abi import lower_kernel
    g = make_graph("Exp", [(F32, (64,))], lambda b, x: b.op("Exp", x))
    assert "llvm.ldexp" in str(lower_kernel(g, "k", features=frozenset({"avx512f"}))[0])
    assert "llvm.ldexp" not in str(lower_kernel(g, "k", features=frozenset({"avx2", "fma"}))[0])


def _run(lib, name, x):
    out = np.empty_like(x)
    lib.kernel(name)([x], [out])
    return out


def _pad(x: np.ndarray) -> np.ndarray:
    """Inputs are N+16 long (the kernels' static shape)."""
    return np.resize(x, N + 16)


def test_exp_whole_float_range(lib, rng):
    """exp: max 7.4e-8 relative measured over all float32 inputs (bound 1e-7; 1.2e-7 before the degree-6
    Horner polynomial), denormal results included; overflow -> inf, underflow -> 0, NaN -> NaN."""
    x = _pad(_all_floats32(rng))
    with np.errstate(all="ignore"):
        exact = np.exp(x.astype(np.float64))
    y = _run(lib, "Exp", x)
    f32 = np.finfo(np.float32)
    normal = (np.abs(exact) >= f32.tiny) & (exact <= f32.max)
    assert _rel_err(y[normal], exact[normal]) <= 1e-7
    assert (y[exact > f32.max * (1 + 2 ** -25)] == np.inf).all()
    denormal = (exact > 0) & (exact < f32.tiny)            # within one denormal step
    assert np.max(np.abs(y[denormal] - exact[denormal])) <= 2 ** -149
    assert np.array_equal(np.isnan(y), np.isnan(x))
    assert (y[x > 88.73] == np.inf).all() and (y[x < -104] == 0).all()


def test_exp_dense_in_range(lib, rng):
    """exp on [-104, 89] (where results are neither 0 nor inf): max 7.6e-8 relative measured for normal results
    (8.4e-8 with the former Cephes polynomial), denormal results within one denormal step (0.86 measured: y's
    error times up to 2**23 steps plus the final rounding); NaN stays NaN without a NaN select."""
    x = rng.uniform(-104, 89, N + 16).astype(np.float32)
    x[:4] = [np.nan, -np.nan, 88.72283172607422, 88.72283935546875]
    with np.errstate(all="ignore"):
        exact = np.exp(x.astype(np.float64))
    y = _run(lib, "Exp", x)
    f32 = np.finfo(np.float32)
    normal = (exact >= f32.tiny) & (exact <= f32.max)
    assert _rel_err(y[normal], exact[normal]) <= 8e-8
    denormal = (exact > 0) & (exact < f32.tiny)
    assert np.max(np.abs(y[denormal] - exact[denormal])) <= 2 ** -149
    assert np.isnan(y[:2]).all() and np.isfinite(y[2]) and y[3] == np.inf


def test_log_whole_float_range(lib, rng):
    """log: max 1.2e-7 relative for every positive float32 (denormals included); log(0) = -inf,
    log(x<0) = NaN, log(inf) = inf."""
    x = _pad(_all_floats32(rng))
    with np.errstate(all="ignore"):
        exact = np.log(x.astype(np.float64))
    y = _run(lib, "Log", x)
    assert _rel_err(y, exact) <= 1.2e-7
    assert (y[x == 0] == -np.inf).all() and np.isnan(y[x < 0]).all() and (y[x == np.inf] == np.inf).all()


def test_tanh_accuracy(lib):
    """tanh on [-10, 10]: max 1.38e-7 relative measured (the issue asks for 2e-7)."""
    x = np.linspace(-10, 10, N + 16, dtype=np.float32)
    assert _rel_err(_run(lib, "Tanh", x), np.tanh(x.astype(np.float64))) <= 1.4e-7


def test_sigmoid_accuracy(lib):
    """sigmoid on [-100, 100]: max 2e-7 relative, including the denormal tail below -87."""
    x = np.linspace(-100, 80, N + 16, dtype=np.float32)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    y = _run(lib, "Sigmoid", x)
    normal = exact >= np.finfo(np.float32).tiny
    assert _rel_err(y[normal], exact[normal]) <= 2e-7


def _gelu_tanh64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def test_gelu_tanh_accuracy(lib):
    """tanh-approximated Gelu, lowered as x / (1 + exp(-2u)), u = sqrt(2/pi) * (x + 0.044715 x^3), against
    float64 on [-20, 20].  exp's argument carries float32 rounding of u, so the relative error grows with |2u|
    (the function's condition): measured max 3.5 * (1 + |2u|) half-ulps (bound 4), i.e. 2.1e-7 on [-1, 20],
    1.0e-6 on [-3, 20].  The spelled-out 0.5 * x * (1 + tanh(u)) evaluated in float32 (numpy) is at 2.0e-5 on
    [-3, 20] and loses every digit further out (1 + tanh(u) cancels).  Results below 1e-36 (x / exp(-2u) with
    exp past float32's range) are within 1e-36 of 0; Gelu(inf) = inf, Gelu(-inf) = NaN, Gelu(NaN) = NaN, as in
    the tanh form."""
    x = np.linspace(-20, 20, N + 16, dtype=np.float32)
    x[:3] = [np.inf, -np.inf, np.nan]
    x64 = x[3:].astype(np.float64)
    two_u = 2 * math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)
    exact = x64 / (1 + np.exp(-two_u))
    y = _run(lib, "GeluTanh", x)
    big = np.abs(exact) > 1e-36
    err = np.abs(y[3:][big] - exact[big]) / np.abs(exact[big])
    assert np.max(err / (1 + np.abs(two_u[big]))) <= 4 * 2.0 ** -24
    assert _rel_err(y[3:][x64 >= -1], exact[x64 >= -1]) <= 2.2e-7
    assert np.max(np.abs(y[3:][~big])) <= 1e-36
    assert y[0] == np.inf and np.isnan(y[1]) and np.isnan(y[2])


def test_erf_accuracy(lib):
    """erf on [-6, 6]: max 8e-8 relative against math.erf (float32 evaluation; was 1e-7 evaluated in double)."""
    x = np.linspace(-6, 6, N + 16, dtype=np.float32)
    exact = np.array([math.erf(v) for v in x.astype(np.float64)[::7]])
    assert _rel_err(_run(lib, "Erf", x)[::7], exact) <= 8e-8


def test_erf_all_floats_and_specials(lib):
    """erf over a dense sample of every float32 bit pattern in [2**-126, 4] (both signs, each interval boundary
    of the float32 evaluation): max 8e-8 relative; erf(±0) = ±0, erf(±inf) = ±1, NaN -> NaN, denormals
    within one denormal step, 1.0 from 3.92 up, large arguments exactly ±1."""
    bits = np.arange(0x00800000, 0x40800000, 977, dtype=np.uint32)
    x = bits.view(np.float32)
    edges = np.array([0.875, 1.7, 2.6, 3.92], np.float32)
    x = np.concatenate([x, edges, np.nextafter(edges, np.float32(0)), np.nextafter(edges, np.float32(9))])
    x = np.concatenate([x, -x])[: N + 16]
    exact = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert _rel_err(_run(lib, "Erf", _pad(x))[: len(x)], exact) <= 8e-8
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e-39, -1e-38, 1e-30, 3.92, 50.0,
                         -1e30, np.finfo(np.float32).max], np.float32)
    y = _run(lib, "Erf", _pad(specials))[: len(specials)]
    exact = np.array([math.erf(v) if np.isfinite(v) else (math.copysign(1.0, v) if np.isinf(v) else np.nan)
                      for v in specials.astype(np.float64)])
    assert np.array_equal(np.signbit(y[:2]), [False, True]) and (y[:2] == 0).all()
    assert np.isnan(y[4]) and (y[[2, 3]] == [1, -1]).all() and (y[10:] == [1, 1, -1, 1]).all()
    finite = np.isfinite(exact)
    assert np.max(np.abs(y[finite] - exact[finite].astype(np.float32))) <= 2 ** -149 or \
        _rel_err(y[finite], exact[finite]) <= 8e-8


def test_sin_cos_accuracy(lib):
    """sin/cos on [-1e4, 1e4]: max absolute error 1e-7 (range reduction in double); |x| >= 2**24 -> NaN."""
    x = np.linspace(-1e4, 1e4, N + 16, dtype=np.float32)
    for name, ref in (("Sin", np.sin), ("Cos", np.cos)):
        y = _run(lib, name, x).astype(np.float64)
        assert np.max(np.abs(y - ref(x.astype(np.float64)))) <= 1e-7
    big = np.full(N + 16, 3e7, np.float32)
    assert np.isnan(_run(lib, "Sin", big)).all()


def test_softplus_tails(lib):
    """softplus = max(x,0) + log1p(exp(-|x|)): exact tails, 2e-7 relative on [-100, 100]."""
    x = np.linspace(-100, 100, N + 16, dtype=np.float32)
    exact = np.logaddexp(0, x.astype(np.float64))
    y = _run(lib, "Softplus", x)
    normal = exact >= np.finfo(np.float32).tiny
    assert _rel_err(y[normal], exact[normal]) <= 2.5e-7


def test_float64_exp_log_tanh(lib, rng):
    """float64: exp/log/tanh within 4e-16 relative (Cephes forms in double)."""
    x = rng.uniform(-700, 700, N + 16)
    assert _rel_err(_run(lib, "Exp64", x), np.exp(x)) <= 4e-16
    x = np.exp(rng.uniform(-700, 700, N + 16))
    assert _rel_err(_run(lib, "Log64", x), np.log(x)) <= 4e-16
    x = rng.uniform(-20, 20, N + 16)
    assert _rel_err(_run(lib, "Tanh64", x), np.tanh(x)) <= 4e-16

