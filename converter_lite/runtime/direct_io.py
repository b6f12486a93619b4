"""Zero-copy I/O of a plan run (plan.py ``Executor._io_direct``): which caller arrays native steps may read or
write in place, and how a run's outputs become arrays the caller owns (fresh copies, or the caller's own arrays
under IO binding).  An output never aliases an input, a constant or a buffer a later run reuses."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ZERO_COPY_BYTES = 1 << 16      # smaller inputs/outputs are copied: the checks would cost more than the copy
POOLED_OUTPUTS = 2             # blocks kept per output for fresh outputs (a caller often holds the last result)


@dataclass(frozen=True)
class DirectIO:
    """Per zero-copy input/output position: (argument slots (ctypes array, index), arena address).  An input's
    slots are its native readers'; an output's, its one native writer's and its native readers'."""
    ins: dict
    outs: dict


def readable_in_place(a, arr: np.ndarray) -> bool:
    """A caller's array a fused kernel can use for ``arr``: same dtype and shape, C-contiguous, element-aligned
    (fused kernels load with element alignment and test a pointer's 64-byte alignment before streaming stores)."""
    return (type(a) is np.ndarray and a.dtype == arr.dtype and a.shape == arr.shape and a.flags.c_contiguous
            and a.flags.aligned)


def into(given, value):
    """IO binding: ``value`` written into the caller's array ``given`` (checked by Model.run), which is returned;
    without one, ``value`` itself."""
    if given is None:
        return value
    np.copyto(given, value, casting="unsafe")
    return given


def fresh(value):
    """A run's output the caller owns: an array copy, a list of copies for a sequence, None for an empty
    optional."""
    if value is None:
        return None
    if isinstance(value, list):
        return [np.array(a, copy=True) for a in value]
    return np.array(value, copy=True)
