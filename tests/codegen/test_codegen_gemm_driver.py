"""kernels/gemm/ (emit.py + bind.py): GEMM tiles through numpy's CBLAS, on 1 and 2 pool threads."""
import numpy as np
import pytest
from helpers import all_drivers_library

from converter_lite.kernels.gemm import abi as gemm_driver
from converter_lite.kernels.gemm.abi import GEMM_TILES_SYMBOL, TILE_BYTES
from converter_lite.kernels.gemm import bind as gemm_tiles
from converter_lite.kernels.blas import gemm_entry
from converter_lite.kernels.gemm.bind import (
    RECORD,
    blas_layout,
    gemm_records,
    gemm_step,
    tile_grid,
)
from converter_lite.runtime.threads import blas_limit

pytestmark = pytest.mark.skipif(gemm_entry(np.float32) is None, reason="numpy's BLAS exposes no CBLAS gemm")


@pytest.fixture(scope="module")
def addr():
    lib = all_drivers_library()
    a = lib.support(GEMM_TILES_SYMBOL)
    assert a
    yield a
    del lib


@pytest.fixture(scope="module")
def jit_addr():
    lib = all_drivers_library(link=False, trust=False)
    yield lib.support(GEMM_TILES_SYMBOL)
    del lib


def _rand(rng, shape, dt):
    return rng.standard_normal(shape).astype(dt)


def _check(addr, a, b, nt, alpha=1.0, beta=0.0, bias=None, out_shape=None):
    dt = a.dtype
    c = np.full(out_shape or np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]),
                np.nan, dt)
    step = gemm_step(addr, a, b, c, nt, alpha, beta, bias)
    assert step is not None
    with blas_limit(1):
        step()
        step()                                                  # a second run gives the same (prefill again)
    want = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64))
    if bias is not None:
        want = want + beta * bias.astype(np.float64)
    tol = 1e-4 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(c, want, rtol=tol, atol=tol * max(1, a.shape[-1]))


def test_the_record_dtype_follows_the_abi():
    assert RECORD.itemsize == TILE_BYTES == 160
    assert RECORD.names == gemm_driver.FIELDS and len(RECORD.names) == gemm_driver.TILE_FIELDS
    assert all(RECORD.fields[n][1] == 8 * i for i, n in enumerate(gemm_driver.FIELDS))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("nt", [1, 2])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (3, 17, 130), (130, 3, 17), (17, 130, 3), (130, 130, 130),
                                 (1, 512, 128), (128, 33, 64)])
def test_plain_products(addr, monkeypatch, dt, nt, mnk):
    monkeypatch.setattr(gemm_tiles, "MIN_WORK", 0)                # split even the small ones
    m, n, k = mnk
    rng = np.random.default_rng(m * 1000 + n + k)
    _check(addr, _rand(rng, (m, k), dt), _rand(rng, (k, n), dt), nt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_transposed_views_and_bias_epilogue(addr, monkeypatch, dt):
    monkeypatch.setattr(gemm_tiles, "MIN_WORK", 0)
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (40, 30), dt), _rand(rng, (50, 40), dt)
    assert blas_layout(a.T)[0] == 112 and blas_layout(b)[0] == 111
    for bias in (_rand(rng, (50,), dt), _rand(rng, (30, 1), dt), _rand(rng, (30, 50), dt), np.array(2.5, dt),
                 _rand(rng, (50, 30), dt).T):
        for nt in (1, 2):
            _check(addr, a.T, b.T, nt, alpha=0.5, beta=2.0, bias=bias)
            _check(addr, a.T, b.T.copy(), nt, alpha=1.0, beta=1.0, bias=bias)


@pytest.mark.parametrize("nt", [1, 2])
def test_batched_with_broadcast(addr, monkeypatch, nt):
    monkeypatch.setattr(gemm_tiles, "MIN_WORK", 0)
    rng = np.random.default_rng(2)
    _check(addr, _rand(rng, (2, 2, 64, 64), np.float32), _rand(rng, (2, 2, 64, 64), np.float32), nt)
    _check(addr, _rand(rng, (2, 1, 65, 33), np.float32), _rand(rng, (3, 33, 70), np.float32), nt)
    _check(addr, _rand(rng, (5, 7), np.float64), _rand(rng, (4, 7, 9), np.float64), nt)
    kt = _rand(rng, (2, 3, 16, 8), np.float32)                   # attention's K^T as a transposed view
    _check(addr, _rand(rng, (2, 3, 5, 8), np.float32), kt.transpose(0, 1, 3, 2), nt)


