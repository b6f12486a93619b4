"""tools/bench_threads.py (the thread-scaling table): the table's arithmetic on made-up results, and one real
model measured at 1 and 2 threads.  No timing assertions: numbers are only checked to be numbers."""
from __future__ import annotations

import math
import os

import pytest

from tools import bench_threads as bt
from tools.bench_timing import Budget

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_table_ratios_speedups_and_geomean():
    a = bt.Result("a", cells={1: bt.Cell(2.0, 4.0, ours_threads=1), 2: bt.Cell(1.0, 1.0, ours_threads=2,
                                                                                  fixed_ms=1.25)})
    b = bt.Result("b", cells={1: bt.Cell(1.0, 1.0, ours_threads=1), 2: bt.Cell(error="RuntimeError: x")})
    c = bt.Result("c", error="convert: ValueError: bad")
    lines = bt.table_lines([a, b, c], (1, 2))
    text = "\n".join(lines)
    assert "| a | 2 / 4 (**0.50**, 1) | 1 / 1 (**1.00**, 2) |" in text
    assert "| b | 1 / 1 (**1.00**, 1) | RuntimeError: x |" in text
    assert "| c | convert: ValueError: bad |" in text
    # geomean over the cells measured: sqrt(0.5 * 1) at 1 thread, 1.0 (one cell) at 2
    assert f"| geomean ours/ORT | **{math.sqrt(0.5):.2f}** (2) | **1.00** (1) |" in text
    assert "| a | ours | 1.00 | 2.00 |" in text and "| a | ORT | 1.00 | 4.00 |" in text
    assert "| a | ours, all t threads | 1.00 | 1.60 |" in text          # 2.0 / 1.25


def test_one_model_at_one_and_two_threads(tmp_path):
    src = bt.Source("mynet", os.path.join(ROOT, "models", "mynet.onnx"))
    ms, seconds, err = bt._convert(src, str(tmp_path))
    assert not err and os.path.exists(ms) and seconds > 0
    budget = Budget(min_rounds=2, min_seconds=0.0, max_seconds=1.0, floor_rounds=1, warmup=1, block=2, settle=0.0)
    r = bt.measure(src, ms, (1, 2), budget, profile=False, fixed=True)
    assert not r.error and r.rel_err < 1e-4
    for t in (1, 2):
        cell = r.cells[t]
        assert not cell.error and cell.ours_ms > 0 and cell.ort_ms > 0 and 1 <= cell.ours_threads <= t
    assert math.isfinite(r.cells[2].fixed_ms) and math.isnan(r.cells[1].fixed_ms)


@pytest.mark.parametrize("threads", ["1,x", "0,2", ""])
def test_bad_thread_list_is_an_argument_error(threads, capsys):
    with pytest.raises(SystemExit) as e:
        bt.main(["--threads", threads, "--only", "nothing"])
    assert e.value.code == 2 and "--threads" in capsys.readouterr().err
