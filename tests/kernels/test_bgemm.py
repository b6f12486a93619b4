"""kernels/bgemm: the bf16 GEMM driver (``vcvtne2ps2bf16`` + ``vdpbf16ps`` where the target has AVX-512 BF16, their
emulation elsewhere) against ops/bf16.py's reference: the same bfloat16 rounding of A and B, float32 sums (in
another order: compared within float32 accumulation error)."""
import numpy as np
import pytest
from helpers import all_drivers_library

from converter_lite.kernels.bgemm.abi import BGEMM_SYMBOL, PANEL
from converter_lite.kernels.bgemm.bind import PackedBf16, bgemm_step
from converter_lite.ops.bf16 import bf16_to_float, matmul_bf16, to_bf16
from converter_lite.runtime.native import host_cpu_flags

HAS_BF16 = "avx512_bf16" in host_cpu_flags()


@pytest.fixture(scope="module", params=["linked", "jit", "emulated"])
def lib(request):
    """The driver as linked for this host, JIT-compiled, and built for an AVX-512 target without BF16 (the
    emulation)."""
    if request.param == "emulated":
        from converter_lite.codegen import build_kernels
        from converter_lite.kernels.registry import emitters
        from converter_lite.runtime.native import NativeLibrary
        bundle = build_kernels([], target={"cpu_type": "x86-64-v4"}, cache_dir="", drivers=emitters([BGEMM_SYMBOL]))
        assert "avx512bf16" not in bundle.target.get("required_features", [])
        lib = NativeLibrary.from_sections(bundle.sections, trust_native_code=True)
    else:
        linked = request.param == "linked"
        lib = all_drivers_library(link=linked, trust=linked)
    assert lib.support(BGEMM_SYMBOL)
    yield lib
    del lib


def test_rounding_table():
    """ops/bf16.py ``to_bf16``: round to nearest even, ties to even, denormals to signed zero, NaN quieted,
    overflow to infinity."""
    x = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.5, 1e-40, -1e-40, np.inf, -np.inf,
                  3.4e38, 0.0, -0.0], np.float32)
    want = np.array([0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0, 0x8000, 0x7F80, 0xFF80, 0x7F80, 0, 0x8000])
    np.testing.assert_array_equal(to_bf16(x), want)
    nan = np.array([0x7F800001, 0xFFC00000], np.uint32).view(np.float32)   # signalling NaN gets quieted
    np.testing.assert_array_equal(to_bf16(nan), [0x7FC0, 0xFFC0])
    np.testing.assert_array_equal(bf16_to_float(np.array([0x3F80, 0xC020], np.uint16)), [1.0, -2.5])


def test_packed_layout():
    w = np.arange(7 * 70, dtype=np.uint16).reshape(7, 70)
    p = PackedBf16(w)
    assert p.data.shape == (3, 4, PANEL, 2) and p.data.ctypes.data % 64 == 0
    assert p.data[1, 2, 3, 1] == w[2 * 2 + 1, 32 + 3]
    assert not p.data[2, :, 6:].any() and not p.data[:, 3, :, 1].any()     # zeros past N and past odd K


def test_hardware_rounding_matches_reference(lib):
    """K = 1 against B = 1: the output is A as the driver rounded it, bit for bit (NaN as NaN)."""
    rng = np.random.default_rng(5)
    a = np.concatenate([rng.standard_normal(200).astype(np.float32) * np.float32(1e3),
                        (1 + np.arange(64, dtype=np.float32) * np.float32(2 ** -9)),     # ties and near ties
                        np.array([1e-40, -1e-40, np.inf, -np.inf, np.nan, 3.39e38, 3.4e38, 1.2e-38], np.float32)])
    a = a.reshape(-1, 1)
    c = np.zeros((a.shape[0], 1), np.float32)
    bgemm_step(lib.support(BGEMM_SYMBOL), a, PackedBf16(to_bf16(np.ones((1, 1), np.float32))), c, 1)()
    np.testing.assert_array_equal(c, bf16_to_float(to_bf16(a)))


