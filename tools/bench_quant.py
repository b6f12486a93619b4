"""`make bench` section: quantization (issue 19).

    python -m tools.bench_quant [--threads 2] [--quick]

Two tables:

* **WEIGHT_QUANT** (``[common_quant_param] quant_type=WEIGHT_QUANT bit_num=8``) on the real-architecture exports of
  ``../shared/models`` (and YOLOv8n when ``make wild-models`` fetched it): the ``.ms`` size against the same model
  converted without quantization, the cosine between the two models' outputs on one seeded input, and both
  latencies (the loader dequantizes, so they should match).
* **Models quantized by onnxruntime** (``quantize_static``, QDQ, per-channel int8 weights, uint8 activations,
  8 seeded calibration inputs) for the CNN exports: ours against onnxruntime on the same quantized file, and
  the cosine between the two outputs.

Each engine alone in blocks, rounds interleaved (bench_timing.interleave); medians.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from .bench_timing import QUICK, Budget, interleave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_MODELS = os.path.join(ROOT, "..", "shared", "models")
WEIGHT_MODELS = ("resnet_mini", "mobilenet_v2_half", "convnext_mini", "bert_tiny", "gpt2_tiny", "vit_mini")
QDQ_MODELS = ("resnet_mini", "mobilenet_v2_half")
CONFIG = "[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\nmin_quant_weight_size=0\n" \
         "min_quant_weight_channel=16\n"


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    d = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / d) if d else 1.0


def _sources() -> list[tuple[str, str, dict]]:
    from . import wild_models
    out = [(n, os.path.join(SHARED_MODELS, f"{n}.onnx"), {}) for n in WEIGHT_MODELS
           if os.path.exists(os.path.join(SHARED_MODELS, f"{n}.onnx"))]
    if "yolov8n_320" in {m.name for m in wild_models.available()}:
        m = wild_models.BY_NAME["yolov8n_320"]
        out.append((m.name, wild_models.path_of(m), dict(m.shapes)))
    return out


def _feeds(ms_path: str):
    from .bench_engines import make_feeds
    return make_feeds(ms_path, (0, 500))


def weight_quant(threads: int, budget: Budget, work: str) -> list[dict]:
    import converter_lite
    cfg = os.path.join(work, "quant.cfg")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    rows = []
    for name, src, shapes in _sources():
        row = {"model": name}
        try:
            fl = converter_lite.convert(src, os.path.join(work, f"{name}_f"), input_shape=shapes or None,
                                        graph_kernel_flags="--opt_level=2")
            q = converter_lite.convert(src, os.path.join(work, f"{name}_q"), input_shape=shapes or None,
                                       config_file=cfg, graph_kernel_flags="--opt_level=2")
            feeds = _feeds(fl)
            mf, mq = converter_lite.load(fl, num_threads=threads), converter_lite.load(q, num_threads=threads)
            row["cosine"] = min(_cosine(a, b) for a, b in zip(mf.run(feeds).values(), mq.run(feeds).values()))
            row["float_mb"], row["quant_mb"] = os.path.getsize(fl) / 2 ** 20, os.path.getsize(q) / 2 ** 20
            row["onnx_mb"] = os.path.getsize(src) / 2 ** 20
            times = interleave({"float": lambda: mf.run(feeds), "quant": lambda: mq.run(feeds)}, budget)
            row["float_ms"], row["quant_ms"] = times["float"].median, times["quant"].median
        except Exception as e:  # noqa: BLE001 - a row says what failed
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        rows.append(row)
    return rows


def qdq(threads: int, budget: Budget, work: str) -> list[dict]:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    import converter_lite

    from .bench_engines import onnxruntime
    rows = []
    for name in QDQ_MODELS:
        src = os.path.join(SHARED_MODELS, f"{name}.onnx")
        if not os.path.exists(src):
            continue
        row = {"model": name}
        try:
            inp = onnx.load(src).graph.input[0]
            shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
            rng = np.random.default_rng(0)

            class Reader(CalibrationDataReader):
                def __init__(self):
                    self.data = iter([{inp.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(8)])

                def get_next(self):
                    return next(self.data, None)
            path = os.path.join(work, f"{name}_qdq.onnx")
            quantize_static(src, path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            ms = converter_lite.convert(path, os.path.join(work, f"{name}_qdq"), graph_kernel_flags="--opt_level=2")
            feeds = {inp.name: np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
            ours = converter_lite.load(ms, num_threads=threads)
            ort = onnxruntime(path, feeds, threads)
            row["cosine"] = _cosine(list(ours.run(feeds).values())[0], ort.run()[0])
            times = interleave({"ours": lambda: ours.run(feeds), "ort": ort.run}, budget)
            row["ours_ms"], row["ort_ms"] = times["ours"].median, times["ort"].median
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        rows.append(row)
    return rows


def measure(threads: int = 2, quick: bool = False) -> dict:
    budget = QUICK if quick else Budget(min_seconds=1.0, max_seconds=5.0, block=10)
    with tempfile.TemporaryDirectory(prefix="cl_bench_quant_") as work:
        return {"weight": weight_quant(threads, budget, work), "qdq": qdq(threads, budget, work)}


def lines(result: dict) -> list[str]:
    out = ["WEIGHT_QUANT bit_num=8 (per-channel int8 weights, dequantized at load) against the same model "
           "converted in float; cosine of the outputs on one seeded input.", "",
           "| model | float .ms MB | quantized .ms MB | / float | / ONNX | output cosine | float ms | quantized ms |",
           "|---|---|---|---|---|---|---|---|"]
    for r in result["weight"]:
        if "error" in r:
            out.append(f"| {r['model']} | {r['error']} | | | | | | |")
            continue
        out.append(f"| {r['model']} | {r['float_mb']:.2f} | {r['quant_mb']:.2f} | {r['quant_mb'] / r['float_mb']:.2f} | "
                   f"{r['quant_mb'] / r['onnx_mb']:.2f} | {r['cosine']:.6f} | {r['float_ms']:.3f} | "
                   f"{r['quant_ms']:.3f} |")
    out += ["", "Models quantized by onnxruntime (quantize_static, QDQ, per-channel): ours computes the "
            "dequantized values in float32, onnxruntime runs its int8 kernels.", "",
            "| model | ours ms | onnxruntime ms | ours / ORT | output cosine vs ORT |", "|---|---|---|---|---|"]
    for r in result["qdq"]:
        if "error" in r:
            out.append(f"| {r['model']} | {r['error']} | | | |")
            continue
        out.append(f"| {r['model']} | {r['ours_ms']:.3f} | {r['ort_ms']:.3f} | {r['ours_ms'] / r['ort_ms']:.2f} | "
                   f"{r['cosine']:.6f} |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    print("\n".join(lines(measure(args.threads, args.quick))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
