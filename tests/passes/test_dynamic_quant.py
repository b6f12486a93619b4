"""[common_quant_param] quant_type=DYNAMIC_QUANT (passes/dynamic_quant.py, quant_config.py): MatMul/Gemm on constant
weights become onnxruntime's ``quantize_dynamic`` form (DynamicQuantizeLinear -> MatMulInteger on int8 weights ->
Cast -> Mul by the scales [-> Add bias]); the converted model stays close to the float one, stores int8 weights,
honours the thresholds and the skip list; bad configs fail -600 naming the key and write nothing."""
from __future__ import annotations

import csv
import os

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.frontend.onnx_import import import_model
from converter_lite.model.format import load_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.dynamic_quant import quantize_dynamic
from converter_lite.quant_config import DynamicQuantConfig, parse_quant_sections
from tests.cli.test_converter_cli import assert_failed, last_line, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BERT_TINY = os.path.join(ROOT, "..", "shared", "models", "bert_tiny.onnx")
F32 = np.float32
K = 256
# the model's thresholds: "small" (64x20 = 1280 elements) is below min_quant_weight_size, "skipme" is skipped
QUANT_LINES = ["min_quant_weight_size=4000", "min_quant_weight_channel=16", "skip_quant_node=skipme, no_such_node"]
QUANTIZED = {"q_proj", "k_proj", "v_proj", "o_proj", "gemm_t", "gemm_n"}     # k_proj2 shares k_proj's weight


def _weights(rng) -> dict[str, np.ndarray]:
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(F32)

    return {"wq": w(K, 640), "wk": w(K, 640), "wv": w(K, 640), "wo": w(3 * 640, 37), "wg": w(37, 512).T.copy(),
            "cg": rng.standard_normal(512).astype(F32), "wn": w(512, 300), "wskip": w(300, 64), "wsmall": w(64, 20),
            "shape2": np.array([-1, 37], np.int64)}


def weight_model(rng) -> onnx.ModelProto:
    """x [2, 7, K] read by 3 MatMuls (q/k/v; k's weight also read by k_proj2 on relu(x)), o_proj to N=37,
    Gemm transB=1 with C, Gemm without C (alpha 0.5), then a skipped MatMul and one below the size threshold."""
    nodes = [
        oh.make_node("MatMul", ["x", "wq"], ["q"], name="q_proj"),
        oh.make_node("MatMul", ["x", "wk"], ["k"], name="k_proj"),
        oh.make_node("MatMul", ["x", "wv"], ["v"], name="v_proj"),
        oh.make_node("Relu", ["x"], ["xr"]),
        oh.make_node("MatMul", ["xr", "wk"], ["k2"], name="k_proj2"),
        oh.make_node("Add", ["k", "k2"], ["kk"]),
        oh.make_node("Concat", ["q", "kk", "v"], ["qkv"], axis=-1),
        oh.make_node("MatMul", ["qkv", "wo"], ["o"], name="o_proj"),
        oh.make_node("Relu", ["o"], ["r"]),
        oh.make_node("Reshape", ["r", "shape2"], ["r2"]),
        oh.make_node("Gemm", ["r2", "wg", "cg"], ["g"], name="gemm_t", transB=1),
        oh.make_node("Tanh", ["g"], ["gt"]),
        oh.make_node("Gemm", ["gt", "wn"], ["n"], name="gemm_n", alpha=0.5),
        oh.make_node("MatMul", ["n", "wskip"], ["s"], name="skipme"),
        oh.make_node("MatMul", ["s", "wsmall"], ["y"], name="small"),
    ]
    return make_model(nodes, [tensor_info("x", F32, [2, 7, K])],
                      [tensor_info("y", F32, [14, 20]), tensor_info("q", F32, [2, 7, 640])], _weights(rng))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dq") / "weights.onnx"
    onnx.save(weight_model(np.random.default_rng(0)), str(path))
    return str(path)


