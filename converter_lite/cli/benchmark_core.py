"""The ``benchmark`` flow behind the CLI, usable from Python: ``run_benchmark(BenchmarkOptions(...))``.

Modes, as in MindSpore: with ``benchmark_data_file`` (or, beyond MindSpore, ``compare_model``) the model runs
once and its outputs are compared (accuracy mode); otherwise it is timed (performance mode).  Every line goes
through ``out``/``err`` so that callers can capture it; the returned status is 0 or a MindSpore error code,
and the returned report is what ``--reportFile`` holds.
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from ..errors import RET_ERROR, RET_INPUT_PARAM_INVALID, RET_NOT_SUPPORT, ConverterError
from ..fileio import write_text
from .memory import MIB, RssPeak, fmt_mib, traced_peak
from .progress import Progress

Printer = Callable[[str], None]
IN_DATA_SHOWN = 20


@dataclass
class BenchmarkOptions:
    model_file: str
    in_data_file: str | None = None
    input_shapes: str | None = None
    loop_count: int = 10
    warm_up_loop_count: int = 3
    num_threads: int = 2
    benchmark_data_file: str | None = None
    accuracy_threshold: float = 0.5
    compare_model: str | None = None
    time_profiling: bool = False
    report_file: str | None = None
    device: str = "CPU"
    cpu_bind_mode: int | None = None
    seed: int = 0
    native: bool = True
    rebuild_kernels: bool = False
    progress: bool = False


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def validate(opts: BenchmarkOptions) -> None:
    """MindSpore's flag checks (``Benchmark::Init``); raises ConverterError on an invalid combination."""
    def bad(msg: str) -> ConverterError:
        return ConverterError(RET_INPUT_PARAM_INVALID, msg)
    if not opts.model_file:
        raise bad("modelPath is required (--modelFile=model.ms)")
    if opts.loop_count <= 0:
        raise bad(f"LoopCount:{opts.loop_count} must be greater than 0")
    if opts.warm_up_loop_count < 0:
        raise bad(f"WarmUpLoopCount:{opts.warm_up_loop_count} must be greater than or equal to 0")
    if opts.num_threads <= 0:
        raise bad(f"numThreads:{opts.num_threads} must be greater than 0")
    if opts.device.upper() != "CPU":
        raise ConverterError(RET_NOT_SUPPORT, f"--device={opts.device} is not supported: converter_lite models "
                                              "run on the CPU only (--device=CPU)")
    if not opts.accuracy_threshold >= 0:
        raise bad(f"accuracyThreshold:{opts.accuracy_threshold} must not be negative")
    if opts.benchmark_data_file and opts.compare_model:
        raise bad("give either --benchmarkDataFile or --compareModel as the reference, not both")


def run_benchmark(opts: BenchmarkOptions, out: Printer = print, err: Printer = _stderr) -> tuple[int, dict]:
    """Runs the benchmark described by ``opts``; returns ``(status, report)``."""
    name = os.path.basename(opts.model_file or "")
    report: dict = {"model": name, "options": asdict(opts), "status": "failed", "code": RET_ERROR}
    try:
        validate(opts)
    except ConverterError as e:
        err(e.message)
        err(f"Benchmark init Error : {e.code}")
        err(f"Run Benchmark {name} Failed : {e.code}")
        report.update(code=e.code, error=e.message)
        return _finish(opts, report, e.code, err)
    _print_settings(opts, out)
    try:
        _run(opts, name, report, out, err)
        code = 0
    except ConverterError as e:
        err(e.message)
        code = e.code
        report["error"] = e.message
    except OSError as e:
        msg = f"cannot read {e.filename}: {e.strerror}" if e.filename else str(e)
        err(msg)
        code = RET_ERROR
        report["error"] = msg
    except MemoryError as e:            # e.g. huge declared dims: a clean failure, not a traceback
        msg = f"out of memory running {name}: {e}"
        err(msg)
        code = RET_ERROR
        report["error"] = msg
    if code == 0:
        out(f"Run Benchmark {name} Success.")
    else:
        err(f"Run Benchmark {name} Failed : {code}")
    report.update(status="success" if code == 0 else "failed", code=code)
    return _finish(opts, report, code, err)


def _print_settings(opts: BenchmarkOptions, out: Printer) -> None:
    out(f"ModelPath = {opts.model_file}")
    out(f"InDataPath = {opts.in_data_file or ''}")
    out(f"LoopCount = {opts.loop_count}")
    out(f"DeviceType = {opts.device}")
    out(f"AccuracyThreshold = {opts.accuracy_threshold:g}")
    out(f"WarmUpLoopCount = {opts.warm_up_loop_count}")
    out(f"NumThreads = {opts.num_threads}")
    out(f"calibDataPath = {opts.benchmark_data_file or opts.compare_model or ''}")
    if opts.cpu_bind_mode is not None:
        out(f"cpuBindMode = {opts.cpu_bind_mode} (ignored: converter_lite does not bind threads to cores)")


