"""``--bf16=on`` (passes/bf16.py, pipeline.py, kernels/bgemm/): MatMul/Gemm on constant float32 weights become
``MatMulBf16`` on bfloat16 weights; the converted model stays within bfloat16's precision of onnxruntime's float32
output, stores half-size weights, runs on the native bf16 GEMM; a CPU without AVX-512 BF16 refuses the conversion
(-600, nothing written) and the loading of such a model (naming the feature); ``--bf16=off`` changes nothing."""
from __future__ import annotations

import os

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.config import GraphKernelConfig
from converter_lite.errors import ConverterError
from converter_lite.frontend.onnx_import import import_model
from converter_lite.kernels.bgemm.abi import BGEMM_SYMBOL
from converter_lite.kernels.registry import DRIVERS_ATTR
from converter_lite.model.format import load_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.bf16 import convert_to_bf16
from converter_lite.pipeline import bf16_refusal
from converter_lite.runtime import native

F32 = np.float32
HAS_BF16 = "avx512_bf16" in native.host_cpu_flags()
# a host without AVX-512 BF16 converts as if it had it (the driver is then built as its emulation)
FLAGS = None if HAS_BF16 else frozenset({"avx512_bf16"})
NO_BF16 = frozenset(native.host_cpu_flags() - {"avx512_bf16"}) or frozenset({"avx512f"})


def _model(rng):
    """x [2, 7, 96]: MatMul + Add bias (folded) -> Relu -> MatMul K=131 (odd) -> Reshape -> Gemm transB=1
    alpha=0.5 with a constant C -> Tanh -> Gemm with a computed C; a small MatMul (below the size threshold)
    stays float."""
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(F32)

    inits = {"w1": w(96, 131), "b1": rng.standard_normal(131).astype(F32), "w2": w(131, 65),
             "shape": np.array([-1, 65], np.int64), "w3": w(65, 200).T.copy(), "c3": rng.standard_normal(200).astype(F32),
             "w4": w(200, 48), "wc": w(65, 48), "w5": w(48, 8)}
    nodes = [
        oh.make_node("MatMul", ["x", "w1"], ["m1"], name="mm1"),
        oh.make_node("Add", ["m1", "b1"], ["a1"], name="bias1"),
        oh.make_node("Relu", ["a1"], ["r1"]),
        oh.make_node("MatMul", ["r1", "w2"], ["m2"], name="mm2"),
        oh.make_node("Reshape", ["m2", "shape"], ["f"]),
        oh.make_node("Gemm", ["f", "w3", "c3"], ["g3"], name="gemm3", transB=1, alpha=0.5),
        oh.make_node("Tanh", ["g3"], ["t3"]),
        oh.make_node("MatMul", ["f", "wc"], ["cc"], name="mmc"),        # 65 x 48 = 3120: converted too
        oh.make_node("Gemm", ["t3", "w4", "cc"], ["g4"], name="gemm4"),
        oh.make_node("MatMul", ["g4", "w5"], ["y"], name="small"),
    ]
    return make_model(nodes, [tensor_info("x", F32, [2, 7, 96])], [tensor_info("y", F32, [14, 8])], inits)


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    m = _model(rng)
    x = rng.standard_normal((2, 7, 96)).astype(F32)
    return m, {"x": x}, run_ort(m, {"x": x})[0]


def test_pass_rewrites_and_interprets(model):
    m, feeds, want = model
    g = import_model(m)
    result = convert_to_bf16(g)
    ops = [n.op for n in g.nodes]
    assert result.nodes == {"MatMul": 3, "Gemm": 2} and result.biases_folded == 1
    assert ops.count("MatMulBf16") == 5 and ops.count("MatMul") == 1 and "Gemm" not in ops
    assert ops.count("Add") == 1                       # gemm4's computed C, added after the product
    assert result.bf16_bytes * 2 == result.float_bytes and len(result.rows) == 5
    assert "5 nodes as bfloat16 products" in result.summary()
    got = eval_graph(g, feeds)[0]
    assert _cosine(got, want) >= 0.999
    np.testing.assert_allclose(got, want, rtol=0.05, atol=0.05 * float(np.abs(want).max()))


def test_min_elements_keeps_small_weights(model):
    g = import_model(model[0])
    assert convert_to_bf16(g, min_elements=10 ** 6).count == 0
    assert "MatMulBf16" not in {n.op for n in g.nodes}


