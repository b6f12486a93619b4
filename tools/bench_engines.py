"""The engines ``make bench`` compares, each ready to run one model on fixed inputs.

An ``Engine`` is a name plus ``run() -> list[np.ndarray]`` (the model's outputs in graph-output order, on the
inputs it was built with) and the milliseconds its loading took:

    ours(level)    converter_lite.convert at ``--opt_level=<level>`` into the work dir, then converter_lite.load
                   (``num_threads``); ``run`` is ``Model.run``.  Load time = median of ``LOADS`` loads.
    onnxruntime    InferenceSession with ORT_ENABLE_ALL, ``intra_op_num_threads`` = threads, inter-op 1, CPU EP.
    openvino       only when ``import openvino`` works (never installed by the project): compiled for "CPU"
                   with the same thread count, latency hint, one stream.

Inputs (``make_feeds``): seeded random data from the runtime's generator (cli/inputs.py), with integer
inputs drawn from ``int_range`` when given (token ids of the real-architecture exports: [0, 500)).
"""
from __future__ import annotations

import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

LOADS = 3                     # loads of a converted model whose median is the reported load time
SEED = 0


@dataclass
class Engine:
    name: str
    run: Callable[[], list[np.ndarray]]
    load_ms: float
    info: dict = field(default_factory=dict)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def convert(onnx_path: str, work_dir: str, level: int) -> tuple[str, float]:
    """Converts ``onnx_path`` at ``opt_level=level``; returns the .ms path and the conversion time (s)."""
    import converter_lite

    stem = os.path.splitext(os.path.basename(onnx_path))[0]
    t0 = time.perf_counter()
    path = converter_lite.convert(onnx_path, os.path.join(work_dir, f"{stem}_O{level}"),
                                  graph_kernel_flags=f"--opt_level={level}")
    return path, time.perf_counter() - t0


def ours(ms_path: str, level: int, feeds: dict[str, np.ndarray], threads: int, convert_s: float = 0.0) -> Engine:
    import converter_lite

    loads = []
    for _ in range(LOADS):
        t0 = time.perf_counter()
        model = converter_lite.load(ms_path, num_threads=threads)
        loads.append(_ms(t0))
    run_feeds = {n: feeds[n] for n in model.input_names}

    def run() -> list[np.ndarray]:
        return list(model.run(run_feeds).values())
    info = {"convert_s": convert_s, "kernels": len(model.kernels),
            "fused": sum(k.op == "GraphKernel" for k in model.kernels),
            "native": sum(k.native for k in model.kernels), "path": ms_path}
    return Engine(f"O{level}", run, statistics.median(loads), info)


def make_feeds(ms_path: str, int_range: tuple[int, int] | None) -> dict[str, np.ndarray]:
    """Seeded inputs for the model (see the module docstring)."""
    from converter_lite.cli.inputs import random_array, random_inputs
    from converter_lite.runtime import load

    model = load(ms_path, native=False)
    feeds = random_inputs(model, seed=SEED)
    if int_range is not None:
        rng = np.random.default_rng(SEED + 1)
        for v in model.graph.inputs:
            if np.issubdtype(v.type.dtype.np, np.integer):
                feeds[v.name] = random_array(rng, v.type, *int_range)
    return feeds


def _by_position(names: list[str], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Feeds keyed by another engine's input names (same names, else same order)."""
    if all(n in feeds for n in names):
        return {n: feeds[n] for n in names}
    return dict(zip(names, feeds.values()))


def onnxruntime(onnx_path: str, feeds: dict[str, np.ndarray], threads: int, spinning: bool = True) -> Engine:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if not spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    t0 = time.perf_counter()
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    load_ms = _ms(t0)
    run_feeds = _by_position([i.name for i in sess.get_inputs()], feeds)

    def run() -> list[np.ndarray]:
        return sess.run(None, run_feeds)
    return Engine("onnxruntime", run, load_ms, {"version": ort.__version__, "spinning": spinning})


def openvino_available() -> bool:
    return importlib.util.find_spec("openvino") is not None


def openvino(onnx_path: str, feeds: dict[str, np.ndarray], threads: int) -> Engine:
    import openvino as ov

    t0 = time.perf_counter()
    core = ov.Core()
    compiled = core.compile_model(onnx_path, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                     "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
    request = compiled.create_infer_request()
    load_ms = _ms(t0)
    names = [p.get_any_name() for p in compiled.inputs]
    run_feeds = _by_position(names, feeds)
    outputs = list(compiled.outputs)

    def run() -> list[np.ndarray]:
        result = request.infer(run_feeds)
        return [np.asarray(result[o]) for o in outputs]
    return Engine("openvino", run, load_ms, {"version": ov.get_version()})


def max_rel_error(ours_out: list[np.ndarray], ref_out: list[np.ndarray]) -> float:
    """max over outputs of max|ours - ref| / max|ref| (errors relative to each output's scale, so near-zero
    elements do not blow the figure up); inf when the shapes or the output counts differ."""
    if len(ours_out) != len(ref_out):
        return float("inf")
    worst = 0.0
    for a, b in zip(ours_out, ref_out):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return float("inf")
        if a.size == 0:
            continue
        if not (np.issubdtype(b.dtype, np.number) or b.dtype == np.bool_):
            worst = max(worst, 0.0 if np.array_equal(a, b) else float("inf"))
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        scale = float(np.max(np.abs(b64)))
        diff = float(np.max(np.abs(a64 - b64)))
        if np.isnan(diff):
            same_nan = np.array_equal(np.isnan(a64), np.isnan(b64))
            diff = float(np.nanmax(np.abs(a64 - b64))) if same_nan else float("inf")
            scale = float(np.nanmax(np.abs(b64)))
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst
