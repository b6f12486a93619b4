"""tools/cross_core.py: the CPU 0 <-> CPU 1 round trip the bench tools print with their machine lines."""
import os
import shutil

import pytest

from tools import cross_core
from tools.bench_report import machine_lines


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not (shutil.which("cc") or shutil.which("gcc")),
                    reason="needs two CPUs and a C compiler")
def test_round_trip_is_measured():
    ns = cross_core.round_trip_ns(runs=1)
    assert ns is not None and 1 < ns < 100_000          # a cache line's round trip, not a scheduler's time slice
    assert cross_core.describe(ns) == f"{ns:.0f} ns"


def test_without_a_compiler(monkeypatch):
    monkeypatch.setattr(cross_core.shutil, "which", lambda name: None)
    assert cross_core.round_trip_ns() is None
    assert cross_core.describe(None).startswith("n/a")


def test_machine_lines_carry_it():
    lines = machine_lines(2, {}, "0.1 0.1 0.1", ("92 ns", "401 ns"))
    assert any("92 ns at the start, 401 ns at the end" in line for line in lines)
    assert not any("round trip" in line for line in machine_lines(2, {}, "0.1 0.1 0.1"))
