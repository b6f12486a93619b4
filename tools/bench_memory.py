"""Peak memory of one engine on one model, measured in a fresh process (``make bench``'s memory column).

The parent (``measure``) starts ``python -m tools.bench_memory ENGINE MODEL FEEDS.npz THREADS``.
The child imports its engine's libraries and reads the inputs, then records the RSS and resets the peak-RSS
counter (cli/memory.py ``RssPeak``), loads the model, runs it ``RUNS`` times and prints one JSON line:
``{"peak_mb": peak RSS minus the RSS before loading, "method": ..., "load_ms": ...}``.  So the figure is
what the model costs the process: its weights as resident memory (memory-mapped and paged in, or copied), the
engine's buffers and arenas, and the threads' stacks, without the interpreter and the libraries.  A fresh
process per measurement keeps what one engine left in malloc's free lists from hiding another one's peak.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

RUNS = 3
TIMEOUT_S = 300
ENGINES = ("ours", "onnxruntime", "openvino")


def measure(engine: str, model_path: str, feeds_npz: str, threads: int) -> dict:
    """Runs the child; returns its JSON result, or ``{"error": ...}``."""
    cmd = [sys.executable, "-m", "tools.bench_memory", engine, model_path, feeds_npz, str(threads)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {TIMEOUT_S} s"}
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {r.returncode}: {tail}"}
    return json.loads(lines[-1])


def save_feeds(path: str, feeds: dict[str, np.ndarray]) -> str:
    np.savez(path, **feeds)
    return path


def _loader(engine: str, model_path: str, threads: int):
    """Imports the engine (before the baseline) and returns ``load() -> run(feeds)``."""
    if engine == "ours":
        from converter_lite.runtime import load

        def load_ours():
            model = load(model_path, num_threads=threads)
            return model.run
        return load_ours
    if engine == "onnxruntime":
        import onnxruntime as ort

        def load_ort():
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]
            return lambda feeds: sess.run(None, _match(names, feeds))
        return load_ort
    if engine == "openvino":
        import openvino as ov

        def load_ov():
            compiled = ov.Core().compile_model(model_path, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                                  "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1})
            request = compiled.create_infer_request()
            names = [p.get_any_name() for p in compiled.inputs]
            return lambda feeds: request.infer(_match(names, feeds))
        return load_ov
    raise SystemExit(f"unknown engine {engine!r}; one of {', '.join(ENGINES)}")


def _match(names: list[str], feeds: dict) -> dict:
    return {n: feeds[n] for n in names} if all(n in feeds for n in names) else dict(zip(names, feeds.values()))


def child(argv: list[str]) -> dict:
    from converter_lite.cli.memory import MIB, RssPeak

    engine, model_path, feeds_npz, threads = argv[0], argv[1], argv[2], int(argv[3])
    load = _loader(engine, model_path, threads)
    with np.load(feeds_npz, allow_pickle=False) as data:
        feeds = {k: data[k] for k in data.files}
    rss = RssPeak().start()
    t0 = time.perf_counter()
    run = load()
    load_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(RUNS):
        run(feeds)
    return {"peak_mb": rss.peak_bytes() / MIB, "method": rss.method, "load_ms": load_ms, "pid": os.getpid()}


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1:])))
