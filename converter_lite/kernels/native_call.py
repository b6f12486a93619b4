"""What every driver's binder (kernels/*/bind.py) needs to call native code: aligned buffers, float words of a
record, and the bound call of a ``(desc, nthreads)`` driver entry point, tagged as a native step so that the
plan runs consecutive native steps in one foreign call (runlist/)."""
from __future__ import annotations

import ctypes

import numpy as np

from .runlist.bind import tag

ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)      # void driver(i64* desc, i64 nthreads)


def aligned(shape, dtype=np.float32) -> np.ndarray:
    """A zeroed, 64-byte aligned C-contiguous array."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


def float_bits(v: float) -> int:
    """The float64 bit pattern of ``v`` as an i64 record word."""
    return int(np.array(v, np.float64).view(np.int64))


def call_driver(address: int, desc: np.ndarray, nt: int, keep: tuple):
    """A zero-argument callable running ``driver(desc, nt)``; it keeps ``keep`` (the arrays the record points
    into) alive."""
    fn, ptr = ENTRY(address), desc.ctypes.data

    def run():
        fn(ptr, nt)
    run.conv_desc, run.keep = desc, keep
    return tag(run, address, 2, ptr, nt)
