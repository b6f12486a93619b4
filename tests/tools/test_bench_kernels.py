"""tools/bench_kernels.py: the micro-benchmark's result layout and its block timing (format checks only, no
timing assertions: the machine is shared and noisy)."""
from __future__ import annotations

import contextlib
import io

import pytest

from tools import bench_kernels


@pytest.mark.needs_cc
def test_blocks_of_timed_calls_per_engine():
    """Every engine gets rounds x block timed calls (one untimed call per block is not counted)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        res = bench_kernels.main(["--size", "32", "--rounds", "2", "--block", "3", "--no-ort",
                                  "--kernels", "chain,softmax"])
    assert set(res) == {"chain", "softmax"}
    for name, r in res.items():
        assert r["calls"] == 6
        assert set(r["median"]) == set(r["min"]) == {"native", "np.copyto"}
        assert all(0 < r["min"][k] <= r["median"][k] for k in r["median"])
    assert res["softmax"]["shape"] == list(bench_kernels.SHAPES["softmax"])
    assert "1 untimed + 3 timed calls" in buf.getvalue()
