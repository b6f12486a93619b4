"""What every driver's binder (kernels/*/bind.py) needs to call native code: aligned buffers, float words of a
record, and the bound call of a ``(desc, nthreads)`` driver entry point, tagged as a native step so that the
plan runs consecutive native steps in one foreign call (runlist/)."""
from __future__ import annotations

import ctypes
import math
import struct

import numpy as np

from .runlist.bind import tag

_DOUBLE, _BITS = struct.Struct("<d"), struct.Struct("<q")
ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)      # void driver(i64* desc, i64 nthreads)
_char_from_buffer = ctypes.c_char.from_buffer


def data_address(a: np.ndarray) -> int:
    """Data address of an array: through the buffer protocol for a writable contiguous one (0.4 us, where
    ``a.ctypes.data`` takes about 2: binding a plan reads thousands of them), else ``a.ctypes.data``."""
    if a.flags.writeable and a.flags.c_contiguous and a.nbytes:
        return ctypes.addressof(_char_from_buffer(a))
    return a.ctypes.data


def record(fields: tuple, extra: int, words: dict) -> np.ndarray:
    """A driver record: int64 ``words`` by field name (the others 0), ``extra`` zero words after ``fields``."""
    return np.array([words.get(f, 0) for f in fields] + [0] * extra, np.int64)


def aligned(shape, dtype=np.float32) -> np.ndarray:
    """A zeroed, 64-byte aligned C-contiguous array."""
    n = math.prod(shape) * np.dtype(dtype).itemsize
    raw = np.zeros(n + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


def float_bits(v: float) -> int:
    """The float64 bit pattern of ``v`` as an i64 record word."""
    return _BITS.unpack(_DOUBLE.pack(v))[0]


def call_driver(address: int, desc: np.ndarray, nt: int, keep: tuple):
    """A zero-argument callable running ``driver(desc, nt)``; it keeps ``keep`` (the arrays the record points
    into) alive."""
    fn, ptr = ENTRY(address), data_address(desc)

    def run():
        fn(ptr, nt)
    run.conv_desc, run.keep = desc, keep
    return tag(run, address, 2, ptr, nt)
