"""`make bench` section: dynamic shapes (issue 17).

Each model with dynamic input dims is converted once without ``--inputShape`` (at opt_level 2) and loaded
``FIRST_SAMPLES`` times; then, at each of its shapes:
* **first run**: the first ``Model.run`` at a shape the model has not run before, the median over
  ``FIRST_SAMPLES`` loads of the model that run the shapes in the same order (all of them before any other engine
  runs at the model's shapes, after ``IDLE`` seconds with no engine running),
  against the bound ``3 x steady + 5 ms``: shape inference, the plan for the shape and the run
  (runtime/shape_plans.py), or, for a model whose generic plan is cheap (the transformers), the run on that;
* **second run**: the next run at that shape (where the transformers build the shape's plan);
* **steady**: the dynamic model and the same model converted with ``--inputShape`` fixed to that shape, each
  alone in blocks, rounds interleaved (bench_timing.interleave), then onnxruntime on the same feeds (timed after
  them, not between: its idle threads spin ~50 ms after each block, which the block after one paid); ours with
  a fixed thread count (``adaptive_threads=False``), so the ratio compares the kernels, not the chooser;
* **fresh process**: the .ms run at every shape in a new process with an empty HOME, against onnxruntime's
  outputs, and whether that process imported llvmlite (it must not: nothing is compiled at run time);
* the outputs' largest relative error against onnxruntime.

Models: the dynamic BERT- and GPT-2-like exports of models/ (batch and sequence), ../shared/models' ResNet with
its batch, height and width made dynamic, and the pretrained models of
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
IDLE = 0.1          # seconds of idle before the first runs (onnxruntime's threads spin ~50 ms after its last run)
FIRST_SAMPLES = 3   # loads of each model whose first runs at a shape give the median reported
MODELS = os.path.join(ROOT, "models")


def _ids(rng, b, t):
    return rng.integers(0, 500, (b, t)).astype(np.int64)        # (the zoo DistilBERT has 500 tokens)


def _bert(rng, b, t):
    mask = np.ones((b, t), np.int64)
    mask[1:, t // 2:] = 0            # padded rows after the first
    return {"input_ids": _ids(rng, b, t), "attention_mask": mask}


def _image(rng, *shape):
    return {"x": rng.random(shape, np.float32)}


# (name, path, shapes, feeds(rng, *shape)[, convert options]); wild models are skipped when not fetched
CASES = [
    ("bert_dynamic", os.path.join(MODELS, "bert_dynamic.onnx"), [(1, 128), (1, 8), (2, 64), (4, 256), (1, 77)],
     _bert),
    ("gpt2_dynamic", os.path.join(MODELS, "gpt2_dynamic.onnx"), [(1, 128), (1, 8), (2, 64), (4, 256), (1, 77)],
     lambda rng, b, t: {"input_ids": _ids(rng, b, t)}),
    ("distilbert_dyn (transformers export)", os.path.join(MODELS, "zoo", "distilbert_dyn.onnx"),
     [(1, 128), (1, 8), (2, 64), (4, 256)], _bert),
    ("resnet_mini", "shared:resnet_mini", [(1, 3, 160, 160), (2, 3, 224, 224), (1, 3, 97, 131), (4, 3, 128, 128)],
     lambda rng, *s: {"pixel_values": rng.random(s, np.float32)}),
    ("yolov8n_320", "wild:yolov8n_320", [(1, 3, 320, 320), (1, 3, 256, 416), (2, 3, 320, 320), (1, 3, 480, 640)],
     lambda rng, *s: {"images": rng.random(s, np.float32)}),
    ("ocr_det_ppocrv4", "wild:ocr_det_ppocrv4", [(1, 3, 320, 320), (1, 3, 480, 640), (1, 3, 736, 1280),
                                                 (2, 3, 256, 256)], _image),
    ("ocr_rec_ppocrv4", "wild:ocr_rec_ppocrv4", [(1, 3, 48, 320), (1, 3, 48, 160), (2, 3, 48, 500),
                                                 (1, 3, 48, 77)], _image),
    # its height is a '?' dim only some sizes fit (33-80: a Reshape needs it pooled to 1), which dynamic_fusion
    # finds (fit_probes: 48 and 64) to fuse the case above; here bounded as a deployment would declare it
    ("ocr_rec_ppocrv4 (x:1-32,3,48,8-4096)", "wild:ocr_rec_ppocrv4", [(1, 3, 48, 320), (1, 3, 48, 160),
                                                                   (2, 3, 48, 500), (1, 3, 48, 77)], _image,
     {"input_shape": "x:1-32,3,48,8-4096"}),
    ("magika_v3_3", "wild:magika_v3_3", [(1, 2048), (8, 2048), (3, 2048), (32, 2048)],
     lambda rng, *s: {"bytes": rng.integers(0, 257, s).astype(np.int32)}),
]


SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models")


def _dynamic_copy(name: str, out_dir: str) -> str | None:
    """``../shared/models/<name>.onnx`` (exported at fixed shapes) with its image input's batch, height and width
    made dynamic: a ResNet as a user who re-exports it with dynamic axes has it."""
    import onnx
    src = os.path.join(SHARED, name + ".onnx")
    if not os.path.exists(src):
        return None
    m = onnx.load(src)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    for i, sym in ((0, "batch"), (2, "height"), (3, "width")):
        dims[i].dim_param = sym
    for vi in m.graph.output:
        vi.type.tensor_type.shape.dim[0].dim_param = "batch"
        for d in vi.type.tensor_type.shape.dim[2:]:
            d.dim_param = "?"
    del m.graph.value_info[:]
    out = os.path.join(out_dir, name + "_dynamic.onnx")
    onnx.save(m, out)
    return out


def _path(spec: str, work_dir: str) -> str | None:
    if spec.startswith("shared:"):
        return _dynamic_copy(spec[7:], work_dir)
    if not spec.startswith("wild:"):
        return spec
    from .wild_models import default_dir
    p = os.path.join(default_dir(), spec[5:] + ".onnx")
    return p if os.path.exists(p) else None


def measure(threads: int = 2, quick: bool = False, only: set[str] | None = None) -> list[dict]:
    import converter_lite

    budget = QUICK if quick else Budget(min_seconds=2.0, max_seconds=6.0, block=10, settle=0.02)
    ort_budget = QUICK if quick else Budget(min_seconds=1.0, max_seconds=3.0, block=10, settle=0.02)
    rows = []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="cl_bench_dyn_") as tmp:
        for name, spec, shapes, make, *opts in CASES:
            path = _path(spec, tmp)
            if path is None or (only and name.split()[0] not in only):
                continue
            opts = opts[0] if opts else {}
            if quick:
                shapes = shapes[:2]
            t0 = time.perf_counter()
            dyn_ms = converter_lite.convert(path, os.path.join(tmp, name.split()[0]),
                                            graph_kernel_flags="--opt_level=2", **opts)
            convert_s = time.perf_counter() - t0
            # FIRST_SAMPLES loads of the model, each running the shapes in the same order: a first run is one
            # sample on a noisy machine, so each figure is the median of the loads' first (second) runs
            loads = [converter_lite.load(dyn_ms, num_threads=threads, adaptive_threads=False)
                     for _ in range(FIRST_SAMPLES)]
            model = loads[0]
            kernels = sum(n.op == "GraphKernel" for n in model.graph.nodes)
            fresh = _fresh_process(dyn_ms, path, [make(rng, *s) for s in shapes], threads, tmp)
            all_feeds = [make(rng, *shape) for shape in shapes]
            # every first and second run before any other engine runs at these shapes, after IDLE once: no
            # onnxruntime thread spins meanwhile (they spin ~50 ms after a run here), and the CPU is as warm as
            # for the steady runs, so first - steady is what the new shape costs (right after 100 ms of idle a
            # 2-thread run on this VM, first or not, was 1.2-2x slower than a steady one)
            time.sleep(IDLE)
            firsts = []
            for feeds in all_feeds:
                runs = []
                for m in loads:
                    times = []
                    for _ in range(2):      # the first run at the shape, then the second (transformers plan)
                        t0 = time.perf_counter()
                        m.run(feeds)
                        times.append((time.perf_counter() - t0) * 1e3)
                    runs.append(times)
                firsts.append(tuple(float(np.median([r[i] for r in runs])) for i in range(2)))
            for feeds, (first_ms, second_ms) in zip(all_feeds, firsts):
                static_ms = converter_lite.convert(path, os.path.join(tmp, name.split()[0] + "_static"),
                                                   graph_kernel_flags="--opt_level=2",
                                                   input_shape={k: v.shape for k, v in feeds.items()})
                static = converter_lite.load(static_ms, num_threads=threads, adaptive_threads=False)
                ort = engines.onnxruntime(path, feeds, threads)
                err = engines.max_rel_error(list(model.run(feeds).values()), ort.run())
                # the ratio that must stay within 1.15 compares our two forms alone; onnxruntime is timed after
                # them (its idle threads spin ~50 ms after each of its blocks: the block after one paid for it)
                times = interleave({"dynamic": lambda m=model, f=feeds: m.run(f),
                                    "static": lambda m=static, f=feeds: m.run(f)}, budget)
                times.update(interleave({"onnxruntime": ort.run}, ort_budget))
                med = {k: v.summary()["median_ms"] for k, v in times.items()}
                rows.append({"model": name, "shape": "x".join(map(str, _main_shape(feeds))), "first_ms": first_ms,
                             "second_ms": second_ms,
                             "dynamic_ms": med["dynamic"], "static_ms": med["static"], "ort_ms": med["onnxruntime"],
                             "err": err, "kernels": kernels, "convert_s": convert_s, "fresh": fresh})
    return rows


FRESH = """
import json, sys, numpy as np, converter_lite
model = converter_lite.load(sys.argv[1], num_threads=int(sys.argv[3]))
data = np.load(sys.argv[2])
worst, k = 0.0, 0
while f"in{k}_0" in data:
    feeds = {n: data[f"in{k}_{i}"] for i, n in enumerate(model.input_names)}
    for i, got in enumerate(model.run(feeds).values()):
        want = data[f"out{k}_{i}"]
        worst = max(worst, float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30)))
    k += 1
