"""`make bench` section: dynamic shapes (issue 17).

Each model with dynamic input dims is converted once without ``--inputShape`` (at opt_level 2) and loaded once;
then, at each of its shapes:
* **first run**: the first ``Model.run`` at a shape the model has not run before (shape inference, the plan for
  it and the run itself; runtime/shape_plans.py), against the bound ``3 x steady + 5 ms``;
* **steady**: the dynamic model, the same model converted with ``--inputShape`` fixed to that shape, and
  onnxruntime on the same feeds, each engine alone in blocks, rounds interleaved (bench_timing.interleave);
* the outputs' largest relative error against onnxruntime.

Models: the dynamic BERT- and GPT-2-like exports of models/ (batch and sequence), and the pretrained models of
tools/wild_models.py that have dynamic dims (YOLOv8n: batch, height, width; the OCR detector: height, width;
the OCR recognizer: width; magika: batch) when they have been fetched (``make wild-models``).
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from . import bench_engines as engines
from .bench_timing import QUICK, Budget, interleave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")


def _ids(rng, b, t):
    return rng.integers(0, 1000, (b, t)).astype(np.int64)


def _bert(rng, b, t):
    mask = np.ones((b, t), np.int64)
    mask[1:, t // 2:] = 0            # padded rows after the first
    return {"input_ids": _ids(rng, b, t), "attention_mask": mask}


def _image(rng, *shape):
    return {"x": rng.random(shape, np.float32)}


# (name, path, shapes, feeds(rng, *shape)); wild models are skipped when not fetched
CASES = [
    ("bert_dynamic", os.path.join(MODELS, "bert_dynamic.onnx"), [(1, 128), (1, 8), (2, 64), (4, 256), (1, 77)],
     _bert),
    ("gpt2_dynamic", os.path.join(MODELS, "gpt2_dynamic.onnx"), [(1, 128), (1, 8), (2, 64), (4, 256), (1, 77)],
     lambda rng, b, t: {"input_ids": _ids(rng, b, t)}),
    ("yolov8n_320", "wild:yolov8n_320", [(1, 3, 320, 320), (1, 3, 256, 416), (2, 3, 320, 320), (1, 3, 480, 640)],
     lambda rng, *s: {"images": rng.random(s, np.float32)}),
    ("ocr_det_ppocrv4", "wild:ocr_det_ppocrv4", [(1, 3, 320, 320), (1, 3, 480, 640), (1, 3, 736, 1280),
                                                 (2, 3, 256, 256)], _image),
    ("ocr_rec_ppocrv4", "wild:ocr_rec_ppocrv4", [(1, 3, 48, 320), (1, 3, 48, 160), (2, 3, 48, 500),
                                                 (1, 3, 48, 77)], _image),
    ("magika_v3_3", "wild:magika_v3_3", [(1, 2048), (8, 2048), (3, 2048), (32, 2048)],
     lambda rng, *s: {"bytes": rng.integers(0, 257, s).astype(np.int32)}),
]


def _path(spec: str) -> str | None:
    if not spec.startswith("wild:"):
        return spec
    from .wild_models import default_dir
    p = os.path.join(default_dir(), spec[5:] + ".onnx")
    return p if os.path.exists(p) else None


def measure(threads: int = 2, quick: bool = False, only: set[str] | None = None) -> list[dict]:
    import converter_lite

    budget = QUICK if quick else Budget(min_seconds=1.0, max_seconds=4.0, block=5, settle=0.02)
    rows = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="cl_bench_dyn_") as tmp:
        for name, spec, shapes, make in CASES:
            path = _path(spec)
            if path is None or (only and name not in only):
                continue
            if quick:
                shapes = shapes[:2]
            t0 = time.perf_counter()
            dyn_ms = converter_lite.convert(path, os.path.join(tmp, name), graph_kernel_flags="--opt_level=2")
            convert_s = time.perf_counter() - t0
            model = converter_lite.load(dyn_ms, num_threads=threads)
            kernels = sum(n.op == "GraphKernel" for n in model.graph.nodes)
            for shape in shapes:
                feeds = make(rng, *shape)
                t0 = time.perf_counter()
                model.run(feeds)
                first_ms = (time.perf_counter() - t0) * 1e3
                static_ms = converter_lite.convert(path, os.path.join(tmp, f"{name}_static"),
                                                   graph_kernel_flags="--opt_level=2",
                                                   input_shape={k: v.shape for k, v in feeds.items()})
                static = converter_lite.load(static_ms, num_threads=threads)
                ort = engines.onnxruntime(path, feeds, threads)
                err = engines.max_rel_error(list(model.run(feeds).values()), ort.run())
                times = interleave({"dynamic": lambda m=model, f=feeds: m.run(f),
                                    "static": lambda m=static, f=feeds: m.run(f), "onnxruntime": ort.run}, budget)
                med = {k: v.summary()["median_ms"] for k, v in times.items()}
                rows.append({"model": name, "shape": "x".join(map(str, _main_shape(feeds))), "first_ms": first_ms,
                             "dynamic_ms": med["dynamic"], "static_ms": med["static"], "ort_ms": med["onnxruntime"],
                             "err": err, "kernels": kernels, "convert_s": convert_s})
    return rows


def _main_shape(feeds: dict) -> tuple:
    return next(iter(feeds.values())).shape


def lines(rows: list[dict]) -> list[str]:
    out = ["| model | shape | first run ms | bound 3x+5 ms | dynamic ms | static ms | dynamic / static | "
           "onnxruntime ms | dynamic / onnxruntime | max rel err |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bound = 3 * r["dynamic_ms"] + 5
        out.append(f"| {r['model']} | {r['shape']} | {r['first_ms']:.1f} | {bound:.1f}"
                   f"{'' if r['first_ms'] <= bound else ' (over)'} | {r['dynamic_ms']:.3f} | {r['static_ms']:.3f} | "
                   f"{r['dynamic_ms'] / r['static_ms']:.2f} | {r['ort_ms']:.3f} | {r['dynamic_ms'] / r['ort_ms']:.2f} "
                   f"| {r['err']:.1e} |")
    if rows:
        ratios = [r["dynamic_ms"] / r["static_ms"] for r in rows]
        geo = float(np.exp(np.mean(np.log(ratios))))
        out += ["", f"Dynamic / static (converted with --inputShape fixed to the shape): geomean {geo:.2f}, "
                    f"worst {max(ratios):.2f}; {sum(r['first_ms'] <= 3 * r['dynamic_ms'] + 5 for r in rows)} of "
                    f"{len(rows)} first runs within 3x steady + 5 ms. Each model converted once (no --inputShape)."]
    return out


if __name__ == "__main__":
    import sys
    print("\n".join(lines(measure(only=set(sys.argv[1:]) or None))))
