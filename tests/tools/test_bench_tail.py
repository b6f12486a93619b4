"""`make bench`'s p99/median column (tools/bench.py ``tail_ratio``): an engine's runs alone, timed only after the
settle lead-in, so the previous engine's still-spinning threads are no part of its tail.  A fake clock makes
the run times exact."""
from __future__ import annotations

import time

import pytest

from tools.bench import tail_ratio
from tools.bench_timing import Budget, lead_in


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    return now


def _run_after_another_engine(now):
    """Calls take 2 ms while the other engine's threads still spin (its first 70 ms), then 0.1 ms."""
    def run():
        now[0] += 0.002 if now[0] < 0.07 else 0.0001
    return run


def test_tail_ratio_times_only_the_runs_after_the_lead_in(clock):
    assert tail_ratio(_run_after_another_engine(clock), Budget(settle=0.08)) == pytest.approx(1.0, rel=1e-3)


def test_without_the_lead_in_the_other_engine_makes_the_tail(clock):
    # 34 slow runs among the 3,000 timed ones: over 1%, so p99 is a slow run, 20x the median
    assert tail_ratio(_run_after_another_engine(clock), Budget(settle=0.0)) == pytest.approx(20.0, rel=1e-3)


def test_lead_in_runs_until_settle_has_passed_and_at_least_once(clock):
    calls = []

    def run():
        calls.append(clock[0])
        clock[0] += 0.003
    lead_in(run, 0.01)
    assert calls == pytest.approx([0.0, 0.003, 0.006, 0.009])
    calls.clear()
    lead_in(run, 0.0)
    assert len(calls) == 1
