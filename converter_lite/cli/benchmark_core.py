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
    cosine_distance_threshold: float = -1.1     # MindSpore: checked only when > -1
    benchmark_data_type: str = "FLOAT"
    enable_fp16: bool = False
    perf_profiling: bool = False
    perf_event: str | None = None
    workers_num: int | None = None
    enable_parallel: bool = False
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
    accuracy_mode = bool(opts.benchmark_data_file or opts.compare_model)
    if opts.cosine_distance_threshold > -1 and not accuracy_mode:
        raise bad(f"--cosineDistanceThreshold={opts.cosine_distance_threshold:g} needs a reference to compare with "
                  "(--benchmarkDataFile or --compareModel)")
    if opts.cosine_distance_threshold > 1:
        raise bad(f"--cosineDistanceThreshold={opts.cosine_distance_threshold:g}: a cosine similarity is at most 1")
    dtype = opts.benchmark_data_type.upper()
    if dtype in ("INT8", "UINT8"):
        raise bad(f"--benchmarkDataType={opts.benchmark_data_type} is not supported yet: it is for quantized "
                  "models, which converter_lite does not build yet (use FLOAT or INT32)")
    if dtype not in ("FLOAT", "INT32"):
        raise bad(f"--benchmarkDataType={opts.benchmark_data_type}: must be FLOAT, INT32, INT8 or UINT8")
    if dtype != "FLOAT" and not opts.benchmark_data_file:
        raise bad(f"--benchmarkDataType={opts.benchmark_data_type} describes --benchmarkDataFile, which is not given")
    if opts.enable_fp16:
        raise bad("--enableFp16=true is not supported: converter_lite's kernels compute in float32 only "
                  "(converter_lite --fp16=on stores the weights as float16)")
    if opts.perf_profiling or opts.perf_event:
        raise bad("--perfProfiling/--perfEvent are not supported: they read ARM hardware performance counters; "
                  "use --timeProfiling=true for per-kernel times")
    if opts.enable_parallel:
        raise bad("--enableParallel=true is not supported: converter_lite runs one model instance per process "
                  "(use --numThreads for intra-op threads)")
    if opts.workers_num is not None:
        raise bad(f"--workersNum={opts.workers_num} is not supported: it sizes MindSpore's parallel-predict worker "
                  "pool, which converter_lite has not")
    if opts.cpu_bind_mode is not None and opts.cpu_bind_mode not in (0, 1, 2):
        raise bad(f"--cpuBindMode={opts.cpu_bind_mode}: must be 0 (no bind), 1 (big cores) or 2 (little cores)")


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
    saved_affinity = None
    try:
        saved_affinity = _bind_cpus(opts.cpu_bind_mode, out)
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
    finally:
        if saved_affinity is not None:
            os.sched_setaffinity(0, saved_affinity)
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
    if opts.cosine_distance_threshold > -1:
        out(f"CosineDistanceThreshold = {opts.cosine_distance_threshold:g}")
    if opts.benchmark_data_file:
        out(f"BenchmarkDataType = {opts.benchmark_data_type.upper()}")


CPU_BIND_NAMES = {0: "no bind", 1: "big cores", 2: "little cores"}


def core_capacities() -> dict[int, int]:
    """Linux's per-core capacity (``/sys/devices/system/cpu/cpuN/cpu_capacity``, present on big.LITTLE/hybrid
    machines) for the cores this process may use; {} when the kernel does not report it."""
    caps: dict[int, int] = {}
    for cpu in sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else ():
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/cpu_capacity", encoding="ascii") as f:
                caps[cpu] = int(f.read().strip())
        except (OSError, ValueError):
            return {}
    return caps


def bind_cpu_set(mode: int, caps: dict[int, int]) -> set[int] | None:
    """The cores ``--cpuBindMode=mode`` binds to, given ``core_capacities()``; None = no binding (mode 0, or a
    machine whose cores are all alike, where big and little cores do not exist)."""
    if mode == 0 or len(set(caps.values())) < 2:
        return None
    top = max(caps.values())
    big = {c for c, v in caps.items() if v == top}
    return big if mode == 1 else set(caps) - big


