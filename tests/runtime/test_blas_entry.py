"""kernels/blas.py: the CBLAS GEMM entry points native code calls are numpy's own and compute A @ B."""
import ctypes

import numpy as np
import pytest

from converter_lite.kernels.blas import NO_TRANS, ROW_MAJOR, TRANS, gemm_entry


def _call(entry, ctype, order, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, alpha=1.0, beta=0.0):
    i = ctypes.c_int64 if entry.int64 else ctypes.c_int
    proto = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, ctype, ctypes.c_void_p, i,
                             ctypes.c_void_p, i, ctype, ctypes.c_void_p, i)
    proto(entry.address)(order, ta, tb, m, n, k, alpha, a.ctypes.data, lda, b.ctypes.data, ldb, beta,
                         c.ctypes.data, ldc)


@pytest.mark.parametrize("dtype,ctype", [(np.float32, ctypes.c_float), (np.float64, ctypes.c_double)])
def test_gemm_entry_matches_numpy(rng, dtype, ctype):
    entry = gemm_entry(dtype)
    if entry is None:
        pytest.skip("numpy's BLAS exposes no CBLAS GEMM")
    a = rng.standard_normal((5, 7)).astype(dtype)
    bt = rng.standard_normal((3, 7)).astype(dtype)          # B given transposed
    c = np.full((5, 3), 2.0, dtype)
    _call(entry, ctype, ROW_MAJOR, NO_TRANS, TRANS, 5, 3, 7, a, 7, bt, 7, c, 3, alpha=0.5, beta=1.0)
    np.testing.assert_allclose(c, 0.5 * (a @ bt.T) + 2.0, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_gemm_entry_other_dtypes_and_cache():
    assert gemm_entry(np.int32) is None and gemm_entry(np.float16) is None
    assert gemm_entry(np.float32) is gemm_entry(np.dtype("float32"))
