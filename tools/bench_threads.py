"""Thread scaling: converter_lite against onnxruntime at 1, 2, 4, 8 and 16 threads on the same models (issue 18).

    python -m tools.bench_threads [--threads 1,2,4,8,16] [--wild-dir DIR] [--only a,b] [--seconds 0.6]
                                  [--jobs N] [--out FILE] [--profile]

Every model is converted once (the native code does not depend on the thread count: it takes the team size at
run time), conversions in parallel processes (``--jobs``).  Then, model by model and thread count by thread
count, ``converter_lite.load(num_threads=t)`` (the default adaptive thread choice, as users get it) and an
onnxruntime session with ``intra_op_num_threads=t`` are timed in one process, each engine alone in blocks with
the rounds interleaved (``bench_timing.interleave``).  The table gives the medians, ours/onnxruntime per thread
count, how many threads our runs ended on (the thread chooser picks 1 or ``t`` per run) and the geometric means.
``--profile`` adds, for every model slower than onnxruntime at the largest thread count, its slowest steps at
that count.  Rows are written to ``--out`` as they finish (a run cut short keeps what it measured).

Models: ``../shared/models`` (the real-architecture exports; token ids in [0, 500)) and the pretrained models of
``tools.wild_models`` found in ``--wild-dir``, at the shapes that module lists.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from .bench_timing import Budget, interleave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_MODELS = os.path.join(ROOT, "..", "shared", "models")
THREADS = (1, 2, 4, 8, 16)
TOKEN_RANGE = (0, 500)
PROFILE_RUNS = 30
PROFILE_TOP = 6


@dataclass
class Source:
    name: str
    path: str
    shapes: dict = field(default_factory=dict)      # --inputShape for the conversion (wild models)
    wild: str = ""                                   # tools.wild_models entry name, for its feeds


@dataclass
class Cell:
    ours_ms: float = math.nan
    ort_ms: float = math.nan
    ours_p99: float = math.nan
    ort_p99: float = math.nan
    ours_threads: int = 0                            # threads the chooser ended on
    fixed_ms: float = math.nan                       # --fixed: ours with adaptive_threads=False (always t)
    error: str = ""


@dataclass
class Result:
    name: str
    convert_s: float = math.nan
    rel_err: float = math.nan
    cells: dict = field(default_factory=dict)        # threads -> Cell
    profile: list = field(default_factory=list)      # (step, op, share of the run, ms) at the largest count
    error: str = ""


def sources(shared_dir: str, wild_dir: str | None, only: set[str] | None) -> list[Source]:
    from . import wild_models

    out = []
    if os.path.isdir(shared_dir):
        for f in sorted(os.listdir(shared_dir)):
            if f.endswith(".onnx"):
                out.append(Source(f[:-5], os.path.join(shared_dir, f)))
    for m in wild_models.available(wild_dir):
        out.append(Source(m.name, wild_models.path_of(m, wild_dir), dict(m.convert_shapes() or {}), m.name))
    return [s for s in out if not only or s.name in only]


def _convert(src: Source, work_dir: str) -> tuple[str, float, str]:
    """(the .ms path, seconds, error) — run in a worker process."""
    import converter_lite

    t0 = time.perf_counter()
    try:
        path = converter_lite.convert(src.path, os.path.join(work_dir, src.name), input_shape=src.shapes or None,
                                      graph_kernel_flags="--opt_level=2")
    except Exception as e:  # noqa: BLE001 - a failed conversion is a row of the table
        return "", 0.0, _short(e)
    return path, time.perf_counter() - t0, ""


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def _feeds(src: Source, ms_path: str) -> dict[str, np.ndarray]:
    import converter_lite

    from . import wild_models
    from .bench_engines import make_feeds

    if src.wild:
        return wild_models.feeds_for(wild_models.BY_NAME[src.wild], converter_lite.load(ms_path, native=False))
    return make_feeds(ms_path, TOKEN_RANGE)


def _profile(model, feeds) -> list:
    kernels = model.kernels_for(feeds)
    timings = [0.0] * len(kernels)
    total = 0.0
    for _ in range(PROFILE_RUNS):
        t0 = time.perf_counter()
        model.run_profiled(feeds, timings)
        total += time.perf_counter() - t0
    order = sorted(range(len(kernels)), key=lambda k: -timings[k])[:PROFILE_TOP]
    return [(kernels[k].name, kernels[k].op, timings[k] / total, timings[k] / PROFILE_RUNS * 1e3) for k in order]


def measure(src: Source, ms_path: str, threads: tuple[int, ...], budget: Budget, profile: bool,
            fixed: bool = False) -> Result:
    import converter_lite

    from .bench_engines import max_rel_error, onnxruntime

    r = Result(src.name)
    try:
        feeds = _feeds(src, ms_path)
    except Exception as e:  # noqa: BLE001
        r.error = f"feeds: {_short(e)}"
        return r
    for t in threads:
        cell = Cell()
        r.cells[t] = cell
        try:
            ours = converter_lite.load(ms_path, num_threads=t)
            ort = onnxruntime(src.path, feeds, t)
            ours_run = (lambda m=ours: m.run(feeds))
            if math.isnan(r.rel_err):
                r.rel_err = max_rel_error(list(ours_run().values()), ort.run())
            runs = {"ours": ours_run, "ort": ort.run}
            if fixed and t > 1:
                pinned = converter_lite.load(ms_path, num_threads=t, adaptive_threads=False)
                runs["fixed"] = (lambda m=pinned: m.run(feeds))
            times = interleave(runs, budget)
            if "fixed" in times:
                cell.fixed_ms = times["fixed"].median
            cell.ours_ms, cell.ort_ms = times["ours"].median, times["ort"].median
            cell.ours_p99, cell.ort_p99 = times["ours"].p99, times["ort"].p99
            chooser = getattr(ours.plan, "chooser", None)
            cell.ours_threads = chooser.best() if chooser is not None else getattr(ours.plan, "run_threads", t)
            if profile and t == threads[-1] and cell.ours_ms > cell.ort_ms:
                r.profile = _profile(ours, feeds)
            del ours, ort
        except Exception as e:  # noqa: BLE001
            cell.error = _short(e)
    return r


def _cell_ms(c: Cell, attr: str) -> float:
    v = getattr(c, attr)
    return c.ours_ms if attr == "fixed_ms" and not math.isfinite(v) else v


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(xs)))) if xs else math.nan


def table_lines(results: list[Result], threads: tuple[int, ...]) -> list[str]:
    head = "| model | " + " | ".join(f"{t} thr: ours / ORT ms (ratio, ours on)" for t in threads) + " |"
    out = [head, "|---|" + "---|" * len(threads)]
    ratios: dict[int, list[float]] = {t: [] for t in threads}
    for r in results:
        if r.error:
            out.append(f"| {r.name} | {r.error} |" + " |" * (len(threads) - 1))
            continue
        cells = []
        for t in threads:
            c = r.cells.get(t)
            if c is None or c.error or not math.isfinite(c.ours_ms):
                cells.append(c.error if c else "")
                continue
            ratio = c.ours_ms / c.ort_ms
            ratios[t].append(ratio)
            cells.append(f"{c.ours_ms:.3g} / {c.ort_ms:.3g} (**{ratio:.2f}**, {c.ours_threads})")
        out.append(f"| {r.name} | " + " | ".join(cells) + " |")
    out.append("| geomean ours/ORT | " + " | ".join(f"**{_geomean(ratios[t]):.2f}** ({len(ratios[t])})"
                                                   for t in threads) + " |")
    scaling = ["", "Speed-up from 1 thread (median 1-thread time / median t-thread time):", "",
               "| model | engine | " + " | ".join(f"{t}" for t in threads) + " |",
               "|---|---|" + "---|" * len(threads)]
    for r in results:
        base = r.cells.get(threads[0])
        if r.error or base is None or base.error:
            continue
        engines = [("ours", "ours_ms"), ("ORT", "ort_ms")]
        if any(math.isfinite(c.fixed_ms) for c in r.cells.values()):
            engines.insert(1, ("ours, all t threads", "fixed_ms"))
        for eng, attr in engines:
            b = base.ours_ms if attr == "fixed_ms" else getattr(base, attr)
            scaling.append(f"| {r.name} | {eng} | " + " | ".join(
                f"{b / _cell_ms(r.cells[t], attr):.2f}" if t in r.cells and not r.cells[t].error else ""
                for t in threads) + " |")
    prof = []
    for r in results:
        if r.profile:
            prof.append(f"- {r.name} at {threads[-1]} threads: " + "; ".join(
                f"{name} ({op}) {share:.0%} {ms:.3f} ms" for name, op, share, ms in r.profile))
    if prof:
        prof = ["", "Slowest steps where ours is behind at the largest thread count (run_profiled):", ""] + prof
    errs = [f"- {r.name}: max rel err {r.rel_err:.1e}" for r in results if r.rel_err > 1e-3]
    if errs:
        errs = ["", "Outputs off onnxruntime by more than 1e-3 relative:", ""] + errs
    return out + scaling + prof + errs


def machine_lines() -> list[str]:
    import onnxruntime

    from .cross_core import describe, round_trip_ns
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    line = (f"Machine: {cpu}, {os.cpu_count()} logical CPUs; load average {load[0]:.2f} at the start; "
            f"onnxruntime {onnxruntime.__version__}; Python {platform.python_version()}; CPU 0 <-> CPU 1 "
            f"cache-line round trip {describe(round_trip_ns())} at the start (tools/cross_core.py).")
    return [line, ""]


def _thread_list(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(sorted({int(t) for t in text.split(",") if t.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of thread counts: {text!r}") from None
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1: {text!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=_thread_list, default=THREADS, help="comma-separated counts (1,2,4,8,16)")
    ap.add_argument("--shared-dir", default=SHARED_MODELS)
    ap.add_argument("--wild-dir", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--seconds", type=float, default=0.6, help="timed seconds per model and thread count")
    ap.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--out", default="")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--fixed", action="store_true", help="also time ours with adaptive_threads=False")
    args = ap.parse_args(argv)
    threads = args.threads
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    budget = Budget(min_rounds=4, min_seconds=args.seconds, max_seconds=max(3.0, 4 * args.seconds),
                    floor_rounds=2, warmup=3, block=8, settle=0.08)
    srcs = sources(args.shared_dir, args.wild_dir, only)
    head = machine_lines()
    results: list[Result] = []

    def write() -> None:
        text = "\n".join(head + table_lines(results, threads)) + "\n"
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as f:
                f.write(text)
            with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
                json.dump([asdict(r) for r in results], f, indent=1, default=str)
        return text

    with tempfile.TemporaryDirectory(prefix="cl_threads_") as work:
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            converted = list(pool.map(_convert, srcs, [work] * len(srcs)))
        print(f"converted {len(srcs)} models in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        for src, (ms_path, convert_s, err) in zip(srcs, converted):
            if err:
                results.append(Result(src.name, error=f"convert: {err}"))
            else:
                results.append(measure(src, ms_path, threads, budget, args.profile, args.fixed))
                results[-1].convert_s = convert_s
            r = results[-1]
            print(f"{src.name}: " + (r.error or ", ".join(
                f"{t}: {c.ours_ms:.3g}/{c.ort_ms:.3g}" if not c.error else f"{t}: {c.error}"
                for t, c in r.cells.items())), file=sys.stderr, flush=True)
            write()
    print(write())
    return 0


if __name__ == "__main__":
    sys.exit(main())