def _check(c, a, wb, bias=None):
    ref = matmul_bf16({}, a, wb, bias)
    bound = np.abs(bf16_to_float(to_bf16(a))) @ np.abs(bf16_to_float(wb))
    tol = bound * (a.shape[1] + 2) * 2 ** -23 + 1e-30
    assert np.all(np.abs(c - ref) <= tol), float(np.max(np.abs(c - ref) - tol))


SHAPES = [(1, 1, 1), (3, 5, 7), (12, 16, 32), (13, 33, 47), (29, 301, 70), (64, 768, 96), (7, 2, 300), (130, 64, 16),
          (2, 37, 513), (100, 129, 33)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("nt", [1, 2])
def test_against_reference(lib, m, k, n, nt):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    wb = to_bf16(rng.standard_normal((k, n)).astype(np.float32))
    bias = rng.standard_normal(n).astype(np.float32)
    c = np.full((m, n), -7, np.float32)
    bgemm_step(lib.support(BGEMM_SYMBOL), a, PackedBf16(wb), c, nt, bias=bias)()
    _check(c, a, wb, bias)
    c2 = np.full((m, n), -7, np.float32)
    bgemm_step(lib.support(BGEMM_SYMBOL), a, PackedBf16(wb), c2, nt)()      # no bias
    _check(c2, a, wb)


def test_split_tiles_and_row_strides(lib):
    """A large product split across threads (rows or panels), A read in place from a wider buffer, C rows with
    padding."""
    rng = np.random.default_rng(3)
    big = rng.standard_normal((300, 520)).astype(np.float32)
    a = big[:, :511]                                      # row stride 520 floats, K odd
    wb = to_bf16(rng.standard_normal((511, 400)).astype(np.float32))
    out = np.zeros((300, 416), np.float32)
    c = out[:, :400]
    step = bgemm_step(lib.support(BGEMM_SYMBOL), a, PackedBf16(wb), c, 2, bias=np.float32(0.5))
    assert len(step.tiles) > 1
    step()
    _check(c, np.ascontiguousarray(a), wb, np.full(400, 0.5, np.float32))
    assert not out[:, 400:].any()


def test_nan_inf_pass_through(lib):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 40)).astype(np.float32)
    a[1, 3], a[2, 39], a[3, 0] = np.nan, np.inf, -np.inf
    w = np.abs(rng.standard_normal((40, 20)).astype(np.float32)) + 0.1
    wb = to_bf16(w)
    c = np.zeros((5, 20), np.float32)
    bgemm_step(lib.support(BGEMM_SYMBOL), a, PackedBf16(wb), c, 1)()
    assert np.isnan(c[1]).all() and (c[2] == np.inf).all() and (c[3] == -np.inf).all()
    _check(c[[0, 4]], a[[0, 4]], wb)


def test_empty_and_refused_operands(lib):
    addr = lib.support(BGEMM_SYMBOL)
    wb = PackedBf16(to_bf16(np.ones((8, 4), np.float32)))
    step = bgemm_step(addr, np.zeros((0, 8), np.float32), wb, np.zeros((0, 4), np.float32), 2)
    step()                                                 # nothing to do
    assert bgemm_step(addr, np.zeros((3, 8), np.float64), wb, np.zeros((3, 4), np.float32), 1) is None
    assert bgemm_step(addr, np.zeros((3, 7), np.float32), wb, np.zeros((3, 4), np.float32), 1) is None
    assert bgemm_step(addr, np.zeros((3, 16), np.float32)[:, ::2], wb, np.zeros((3, 4), np.float32), 1) is None


@pytest.mark.skipif(not HAS_BF16, reason="the host has no AVX-512 BF16")
def test_host_code_uses_vdpbf16ps():
    from converter_lite.codegen.build import driver_ir
    from converter_lite.codegen.library import KernelLibrary, resolve_target
    from converter_lite.kernels.registry import emitter
    host = resolve_target(None)
    asm = KernelLibrary(host).assembly(driver_ir(BGEMM_SYMBOL, emitter(BGEMM_SYMBOL), host.triple, host.usable))
    assert "vdpbf16ps" in asm and "vcvtne2ps2bf16" in asm