print(json.dumps({"shapes": k, "max_rel_err": worst, "llvmlite": "llvmlite" in sys.modules}))
"""


def _fresh_process(ms_path: str, onnx_path: str, feeds: list[dict], threads: int, tmp: str) -> dict:
    """The .ms run in a new process with an empty HOME (no kernel cache) at every shape, against onnxruntime's
    outputs: {"shapes", "max_rel_err", "llvmlite": whether that process imported it}."""
    import json
    import subprocess
    import sys

    import onnxruntime as ort
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    arrays = {}
    for k, f in enumerate(feeds):
        for i, inp in enumerate(sess.get_inputs()):
            arrays[f"in{k}_{i}"] = f[inp.name]
        for i, o in enumerate(sess.run(None, f)):
            arrays[f"out{k}_{i}"] = o
    npz = os.path.join(tmp, "fresh.npz")
    np.savez(npz, **arrays)
    home = tempfile.mkdtemp(prefix="home_", dir=tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVERTER_LITE")}
    env.update(HOME=home, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", FRESH, ms_path, npz, str(threads)], env=env, capture_output=True,
                       text=True, timeout=600, check=False)
    if r.returncode:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _main_shape(feeds: dict) -> tuple:
    return next(iter(feeds.values())).shape


def lines(rows: list[dict]) -> list[str]:
    out = ["| model | shape | first run ms | bound 3x+5 ms | second run ms | dynamic ms | static ms | "
           "dynamic / static | onnxruntime ms | dynamic / onnxruntime | max rel err |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        bound = 3 * r["dynamic_ms"] + 5
        out.append(f"| {r['model']} | {r['shape']} | {r['first_ms']:.1f} | {bound:.1f}"
                   f"{'' if r['first_ms'] <= bound else ' (over)'} | {r['second_ms']:.1f} | {r['dynamic_ms']:.3f} | "
                   f"{r['static_ms']:.3f} | "
                   f"{r['dynamic_ms'] / r['static_ms']:.2f} | {r['ort_ms']:.3f} | {r['dynamic_ms'] / r['ort_ms']:.2f} "
                   f"| {r['err']:.1e} |")
    fresh = {r["model"]: r["fresh"] for r in rows}
    if fresh:
        out += ["", "Fresh process, empty HOME, every shape above (the .ms as converted; nothing compiled):", "",
                "| model | shapes run | max rel err vs onnxruntime | llvmlite imported |", "|---|---|---|---|"]
        for name, f in fresh.items():
            if "error" in f:
                out.append(f"| {name} | failed: {f['error']} | | |")
            else:
                out.append(f"| {name} | {f['shapes']} | {f['max_rel_err']:.1e} | {'yes' if f['llvmlite'] else 'no'} |")
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
