"""`make bench` section: the fused elementwise chain through the API users call (issue 18).

    python -m tools.bench_api [--size 4096] [--threads 2]

``Y = Tanh(X*0.5 + 0.1) * 2`` on float32 [size, size] as an ONNX model, converted at opt_level 2 (one fused
kernel), timed as users call it: ``Model.run`` with fresh outputs and with ``outputs=`` (IO binding), against the
copy floors a run cannot beat by much (``X.copy()``: read X, write fresh memory; ``np.copyto`` into a
preallocated array) and onnxruntime's ``InferenceSession.run`` (fresh outputs, same thread count, no spinning).
Each engine alone in blocks of 5 calls, rounds interleaved (bench_timing.interleave); medians.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np


def chain_model(size: int):
    import onnx.helper as oh
    import onnx.numpy_helper as onh
    consts = {"h": 0.5, "c": 0.1, "two": 2.0}
    nodes = [oh.make_node("Mul", ["x", "h"], ["a"]), oh.make_node("Add", ["a", "c"], ["b"]),
             oh.make_node("Tanh", ["b"], ["t"]), oh.make_node("Mul", ["t", "two"], ["y"])]
    g = oh.make_graph(nodes, "chain", [oh.make_tensor_value_info("x", 1, [size, size])],
                      [oh.make_tensor_value_info("y", 1, [size, size])],
                      initializer=[onh.from_array(np.array(v, np.float32), k) for k, v in consts.items()])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=10)


def measure(size: int = 4096, threads: int = 2, quick: bool = False) -> dict:
    import onnxruntime as ort

    import converter_lite

    from .bench_timing import QUICK, Budget, interleave
    proto = chain_model(size)
    with tempfile.TemporaryDirectory(prefix="cl_bench_api_") as tmp:
        path = os.path.join(tmp, "chain.onnx")
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())
        model = converter_lite.load(converter_lite.convert(path, os.path.join(tmp, "chain"),
                                                           graph_kernel_flags="--opt_level=2"), num_threads=threads)
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    dst, out = np.empty_like(x), np.empty_like(x)
    ref = sess.run(None, {"x": x})[0]
    got = model.run({"x": x})["y"]
    err = float(np.abs(got - ref).max())
    runs = {"Model.run": lambda: model.run({"x": x}), "Model.run(outputs=)": lambda: model.run({"x": x},
                                                                                                 outputs={"y": out}),
            "X.copy()": x.copy, "np.copyto": lambda: np.copyto(dst, x), "onnxruntime": lambda: sess.run(None, {"x": x})}
    budget = QUICK if quick else Budget(min_seconds=3.0, max_seconds=12.0, block=5)
    med = {k: v.median for k, v in interleave(runs, budget).items()}
    return {"size": size, "threads": threads, "median_ms": med, "max_abs_err": err}


def lines(r: dict) -> list[str]:
    m = r["median_ms"]
    rows = [f"float32 [{r['size']}, {r['size']}], {r['threads']} threads; max |ours - onnxruntime| "
            f"{r['max_abs_err']:.1e}.", "",
            "| engine | median ms | / X.copy() | / np.copyto | / onnxruntime |", "|---|---|---|---|---|"]
    for k, v in m.items():
        rows.append(f"| {k} | {v:.3f} | {v / m['X.copy()']:.2f} | {v / m['np.copyto']:.2f} | "
                    f"{v / m['onnxruntime']:.2f} |")
    rows += ["", (f"Targets: Model.run <= 1.0x X.copy() ({m['Model.run'] / m['X.copy()']:.2f}) and <= 0.5x "
                  f"onnxruntime ({m['Model.run'] / m['onnxruntime']:.2f}); with outputs= <= 1.0x np.copyto "
                  f"({m['Model.run(outputs=)'] / m['np.copyto']:.2f}).")]
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    print("\n".join(lines(measure(args.size, args.threads))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
