"""One grow-only block of working memory shared by the plans of a model with dynamic input shapes.

Each ``Plan`` made for an input shape (shape_plans.py) needs an arena and a scratch area sized for that shape.
Giving each plan its own would make every new shape pay for fresh memory: the operating system maps and zeroes
each page at its first touch (about 1 ms per MB on the shared 2-core VM: 30 MB of PP-OCR's detector at 480x640
cost 50-70 ms on the first run at that size, on top of a 39 ms run).  So the plans' executors carve their arena
and scratch out of one block instead, which only grows: a shape that fits in the largest one seen so far touches
no new page.

The block is a reservation of address space (``RESERVE`` bytes, an anonymous ``MAP_NORESERVE`` mapping: no
memory until a page is touched), so it never moves as shapes grow: a larger shape only touches the pages past
the largest one seen, and the resident memory is what the largest plan used.  Where the mapping cannot be made,
or a plan needs more than it holds, the block is an ordinary allocation of the size asked (replaced by a larger
one when a larger plan comes).

``take(nbytes)`` returns the current block (a new, larger one when it is smaller than ``nbytes``) and the lock
that guards it.  A run holds the lock while it uses the block (``Plan.execute``); a run that finds it held (two
threads running the model at once) runs on an executor with memory of its own.  Executors bound to a block
that has since been replaced are dropped when next used (``stale``), so the old block is freed once its last
executor is.
"""
from __future__ import annotations

import mmap
import sys
import threading

import numpy as np

ALIGN = 64
RESERVE = 4 << 30 if sys.maxsize > 1 << 32 else 0        # address space reserved for the block (64-bit only)
NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else 0)


def _reserve(nbytes: int) -> np.ndarray | None:
    """``nbytes`` of zero-filled address space whose pages are only backed when touched, or None."""
    if not nbytes or not hasattr(mmap, "MAP_ANONYMOUS"):
        return None
    try:
        region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | NORESERVE)
    except (OSError, ValueError, OverflowError):
        return None
    return np.frombuffer(region, np.uint8)             # (page-aligned; the array keeps the mapping alive)


class SharedArena:
    def __init__(self):
        self._block: np.ndarray | None = None
        self._lock = threading.Lock()       # guards the current block's use by a run
        self._grow = threading.Lock()       # guards replacing it
        self.generation = 0
        self.grown = 0                      # blocks allocated so far (a test figure)

    @property
    def nbytes(self) -> int:
        return 0 if self._block is None else self._block.size

    def take(self, nbytes: int) -> tuple[np.ndarray, threading.Lock, int]:
        """(block of at least ``nbytes`` bytes, 64-byte aligned; its lock; its generation)."""
        with self._grow:
            if self._block is None or self._block.size < nbytes:
                block = _reserve(RESERVE) if nbytes <= RESERVE else None
                if block is None:
                    raw = np.empty(nbytes + ALIGN, np.uint8)
                    skip = (-raw.ctypes.data) % ALIGN
                    block = raw[skip:skip + nbytes]
                self._block = block
                self._lock = threading.Lock()
                self.generation += 1
                self.grown += 1
            return self._block, self._lock, self.generation

    def stale(self, generation: int) -> bool:
        """Whether a block of ``generation`` has been replaced by a larger one."""
        return generation != self.generation
