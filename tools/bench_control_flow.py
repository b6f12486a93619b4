"""`make bench` section: control flow (issue 16).

* vad_streaming (an If on the sample rate choosing between two conv + LSTM branches, state in and out): ours
  converted in general (the If runs, both branches optimized, each a plan of its own) and with
  ``--inputValue=sr:16000`` (the If folds, the graph fuses flat), against onnxruntime on the same feeds;
* greedy_decoder (a Loop with a data-dependent stop): ours against onnxruntime at 20 iterations, and the cost of
  one iteration.

Each engine is timed alone in blocks, rounds interleaved (bench_timing.interleave), ``threads`` threads.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from . import bench_engines as engines
from .bench_timing import QUICK, Budget, interleave

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")


def _kernels(ms_path: str) -> tuple[int, int]:
    """(fused kernels of the main graph, fused kernels inside control-flow bodies)."""
    from converter_lite.model.format import load_model
    g = load_model(ms_path).graph
    top = sum(n.op == "GraphKernel" for n in g.nodes)
    return top, sum(n.op == "GraphKernel" for b in g.all_graphs()[1:] for n in b.nodes)


def measure(threads: int = 2, quick: bool = False) -> dict:
    import converter_lite

    # tiny models: blocks of 50 runs, so each block times one engine alone well past its thread spin-down
    budget = QUICK if quick else Budget(min_seconds=2.0, max_seconds=8.0, block=50, settle=0.08)
    out: dict = {}
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="cl_bench_cf_") as tmp:
        vad = os.path.join(MODELS, "vad_streaming.onnx")
        feeds = {"input": rng.standard_normal((1, 512)).astype(np.float32),
                 "state": np.zeros((2, 1, 64), np.float32), "sr": np.array(16000, np.int64)}
        general = converter_lite.convert(vad, os.path.join(tmp, "vad"), graph_kernel_flags="--opt_level=2")
        fixed = converter_lite.convert(vad, os.path.join(tmp, "vad16k"), graph_kernel_flags="--opt_level=2",
                                       input_value={"sr": 16000})
        g_model = converter_lite.load(general, num_threads=threads)
        f_model = converter_lite.load(fixed, num_threads=threads)
        ort = engines.onnxruntime(vad, feeds, threads)
        want = ort.run()
        for m in (g_model, f_model):
            got = list(m.run(feeds).values())
            out.setdefault("vad_max_err", 0.0)
            out["vad_max_err"] = max(out["vad_max_err"], engines.max_rel_error(got, want))
        times = interleave({"general": lambda: g_model.run(feeds), "inputValue": lambda: f_model.run(feeds),
                            "onnxruntime": ort.run}, budget)
        out["vad"] = {k: v.summary() for k, v in times.items()}
        out["vad_kernels"] = {"general": _kernels(general), "inputValue": _kernels(fixed)}

        dec = os.path.join(MODELS, "greedy_decoder.onnx")
        dfeeds = {"start": np.array([1], np.int64), "h0": np.zeros((1, 64), np.float32),
                  "max_len": np.array(20, np.int64)}
        ms = converter_lite.convert(dec, os.path.join(tmp, "dec"), graph_kernel_flags="--opt_level=2")
        d_model = converter_lite.load(ms, num_threads=threads)
        d_ort = engines.onnxruntime(dec, dfeeds, threads)
        got = list(d_model.run(dfeeds).values())
        out["dec_iterations"] = int(got[2].shape[0])
        out["dec_max_err"] = engines.max_rel_error(got, d_ort.run())
        times = interleave({"ours": lambda: d_model.run(dfeeds), "onnxruntime": d_ort.run}, budget)
        out["dec"] = {k: v.summary() for k, v in times.items()}
        out["dec_kernels"] = _kernels(ms)
    return out


def lines(r: dict) -> list[str]:
    v, d = r["vad"], r["dec"]
    ort = v["onnxruntime"]["median_ms"]
    kg, kf = r["vad_kernels"]["general"], r["vad_kernels"]["inputValue"]
    n = r["dec_iterations"]
    rows = [
        "| model | engine | fused kernels (main + bodies) | median ms | p90 ms | / onnxruntime |",
        "|---|---|---|---|---|---|",
        f"| vad_streaming | ours, If at run time | {kg[0]} + {kg[1]} | {v['general']['median_ms']:.4f} | "
        f"{v['general']['p90_ms']:.4f} | {v['general']['median_ms'] / ort:.2f} |",
        f"| vad_streaming | ours, --inputValue=sr:16000 | {kf[0]} + {kf[1]} | {v['inputValue']['median_ms']:.4f} | "
        f"{v['inputValue']['p90_ms']:.4f} | {v['inputValue']['median_ms'] / ort:.2f} |",
        f"| vad_streaming | onnxruntime | | {ort:.4f} | {v['onnxruntime']['p90_ms']:.4f} | 1.00 |",
        f"| greedy_decoder ({n} iterations) | ours | {r['dec_kernels'][0]} + {r['dec_kernels'][1]} | "
        f"{d['ours']['median_ms']:.4f} | {d['ours']['p90_ms']:.4f} | "
        f"{d['ours']['median_ms'] / d['onnxruntime']['median_ms']:.2f} |",
        f"| greedy_decoder ({n} iterations) | onnxruntime | | {d['onnxruntime']['median_ms']:.4f} | "
        f"{d['onnxruntime']['p90_ms']:.4f} | 1.00 |",
        "",
        f"Per Loop iteration: ours {d['ours']['median_ms'] / max(n, 1) * 1e3:.1f} us, onnxruntime "
        f"{d['onnxruntime']['median_ms'] / max(n, 1) * 1e3:.1f} us. Max relative error vs onnxruntime: "
        f"vad {r['vad_max_err']:.1e}, decoder {r['dec_max_err']:.1e}.",
    ]
    return rows


if __name__ == "__main__":
    print("\n".join(lines(measure())))
