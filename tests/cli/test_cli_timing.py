"""Timing statistics and MindSpore's profiling tables (converter_lite/cli/timing.py)."""
from __future__ import annotations

import re

import numpy as np
from runtime_graphs import fused_graph

from converter_lite.model import save_model
from converter_lite.runtime import load
from converter_lite.cli.timing import (ProfileRow, TimingResult, measure, profile_report, profile_tables,
                                          timing_lines)
from converter_lite.cli.inputs import random_inputs


def test_timing_lines_exact_format():
    r = TimingResult([1.0, 2.0, 3.0, 4.0])
    lines = timing_lines("model.ms", 2, r)
    assert lines[0] == ("Model = model.ms, NumThreads = 2, MinRunTime = 1.000000 ms, MaxRuntime = 4.000000 ms, "
                        "AvgRunTime = 2.500000 ms")
    assert lines[1] == "MedianRunTime = 2.500000 ms, P90RunTime = 3.700000 ms, P99RunTime = 3.970000 ms"


def test_profile_table_layout():
    """Widths follow MindSpore's PrintResult: first longer cell sets len+4; titles widen; tab after each."""
    r = TimingResult([1.0], by_name=[ProfileRow("Fused_Add_Mul_0", 3.0, 2, ("add", "mul")),
                                     ProfileRow("conv", 1.0, 2)],
                     by_type=[ProfileRow("Conv", 1.0, 2), ProfileRow("GraphKernel", 3.0, 2)])
    lines = profile_tables(r, loop_count=2)
    assert lines[0] == "-" * 73
    assert lines[1] == "opName             \tavg(ms)     \tpercent     \tcalledTimes\topTotalTime \t"
    assert lines[2] == "Fused_Add_Mul_0    \t1.500000    \t0.750000    \t2          \t3.000000    \t"
    assert lines[3] == "conv               \t0.500000    \t0.250000    \t2          \t1.000000    \t"
    assert lines[4] == "    Fused_Add_Mul_0 <- add, mul"
    assert lines[5] == "-" * 73
    assert lines[6].startswith("opType         \tavg(ms)")      # "Conv" sets 8, "GraphKernel" then 15
    assert lines[7].startswith("Conv           \t0.500000")
    report = profile_report(r, 2)
    assert report["by_name"][0]["source_nodes"] == ["add", "mul"] and report["by_type"][1]["percent"] == 0.75


def test_measure_profiles_every_kernel(tmp_path):
    m = load(save_model(tmp_path / "f.ms", fused_graph(), {}))
    seen = []
    r = measure(m, random_inputs(m), loop_count=4, warm_up=2, profile=True,
                progress=lambda stage, i, n: seen.append((stage, i, n)))
    assert len(r.times_ms) == 4 and all(t > 0 for t in r.times_ms)
    assert [row.name for row in r.by_name] == ["gk0", "tanh0"]
    assert [row.name for row in r.by_type] == ["GraphKernel", "Tanh"]
    assert all(row.calls == 4 for row in r.by_name)
    assert r.by_name[0].source_nodes == ("mul0", "add0", "relu0", "sub0")
    assert seen[0] == ("warm up", 1, 2) and seen[-1] == ("benchmark", 4, 4)
    s = r.summary()
    assert s["min_ms"] <= s["median_ms"] <= s["p90_ms"] <= s["p99_ms"] <= s["max_ms"]
    assert all(re.fullmatch(r"\d+\.\d{6}", f"{v:f}") for v in (s["avg_ms"],))


def test_measure_without_profile(tmp_path):
    m = load(save_model(tmp_path / "f.ms", fused_graph(), {}))
    r = measure(m, random_inputs(m), loop_count=3, warm_up=0)
    assert len(r.times_ms) == 3 and r.by_name == [] and np.isfinite(r.avg)