def _run(opts: BenchmarkOptions, name: str, report: dict, out: Printer, err: Printer) -> None:
    from ..api import load
    from .inputs import check_input_shapes, random_inputs, read_input_files

    out("start reading model file")
    rss = RssPeak().start()
    t0 = time.perf_counter()
    model = load(opts.model_file, num_threads=opts.num_threads, native=opts.native,
                 trust_native_code=not opts.rebuild_kernels)
    load_ms = (time.perf_counter() - t0) * 1e3
    out(f"PrepareTime = {load_ms:f} ms")
    out(f"LoadTime = {load_ms:f} ms")
    report["load_time_ms"] = load_ms
    report["native_kernels"] = sum(k.native for k in model.kernels)
    if opts.input_shapes:
        model = check_input_shapes(model, opts.input_shapes)
    if opts.in_data_file:
        feeds = read_input_files(model, [p.strip() for p in opts.in_data_file.split(",") if p.strip()])
        source = opts.in_data_file
    else:
        feeds = random_inputs(model, seed=opts.seed)
        source = f"random (seed {opts.seed})"
    report["inputs"] = {"source": source, "tensors": {n: {"dtype": str(a.dtype), "shape": list(a.shape)}
                                                     for n, a in feeds.items()}}
    if opts.benchmark_data_file or opts.compare_model:
        _accuracy(opts, model, feeds, report, out, err)
    else:
        _performance(opts, name, model, feeds, report, out)
        _memory(model, feeds, rss, report, out)


def _accuracy(opts, model, feeds, report, out, err) -> None:
    from .accuracy import compare_outputs, failure_lines, fmt, read_calibration

    out("MarkAccuracy")
    for i, a in enumerate(feeds.values()):
        flat = np.asarray(a).reshape(-1)[:IN_DATA_SHOWN]
        out(f"InData{i}: " + " ".join(fmt(v) if isinstance(v, float) else str(v) for v in flat.tolist()))
    outputs = model.run(feeds)
    if opts.compare_model:
        from .benchmark_compare import onnxruntime_outputs
        expected = onnxruntime_outputs(opts.compare_model, feeds, model.output_names, opts.num_threads)
        reference = f"onnxruntime:{opts.compare_model}"
    else:
        expected = read_calibration(opts.benchmark_data_file)
        reference = opts.benchmark_data_file
    result = compare_outputs(outputs, expected, opts.accuracy_threshold)
    for line in result.lines:
        out(line)
    out("")
    report["accuracy"] = {"reference": reference, "threshold": opts.accuracy_threshold,
                          "biases_percent": {k: _finite(v) for k, v in result.biases.items()},
                          "mean_bias_percent": _finite(result.mean_bias), "passed": result.passed,
                          "not_compared": result.uncompared}
    if not result.passed:
        for line in failure_lines(result):
            err(line)
        raise ConverterError(RET_ERROR, f"mean bias {fmt(result.mean_bias)}% is above the accuracy threshold "
                                        f"{fmt(opts.accuracy_threshold)}%")


def _performance(opts, name, model, feeds, report, out) -> None:
    from .timing import measure, profile_report, profile_tables, profile_total_line, timing_lines

    progress = Progress() if opts.progress else None
    out("Running warm up loops...")
    out("Running benchmark loops...")
    result = measure(model, feeds, opts.loop_count, opts.warm_up_loop_count, profile=opts.time_profiling,
                     progress=progress)
    if progress:
        progress.close()
    if opts.time_profiling:
        for line in profile_tables(result, opts.loop_count) + profile_total_line(result):
            out(line)
        report["profile"] = profile_report(result, opts.loop_count)
    for line in timing_lines(name, opts.num_threads, result):
        out(line)
    report["timing"] = result.summary()


def _memory(model, feeds, rss: RssPeak, report: dict, out: Printer) -> None:
    """Peak memory lines (cli/memory.py explains both methods): the resident memory that loading and the
    runs added, then the numpy arrays alive at once within one more (untimed, traced) run."""
    peak_rss = rss.peak_bytes()
    arrays = traced_peak(lambda: model.run(feeds))
    out(f"PeakMemory = {fmt_mib(peak_rss)} MB ({rss.describe()})")
    out(f"PeakRunMemory = {fmt_mib(arrays)} MB (numpy arrays alive at once during one run, tracemalloc)")
    report["memory"] = {"peak_rss_mb": peak_rss / MIB, "peak_rss_method": rss.describe(),
                        "rss_total_peak_mb": rss.peak_total_bytes() / MIB,
                        "run_peak_arrays_mb": arrays / MIB,
                        "run_peak_arrays_method": "numpy arrays alive at once during one run (tracemalloc)"}


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _finish(opts: BenchmarkOptions, report: dict, code: int, err: Printer) -> tuple[int, dict]:
    if opts.report_file:
        try:
            write_text(opts.report_file, json.dumps(report, indent=2), make_dirs=False)
        except OSError as e:
            err(f"cannot write report file {opts.report_file}: {e.strerror or e}")
            code = code or RET_ERROR
    return code, report
