"""`make bench` section: quantization (issue 19).

    python -m tools.bench_quant [--threads 2] [--quick]

Seven tables:

* **WEIGHT_QUANT** (``[common_quant_param] quant_type=WEIGHT_QUANT bit_num=8``) on the real-architecture exports of
  ``../shared/models`` (and YOLOv8n when ``make wild-models`` fetched it): the ``.ms`` size against the same model
  converted without quantization, the cosine between the two models' outputs on one seeded input, and both
  latencies (the loader dequantizes, so they should match).
* **DYNAMIC_QUANT** (``quant_type=DYNAMIC_QUANT``) on the transformers of ``DYNAMIC_QUANT_MODELS``, the same
  columns against their float conversion.
* **BF16** (``--bf16=on``: MatMul/Gemm on bfloat16 weights, AVX-512 BF16's ``vdpbf16ps``) on the transformers of
  ``BF16_MODELS``, the same columns against their float conversion (a host without ``avx512_bf16``: rows saying
  the conversion was refused).
* **FULL_QUANT** (``full_quant``) on the CNNs of ``FULL_QUANT_MODELS`` (and YOLOv8n at 320 x 320 when ``make
  wild-models`` fetched it): against the float conversion and against onnxruntime on its own int8 QDQ model of the
  network.
* **Models quantized by onnxruntime** (``quantize_static``, QDQ, per-channel int8 weights, uint8 activations,
  8 seeded calibration inputs) for the CNN exports and YOLOv8n, in QOperator form (``QOPERATOR_MODELS``), and
  (``quantize_dynamic``, int8 weights, activations quantized per call) for the transformers and a CNN: ours against
  onnxruntime on the same quantized file, and the cosine between the two outputs.

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
# QOperator: ../shared/models' CNNs trip onnxruntime's quantizer (a Conv bias it expects as an initializer)
QOPERATOR_MODELS = ("conv_net", "vit_mini")
# (model, op types quantize_dynamic quantizes: None = its default, MatMul and the like)
DYNAMIC_MODELS = (("bert_tiny", None), ("gpt2_tiny", None), ("resnet_mini", ["Conv"]))
CONFIG = "[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\nmin_quant_weight_size=0\n" \
         "min_quant_weight_channel=16\n"
DYNAMIC_CONFIG = "[common_quant_param]\nquant_type=DYNAMIC_QUANT\nbit_num=8\n"
DYNAMIC_QUANT_MODELS = ("bert_tiny", "gpt2_tiny", "vit_mini")
WILD_MODELS = ("yolov8n_320",)      # real models (tools/wild_models.py) of the WEIGHT_QUANT, FULL_QUANT, QDQ tables
BF16_MODELS = ("bert_tiny", "gpt2_tiny", "vit_mini")


def _cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    d = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / d) if d else 1.0


def _sources() -> list[tuple[str, str, dict]]:
    return [(n, os.path.join(SHARED_MODELS, f"{n}.onnx"), {}) for n in WEIGHT_MODELS
            if os.path.exists(os.path.join(SHARED_MODELS, f"{n}.onnx"))] + _wild(WILD_MODELS)


def _wild(names) -> list[tuple[str, str, dict]]:
    """(name, path, input shapes) of the real models among ``names`` that ``make wild-models`` fetched."""
    from . import wild_models
    have = {m.name for m in wild_models.available()}
    return [(n, wild_models.path_of(wild_models.BY_NAME[n]), dict(wild_models.BY_NAME[n].shapes)) for n in names
            if n in have]


def _feeds(ms_path: str):
    from .bench_engines import make_feeds
    return make_feeds(ms_path, (0, 500))


def weight_quant(threads: int, budget: Budget, work: str) -> list[dict]:
    return _against_float(CONFIG, _sources(), threads, budget, work, "weight")


def dynamic_quant(threads: int, budget: Budget, work: str) -> list[dict]:
    return _against_float(DYNAMIC_CONFIG, [s for s in _sources() if s[0] in DYNAMIC_QUANT_MODELS], threads, budget,
                          work, "dynamic")


def bf16(threads: int, budget: Budget, work: str) -> list[dict]:
    return _against_float(None, [s for s in _sources() if s[0] in BF16_MODELS], threads, budget, work, "bf16",
                          bf16=True)


def _against_float(config: str | None, sources: list, threads: int, budget: Budget, work: str, tag: str,
                   **options) -> list[dict]:
    """Rows of ``sources`` converted with the quantization ``config`` (or the ``convert`` keywords ``options``)
    against the same model converted in float32: .ms sizes, the outputs' cosine on one seeded input, both
    latencies (alone in blocks)."""
    import converter_lite
    cfg = None
    if config is not None:
        cfg = os.path.join(work, f"{tag}.cfg")
        with open(cfg, "w") as f:
            f.write(config)
    rows = []
    for name, src, shapes in sources:
        row = {"model": name}
        try:
            fl = converter_lite.convert(src, os.path.join(work, f"{name}_f"), input_shape=shapes or None,
                                        graph_kernel_flags="--opt_level=2")
            q = converter_lite.convert(src, os.path.join(work, f"{name}_{tag}"), input_shape=shapes or None,
                                       config_file=cfg, graph_kernel_flags="--opt_level=2", **options)
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


FULL_QUANT_MODELS = ("resnet_mini", "mobilenet_v2_half", "conv_net")
CALIBRATION = 8


def full_quant(threads: int, budget: Budget, work: str) -> list[dict]:
    """FULL_QUANT (MAX_MIN, per channel, bias correction) with ``CALIBRATION`` seeded BIN files per model: the
    cosine against the float conversion on an input outside them, both .ms sizes, our float and FULL_QUANT
    latencies and onnxruntime's on its own QDQ model of the same network (quantize_static, the same calibration
    inputs), each alone in blocks."""
    import converter_lite

    from .bench_engines import onnxruntime
    rows = []
    for name, src, shapes in [(n, _source(n), {}) for n in FULL_QUANT_MODELS] + _wild(WILD_MODELS):
        if not os.path.exists(src):
            continue
        row = {"model": name}
        try:
            feeds = [_onnx_feeds(src, 10 + k, shapes) for k in range(CALIBRATION)]
            lines = []
            for inp in feeds[0]:
                d = os.path.join(work, f"{name}_cal_{len(lines)}")
                os.makedirs(d, exist_ok=True)
                for k, f in enumerate(feeds):
                    f[inp].astype(f[inp].dtype.newbyteorder("<")).tofile(os.path.join(d, f"{k:03d}.bin"))
                lines.append(f"{inp}:{d}")
            cfg = os.path.join(work, f"{name}_full.cfg")
            with open(cfg, "w") as fh:
                fh.write("[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n[data_preprocess_param]\n"
                         f"calibrate_path={','.join(lines)}\ncalibrate_size={CALIBRATION}\ninput_type=BIN\n"
                         "[full_quant_param]\nactivation_quant_method=MAX_MIN\nper_channel=true\n")
            fl = converter_lite.convert(src, os.path.join(work, f"{name}_float"), input_shape=shapes or None,
                                        graph_kernel_flags="--opt_level=2")
            fq = converter_lite.convert(src, os.path.join(work, f"{name}_full"), config_file=cfg,
                                        input_shape=shapes or None, graph_kernel_flags="--opt_level=2")
            qdq = os.path.join(work, f"{name}_ort_qdq.onnx")
            _static("QDQ", shapes)(src, qdq)
            test = _onnx_feeds(src, 1, shapes)             # not one of the calibration inputs
            mf, mq = converter_lite.load(fl, num_threads=threads), converter_lite.load(fq, num_threads=threads)
            ort = onnxruntime(qdq, test, threads)
            row["cosine"] = min(_cosine(a, b) for a, b in zip(mf.run(test).values(), mq.run(test).values()))
            row["float_mb"], row["quant_mb"] = os.path.getsize(fl) / 2 ** 20, os.path.getsize(fq) / 2 ** 20
            times = interleave({"float": lambda: mf.run(test), "full": lambda: mq.run(test), "ort": ort.run}, budget)
            row["float_ms"], row["full_ms"], row["ort_ms"] = (times[k].median for k in ("float", "full", "ort"))
        except Exception as e:  # noqa: BLE001 - a row says what failed
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        rows.append(row)
    return rows


def _onnx_feeds(src: str, seed: int, shapes: dict | None = None) -> dict:
    """Seeded feeds for every input of ``src`` (floats: standard normal; token ids: [0, 500)), at ``shapes`` where
    given (else the model's dims, 1 for a dynamic one)."""
    import onnx
    feeds = {}
    for inp in onnx.load(src).graph.input:
        t = inp.type.tensor_type
        shape = list((shapes or {}).get(inp.name) or [d.dim_value or 1 for d in t.shape.dim])
        rng = np.random.default_rng(seed)
        feeds[inp.name] = rng.integers(0, 500, shape).astype(np.int64) if t.elem_type == 7 else \
            rng.standard_normal(shape).astype(np.float32)
    return feeds


def _source(name: str) -> str:
    """``name``.onnx in ../shared/models, else in models/."""
    shared = os.path.join(SHARED_MODELS, f"{name}.onnx")
    return shared if os.path.exists(shared) else os.path.join(ROOT, "models", f"{name}.onnx")


def _against_onnxruntime(name: str, quantize, threads: int, budget: Budget, work: str, src: str | None = None,
                         shapes: dict | None = None) -> dict:
    """One row: ``quantize(src, path)`` writes the model quantized by onnxruntime; ours (converted at ``shapes``
    when given) against onnxruntime on that file (medians, each alone in blocks) and the cosine of their
    outputs."""
    import converter_lite

    from .bench_engines import onnxruntime
    src = src or _source(name)
    row = {"model": name}
    try:
        path = os.path.join(work, f"{name}_{quantize.__name__}.onnx")
        quantize(src, path)
        ms = converter_lite.convert(path, path[:-5], input_shape=shapes or None, graph_kernel_flags="--opt_level=2")
        feeds = _onnx_feeds(src, 1, shapes)
        ours = converter_lite.load(ms, num_threads=threads)
        ort = onnxruntime(path, feeds, threads)
        row["cosine"] = _cosine(list(ours.run(feeds).values())[0], ort.run()[0])
        times = interleave({"ours": lambda: ours.run(feeds), "ort": ort.run}, budget)
        row["ours_ms"], row["ort_ms"] = times["ours"].median, times["ort"].median
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return row


def _static(fmt: str, shapes: dict | None = None):
    """quantize_static(src, path) in format ``fmt`` ("QDQ" or "QOperator"), 8 seeded calibration inputs (at
    ``shapes`` where given)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    def quantize(src: str, path: str) -> None:
        calibration = iter([_onnx_feeds(src, 10 + k, shapes) for k in range(8)])

        class Reader(CalibrationDataReader):
            def get_next(self):
                return next(calibration, None)
        quantize_static(src, path, Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    quantize.__name__ = f"static_{fmt.lower()}"
    return quantize


def qdq(threads: int, budget: Budget, work: str) -> list[dict]:
    return [_against_onnxruntime(n, _static("QDQ"), threads, budget, work) for n in QDQ_MODELS
            if os.path.exists(_source(n))] + \
        [_against_onnxruntime(n, _static("QDQ", shapes), threads, budget, work, src, shapes)
         for n, src, shapes in _wild(WILD_MODELS)]


def qoperator(threads: int, budget: Budget, work: str) -> list[dict]:
    return [_against_onnxruntime(n, _static("QOperator"), threads, budget, work) for n in QOPERATOR_MODELS
            if os.path.exists(_source(n))]


def dynamic(threads: int, budget: Budget, work: str) -> list[dict]:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    rows = []
    for name, ops in DYNAMIC_MODELS:
        def dynamic_int8(src: str, path: str, ops=ops) -> None:
            quantize_dynamic(src, path, weight_type=QuantType.QInt8, op_types_to_quantize=ops)
        if os.path.exists(_source(name)):
            rows.append(_against_onnxruntime(name, dynamic_int8, threads, budget, work))
    return rows


def measure(threads: int = 2, quick: bool = False) -> dict:
    budget = QUICK if quick else Budget(min_seconds=1.0, max_seconds=5.0, block=10)
    with tempfile.TemporaryDirectory(prefix="cl_bench_quant_") as work:
        return {"weight": weight_quant(threads, budget, work), "dynamic_quant": dynamic_quant(threads, budget, work),
                "bf16": bf16(threads, budget, work),
                "full_quant": full_quant(threads, budget, work),
                "qdq": qdq(threads, budget, work),
                "qoperator": qoperator(threads, budget, work), "dynamic": dynamic(threads, budget, work)}


def lines(result: dict) -> list[str]:
    out = []
    for key, title in (("weight", "WEIGHT_QUANT bit_num=8 (per-channel int8 weights, dequantized at load)"),
                       ("dynamic_quant", "DYNAMIC_QUANT (int8 weights per output column, activations quantized per "
                                         "call; MatMul/Gemm on the native int8 GEMM)"),
                       ("bf16", ("BF16 (--bf16=on: bfloat16 weights, activations rounded to bfloat16 per call, "
                                 "float32 sums; MatMul/Gemm on the native bf16 GEMM, vdpbf16ps)"))):
        q = "bf16" if key == "bf16" else "quantized"
        out += [f"{title} against the same model converted in float32; cosine of the outputs on one seeded input.",
                "", (f"| model | float .ms MB | {q} .ms MB | / float | / ONNX | output cosine | float ms | "
                     f"{q} ms | {q} / float |"), "|---|---|---|---|---|---|---|---|---|"]
        for r in result.get(key, []):
            if "error" in r:
                out.append(f"| {r['model']} | {r['error']} | | | | | | | |")
                continue
            out.append(f"| {r['model']} | {r['float_mb']:.2f} | {r['quant_mb']:.2f} | "
                       f"{r['quant_mb'] / r['float_mb']:.2f} | {r['quant_mb'] / r['onnx_mb']:.2f} | {r['cosine']:.6f} | "
                       f"{r['float_ms']:.3f} | {r['quant_ms']:.3f} | {r['quant_ms'] / r['float_ms']:.2f} |")
        out.append("")
    out += ["FULL_QUANT (MAX_MIN, per_channel, bias_correction; 8 seeded BIN calibration inputs) against the float "
            "conversion (cosine on an input outside the calibration set) and onnxruntime on its own QDQ model of the "
            "same network (quantize_static, the same inputs).", "",
            "| model | float .ms MB | FULL_QUANT .ms MB | / float | output cosine | float ms | FULL_QUANT ms | "
            "/ float | onnxruntime QDQ ms | FULL_QUANT / ORT QDQ |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result.get("full_quant", []):
        if "error" in r:
            out.append(f"| {r['model']} | {r['error']} | | | | | | | | |")
            continue
        out.append(f"| {r['model']} | {r['float_mb']:.2f} | {r['quant_mb']:.2f} | {r['quant_mb'] / r['float_mb']:.2f} | "
                   f"{r['cosine']:.6f} | {r['float_ms']:.3f} | {r['full_ms']:.3f} | {r['full_ms'] / r['float_ms']:.2f} | "
                   f"{r['ort_ms']:.3f} | {r['full_ms'] / r['ort_ms']:.2f} |")
    for key, title in (("qdq", "Models quantized by onnxruntime (quantize_static, QDQ, per-channel): ours runs the "
                                "dense convolutions on its int8 convolution (QuantizedConv: the input quantized on "
                                "the way in, the weights' int8 values found back from the dequantized ones), the "
                                "depthwise ones in float32; onnxruntime runs its int8 kernels."),
                       ("qoperator", "Models quantized by onnxruntime in QOperator form (quantize_static: QLinearConv/"
                                     "QLinearMatMul and the com.microsoft QLinearAdd/Mul/Softmax/Concat/"
                                     "GlobalAveragePool, QGemm): ours runs QLinearMatMul/QGemm on the native int8 "
                                     "GEMM and expands the others into float ops."),
                       ("dynamic", "Models quantized by onnxruntime's quantize_dynamic (int8 weights; DynamicQuantizeLinear "
                                   "+ MatMulInteger/ConvInteger): ours runs MatMulInteger -> Cast -> Mul -> Add as one "
                                   "MatMulIntegerToFloat on the native int8 GEMM and ConvInteger as an exact-integer "
                                   "float32 Conv, onnxruntime its int8 kernels.")):
        out += ["", title, "", "| model | ours ms | onnxruntime ms | ours / ORT | output cosine vs ORT |",
                "|---|---|---|---|---|"]
        for r in result.get(key, []):
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