def test_jit_library_runs_the_driver(jit_addr):
    assert jit_addr
    rng = np.random.default_rng(3)
    _check(jit_addr, _rand(rng, (70, 20), np.float32), _rand(rng, (20, 90), np.float32), 2)


def test_what_does_not_fit(addr):
    f = np.zeros((4, 4), np.float32)
    assert gemm_records(f, f.astype(np.float64), f, 1) is None                        # mixed dtypes
    assert gemm_records(f.astype(np.int32), f.astype(np.int32), f.astype(np.int32), 1) is None
    assert gemm_records(np.zeros((0, 4), np.float32), f, np.zeros((0, 4), np.float32), 1) is None   # empty
    assert gemm_records(f[:, ::-1], f, f, 1) is None                                   # negative stride
    assert gemm_records(f[::2, ::2], f[:2], np.zeros((2, 4), np.float32), 1) is None    # both strides > 1
    assert gemm_records(f, f, np.zeros((4, 4), np.float32).T, 1) is None               # transposed output
    assert gemm_step(None, f, f, f.copy(), 1) is None


def test_tile_grid(monkeypatch):
    monkeypatch.setattr(gemm_tiles, "TILES_PER_THREAD", 1)
    monkeypatch.setattr(gemm_tiles, "MIN_WORK", 1 << 17)
    assert tile_grid(1, 128, 512, 128, 1) == ("N", [(0, 512)], False)
    axis, ranges, par = tile_grid(1, 128, 512, 128, 2)
    assert (axis, ranges, par) == ("N", [(0, 256), (256, 512)], True)
    assert tile_grid(1, 130, 8, 128, 2)[1] == [(0, 65), (65, 130)]                   # equal row parts
    assert tile_grid(4, 64, 64, 64, 2) == ("M", [(0, 64)], True)                       # batch entries as tiles
    assert tile_grid(1, 4, 4, 4, 2)[2] is False                                        # too small to split
    monkeypatch.setattr(gemm_tiles, "TILES_PER_THREAD", 2)
    assert tile_grid(1, 128, 512, 128, 2)[1] == [(0, 128), (128, 256), (256, 384), (384, 512)]
    assert tile_grid(1, 8, 8, 4096, 2)[1] == [(0, 8)]                                  # no dim to split
    assert tile_grid(1, 101, 96, 384, 2)[1] == [(0, 26), (26, 51), (51, 76), (76, 101)]  # no short last tile
    assert tile_grid(1, 101, 200, 96, 2)[1] == [(0, 64), (64, 112), (112, 160), (160, 200)]  # ALIGN cuts
    assert tile_grid(1, 40, 8, 4096, 2)[1] == [(0, 20), (20, 40)]                      # tiles >= ALIGN rows
    assert tile_grid(1, 64, 96, 512, 2)[1] == [(0, 48), (48, 96)]                      # 6 column units: 3 + 3


def test_tile_grid_splits_skinny_products_reading_a_large_b():
    """A product of one to SKINNY rows streams B from memory: split across threads once B is large
    (MIN_B_ELEMENTS), whatever its multiply-adds (a wake-word head's [1, 3264] x [3264, 128] Gemm)."""
    assert gemm_tiles.MIN_WORK > 3264 * 128                                  # below the multiply-add bound ...
    axis, ranges, par = tile_grid(1, 1, 128, 3264, 2)
    assert axis == "N" and par and len(ranges) >= 2 and ranges[0][0] == 0 and ranges[-1][1] == 128
    assert tile_grid(1, 1, 128, 3264, 1)[2] is False                         # one thread: one tile
    assert tile_grid(1, 1, 128, 512, 2)[2] is False                          # a small B stays on one thread
    assert tile_grid(1, 16, 128, 160, 2)[2] is False                         # not skinny, below MIN_WORK
