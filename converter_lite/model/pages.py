"""Giving back the resident pages of a memory-mapped ``.ms`` file.

A model's constants are read-only views into the mapped file (format.py, which maps every page at load).  Those
pages stay resident (and count in the process's RSS) until the kernel needs the memory.  The runtime's weight
packing copies a weight into its own layout (a GEMM's panels, a convolution's channel blocks) and from then on
reads only the copy, so it gives the source's pages back.  Left resident, such a weight counted twice:
bert_base (435 MB of weights) peaked at 751 MB against onnxruntime's 529 (433 MB now).

``release(obj)`` drops the resident pages that lie wholly inside ``obj`` (a numpy array or memoryview) when it
views a read-only file mapping (``mmap.ACCESS_READ``): ``madvise(MADV_DONTNEED)``, which for a file mapping only
unmaps the pages; the data stays in the page cache and a later read maps it again, so nothing can change value.
Anything else (an array that owns its memory, a file read into memory, a platform without ``madvise``) is left
alone.  Pages shared with a neighbouring tensor are kept (only whole pages inside ``obj`` are released).
"""
from __future__ import annotations

import mmap

import numpy as np

PAGE = mmap.PAGESIZE


def _mapping(obj) -> mmap.mmap | None:
    """The read-only ``mmap`` that ``obj`` (an ndarray, possibly a view of a view, or a memoryview) views."""
    for _ in range(16):
        if isinstance(obj, mmap.mmap):
            return obj
        if isinstance(obj, np.ndarray):
            obj = obj.base
        elif isinstance(obj, memoryview):
            obj = obj.obj
        else:
            return None
    return None


def release(obj) -> int:
    """Releases the whole pages of the file mapping inside ``obj``; returns the bytes released (0 if none)."""
    mm = _mapping(obj)
    if mm is None or mm.closed or not hasattr(mm, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return 0
    data = obj if isinstance(obj, np.ndarray) else np.frombuffer(obj, np.uint8)
    if data.size == 0 or not (data.flags.c_contiguous or data.flags.f_contiguous):
        return 0
    base = np.frombuffer(mm, np.uint8).ctypes.data
    start = data.ctypes.data - base
    end = start + data.nbytes
    if start < 0 or end > len(mm):
        return 0
    lo, hi = -(-start // PAGE) * PAGE, end // PAGE * PAGE
    if hi <= lo:
        return 0
    try:
        mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
    except (OSError, ValueError):
        return 0
    return hi - lo