def _feeds():
    return {"x": np.random.default_rng(1).standard_normal((2, 7, K)).astype(F32)}


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _config(tmp_path, name, lines, opt_level=None):
    cfg = tmp_path / f"{name}.cfg"
    gk = f"[graph_kernel_param]\nopt_level={opt_level}\n" if opt_level is not None else ""
    cfg.write_text(gk + "[common_quant_param]\n" + "".join(f"{line}\n" for line in lines))
    return str(cfg)


def _run_ort_precise(model, feeds):
    """onnxruntime without graph optimizations, its u8s8 products exact also on AVX2 without VNNI (whose fast path
    may saturate 16-bit pair sums)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.x64quantprecision", "1")
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _to_onnx(graph) -> onnx.ModelProto:
    """The IR graph (ONNX ops only) back as an ONNX model: constants become initializers."""
    nodes, inits, seen = [], [], set()
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None and v.const is not None and v.name not in seen:
                seen.add(v.name)
                inits.append(onh.from_array(np.asarray(v.const), v.name))
        attrs = {k: list(a) if isinstance(a, tuple) else a for k, a in n.attrs.items()}
        nodes.append(oh.make_node(n.op, ["" if v is None else v.name for v in n.inputs],
                                  [o.name for o in n.outputs], name=n.name, **attrs))
    ins = [tensor_info(v.name, v.dtype.np, list(v.shape)) for v in graph.inputs]
    outs = [tensor_info(v.name, v.dtype.np, None) for v in graph.outputs]
    return oh.make_model(oh.make_graph(nodes, "rewritten", ins, outs, initializer=inits),
                         opset_imports=[oh.make_opsetid("", 21)], ir_version=10)


def _rewritten(model_file):
    graph = import_model(model_file)
    result = quantize_dynamic(graph, parse_quant_sections(
        {"common_quant_param": {"quant_type": "DYNAMIC_QUANT", **dict(line.split("=") for line in QUANT_LINES)}}))
    return graph, result


# -- the pass ---------------------------------------------------------------------------------------------------
def test_rewrite_is_onnxruntimes_form_in_topological_order(model_file):
    graph, result = _rewritten(model_file)
    counts = graph.op_counts()
    assert "Gemm" not in counts and counts["MatMul"] == 2                      # skipme and small stay float
    assert counts["DynamicQuantizeLinear"] == 5                                # x, relu(x), qkv, r2, tanh(g)
    assert counts["MatMulInteger"] == 7 and counts["Cast"] == 7
    assert result.nodes == 7 and {r["node"] for r in result.rows} == QUANTIZED
    produced = {id(v) for v in graph.inputs}
    for n in graph.nodes:                                                      # every input made before its use
        assert all(v is None or v.const is not None or id(v) in produced for v in n.inputs), n
        produced.update(id(o) for o in n.outputs)
    by_name = {n.name: n for n in graph.nodes}
    mm = {n.name.removesuffix("_MatMulInteger"): n for n in graph.nodes if n.op == "MatMulInteger"}
    x_dq = mm["q_proj"].inputs[0].producer
    assert x_dq.op == "DynamicQuantizeLinear" and x_dq.inputs[0] is graph.inputs[0]
    assert mm["k_proj"].inputs[0] is mm["v_proj"].inputs[0] is mm["q_proj"].inputs[0]      # one DQL for q/k/v
    assert mm["k_proj2"].inputs[1] is mm["k_proj"].inputs[1]                   # the shared weight, quantized once
    for name, n in mm.items():
        wq, wz = n.inputs[1].const, n.inputs[3].const
        assert wq.dtype == np.int8 and wq.ndim == 2 and np.abs(wq).max() == 127, name
        assert wz.dtype == np.int8 and wz.shape == (wq.shape[1],) and not wz.any()
        assert n.inputs[2] is n.inputs[0].producer.outputs[2]                  # the activation's zero point
    assert mm["gemm_t"].inputs[1].const.shape == (37, 512)                     # transB applied: [K, N]
    assert mm["o_proj"].inputs[1].const.shape == (3 * 640, 37)
    assert by_name["skipme"].inputs[1].const.dtype == np.float32
    assert [v.name for v in graph.outputs] == ["y", "q"]                       # outputs keep their values
    assert graph.outputs[1].producer.op == "Mul"


def test_reference_equals_onnxruntime_on_the_rewritten_form(model_file):
    graph, _ = _rewritten(model_file)
    feeds = _feeds()
    ours = eval_graph(graph, feeds)
    theirs = _run_ort_precise(_to_onnx(graph), feeds)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * float(np.abs(b).max()))


def test_same_weights_and_outputs_as_onnxruntime_quantize_dynamic(model_file, tmp_path):
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize_dynamic

    # onnxruntime quantizes MatMuls only (no Gemm): the reference is our form of the model without its Gemms
    src = weight_model(np.random.default_rng(0))
    body = src.graph
    for n in body.node:
        if n.op_type == "Gemm":
            n.op_type = "MatMul"
            del n.attribute[:]
            del n.input[2:]
    inits = {i.name: i for i in body.initializer}
    inits["wg"].CopyFrom(onh.from_array(onh.to_array(inits["wg"]).T.copy(), "wg"))
    inits["wn"].CopyFrom(onh.from_array(onh.to_array(inits["wn"]) * F32(0.5), "wn"))
    path = str(tmp_path / "matmuls.onnx")
    onnx.save(src, path)
    ort_path = str(tmp_path / "matmuls_ort.onnx")
    ort_quantize_dynamic(path, ort_path, per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_exclude=["skipme", "small"])
    ort_model = onnx.load(ort_path)
    graph, _ = _rewritten(path)
    ort_weights = {i.name: onh.to_array(i) for i in ort_model.graph.initializer if i.name.endswith("_quantized")}
    ours = {n.inputs[1].name: n.inputs[1].const for n in graph.nodes if n.op == "MatMulInteger"}
    assert sorted(ours) == sorted(ort_weights)                                  # wq_quantized, ...: 6 weights
    for name, q in ours.items():      # ours divides in float64: an element at a float32 half may round the other way
        diff = np.abs(q.astype(np.int32) - ort_weights[name])
        assert q.shape == ort_weights[name].shape and diff.max() <= 1 and np.count_nonzero(diff) <= q.size // 10000
    assert sum(n.op_type == "DynamicQuantizeLinear" for n in ort_model.graph.node) == 5
    feeds = _feeds()                  # the odd weight element apart, the same numbers
    for a, b in zip(eval_graph(graph, feeds), _run_ort_precise(ort_model, feeds)):
        assert a.shape == b.shape and np.linalg.norm(a - b) <= 1e-3 * np.linalg.norm(b)


def test_thresholds_and_what_is_not_rewritten(rng):
    def site(op, x_shape, w, **attrs):
        from converter_lite.ir.core import Graph, Node, TensorType, Value
        from converter_lite.ir.dtype import DType
        x = Value("x", TensorType(DType.float32, x_shape))
        ins = [x, Value("w", const=w)] + ([Value("c", const=attrs.pop("C"))] if "C" in attrs else [])
        out = Value("y", TensorType(DType.float32, None))
        g = Graph(inputs=[x], outputs=[out], nodes=[Node(op, ins, [out], attrs, name="n")])
        return quantize_dynamic(g, DynamicQuantConfig(min_quant_weight_channel=4, min_quant_weight_size=64)).nodes

    w = rng.standard_normal((16, 8)).astype(F32)
    assert site("MatMul", (3, 16), w) == 1
    assert site("MatMul", (2, 3, 16), w) == 1
    assert site("MatMul", (16,), w) == 0                                        # 1-D activation
    assert site("MatMul", (3, 16), w.astype(np.float64)) == 0                   # not a float32 weight
    assert site("MatMul", (3, 16), w[:, :3]) == 0                               # 3 columns < 4
    assert site("MatMul", (3, 16), w[:4]) == 0                                  # 32 elements < 64
    assert site("Gemm", (3, 16), w, transA=0, beta=2.0, C=np.ones(8, F32)) == 1   # beta folds into C
    assert site("Gemm", (16, 3), w, transA=1) == 0
    assert site("MatMul", (3, 16), rng.standard_normal((2, 16, 8)).astype(F32)) == 0   # batched weight


# -- conversion ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opt_level", [0, 2])
def test_converted_model_is_close_and_holds_int8_weights(model_file, tmp_path, opt_level):
    feeds = _feeds()
    ref = run_ort(onnx.load(model_file), feeds)
    f = converter_lite.convert(model_file, str(tmp_path / "f"), graph_kernel_flags=f"--opt_level={opt_level}")
    cfg = _config(tmp_path, "q", ["quant_type=DYNAMIC_QUANT", "bit_num=8", *QUANT_LINES,
                                  f"debug_info_save_path={tmp_path / 'dbg'}"], opt_level)
    q = converter_lite.convert(model_file, str(tmp_path / "q"), config_file=cfg)
    got = converter_lite.load(q).run(feeds)
    for name, r in zip(("y", "q"), ref):
        assert got[name].shape == r.shape and _cosine(got[name], r) >= 0.99, name
    assert os.path.getsize(q) <= 0.35 * os.path.getsize(f)
    loaded = load_model(q)
    assert loaded.metadata["dynamic_quant"] == {"bit_num": 8, "weights": 6, "nodes": 7, "quant_strategy": "ALWC"}
    assert loaded.metadata["opt_level"] == opt_level
    if opt_level == 0:
        products = [n for n in loaded.graph.nodes if n.op == "MatMulInteger"]
        assert len(products) == 7 and all(n.inputs[1].const.dtype == np.int8 for n in products)
        floats = {n.name: n.inputs[1].const for n in loaded.graph.nodes if n.op == "MatMul"}
        assert sorted(floats) == ["skipme", "small"] and all(w.dtype == np.float32 for w in floats.values())
    with open(tmp_path / "dbg" / "q_dynamic_quant.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["node"] for r in rows} == QUANTIZED
    assert all(r["bits"] == "8" and r["axis"] == "1" and float(r["cosine"]) > 0.9999 for r in rows)
    assert {r["shape"] for r in rows if r["node"] == "gemm_t"} == {"37x512"}


def test_bert_tiny_converts_and_runs_close(tmp_path):
    if not os.path.exists(BERT_TINY):
        pytest.skip(f"{BERT_TINY} not present")
    cfg = _config(tmp_path, "q", ["quant_type=DYNAMIC_QUANT", "[dynamic_quant_param]", "quant_strategy=ALWC"], 2)
    q = converter_lite.convert(BERT_TINY, str(tmp_path / "q"), config_file=cfg, input_shape={"input_ids": (2, 64)})
    feeds = {"input_ids": np.random.default_rng(0).integers(0, 500, (2, 64)).astype(np.int64)}
    ref = run_ort(onnx.load(BERT_TINY), feeds)[0]
    got = next(iter(converter_lite.load(q).run(feeds).values()))
    assert _cosine(ref, got) >= 0.99
    assert load_model(q).metadata["dynamic_quant"]["weights"] == 12                # the 12 dense layers


def test_fp16_and_dynamic_quant_are_exclusive(model_file, tmp_path):
    cfg = _config(tmp_path, "q", ["quant_type=DYNAMIC_QUANT"])
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(model_file, str(tmp_path / "q"), config_file=cfg, fp16=True)
    assert e.value.code == -600 and "DYNAMIC_QUANT" in str(e.value) and "use one of them" in str(e.value)
    assert not (tmp_path / "q.ms").exists()


# -- the config ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lines, words", [
    (["quant_type=DYNAMIC_QUNAT"], ["quant_type='DYNAMIC_QUNAT'", "WEIGHT_QUANT, FULL_QUANT, DYNAMIC_QUANT"]),
    (["quant_type=DYNAMIC_QUANT", "bit_num=7"], ["bit_num=7", "DYNAMIC_QUANT supports 8 bits only"]),
    (["quant_type=DYNAMIC_QUANT", "bit_num=16"], ["bit_num=16", "8 bits only"]),
    (["quant_type=DYNAMIC_QUANT", "min_quant_weight_channel=x"], ["min_quant_weight_channel='x': not an integer"]),
    (["quant_type=DYNAMIC_QUANT", "skip_quant_nodes=a"], ["unknown key 'skip_quant_nodes'; did you mean"]),
    (["quant_type=FULL_QUANT"], ["quant_type=FULL_QUANT needs a [data_preprocess_param] section"]),
    (["quant_type=DYNAMIC_QUANT", "[dynamic_quant_param]", "quant_strategy=ALCW"],
     ["[dynamic_quant_param]", "quant_strategy='ALCW': must be ALWC", "or ACWL"]),
    (["quant_type=DYNAMIC_QUANT", "[dynamic_quant_param]", "quant_strategy=ACWL"],
     ["[dynamic_quant_param]", "quant_strategy=ACWL", "not supported yet"]),
    (["quant_type=DYNAMIC_QUANT", "[dynamic_quant_param]", "quant_stratgy=ALWC"],
     ["[dynamic_quant_param]", "unknown key 'quant_stratgy'; did you mean 'quant_strategy'?"]),
    (["quant_type=WEIGHT_QUANT", "[dynamic_quant_param]", "quant_strategy=ALWC"],
     ["[dynamic_quant_param] applies to quant_type=DYNAMIC_QUANT only"]),
])
def test_bad_configs_fail_naming_the_key_and_write_nothing(model_file, tmp_path, lines, words):
    cfg = _config(tmp_path, "bad", lines)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(model_file, str(out / "q"), config_file=cfg)
    assert e.value.code == -600
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert os.listdir(out) == []


def test_dynamic_section_alone_fails(model_file, tmp_path):
    cfg = tmp_path / "d.cfg"
    cfg.write_text("[graph_kernel_param]\nopt_level=1\n[dynamic_quant_param]\nquant_strategy=ALWC\n")
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(model_file, str(tmp_path / "q"), config_file=str(cfg))
    assert e.value.code == -600 and "[dynamic_quant_param] needs [common_quant_param] quant_type=DYNAMIC_QUANT" \
        in str(e.value)
    assert not (tmp_path / "q.ms").exists()


def test_config_defaults():
    cfg = parse_quant_sections({"common_quant_param": {"quant_type": "DYNAMIC_QUANT"}})
    assert cfg == DynamicQuantConfig() and cfg.quant_type == "DYNAMIC_QUANT"
    assert (cfg.bit_num, cfg.min_quant_weight_channel, cfg.quant_strategy) == (8, 16, "ALWC")
    cfg = parse_quant_sections({"common_quant_param": {"quant_type": "DYNAMIC_QUANT", "enable_encode": "true",
                                                       "skip_quant_node": "a, b"},
                                "dynamic_quant_param": {"quant_strategy": "ALWC"}})
    assert cfg.skip_quant_node == ("a", "b")
    assert parse_quant_sections({"common_quant_param": {"quant_type": "WEIGHT_QUANT"}}).quant_type == "WEIGHT_QUANT"


def test_cli(model_file, tmp_path):
    cfg = _config(tmp_path, "q", ["quant_type=DYNAMIC_QUANT", "bit_num=8", *QUANT_LINES,
                                  "[dynamic_quant_param]", "quant_strategy=ALWC"], 2)
    r = run_cli("--fmk=ONNX", f"--modelFile={model_file}", f"--outputFile={tmp_path}/q", f"--configFile={cfg}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert last_line(r) == "CONVERT RESULT SUCCESS:0"
    assert load_model(str(tmp_path / "q.ms")).metadata["dynamic_quant"]["weights"] == 6
    bad = _config(tmp_path, "bad", ["quant_type=DYNAMIC_QUANT", "bit_num=4"])
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli("--fmk=ONNX", f"--modelFile={model_file}", f"--outputFile={out}/q", f"--configFile={bad}")
    assert_failed(r, -600, "[common_quant_param] bit_num=4", out_dir=out)
