"""kernels/gemm/emit_sgemm.py: the native float32 GEMM, called directly and through the tile driver (bind.py)."""
import ctypes

import numpy as np
import pytest
from helpers import all_drivers_library

from converter_lite.kernels.gemm import abi as sgemm
from converter_lite.kernels.gemm import bind as gemm_tiles
from converter_lite.kernels.gemm.bind import (
    GemmDriver,
    PackedB,
    gemm_records,
    gemm_step,
    tile_grid,
)

I, P, F, I32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float, ctypes.c_int32
SGEMM = ctypes.CFUNCTYPE(None, I32, I32, I32, I, I, I, F, P, I, P, I, F, P, I)


@pytest.fixture(scope="module", params=["linked", "jit"])
def lib(request):
    linked = request.param == "linked"
    lib = all_drivers_library(link=linked, trust=linked)
    assert lib.support(sgemm.SGEMM_SYMBOL)
    yield lib
    del lib


def test_packed_layout():
    b = np.arange(5 * 70, dtype=np.float32).reshape(5, 70)
    p = PackedB(b)
    assert p.data.shape == (3, 5, 32) and p.data.ctypes.data % 64 == 0 and p.shape == (5, 70)
    np.testing.assert_array_equal(p.data[1, 2], b[2, 32:64])
    np.testing.assert_array_equal(p.data[2, 4, :6], b[4, 64:70])
    assert not p.data[2, :, 6:].any()                              # zeros past N
    t = PackedB(np.ascontiguousarray(b.T).T)                       # a transposed view packs the same
    np.testing.assert_array_equal(t.data, p.data)


def _call(lib, a, b, c, ta=False, tb="N", alpha=1.0, beta=0.0, wide=True):
    """c = alpha * a @ b + beta * c through cl_sgemm_v1, with A/B stored as asked."""
    m, k = a.shape
    n = b.shape[1]
    a_s = np.ascontiguousarray(a.T) if ta else np.ascontiguousarray(a)
    if tb == "T":
        b_s, ldb, code = np.ascontiguousarray(b.T), k, sgemm.TRANS
    elif tb == "P":
        b_s, ldb, code = PackedB(b).data, k * sgemm.PANEL, sgemm.PACKED
    else:
        b_s, ldb, code = np.ascontiguousarray(b), n, sgemm.NO_TRANS
    fn = SGEMM(lib.support(sgemm.SGEMM_SYMBOL))
    fn(sgemm.ROW_MAJOR | (sgemm.FLAG_WIDE if wide else 0), sgemm.TRANS if ta else sgemm.NO_TRANS, code, m, n, k,
       alpha, a_s.ctypes.data, a_s.shape[1], b_s.ctypes.data, ldb, beta, c.ctypes.data, max(1, n))


SHAPES = [(1, 1, 1), (3, 5, 7), (14, 32, 16), (15, 33, 17), (29, 47, 300), (101, 96, 96), (7, 100, 513),
          (130, 16, 2), (2, 200, 33)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", ["N", "T", "P"])
@pytest.mark.parametrize("wide", [True, False])
def test_matches_float64_product(lib, rng, m, n, k, ta, tb, wide):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    for alpha, beta in ((1.0, 0.0), (0.5, -2.0)):
        c = c0.copy() if beta else np.full((m, n), np.nan, np.float32)   # beta = 0: C is never read
        _call(lib, a, b, c, ta, tb, alpha, beta, wide)
        want = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + (beta * c0 if beta else 0.0)
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * np.sqrt(k) * 4)


def test_empty_and_k_zero(lib, rng):
    a, b = np.zeros((4, 0), np.float32), np.zeros((0, 5), np.float32)
    c = np.ones((4, 5), np.float32)
    _call(lib, a, b, c, beta=3.0)
    np.testing.assert_array_equal(c, 3.0)                          # K = 0: C = beta * C
    _call(lib, a, b, c, beta=0.0)
    np.testing.assert_array_equal(c, 0.0)
    c = np.full((0, 5), 7, np.float32)
    _call(lib, np.zeros((0, 3), np.float32), np.ones((3, 5), np.float32), c)       # M = 0: nothing written


