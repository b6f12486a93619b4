"""The CBLAS GEMM entry points of numpy's own BLAS, for native code to call directly.

Native drivers (GEMM split across the native thread pool, convolutions as im2col tiles + GEMM) call BLAS
from generated code through a function pointer that the runtime passes in at bind time, so a ``.ms`` file does
not link against any BLAS and keeps loading where numpy's BLAS is named differently.

``gemm_entry(dtype)`` -> ``GemmEntry(address, int64)`` or None: the address of ``cblas_sgemm`` (float32) or
``cblas_dgemm`` (float64) in the OpenBLAS that numpy loaded (the scipy-openblas wheels prefix and suffix the
names: ``scipy_cblas_sgemm64_`` takes 64-bit integers), and whether its integer arguments are 64-bit.
CBLAS signature: ``gemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)`` with
order/trans as C ints (CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112) and M..ldc as BLAS ints.
None when numpy's BLAS is not an OpenBLAS exposing CBLAS (then the numpy paths are used).
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112  # CBLAS's order and transpose flags (as C ints)

# (symbol, 64-bit integers) in order of preference, per routine
_NAMES = {"sgemm": (("scipy_cblas_sgemm64_", True), ("cblas_sgemm64_", True), ("scipy_cblas_sgemm", False),
                    ("cblas_sgemm", False)),
          "dgemm": (("scipy_cblas_dgemm64_", True), ("cblas_dgemm64_", True), ("scipy_cblas_dgemm", False),
                    ("cblas_dgemm", False))}


@dataclass(frozen=True)
class GemmEntry:
    address: int
    int64: bool


_lock = threading.Lock()
_found: dict[str, GemmEntry | None] = {}


def _lookup(routine: str) -> GemmEntry | None:
    import numpy.linalg  # noqa: F401  (makes sure numpy's BLAS is loaded)
    for path in loaded_libraries("blas"):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol, int64 in _NAMES[routine]:
            fn = getattr(lib, symbol, None)
            if fn is not None:
                return GemmEntry(ctypes.cast(fn, ctypes.c_void_p).value, int64)
    return None


def gemm_entry(dtype) -> GemmEntry | None:
    """The CBLAS GEMM for ``dtype`` (float32 -> sgemm, float64 -> dgemm), or None (see the module doc)."""
    routine = {np.dtype(np.float32): "sgemm", np.dtype(np.float64): "dgemm"}.get(np.dtype(dtype))
    if routine is None:
        return None
    with _lock:
        if routine not in _found:
            _found[routine] = _lookup(routine)
        return _found[routine]

def loaded_libraries(word: str) -> list[str]:
    """Paths of the shared libraries mapped into this process whose path contains ``word``."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if word in line.lower() and "/" in line}
    except OSError:
        return []
    return sorted(p for p in paths if ".so" in os.path.basename(p))
