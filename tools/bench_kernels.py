"""Micro-benchmark of fused elementwise native kernels against the memory-copy floor and onnxruntime.

    python -m tools.bench_kernels [--size 4096] [--threads 2] [--rounds 15] [--block 10]

Kernels (float32 [size, size] unless stated):
    chain      Y = Tanh(X*0.5 + 0.1) * 2
    tanh_gelu  Y = 0.5*X*(1 + Tanh(sqrt(2/pi)*(X + 0.044715*X^3)))
    softmax    Softmax over the last axis of [64*128, 128] (the stitched opt_level-3 kernel)
    layernorm  LayerNorm over the last axis of [8*256, 512] with scale and bias (stitched)
Each chain is written out in basic ONNX ops, as exporters do; the native kernel timed is the one the converter
forms from it (its graph-kernel optimizer at opt_level 3: pattern fusions, expanders, clustering, stitching,
simplification), onnxruntime runs the chain as written.
Timing (tools/bench_timing.py, as ``make bench`` times whole models): the native kernel (``--threads``
threads), one single-threaded ``np.copyto`` of the same bytes (the floor the SPEC compares with) and onnxruntime
(ORT_ENABLE_ALL, same thread count) on the same chain as an ONNX model run interleaved, round after round (the
order rotates), each engine a block of 1 untimed + ``--block`` timed calls per round, every call timed on its
own.  Medians and minima are per call over all timed calls of all rounds.  Blocks measure what a caller sees
when it calls a kernel repeatedly (a model's layers): with one call per engine per round the native pool's
worker thread (codegen/threadpool.py: spins ~0.1 ms after a call, then sleeps) was asleep at every call and the
caller ran most chunks alone.  Every engine gets the same treatment, the copy floor included (its buffers stay
as warm as the kernels').  onnxruntime's pool is set not to spin between calls, so its spinning threads do
not take a core from the next engine's block.  Prints medians and minima (the latter less sensitive to other
load) with ratios.  Not a test: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import math
import tempfile
import time

import numpy as np
from converter_lite.codegen import build_kernels
from converter_lite.ir.core import Graph, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.builder import GraphBuilder
from converter_lite.runtime.native import NativeLibrary

from .bench_timing import Budget, interleave


def _chain(b: GraphBuilder, x):
    return b.op("Tanh", x * 0.5 + 0.1) * 2.0


def _tanh_gelu(b: GraphBuilder, x):
    inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
    return x * 0.5 * (b.op("Tanh", inner) + 1.0)


def _softmax(b: GraphBuilder, x):
    from converter_lite.passes.expand.emit import exp, reduce_max, reduce_sum
    e = exp(x - reduce_max(x, (1,)))
    return e / reduce_sum(e, (1,))


def _layer_norm(b: GraphBuilder, x):
    from converter_lite.passes.expand.emit import mean, reciprocal, sqrt
    d = x - mean(x, (1,))
    inv = reciprocal(sqrt(mean(d * d, (1,)) + 1e-5))
    c = x.shape[1]
    scale = b.wrap(b.const(np.linspace(0.5, 1.5, c, dtype=np.float32)))
    bias = b.wrap(b.const(np.linspace(-0.1, 0.1, c, dtype=np.float32)))
    return d * inv * scale + bias


KERNELS = {"chain": _chain, "tanh_gelu": _tanh_gelu, "softmax": _softmax, "layernorm": _layer_norm}
OPT_LEVEL = 3       # the level whose stitched Softmax/LayerNorm kernels issue #4 names (the chains fuse alike at 2)
# the stitched row kernels of issue #4 have their own shapes (rows x row length)
SHAPES = {"softmax": (64 * 128, 128), "layernorm": (8 * 256, 512)}


def make_graph(name: str, shape: tuple[int, ...]) -> Graph:
    import converter_lite.ops  # noqa: F401  (registers the op table used by the builder)
    g = Graph(name)
    x = Value("X", TensorType(DType.float32, shape))
    g.inputs = [x]
    b = GraphBuilder(g)
    g.outputs = [KERNELS[name](b, b.wrap(x)).v]
    return g


def converter_kernel(graph: Graph, opt_level: int = OPT_LEVEL) -> tuple[Graph, list]:
    """What the converter makes of ``graph``: its graph-kernel optimizer at ``opt_level`` (without the build
    pass) must leave one GraphKernel node; returns that kernel's sub-graph and, per kernel input, None for the
    graph's input or the constant array it reads (LayerNorm's scale and bias stay outside the kernel)."""
    from converter_lite.config import GraphKernelConfig
    from converter_lite.passes.manager import run_graph_kernel_optimizer
    run_graph_kernel_optimizer(graph, GraphKernelConfig(opt_level=opt_level, disable_pass=("graph_kernel_build",)))
    kernels = [n for n in graph.nodes if n.op == "GraphKernel"]
    if len(kernels) != 1 or len(graph.nodes) != 1:
        raise RuntimeError(f"{graph.name}: opt_level {opt_level} formed {[n.op for n in graph.nodes]}, "
                           "not one fused kernel")
    node = kernels[0]
    extra = [None if v in graph.inputs else np.asarray(v.const) for v in node.inputs]
    return node.attrs["graph"], extra


def onnx_session(graph: Graph, threads: int):
    """The same sub-graph as an onnxruntime session (ORT_ENABLE_ALL)."""
    import onnx.helper as oh  # only this tool needs onnx, to feed onnxruntime
    import onnx.numpy_helper as onh
    import onnxruntime as ort

    names: dict[int, str] = {}

    def name(v):
        if id(v) not in names:
            names[id(v)] = v.name if v in graph.inputs else f"v{len(names)}"
        return names[id(v)]

    nodes, inits = [], []
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None and v.const is not None and id(v) not in names:
                inits.append(onh.from_array(np.asarray(v.const), name(v)))
        nodes.append(oh.make_node(n.op, [name(v) for v in n.inputs], [name(o) for o in n.outputs], **n.attrs))
    x, y = graph.inputs[0], graph.outputs[0]
    io = [oh.make_tensor_value_info(name(v), 1, list(v.shape)) for v in (x, y)]
    model = oh.make_model(oh.make_graph(nodes, "bench", [io[0]], [io[1]], initializer=inits),
                          opset_imports=[oh.make_opsetid("", 21)], ir_version=10)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    # interleaved timing: threads spinning after a run would steal the cores the next measurement uses
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out = np.empty(y.shape, np.float32)
    binding = sess.io_binding()
    return sess, binding, name(x), name(y), out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block", type=int, default=10, help="timed calls per engine per round (after 1 untimed)")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated subset of the kernels")
    args = ap.parse_args(argv)
    square = (args.size, args.size)
    graphs = {k: make_graph(k, SHAPES.get(k, square)) for k in args.kernels.split(",")}
    fused = {k: converter_kernel(make_graph(k, g.inputs[0].shape)) for k, g in graphs.items()}
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        bundle = build_kernels([(k, sub) for k, (sub, _) in fused.items()], cache_dir=cache,
                               num_threads_hint=args.threads)
        build_s = time.perf_counter() - t0
    lib = NativeLibrary.from_sections(bundle.sections, num_threads=args.threads)
    rng = np.random.default_rng(0)
    results = {}
    print(f"native threads={args.threads}, build {build_s * 1e3:.0f} ms; {args.rounds} rounds x (1 untimed + "
          f"{args.block} timed calls) per engine, interleaved")
    for name, g in graphs.items():
        shape = g.inputs[0].shape
        x = rng.standard_normal(shape).astype(np.float32)
        y = np.empty_like(x)
        dst = np.empty_like(x)
        print(f"{name}: float32 {list(shape)} ({x.nbytes / 1e6:.0f} MB in and out)")
        run = lib.kernel(name).bind([x if c is None else c for c in fused[name][1]], [y])
        timers = {"native": run, "np.copyto": lambda d=dst, s=x: np.copyto(d, s)}
        if not args.no_ort:
            sess, binding, xin, yout, out = onnx_session(g, args.threads)
            binding.bind_cpu_input(xin, x)
            binding.bind_output(yout, "cpu", 0, np.float32, list(shape), out.ctypes.data)
            timers["onnxruntime"] = lambda s=sess, bd=binding: s.run_with_iobinding(bd)
        budget = Budget(min_rounds=args.rounds, min_seconds=0.0, max_seconds=60.0, floor_rounds=args.rounds,
                        warmup=2, block=max(1, args.block))
        samples = interleave(timers, budget)
        med = {k: v.median * 1e-3 for k, v in samples.items()}
        best = {k: min(v.times_ms) * 1e-3 for k, v in samples.items()}
        results[name] = {"median": med, "min": best, "shape": list(shape),
                         "calls": len(samples["native"].times_ms)}
        for tag, stat in (("median", med), ("min", best)):
            line = "  ".join(f"{k} {v * 1e3:7.2f} ms" for k, v in stat.items())
            ratios = f"native/copy {stat['native'] / stat['np.copyto']:.2f}x"
            if "onnxruntime" in stat:
                ratios += f", onnxruntime/native {stat['onnxruntime'] / stat['native']:.2f}x"
            print(f"{name:10s} {tag:6s} {line}   ({ratios})")
    return results


if __name__ == "__main__":
    main()
