"""Performance mode of ``benchmark``: timed loops, latency statistics and MindSpore's profiling tables.

``measure`` runs ``warm_up`` untimed and ``loop_count`` timed ``Model.run`` calls (wall clock per call, like
MindSpore's RunGraph timing).  With ``profile=True`` the timed runs also record each top-level kernel's time,
from which ``profile_tables`` prints MindSpore's two ``--timeProfiling`` tables (per kernel name and per op type:
``avg(ms)`` = total / loop_count, ``percent`` = share of the summed kernel time as a fraction, ``calledTimes``,
``opTotalTime`` in ms), followed by the original ONNX nodes of each fused kernel.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

TABLE_RULE = "-" * 73
NAME_TITLES = ("opName", "avg(ms)", "percent", "calledTimes", "opTotalTime")
TYPE_TITLES = ("opType", "avg(ms)", "percent", "calledTimes", "opTotalTime")


@dataclass
class ProfileRow:
    name: str
    total_ms: float
    calls: int
    source_nodes: tuple[str, ...] = ()


@dataclass
class TimingResult:
    times_ms: list[float]
    by_name: list[ProfileRow] = field(default_factory=list)   # empty unless profiled
    by_type: list[ProfileRow] = field(default_factory=list)

    @property
    def min(self) -> float:
        return min(self.times_ms)

    @property
    def max(self) -> float:
        return max(self.times_ms)

    @property
    def avg(self) -> float:
        return sum(self.times_ms) / len(self.times_ms)

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.times_ms, q))

    def summary(self) -> dict:
        return {"min_ms": self.min, "max_ms": self.max, "avg_ms": self.avg, "median_ms": self.percentile(50),
                "p90_ms": self.percentile(90), "p99_ms": self.percentile(99), "times_ms": list(self.times_ms)}


def measure(model, feeds: dict[str, np.ndarray], loop_count: int = 10, warm_up: int = 3, profile: bool = False,
            progress: Callable[[str, int, int], None] | None = None) -> TimingResult:
    """Times ``model.run(feeds)``; ``progress(stage, done, total)`` is called after each run if given."""
    for i in range(warm_up):
        model.run(feeds)
        if progress:
            progress("warm up", i + 1, warm_up)
    clock = time.perf_counter
    times: list[float] = []
    kernels = model.kernels_for(feeds) if profile and hasattr(model, "kernels_for") else model.kernels
    kernel_s = [0.0] * len(kernels)
    for i in range(loop_count):
        if profile:
            t0 = clock()
            model.run_profiled(feeds, kernel_s)
        else:
            t0 = clock()
            model.run(feeds)
        times.append((clock() - t0) * 1e3)
        if progress:
            progress("benchmark", i + 1, loop_count)
    result = TimingResult(times)
    if profile:
        result.by_name, result.by_type = _aggregate(kernels, kernel_s, loop_count)
    return result


def _aggregate(kernels, seconds: list[float], loop_count: int) -> tuple[list[ProfileRow], list[ProfileRow]]:
    """Rows keyed and sorted by kernel name and by op type (MindSpore keeps them in a std::map)."""
    by_name: dict[str, ProfileRow] = {}
    by_type: dict[str, ProfileRow] = {}
    for k, s in zip(kernels, seconds):
        for table, key in ((by_name, k.name), (by_type, k.op)):
            row = table.setdefault(key, ProfileRow(key, 0.0, 0))
            row.total_ms += s * 1e3
            row.calls += loop_count
        by_name[k.name].source_nodes += tuple(k.source_nodes)
    return sorted(by_name.values(), key=lambda r: r.name), sorted(by_type.values(), key=lambda r: r.name)


def timing_lines(model_name: str, num_threads: int, result: TimingResult) -> list[str]:
    """MindSpore's result line (exact format) plus our median/p90/p99 line."""
    return [f"Model = {model_name}, NumThreads = {num_threads}, MinRunTime = {result.min:f} ms, "
            f"MaxRuntime = {result.max:f} ms, AvgRunTime = {result.avg:f} ms",
            f"MedianRunTime = {result.percentile(50):f} ms, P90RunTime = {result.percentile(90):f} ms, "
            f"P99RunTime = {result.percentile(99):f} ms"]


def profile_tables(result: TimingResult, loop_count: int) -> list[str]:
    """Both ``--timeProfiling`` tables, laid out as MindSpore's ``PrintResult`` does, plus, after the first
    table, one line per fused kernel naming the ONNX nodes it contains."""
    total = sum(r.total_ms for r in result.by_name)
    lines = _table(NAME_TITLES, result.by_name, total, loop_count)
    for r in result.by_name:
        if r.source_nodes:
            lines.append(f"    {r.name} <- {', '.join(r.source_nodes)}")
    lines += _table(TYPE_TITLES, result.by_type, total, loop_count)
    return lines


def profile_total_line(result: TimingResult) -> list[str]:
    """Newer MindSpore's closing line of the profile: the timed runs' wall time and the part of it spent inside
    kernels (the rest is the runtime's own overhead), then a rule."""
    kernel_ms = sum(r.total_ms for r in result.by_name)
    return [f"total time :     {sum(result.times_ms):f} ms,    kernel cost : {kernel_ms:f} ms", TABLE_RULE]


def profile_report(result: TimingResult, loop_count: int) -> dict:
    total = sum(r.total_ms for r in result.by_name) or 1.0

    def rows(table):
        return [{"name": r.name, "avg_ms": r.total_ms / loop_count, "percent": r.total_ms / total,
                 "called_times": r.calls, "total_ms": r.total_ms, **({"source_nodes": list(r.source_nodes)}
                                                                   if r.source_nodes else {})} for r in table]
    return {"by_name": rows(result.by_name), "by_type": rows(result.by_type),
            "total_ms": sum(result.times_ms), "kernel_ms": sum(r.total_ms for r in result.by_name),
            "fused_kernels": {r.name: list(r.source_nodes) for r in result.by_name if r.source_nodes}}


def _table(titles: tuple[str, ...], rows: list[ProfileRow], total_ms: float, loop_count: int) -> list[str]:
    # Column widths follow MindSpore exactly: a cell longer than the current width sets it to len + 4; a title
    # longer than the width sets it to the title's length.  Cells are padded and each is followed by a tab.
    widths = [0] * 5
    cells = []
    for r in rows:
        row = [r.name, f"{r.total_ms / loop_count:f}", f"{r.total_ms / total_ms if total_ms else 0.0:f}",
               f"{r.calls:d}", f"{r.total_ms:f}"]
        for i, c in enumerate(row):
            if len(c) > widths[i]:
                widths[i] = len(c) + 4
        cells.append(row)
    for i, t in enumerate(titles):
        widths[i] = max(widths[i], len(t))
    lines = [TABLE_RULE, "".join(t.ljust(w) + "\t" for t, w in zip(titles, widths))]
    lines += ["".join(c.ljust(w) + "\t" for c, w in zip(row, widths)) for row in cells]
    return lines