def _bind_cpus(mode: int | None, out: Printer) -> set[int] | None:
    """Binds this process to the cores of ``--cpuBindMode`` (before the model's threads start); returns the
    previous affinity to restore, or None when nothing was changed (always says which, in one line)."""
    if mode is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        out(f"cpuBindMode = {mode} ({CPU_BIND_NAMES[mode]}): not bound, this OS has no sched_setaffinity")
        return None
    caps = core_capacities()
    cores = bind_cpu_set(mode, caps)
    if cores is None:
        why = "no binding asked" if mode == 0 else "not bound: this machine's cores are all alike (no big/little)"
        out(f"cpuBindMode = {mode} ({CPU_BIND_NAMES[mode]}): {why}")
        return None
    previous = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    out(f"cpuBindMode = {mode} ({CPU_BIND_NAMES[mode]}): bound to cores {','.join(map(str, sorted(cores)))}")
    return previous


def cosine_similarity(actual: np.ndarray, expected: np.ndarray) -> float:
    """MindSpore's cosine distance of two tensors (their cosine similarity; 1 = same direction)."""
    a = np.asarray(actual, dtype=np.float64).reshape(-1)
    e = np.asarray(expected, dtype=np.float64).reshape(-1)
    na, ne = float(np.linalg.norm(a)), float(np.linalg.norm(e))
    if na == 0.0 and ne == 0.0:
        return 1.0
    if na == 0.0 or ne == 0.0:
        return 0.0
    return float(np.dot(a, e) / (na * ne))


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
    shapes = None
    if opts.input_shapes:
        model, shapes = check_input_shapes(model, opts.input_shapes)
    if opts.in_data_file:
        feeds = read_input_files(model, [p.strip() for p in opts.in_data_file.split(",") if p.strip()], shapes)
        source = opts.in_data_file
    else:
        feeds = random_inputs(model, seed=opts.seed, shapes=shapes)
        source = f"random (seed {opts.seed})"
    report["inputs"] = {"source": source, "tensors": {n: _describe(a) for n, a in feeds.items()}}
    if opts.benchmark_data_file or opts.compare_model:
        _accuracy(opts, model, feeds, report, out, err)
    else:
        _performance(opts, name, model, feeds, report, out)
        _memory(model, feeds, rss, report, out)


def _describe(a) -> dict:
    """A feed for the report: dtype and shape, or a sequence's length and its elements'."""
    if isinstance(a, list):
        return {"sequence": [_describe(x) for x in a]}
    if a is None:
        return {"optional": None}
    return {"dtype": str(a.dtype), "shape": list(a.shape)}


def _accuracy(opts, model, feeds, report, out, err) -> None:
    from .accuracy import compare_outputs, failure_lines, fmt, read_calibration

    kinds = [f"{n} ({t})" for n, t in zip(model.input_names + model.output_names,
                                          model.input_types + model.output_types) if not t.is_tensor]
    if kinds:
        raise ConverterError(RET_INPUT_PARAM_INVALID, "accuracy checks (--benchmarkDataFile, --compareModel) "
                                                      f"compare tensors; this model has {', '.join(kinds)}")
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
        if opts.benchmark_data_type.upper() == "INT32":
            for key, value in expected.items():
                if not np.all(np.mod(value, 1) == 0):
                    raise ConverterError(RET_INPUT_PARAM_INVALID, f"--benchmarkDataType=INT32: tensor {key} of "
                                                                  f"{reference} holds non-integer values")
                expected[key] = value.astype(np.int32)
    result = compare_outputs(outputs, expected, opts.accuracy_threshold)
    for line in result.lines:
        out(line)
    out("")
    if opts.cosine_distance_threshold > -1:
        cosines = {k: cosine_similarity(outputs[k], v) for k, v in expected.items()}
        for k, c in cosines.items():
            out(f"Cosine distance of node/tensor {k} : {fmt(c)}")
        low = {k: c for k, c in cosines.items() if not c >= opts.cosine_distance_threshold}
        report["cosine_distance"] = {"threshold": opts.cosine_distance_threshold, "values": cosines,
                                     "passed": not low}
        if low:
            raise ConverterError(RET_ERROR, "cosine distance of " + ", ".join(f"{k} ({fmt(c)})" for k, c in low.items())
                                 + f" is below the threshold {fmt(opts.cosine_distance_threshold)}")
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