def test_nan_and_inf_propagate_like_numpy(lib, rng):
    a = rng.standard_normal((20, 40)).astype(np.float32)
    b = rng.standard_normal((40, 50)).astype(np.float32)
    a[3, 7], a[5, :] = np.nan, np.inf
    b[:, 9] = -np.inf
    c = np.empty((20, 50), np.float32)
    for tb in ("N", "T", "P"):
        _call(lib, a, b, c, tb=tb)
        with np.errstate(invalid="ignore"):
            want = a @ b
        np.testing.assert_array_equal(np.isnan(c), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(c), np.isinf(want))
        fin = np.isfinite(want)
        np.testing.assert_allclose(c[fin], want[fin], rtol=1e-4, atol=1e-4)


def _driver(lib, wide=True):
    return GemmDriver(lib.support("cl_gemm_tiles_v1"), lib.support(sgemm.SGEMM_SYMBOL), wide)


@pytest.mark.parametrize("nt", [1, 2, 3])
def test_tiles_with_packed_weights_and_bias(lib, rng, nt, monkeypatch):
    monkeypatch.setattr(gemm_tiles, "MIN_WORK", 1)                  # split even small products
    x = rng.standard_normal((2, 37, 48)).astype(np.float32)
    w = rng.standard_normal((48, 300)).astype(np.float32)
    bias = rng.standard_normal(300).astype(np.float32)
    drv = _driver(lib)
    packed = PackedB(w)
    c = np.full((74, 300), np.nan, np.float32)
    rec, _ = gemm_records(x.reshape(74, 48), packed, c, nt, 1.0, 1.0, bias, driver=drv)
    assert (rec["fn"] == drv.sgemm).all() and (rec["transB"] == sgemm.PACKED).all()
    if nt > 1:                                                      # N split at panel boundaries only
        starts = (rec["C"] - c.ctypes.data) // 4
        assert len(rec) > 1 and (starts % sgemm.PANEL == 0).all()
    step = gemm_step(drv, x.reshape(74, 48), packed, c, nt, 1.0, 1.0, bias)
    step()
    step()
    want = x.reshape(74, 48).astype(np.float64) @ w + bias
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


def test_batched_transposed_operands(lib, rng):
    """Attention's Q @ K^T: a transposed view of B, batch dims broadcast; float64 stays on numpy's CBLAS."""
    q = rng.standard_normal((2, 3, 50, 24)).astype(np.float32)
    kt = rng.standard_normal((2, 3, 50, 24)).astype(np.float32).swapaxes(-1, -2)
    c = np.full((2, 3, 50, 50), np.nan, np.float32)
    drv = _driver(lib)
    rec, _ = gemm_records(q, kt, c, 2, driver=drv)
    assert (rec["transB"] == sgemm.TRANS).all() and (rec["fn"] == drv.sgemm).all()
    gemm_step(drv, q, kt, c, 2)()
    np.testing.assert_allclose(c, q.astype(np.float64) @ kt, rtol=1e-5, atol=1e-4)
    d = q.astype(np.float64)
    rec64, _ = gemm_records(d, d.swapaxes(-1, -2), np.zeros((2, 3, 50, 50)), 1, driver=drv)
    assert (rec64["fn"] != drv.sgemm).all()


def test_packed_weights_need_the_native_gemm(lib, rng):
    w = PackedB(rng.standard_normal((8, 8)).astype(np.float32))
    x, c = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    assert gemm_records(x, w, c, 1) is None                          # numpy's CBLAS cannot read panels
    assert gemm_records(x, w, c, 1, driver=GemmDriver(lib.support("cl_gemm_tiles_v1"))) is None


def test_tile_grid_panel_alignment():
    axis, ranges, par = tile_grid(1, 64, 200, 512, 2, align=32)
    assert axis == "N" and par and all(lo % 32 == 0 for lo, _ in ranges) and ranges[-1][1] == 200
