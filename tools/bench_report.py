"""``make bench`` results: one row per model, the summary figures, the machine, and bench/RESULTS.md.

Table columns (times are medians over the interleaved rounds, p90 in parentheses; ratios are of medians; p99/median is the tail):
    ORT ms / O0 ms / O2 ms / OV ms   onnxruntime, converter_lite at opt_level 0 and 2, OpenVINO when present
    O2/ORT, O0/ORT                   our latency over onnxruntime's (< 1: we are faster)
    O0/O2                            the speed-up that opt_level 2 brings over 0
    load ms (O2, ORT)                converter_lite.load (median of 3), InferenceSession creation
    peak MB (O2, ORT)                peak memory of load + 3 runs in a fresh process (tools/bench_memory.py)
    max rel err (O0, O2)             max|ours - ORT| / max|ORT| over the outputs, from one run
"""
from __future__ import annotations

import datetime
import math
import os
import platform
import sys
from dataclasses import dataclass, field

from .bench_timing import Samples


@dataclass
class ModelResult:
    name: str
    group: str                                       # "real" (../shared/models) or "sample" (models/)
    times: dict[str, Samples] = field(default_factory=dict)      # engine -> samples
    load_ms: dict[str, float] = field(default_factory=dict)
    peak_mb: dict[str, float | str] = field(default_factory=dict)
    rel_err: dict[str, float] = field(default_factory=dict)
    info: dict[str, dict] = field(default_factory=dict)
    error: str | None = None
    weights_mb: float = 0.0                          # size of the ONNX file (weights and graph), MiB
    tails: dict[str, float] = field(default_factory=dict)   # engine -> p99/median, run alone (bench.tail_ratio)

    def median(self, engine: str) -> float | None:
        s = self.times.get(engine)
        return s.median if s and s.times_ms else None

    def ratio(self, a: str, b: str) -> float | None:
        ma, mb = self.median(a), self.median(b)
        return ma / mb if ma and mb else None


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _t(r: ModelResult, engine: str) -> str:
    s = r.times.get(engine)
    return f"{s.median:.2f} ({s.p90:.2f})" if s and s.times_ms else "-"


def _tail(r: ModelResult, engine: str) -> float | None:
    """p99 over median of an engine's runs (issue 18 asks for at most 2 on a quiet machine): measured alone
    (``tails``) where the benchmark did, else over its interleaved runs."""
    if engine in r.tails:
        return r.tails[engine]
    s = r.times.get(engine)
    return s.p99 / s.median if s and s.times_ms and s.median else None


TAIL_LIMIT = 2.0


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pair(a, b, fmt) -> str:
    return f"{fmt(a)}, {fmt(b)}"


def _num(v, digits: int = 1) -> str:
    if isinstance(v, (int, float)):
        return f"{v:.{digits}f}"
    return "-" if v is None else "err"


def _err(v) -> str:
    return "-" if v is None else f"{v:.1e}"


