"""`benchmark` completeness (SPEC §6, issue 5 item 5): load time, peak memory, profiling totals, JSON report,
progress line.  Format only: no timing assertions."""
from __future__ import annotations

import functools
import io
import json
import os
import re
import sys

import pytest
from click.testing import CliRunner

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "runtime"))
from runtime_graphs import fused_graph

from converter_lite.cli import benchmark_core
from converter_lite.cli.benchmark import main
from converter_lite.cli.benchmark_core import BenchmarkOptions, run_benchmark
from converter_lite.cli.progress import Progress
from converter_lite.model import save_model

MB = r"\d+\.\d{3} MB"


@pytest.fixture
def fused_ms(tmp_path):
    return str(save_model(tmp_path / "fused.ms", fused_graph(), {}))


def test_load_time_and_memory_lines(fused_ms):
    r = CliRunner().invoke(main, [f"--modelFile={fused_ms}", "--loopCount=2", "--warmUpLoopCount=1"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert re.search(r"^LoadTime = \d+\.\d{6} ms$", out, re.MULTILINE)
    assert re.search(r"^PrepareTime = \d+\.\d{6} ms$", out, re.MULTILINE)          # MindSpore's line stays
    peak = re.search(rf"^PeakMemory = {MB} \((.+)\)$", out, re.MULTILINE)
    assert peak and "RSS" in peak.group(1)                                          # the method is stated
    assert re.search(rf"^PeakRunMemory = {MB} \(numpy arrays alive at once during one run, tracemalloc\)$",
                     out, re.MULTILINE)
    lines = out.strip().splitlines()
    assert lines[-1] == "Run Benchmark fused.ms Success."
    assert out.index("LoadTime") < out.index("Model = fused.ms") < out.index("PeakMemory")


def test_accuracy_mode_has_load_time_but_no_memory(fused_ms, tmp_path):
    from converter_lite.runtime import load
    from converter_lite.cli.accuracy import write_calibration
    from converter_lite.cli.inputs import random_inputs

    model = load(fused_ms)
    calib = tmp_path / "calib.out"
    write_calibration(str(calib), model.run(random_inputs(model)))
    r = CliRunner().invoke(main, [f"--modelFile={fused_ms}", f"--benchmarkDataFile={calib}"])
    assert r.exit_code == 0, r.output
    assert "LoadTime = " in r.stdout and "PeakMemory" not in r.stdout


def test_profiling_tables_and_report(fused_ms, tmp_path):
    report = tmp_path / "r.json"
    r = CliRunner().invoke(main, [f"--modelFile={fused_ms}", "--timeProfiling=true", "--loopCount=3",
                                  f"--reportFile={report}"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert re.search(r"^opName\s+\tavg\(ms\)", out, re.MULTILINE)
    assert re.search(r"^opType\s+\tavg\(ms\)", out, re.MULTILINE)
    assert re.search(r"^GraphKernel\s+\t\d+\.\d{6}\s+\t", out, re.MULTILINE)     # fused kernels by op type
    assert "    gk0 <- mul0, add0, relu0, sub0" in out                          # original nodes of each kernel
    total = re.search(r"^total time :     (\d+\.\d{6}) ms,    kernel cost : (\d+\.\d{6}) ms$", out, re.MULTILINE)
    assert total
    assert out.index("opType") < total.start() < out.index("Model = fused.ms")
    data = json.loads(report.read_text())
    assert data["load_time_ms"] > 0
    mem = data["memory"]
    assert set(mem) >= {"peak_rss_mb", "peak_rss_method", "run_peak_arrays_mb", "run_peak_arrays_method"}
    assert mem["peak_rss_mb"] >= 0 and mem["run_peak_arrays_mb"] >= 0
    prof = data["profile"]
    assert prof["fused_kernels"] == {"gk0": ["mul0", "add0", "relu0", "sub0"]}
    assert prof["kernel_ms"] <= prof["total_ms"] * 1.5 + 1.0           # sanity only, kernels lie inside runs
    assert [row["name"] for row in prof["by_type"]] == sorted(row["name"] for row in prof["by_type"])
    assert {"median_ms", "p90_ms", "p99_ms"} <= set(data["timing"])


def test_progress_line_on_long_runs(fused_ms, monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr(benchmark_core, "Progress",
                        functools.partial(Progress, stream=stream, delay=0.0, interval=0.0))
    lines: list[str] = []
    status, _ = run_benchmark(BenchmarkOptions(model_file=fused_ms, loop_count=4, warm_up_loop_count=1,
                                               progress=True), out=lines.append, err=lines.append)
    assert status == 0, lines
    text = stream.getvalue()
    assert "\rbenchmark 4/4" in text and "\rwarm up 1/1" in text
    assert text.endswith("\r")                                         # erased before the result lines
    assert not any("\r" in line for line in lines)


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_waits_then_shows_eta():
    stream, clock = io.StringIO(), FakeClock()
    p = Progress(stream=stream, delay=1.0, interval=0.2, clock=clock)
    for done in range(1, 4):                       # 0.3 s: a short run prints nothing
        clock.t += 0.1
        p("benchmark", done, 20)
    assert stream.getvalue() == ""
    clock.t = 2.0
    p("benchmark", 10, 20)
    assert stream.getvalue().startswith("\rbenchmark 10/20  ETA ")
    eta = float(re.search(r"ETA (\d+\.\d) s", stream.getvalue()).group(1))
    assert 1.0 < eta < 3.0                          # (2.0 - 0.1) s for 9 runs -> about 2.1 s for 10 more
    clock.t = 2.05
    p("benchmark", 11, 20)                          # within the redraw interval: nothing new
    assert stream.getvalue().count("\r") == 1
    p("benchmark", 20, 20)                          # the end of a stage is always drawn
    assert stream.getvalue().endswith("benchmark 20/20" + " " * len("  ETA 2.1 s"))
    p.close()
    assert stream.getvalue().endswith("\r")
    quiet = io.StringIO()
    Progress(stream=quiet).close()
    assert quiet.getvalue() == ""
