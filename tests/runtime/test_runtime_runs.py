"""runtime/fast/runs.py: copies by contiguous void runs equal np.copyto on every kind of view."""
from __future__ import annotations

import numpy as np
import pytest

from converter_lite.runtime.fast.runs import as_runs, run_copy


def _views(rng):
    x = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    return [
        (np.empty((3, 5, 4, 6), np.float32), x.transpose(0, 2, 1, 3)),      # trailing axis kept
        (np.empty((3, 4, 6, 5), np.float32), x.transpose(0, 1, 3, 2)),      # true transpose: numpy's loop
        (np.empty((3, 4, 2, 6), np.float32), x[:, :, 1:3]),                 # slice of an inner axis
        (np.empty((3, 4, 5, 6), np.float32), ro),                           # read-only source
        (np.empty((3, 4, 5, 6), np.float32), np.broadcast_to(x[:, :, :1], x.shape)),   # stride 0
        (np.empty((2, 3), np.int8), rng.integers(0, 9, (2, 3, 2)).astype(np.int8)[:, :, 0]),
        (np.empty((0, 4), np.float64), np.zeros((0, 4))),
    ]


def test_run_copy_equals_copyto(rng):
    for dst, src in _views(rng):
        run_copy(dst, src)()
        np.testing.assert_array_equal(dst, src)


def test_run_copy_into_a_padded_interior(rng):
    src = rng.standard_normal((2, 3, 4)).astype(np.float32)
    out = np.full((2, 5, 7), 9.0, np.float32)
    run_copy(out[:, 1:4, 2:6], src)()
    np.testing.assert_array_equal(out[:, 1:4, 2:6], src)
    out[:, 1:4, 2:6] = 9.0
    assert (out == 9.0).all()                                               # nothing outside was touched


@pytest.mark.parametrize("k", [0, 1, 2])
def test_as_runs_shares_memory(rng, k):
    a = rng.standard_normal((2, 3, 4))
    v = as_runs(a, k)
    assert v.shape == a.shape[:k] and v.dtype.itemsize == 8 * int(np.prod(a.shape[k:]))
    assert np.shares_memory(v, a)
