"""kernels/qgemm: the int8 GEMM driver (u8 x s8, VNNI where the target has it) against numpy's integer products."""
import numpy as np
import pytest
from helpers import all_drivers_library

from converter_lite.kernels.qgemm.abi import QGEMM_SYMBOL
from converter_lite.kernels.qgemm.bind import PackedQ, qgemm_step


@pytest.fixture(scope="module", params=["linked", "jit", "avx2"])
def lib(request):
    """The driver as linked for this host, JIT-compiled, and built for an AVX2 target (no VNNI: the generic
    byte products)."""
    if request.param == "avx2":
        from converter_lite.codegen import build_kernels
        from converter_lite.kernels.registry import emitters
        from converter_lite.runtime.native import NativeLibrary
        bundle = build_kernels([], target={"cpu_type": "x86-64-v3"}, cache_dir="",
                               drivers=emitters([QGEMM_SYMBOL]))
        assert "avx512vnni" not in bundle.target.get("required_features", [])
        lib = NativeLibrary.from_sections(bundle.sections, trust_native_code=True)
    else:
        linked = request.param == "linked"
        lib = all_drivers_library(link=linked, trust=linked)
    assert lib.support(QGEMM_SYMBOL)
    yield lib
    del lib


def test_packed_layout():
    w = np.random.default_rng(0).integers(-128, 128, (8, 70)).astype(np.int8)
    p = PackedQ(w)
    assert p.data.shape == (3, 2, 32, 4) and p.data.ctypes.data % 64 == 0
    assert p.data[1, 1, 3, 2] == w[4 + 2, 32 + 3]
    assert not p.data[2, :, 6:].any()                               # zeros past N
    np.testing.assert_array_equal(p.colsum[:70], w.astype(np.int64).sum(0))
    assert not p.colsum[70:].any()


SHAPES = [(1, 4, 1), (3, 8, 5), (12, 16, 32), (13, 20, 33), (29, 300, 47), (128, 128, 128), (7, 512, 100),
          (130, 4, 16), (2, 36, 200), (64, 768, 96)]


def _ref(a, w, azp):
    return (a.astype(np.int64) - int(azp)) @ w.astype(np.int64)


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("nt", [1, 3])
def test_int32_output(lib, m, k, n, nt):
    rng = np.random.default_rng(m * 1000 + k + n)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    azp = np.array([rng.integers(0, 256)], np.uint8)
    c = np.full((m, n), -7, np.int32)
    step = qgemm_step(lib.support(QGEMM_SYMBOL), a, PackedQ(w), c, nt, azp=azp)
    step()
    np.testing.assert_array_equal(c, _ref(a, w, azp[0]))
    azp[0] = 3                                       # the zero point is read at run time, from its address
    step()
    np.testing.assert_array_equal(c, _ref(a, w, 3))


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("bias", [False, True])
def test_float_output(lib, m, k, n, bias):
    rng = np.random.default_rng(m + k * 7 + n)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    azp, ascale = np.array([128], np.uint8), np.array([0.02], np.float32)
    bscale = rng.uniform(0.001, 0.01, n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    c = np.full((m, n), np.nan, np.float32)
    qgemm_step(lib.support(QGEMM_SYMBOL), a, PackedQ(w), c, 2, azp=azp, ascale=ascale, bscale=bscale, bias=b)()
    want = _ref(a, w, 128).astype(np.float32) * (ascale[0] * bscale)
    if bias:
        want = want + b
    np.testing.assert_array_equal(c, want)


def test_strided_rows_and_scalar_scale(lib):
    """Rows of A and C read/written in place with their strides; a scalar b scale; no zero point."""
    rng = np.random.default_rng(5)
    big_a = rng.integers(0, 256, (10, 40)).astype(np.uint8)
    big_c = np.zeros((10, 50), np.float32)
    a, c = big_a[:, :32], big_c[:, 3:40]
    w = rng.integers(-128, 128, (32, 37)).astype(np.int8)
    ascale = np.array([0.5], np.float32)
    qgemm_step(lib.support(QGEMM_SYMBOL), a, PackedQ(w), c, 1, ascale=ascale, bscale=np.float32(0.25))()
    np.testing.assert_array_equal(c, (a.astype(np.int64) @ w).astype(np.float32) * np.float32(0.125))
    assert not big_c[:, :3].any() and not big_c[:, 40:].any()


def test_int32_without_zero_point(lib):
    rng = np.random.default_rng(6)
    a, w = rng.integers(0, 256, (5, 12)).astype(np.uint8), rng.integers(-128, 128, (12, 3)).astype(np.int8)
    c = np.zeros((5, 3), np.int32)
    qgemm_step(lib.support(QGEMM_SYMBOL), a, PackedQ(w), c, 1)()
    np.testing.assert_array_equal(c, a.astype(np.int64) @ w)


def test_declines_what_it_cannot_read(lib):
    addr = lib.support(QGEMM_SYMBOL)
    p = PackedQ(np.ones((8, 4), np.int8))
    assert qgemm_step(addr, np.zeros((2, 8), np.int8), p, np.zeros((2, 4), np.int32), 1) is None      # int8 A
    assert qgemm_step(addr, np.zeros((2, 8), np.uint8), p, np.zeros((2, 4), np.float32), 1) is None   # no scales
    assert qgemm_step(addr, np.zeros((8, 2), np.uint8).T, p, np.zeros((2, 4), np.int32), 1) is None  # column-major