def table_lines(results: list[ModelResult], with_openvino: bool) -> list[str]:
    """The results as a Markdown table (printed as is and written to RESULTS.md)."""
    head = ["model", "ORT ms (p90)", "O0 ms (p90)", "O2 ms (p90)", "O2/ORT", "O0/ORT", "O0/O2"]
    if with_openvino:
        head += ["OV ms (p90)", "O2/OV"]
    head += ["p99/median (O2, ORT, fixed work)", "load ms (O2, ORT)", "peak MB (O2, ORT)", "max rel err (O0, O2)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        if r.error and not r.times:
            lines.append(f"| {r.name} | " + " | ".join(["-"] * (len(head) - 2)) + f" | failed: {r.error} |")
            continue
        cells = [r.name, _t(r, "onnxruntime"), _t(r, "O0"), _t(r, "O2"), _x(r.ratio("O2", "onnxruntime")),
                 _x(r.ratio("O0", "onnxruntime")), _x(r.ratio("O0", "O2"))]
        if with_openvino:
            cells += [_t(r, "openvino"), _x(r.ratio("O2", "openvino"))]
        cells += [_pair(_tail(r, "O2"), _tail(r, "onnxruntime"), lambda v: _num(v, 2))
                  + (f", {r.tails['fixed work']:.2f}" if "fixed work" in r.tails else ""),
                  _pair(r.load_ms.get("O2"), r.load_ms.get("onnxruntime"), _num),
                  _pair(r.peak_mb.get("O2"), r.peak_mb.get("onnxruntime"), _num),
                  _pair(r.rel_err.get("O0"), r.rel_err.get("O2"), _err)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary_lines(results: list[ModelResult]) -> list[str]:
    """Geometric means of the ratios (the bench models = real + sample, the real-architecture ones, the zoo),
    worst model, failures."""
    lines = []
    groups = (("all models", ("real", "sample")), ("real-architecture models", ("real",)),
              ("zoo models (models/zoo, held-out stand-ins)", ("zoo",)))
    for label, group in groups:
        rs = [r for r in results if r.group in group]
        if not rs:
            continue
        o2 = geomean([r.ratio("O2", "onnxruntime") for r in rs])
        o0 = geomean([r.ratio("O0", "onnxruntime") for r in rs])
        up = geomean([r.ratio("O0", "O2") for r in rs])
        n = sum(r.ratio("O2", "onnxruntime") is not None for r in rs)
        lines.append(f"Geometric mean O2/ORT over {label} ({n}): {_x(o2, 3)}   "
                     f"(O0/ORT {_x(o0, 3)}, O0/O2 speed-up {_x(up, 3)})")
    ratios = [(r.ratio("O2", "onnxruntime"), r.name) for r in results
              if r.ratio("O2", "onnxruntime") and r.group != "zoo"]
    if ratios:
        worst = max(ratios)
        lines.append(f"Slowest relative to ORT at O2: {worst[1]} ({worst[0]:.2f}x)")
    tails = [f"{r.name} ({_tail(r, 'O2'):.2f}" + (f"; a fixed-work call of its length {r.tails['fixed work']:.2f}"
                                                  if "fixed work" in r.tails else "") + ")"
             for r in results if (_tail(r, "O2") or 0) > TAIL_LIMIT]
    lines.append(f"p99 above {TAIL_LIMIT:g}x the median at O2: " + ("; ".join(tails) if tails else "none"))
    failed = [f"{r.name} ({r.error})" for r in results if r.error]
    if failed:
        lines.append("Problems: " + "; ".join(failed))
    return lines


@dataclass(frozen=True)
class Targets:
    """Issue 5's performance targets, checked on one run's numbers."""
    geomean_o2_ort: float = 0.8          # geometric mean of O2/ORT at most this
    worst_o2_ort: float = 1.2            # no model slower than this times onnxruntime
    fusion_speedup: float = 1.3          # O0/O2 at least this on the transformer-shaped models
    load_ms: float = 100.0               # load time per load_per_mb MB of weights (at least this)
    load_per_mb: float = 50.0
    peak_vs_ort: float = 1.1             # peak memory at most onnxruntime's + 10 %


def target_lines(results: list[ModelResult], transformers: set[str], t: Targets = Targets()) -> list[str]:
    """One ``- [x]`` / ``- [ ]`` line per target, with the figures that decide it."""
    def check(ok: bool, text: str) -> str:
        return f"- [{'x' if ok else ' '}] {text}"
    ratios = {r.name: r.ratio("O2", "onnxruntime") for r in results if r.ratio("O2", "onnxruntime")}
    lines = []
    g = geomean(list(ratios.values()))
    lines.append(check(g is not None and g <= t.geomean_o2_ort,
                       f"geometric mean O2/ORT <= {t.geomean_o2_ort}: {_x(g, 3)}"))
    slow = sorted((v, k) for k, v in ratios.items() if v > t.worst_o2_ort)
    lines.append(check(bool(ratios) and not slow, f"no model above {t.worst_o2_ort}x onnxruntime at O2: "
                       + (", ".join(f"{k} {v:.2f}x" for v, k in reversed(slow)) or "none above")))
    ups = {r.name: r.ratio("O0", "O2") for r in results if r.name in transformers and r.ratio("O0", "O2")}
    low = [f"{k} {v:.2f}x" for k, v in ups.items() if v < t.fusion_speedup]
    lines.append(check(bool(ups) and not low, f"O0/O2 >= {t.fusion_speedup} on the transformer-shaped models "
                       f"({', '.join(sorted(ups)) or 'none ran'}): " + (", ".join(low) or "all above")))
    # "under 100 ms for 50 MB of weights": the limit grows with the model (100 ms up to 50 MB, 200 for 100 MB)
    limits = {r.name: t.load_ms * max(1.0, r.weights_mb / t.load_per_mb) for r in results}
    loads = {r.name: r.load_ms["O2"] for r in results if "O2" in r.load_ms}
    worst = max(loads, key=lambda k: loads[k] / limits[k], default=None)
    lines.append(check(bool(loads) and all(v < limits[k] for k, v in loads.items()),
                       f"load time < {t.load_ms:g} ms per {t.load_per_mb:g} MB of weights (at least {t.load_ms:g} "
                       "ms): closest to its limit "
                       + (f"{worst} {loads[worst]:.1f} ms ({results_mb(results, worst):.0f} MB, limit "
                          f"{limits[worst]:.0f} ms)" if worst else "-")))
    peaks = [(r.name, r.peak_mb.get("O2"), r.peak_mb.get("onnxruntime")) for r in results]
    peaks = [(n, a, b) for n, a, b in peaks if isinstance(a, float) and isinstance(b, float)]
    over = [f"{n} {a:.1f} MB vs {b:.1f} MB" for n, a, b in peaks if a > t.peak_vs_ort * b]
    lines.append(check(bool(peaks) and not over, f"peak memory <= onnxruntime's + {t.peak_vs_ort - 1:.0%}: "
                       + (", ".join(over) or ("all within" if peaks else "not measured"))))
    return lines


def results_mb(results: list[ModelResult], name: str) -> float:
    return next((r.weights_mb for r in results if r.name == name), 0.0)


def micro_lines(micro: dict[str, dict[str, float]] | None, shape: tuple[int, ...], threads: int) -> list[str]:
    """The fused-elementwise micro-benchmark (tools/bench_kernels.py) as a Markdown table."""
    if not micro:
        return ["(not run)"]
    lines = [(f"float32 {list(shape)}, native threads = {threads}; np.copyto (one thread) of the same bytes is the "
             "memory-copy floor; per-call median and (minimum) over the rounds, each engine timed in blocks of "
             "consecutive calls, interleaved (tools/bench_kernels.py)."), "",
             "| kernel | native ms | np.copyto ms | ORT ms | native/copy | ORT/native |", "|---|---|---|---|---|---|"]
    for name, stats in micro.items():
        med = stats.get("median", stats)            # bench_kernels returns {"median": {...}, "min": {...}}
        low = stats.get("min", {})
        cells = [name + (f" {stats['shape']}" if list(stats.get("shape", shape)) != list(shape) else "")]
        for engine in ("native", "np.copyto", "onnxruntime"):
            v, m = med.get(engine), low.get(engine)
            cells.append("-" if v is None else f"{v * 1e3:.2f}" + (f" ({m * 1e3:.2f})" if m is not None else ""))
        nat, cp, ort = med.get("native"), med.get("np.copyto"), med.get("onnxruntime")
        cells += [_x(nat and cp and nat / cp), _x(ort and nat and ort / nat)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_lines(threads: int, extra: dict[str, str], load_at_start: str = "n/a",
                  cross_core: tuple[str, str] | None = None) -> list[str]:
    import numpy as np

    versions = {"python": sys.version.split()[0], "numpy": np.__version__, **extra}
    return [(f"- CPU: {cpu_model()} ({os.cpu_count()} logical cores; {platform.machine()}, {platform.system()} "
            f"{platform.release()})"),
            "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
            f"- threads: {threads} intra-op for every engine (onnxruntime inter-op 1)",
            f"- load average when the suite started: {load_at_start} (other processes share the cores)",
            *([f"- CPU 0 <-> CPU 1 cache-line round trip (tools/cross_core.py): {cross_core[0]} at the start, "
               f"{cross_core[1]} at the end (~90 ns: the two CPUs share a cache; ~400 ns: they do not, and two "
               "threads lose to one on models whose kernels hand data between cores, in both engines)"]
              if cross_core else []),
            f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}"]


def loadavg() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def results_markdown(table: list[str], summary: list[str], micro: list[str], machine: list[str],
                     method: list[str], targets: list[str] = (), conversion: list[str] = (),
                     control_flow: list[str] = (), wild: list[str] = (), api: list[str] = (),
                     dynamic: list[str] = (), quant: list[str] = ()) -> str:
    parts = ["# `make bench` results", "",
             ("Written by `python -m tools.bench` (`make bench`); numbers from one run on the "
             "machine below.  Latencies in ms: median (p90)."), "",
             "## Machine", *machine, "",
             "## Models", *table, "", *summary, "",
             "## Targets (issue 5)", *targets, "",
             "## Fused elementwise micro-benchmark", *micro, "",
             *(["## The same chain through Model.run (issue 18)", *api, ""] if api else []),
             *(["## Conversion time", *conversion, ""] if conversion else []),
             *(["## Control flow (issue 16)", *control_flow, ""] if control_flow else []),
             *(["## Real models from public wheels (issue 16, `make wild-models`)", *wild, ""] if wild else []),
             *(["## Dynamic shapes: converted once, run at each shape (issue 17)", *dynamic, ""] if dynamic else []),
             *(["## Quantization (issue 19)", *quant, ""] if quant else []),
             "## Method", *method, ""]
    return "\n".join(parts)