@pytest.mark.parametrize("threads", [1, 2])
def test_converted_model_on_native_driver(tmp_path, model, threads):
    m, feeds, want = model
    float_ms = converter_lite.convert(m, str(tmp_path / "f"), graph_kernel_flags="--opt_level=2")
    from converter_lite.pipeline import build_config, convert_model
    res = convert_model(m, str(tmp_path / "b"), config=build_config(graph_kernel_flags="--opt_level=2"), bf16=True,
                        host_flags=FLAGS)
    graph = load_model(res.output_path).graph
    products = [n for n in graph.nodes if n.op == "MatMulBf16"]
    assert len(products) == 5 and all(BGEMM_SYMBOL in n.attrs.get(DRIVERS_ATTR, ()) for n in products)
    assert all(n.inputs[1].const.dtype == np.uint16 for n in products)
    assert res.stats["bf16"] == 5
    assert os.path.getsize(res.output_path) < 0.75 * os.path.getsize(float_ms)
    got = converter_lite.load(res.output_path, num_threads=threads).run(feeds)["y"]
    assert _cosine(got, want) >= 0.999
    ref = eval_graph(import_model(m), feeds)[0]
    assert _cosine(got, ref) >= 0.999


def test_bf16_off_is_unchanged(tmp_path, model):
    m, feeds, _ = model
    a = converter_lite.convert(m, str(tmp_path / "a"), graph_kernel_flags="--opt_level=2")
    b = converter_lite.convert(m, str(tmp_path / "b"), graph_kernel_flags="--opt_level=2", bf16=False)
    la, lb = load_model(a), load_model(b)
    assert "MatMulBf16" not in {n.op for n in lb.graph.nodes}
    # the same nodes, weights and native code (not the file size: the metadata's per-pass timings vary in length)
    assert [n.op for n in la.graph.nodes] == [n.op for n in lb.graph.nodes]
    assert {k: bytes(v) for k, v in la.sections.items()} == {k: bytes(v) for k, v in lb.sections.items()}
    ca, cb = [v.const for v in la.graph.constants()], [v.const for v in lb.graph.constants()]
    assert len(ca) == len(cb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(ca, cb))
    np.testing.assert_array_equal(converter_lite.load(a).run(feeds)["y"], converter_lite.load(b).run(feeds)["y"])


def test_refused_without_the_cpu_feature(tmp_path, model, monkeypatch):
    monkeypatch.setattr(native, "host_cpu_flags", lambda: NO_BF16)
    with pytest.raises(ConverterError) as e:
        converter_lite.convert(model[0], str(tmp_path / "m"), bf16=True)
    assert e.value.code == -600 and "--bf16=on" in e.value.message and "avx512_bf16" in e.value.message
    assert os.listdir(tmp_path) == []


def test_refusal_reasons():
    assert bf16_refusal(GraphKernelConfig(), {"avx512_bf16", "avx512f"}) is None
    assert "this CPU lacks avx512bf16" in bf16_refusal(GraphKernelConfig(), {"avx512f"})
    assert bf16_refusal(GraphKernelConfig(cpu_feature="-avx512bf16"), {"avx512_bf16"})
    assert "cpu_type=x86-64-v3" in bf16_refusal(GraphKernelConfig(cpu_type="x86-64-v3"), {"avx512_bf16"})
    assert bf16_refusal(GraphKernelConfig(cpu_type="x86-64-v4", cpu_feature="+avx512bf16"), set()) is None


def test_with_fp16_or_quantization_refused(tmp_path, model):
    with pytest.raises(ConverterError, match="--bf16=on and --fp16=on") as e:
        converter_lite.convert(model[0], str(tmp_path / "m"), bf16=True, fp16=True)
    assert e.value.code == -600 and os.listdir(tmp_path) == []


@pytest.mark.skipif(not HAS_BF16, reason="the host has no AVX-512 BF16 (the model would record no need of it)")
def test_load_on_a_host_without_the_feature(tmp_path, model, monkeypatch):
    m, feeds, _ = model
    ms = converter_lite.convert(m, str(tmp_path / "b"), graph_kernel_flags="--opt_level=2", bf16=True)
    monkeypatch.setattr(native, "host_cpu_flags", lambda: NO_BF16)
    with pytest.raises(ConverterError) as e:
        converter_lite.load(ms)
    assert "avx512bf16" in e.value.message and "avx512_bf16" in e.value.message and "--bf16" in e.value.message
    monkeypatch.undo()
    assert converter_lite.load(ms).run(feeds)["y"].shape == (14, 8)
