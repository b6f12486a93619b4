"""[common_quant_param] quant_type=FULL_QUANT (quant_config.py, frontend/calibration.py, frontend/full_quant.py,
passes/full_quant.py): onnxruntime's static quantizer, calibrated on BIN files, writes the QDQ model the pipeline
converts; the result stays close to the float model on an input outside the calibration set, stores its weights in
int8 (the file shrinks), corrects biases as MindSpore does, reports per node, and bad configs or calibration data
fail -600 naming the key or file with nothing written."""
from __future__ import annotations

import csv
import json
import logging
import os
import struct
import zlib

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.frontend import full_quant as fq
from converter_lite.model.format import load_model
from converter_lite.pipeline import build_config, convert_model
from converter_lite.quant_config import FullQuantConfig, parse_quant_sections
from tests.cli.test_converter_cli import assert_failed, last_line, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESNET = os.path.join(ROOT, "..", "shared", "models", "resnet_mini.onnx")
F32 = np.float32
N_CAL = 8
METHODS = ("MAX_MIN", "KL", "REMOVAL_OUTLIER")


def small_cnn(rng, batch=1, classes=1500) -> onnx.ModelProto:
    """Conv(3->64)+Relu+Conv(64->256, stride 2)+Relu+GlobalAveragePool+Flatten+Gemm(256->classes): 0.5 M weights,
    so that the weights, not the native code, make most of the file."""
    def he(*shape):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(F32)

    inits = {"w1": he(64, 3, 3, 3), "b1": (rng.standard_normal(64) * 0.1).astype(F32),
             "w2": he(256, 64, 3, 3), "b2": (rng.standard_normal(256) * 0.1).astype(F32),
             "wf": he(classes, 256), "bf": (rng.standard_normal(classes) * 0.1).astype(F32)}
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             oh.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
             oh.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             oh.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
             oh.make_node("Flatten", ["g"], ["f"], name="flatten"),
             oh.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1)]
    return make_model(nodes, [tensor_info("x", F32, [batch, 3, 16, 16])], [tensor_info("y", F32, [batch, classes])],
                      inits)


def _write_bins(directory, shape, seed, n=N_CAL):
    """``n`` calibration files of standard-normal data (the models' input range: normalized pixels)."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        rng.standard_normal(shape).astype("<f4").tofile(os.path.join(directory, f"{i:03d}.bin"))
    return str(directory)


class Case:
    def __init__(self, path, input_name, shape, cal_dir, weights):
        self.path, self.input, self.shape, self.cal, self.weights = path, input_name, shape, cal_dir, weights
        self._float = None
        model = onnx.load(path)
        # the weights' shapes after onnxruntime's preprocessing, which folds a BatchNormalization into its Conv
        self.weight_shapes = [tuple(t.dims) for t in model.graph.initializer if len(t.dims) >= 2]

    def preprocess(self, size=N_CAL):
        return [f"calibrate_path={self.input}:{self.cal}", f"calibrate_size={size}", "input_type=BIN"]

    def feeds(self, seed=99):                   # not in the calibration set (seed 1)
        return {self.input: np.random.default_rng(seed).standard_normal(self.shape).astype(F32)}

    def float_size(self, tmp_path):
        if self._float is None:
            self._float = os.path.getsize(converter_lite.convert(self.path, str(tmp_path / "float"),
                                                                 graph_kernel_flags="--opt_level=2"))
        return self._float


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("fq")
    small = str(root / "small.onnx")
    onnx.save(small_cnn(np.random.default_rng(0)), small)
    out = {"small": Case(small, "x", (1, 3, 16, 16), _write_bins(root / "cal_small", (1, 3, 16, 16), 1), 3)}
    if os.path.exists(RESNET):
        out["resnet_mini"] = Case(RESNET, "pixel_values", (1, 3, 160, 160),
                                  _write_bins(root / "cal_resnet", (1, 3, 160, 160), 1), 12)
    return out


def _config(tmp_path, name, case=None, common=(), preprocess=None, full=(), opt_level=2):
    lines = ["[graph_kernel_param]", f"opt_level={opt_level}", "[common_quant_param]", "quant_type=FULL_QUANT",
             *common]
    if preprocess is None and case is not None:
        preprocess = case.preprocess()
    if preprocess is not None:
        lines += ["[data_preprocess_param]", *preprocess]
    if full:
        lines += ["[full_quant_param]", *full]
    cfg = tmp_path / f"{name}.cfg"
    cfg.write_text("".join(f"{line}\n" for line in lines))
    return str(cfg)


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _tensor_refs(node):
    """Every tensor ref of the .ms header's graph (dicts with a dtype and a shape)."""
    if isinstance(node, dict):
        if "dtype" in node and "shape" in node:
            yield node
            return
        for v in node.values():
            yield from _tensor_refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _tensor_refs(v)


def _weight_storage(path, shapes) -> tuple[int, int]:
    """(weights stored in 8 bits, float32 tensors of a weight's shape stored as such) of a .ms (model/format.py:
    the zlib JSON header after a 32-byte prefix).  A weight is in 8 bits as a quantized ref (integers + scales,
    dequantized at load) or as an int8 constant (a QDQ Conv run on int8 weights)."""
    with open(path, "rb") as f:
        prefix = f.read(32)
        header = json.loads(zlib.decompress(f.read(struct.unpack_from("<Q", prefix, 8)[0])))
    shapes = {tuple(s) for s in shapes} | {tuple(s)[::-1] for s in shapes if len(s) == 2}
    eight = floats = 0
    for ref in _tensor_refs(header["graph"]):
        if "quant" in ref or tuple(ref["shape"]) in shapes and ref["dtype"] in ("<i1", "|i1"):
            eight += 1
        elif tuple(ref["shape"]) in shapes and ref["dtype"] == "<f4":
            floats += 1
    return eight, floats


def _case(cases, name):
    if name not in cases:
        pytest.skip(f"{RESNET} not present")
    return cases[name]


# -- conversion ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("model", ["small", "resnet_mini"])
def test_converts_close_and_stores_int8_weights(cases, tmp_path, model, method, per_channel):
    case = _case(cases, model)
    cfg = _config(tmp_path, "q", case, full=[f"activation_quant_method={method}",
                                             f"per_channel={str(per_channel).lower()}"])
    q = converter_lite.convert(case.path, str(tmp_path / "q"), config_file=cfg)
    feeds = case.feeds()
    ref = run_ort(onnx.load(case.path), feeds)[0]
    got = next(iter(converter_lite.load(q).run(feeds).values()))
    assert got.shape == ref.shape and _cosine(got, ref) >= 0.98
    assert os.path.getsize(q) <= 0.35 * case.float_size(tmp_path)
    assert _weight_storage(q, case.weight_shapes) == (case.weights, 0)   # every weight in 8 bits, no float32 copy
    meta = load_model(q).metadata
    assert meta["opt_level"] == 2
    fqm = meta["full_quant"]
    assert (fqm["bit_num"], fqm["activation_quant_method"], fqm["per_channel"], fqm["bias_correction"]) == \
        (8, method, per_channel, True)
    assert fqm["calibration_inputs"] == {case.input: N_CAL} and fqm["weights"] == case.weights
    assert fqm["nodes"] == len(fqm["quantized_nodes"]) >= case.weights and fqm["excluded_nodes"] == []


def test_loaded_weights_are_the_ones_the_converter_compiled(cases, tmp_path):
    case = cases["small"]
    cfg = build_config(_config(tmp_path, "q", case))
    result = convert_model(case.path, str(tmp_path / "q"), config=cfg)
    compiled = {v.name: v.const for g in result.graph.all_graphs() for v in g.constants()}
    loaded = {v.name: v.const for g in load_model(result.output_path).graph.all_graphs() for v in g.constants()}
    assert compiled.keys() == loaded.keys()
    for name, a in compiled.items():                      # bit for bit, the dequantized float32 weights included
        assert loaded[name].dtype == a.dtype and loaded[name].shape == a.shape
        assert loaded[name].tobytes() == a.tobytes(), name
    weights = [a for a in loaded.values() if a.ndim >= 2]
    assert len(weights) == 3
    for w in weights:
        per_channel = w.reshape(w.shape[0], -1)
        assert w.dtype == np.int8 or max(len(np.unique(c)) for c in per_channel) <= 255   # an int8 grid a channel


def test_opt_level_0_converts_too(cases, tmp_path):
    case = cases["small"]
    q = converter_lite.convert(case.path, str(tmp_path / "q"), config_file=_config(tmp_path, "q", case, opt_level=0))
    feeds = case.feeds()
    assert _cosine(next(iter(converter_lite.load(q).run(feeds).values())), run_ort(onnx.load(case.path), feeds)[0]) \
        >= 0.98
    assert _weight_storage(q, cases["small"].weight_shapes) == (3, 0)


# -- bias correction ------------------------------------------------------------------------------------------------
def _conv1_mean_error(case, qdq) -> np.ndarray:
    """Per output channel, averaged over the calibration inputs: the float conv1's output minus the quantized
    conv1's (before its output's QuantizeLinear), both fed the calibration data."""
    conv = next(n for n in qdq.graph.node if n.name == "conv1")
    probe = onnx.ModelProto()
    probe.CopyFrom(qdq)
    probe.graph.output.append(oh.make_tensor_value_info(conv.output[0], onnx.TensorProto.FLOAT, None))
    files = sorted(os.listdir(case.cal))
    float_model = onnx.load(case.path)
    float_model.graph.output.append(oh.make_tensor_value_info("c1", onnx.TensorProto.FLOAT, None))
    total = 0.0
    for name in files:
        x = {case.input: np.fromfile(os.path.join(case.cal, name), "<f4").reshape(case.shape)}
        yq = run_ort(probe, x)[-1]
        yf = run_ort(float_model, x)[-1]
        total = total + (yf - yq).mean(axis=(0, 2, 3))
    return total / len(files)


def test_bias_correction_removes_the_mean_error_on_the_calibration_data(cases, tmp_path):
    case = cases["small"]

    def quantize(correct: bool):
        cfg = parse_quant_sections({"common_quant_param": {"quant_type": "FULL_QUANT"},
                                    "data_preprocess_param": dict(line.split("=", 1) for line in case.preprocess()),
                                    "full_quant_param": {"bias_correction": str(correct).lower()}})
        return fq.quantize_full(case.path, cfg)

    plain, corrected = quantize(False), quantize(True)
    assert (plain.bias_corrected, corrected.bias_corrected) == (0, 3)          # conv1, conv2, fc
    before, after = np.abs(_conv1_mean_error(case, plain.model)), np.abs(_conv1_mean_error(case, corrected.model))
    # what is left is the rounding of the int32 bias: half a step of its scale (input scale x weight scale)
    inits = {t.name: onh.to_array(t) for t in corrected.model.graph.initializer}
    conv = next(n for n in corrected.model.graph.node if n.name == "conv1")
    bias_dq = next(n for n in corrected.model.graph.node if n.output[0] == conv.input[2])
    half_step = 0.5 * inits[bias_dq.input[1]].astype(np.float64)
    assert np.all(after <= half_step * 1.001 + 1e-6) and np.any(before > 2 * half_step)
    assert after.mean() < 0.5 * before.mean()
    # the biases changed, the weights did not
    biases = [{t.name: onh.to_array(t) for t in m.model.graph.initializer if t.data_type == onnx.TensorProto.INT32}
              for m in (plain, corrected)]
    assert biases[0].keys() == biases[1].keys() and any((biases[0][k] != biases[1][k]).any() for k in biases[0])
    for a, b in zip(plain.weights, corrected.weights):
        np.testing.assert_array_equal(a.q, b.q)

    q = converter_lite.convert(case.path, str(tmp_path / "q"),
                               config_file=_config(tmp_path, "q", case, full=["bias_correction=false"]))
    meta = load_model(q).metadata["full_quant"]
    assert meta["bias_correction"] is False and meta["biases_corrected"] == 0
    feeds = case.feeds()
    assert _cosine(next(iter(converter_lite.load(q).run(feeds).values())), run_ort(onnx.load(case.path), feeds)[0]) \
        >= 0.98


def test_kl_clips_activation_ranges_that_max_min_keeps(cases):
    if not fq._takes_ranges():
        pytest.skip("this onnxruntime's quantize_static takes no precomputed ranges (KL = its 128-bin Entropy)")
    case = cases["small"]

    def scales(method):
        cfg = parse_quant_sections({"common_quant_param": {"quant_type": "FULL_QUANT"},
                                    "data_preprocess_param": dict(line.split("=", 1) for line in case.preprocess()),
                                    "full_quant_param": {"activation_quant_method": method}})
        qdq = fq.quantize_full(case.path, cfg).model
        inits = {t.name: onh.to_array(t) for t in qdq.graph.initializer}
        return {n.input[0]: float(inits[n.input[1]]) for n in qdq.graph.node if n.op_type == "QuantizeLinear"}

    max_min, kl = scales("MAX_MIN"), scales("KL")
    assert max_min.keys() == kl.keys()
    assert all(kl[k] <= max_min[k] * (1 + 1e-6) for k in kl) and any(kl[k] < 0.99 * max_min[k] for k in kl)


# -- report, thresholds, shapes -----------------------------------------------------------------------------------
def test_debug_report_per_node_and_weight(cases, tmp_path):
    case = cases["small"]
    cfg = _config(tmp_path, "q", case, common=[f"debug_info_save_path={tmp_path / 'dbg'}"])
    converter_lite.convert(case.path, str(tmp_path / "q"), config_file=cfg)
    with open(tmp_path / "dbg" / "q_full_quant.csv") as f:
        rows = list(csv.DictReader(f))
    acts = {r["node"]: r for r in rows if r["kind"] == "activation"}
    weights = {r["node"]: r for r in rows if r["kind"] == "weight"}
    assert set(acts) == {"conv1", "conv2", "gap", "flatten", "fc"} and set(weights) == {"conv1", "conv2", "fc"}
    assert acts["conv1"]["tensor"] == "r1" and acts["fc"]["tensor"] == "y" and acts["conv2"]["shape"] == "1x256x8x8"
    assert all(float(r["cosine"]) > 0.99 and float(r["max_abs_error"]) >= 0 for r in acts.values())
    assert all(float(r["cosine"]) > 0.999 and r["bits"] == "8" and r["axis"] == "0" for r in weights.values())
    assert weights["conv2"]["shape"] == "256x64x3x3"


def test_thresholds_and_skip_list_keep_nodes_float(cases, tmp_path, caplog):
    case = cases["small"]
    cfg = _config(tmp_path, "q", case, common=["min_quant_weight_channel=100", "skip_quant_node=fc, no_such_node"])
    with caplog.at_level(logging.WARNING, logger="converter_lite"):
        q = converter_lite.convert(case.path, str(tmp_path / "q"), config_file=cfg)
    assert "skip_quant_node names no_such_node, which is not a node of the model" in caplog.text
    meta = load_model(q).metadata["full_quant"]
    assert sorted(meta["excluded_nodes"]) == ["conv1", "fc"] and meta["weights"] == 1
    assert _weight_storage(q, case.weight_shapes) == (1, 2)
    assert "conv2" in meta["quantized_nodes"] and "conv1" not in meta["quantized_nodes"]
    cfg = _config(tmp_path, "s", case, common=["min_quant_weight_size=100000"])     # conv2 (147456) stays quantized
    meta = load_model(converter_lite.convert(case.path, str(tmp_path / "s"), config_file=cfg)).metadata
    assert sorted(meta["full_quant"]["excluded_nodes"]) == ["conv1"]


def test_dynamic_dims_need_input_shape(cases, tmp_path):
    case = cases["small"]
    dyn = tmp_path / "dyn.onnx"
    onnx.save(small_cnn(np.random.default_rng(0), batch="N"), str(dyn))
    cfg = _config(tmp_path, "q", case)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(str(dyn), str(out / "q"), config_file=cfg)
    assert e.value.code == -600 and "input 'x' has dynamic dim 0" in str(e.value) and "--inputShape" in str(e.value)
    assert os.listdir(out) == []
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(str(dyn), str(out / "q"), config_file=cfg, input_shape="x:1-4,3,16,16")
    assert e.value.code == -600 and "range" in str(e.value)
    q = converter_lite.convert(str(dyn), str(out / "q"), config_file=cfg, input_shape="x:1,3,16,16")
    feeds = case.feeds()
    assert _cosine(next(iter(converter_lite.load(q).run(feeds).values())), run_ort(onnx.load(case.path), feeds)[0]) \
        >= 0.98


def test_nhwc_inputs_calibrate_on_nhwc_files(cases, tmp_path):
    """With --inputDataFormat=NHWC the files hold what the converted model takes: NHWC tensors."""
    case = cases["small"]
    cal = _write_bins(tmp_path / "nhwc", (1, 16, 16, 3), 1)
    cfg = _config(tmp_path, "q", case, preprocess=[f"calibrate_path=x:{cal}", "calibrate_size=8", "input_type=BIN"])
    q = convert_model(case.path, str(tmp_path / "q"), config=build_config(cfg), input_format="NHWC").output_path
    x = case.feeds()
    got = next(iter(converter_lite.load(q).run({"x": x["x"].transpose(0, 2, 3, 1).copy()}).values()))
    assert _cosine(got, run_ort(onnx.load(case.path), x)[0]) >= 0.98


def test_image_keys_are_checked_and_ignored_with_bin(cases, tmp_path, caplog):
    case = cases["small"]
    keys = ["image_to_format=RGB", "normalize_mean=[127.5, 127.5, 127.5]", "normalize_std=[127.5, 127.5, 127.5]",
            "resize_width=16", "resize_height=16", "resize_method=LINEAR", "center_crop_width=16",
            "center_crop_height=16"]
    cfg = _config(tmp_path, "q", case, preprocess=case.preprocess() + keys)
    with caplog.at_level(logging.WARNING, logger="converter_lite"):
        q = converter_lite.convert(case.path, str(tmp_path / "q"), config_file=cfg)
    assert os.path.exists(q)
    assert "apply to input_type=IMAGE only and have no effect with BIN" in caplog.text
    assert "resize_method" in caplog.text


# -- bad configs and calibration data -----------------------------------------------------------------------------
def _bad_dir(tmp_path, kind):
    d = tmp_path / kind
    d.mkdir()
    if kind == "short":                                    # one file of the wrong size among right ones
        _write_bins(d, (1, 3, 16, 16), 5, n=N_CAL)
        (d / "003.bin").write_bytes(b"\0" * 100)
    return str(d)


BAD = [
    ({"common": ["bit_nmu=8"]}, ["[common_quant_param]", "unknown key 'bit_nmu'; did you mean 'bit_num'?"]),
    ({"common": ["bit_num=7"]}, ["bit_num=7", "FULL_QUANT supports 8 bits only"]),
    ({"preprocess": False}, ["quant_type=FULL_QUANT needs a [data_preprocess_param] section"]),
    ({"pre": lambda c, t: [f"calibrate_path=y:{c.cal}", "calibrate_size=8", "input_type=BIN"]},
     ["calibrate_path names 'y', which is not an input of the model (inputs: x)"]),
    ({"pre": lambda c, t: [f"calibrate_path=x:{t}/missing", "calibrate_size=8", "input_type=BIN"]},
     ["calibrate_path: directory", "missing does not exist"]),
    ({"pre": lambda c, t: [f"calibrate_path=x:{_bad_dir(t, 'empty')}", "calibrate_size=8", "input_type=BIN"]},
     ["empty holds no calibration file"]),
    ({"pre": lambda c, t: c.preprocess(size=9)}, ["calibrate_size=9, but directory", "holds only 8 file(s)"]),
    ({"pre": lambda c, t: [f"calibrate_path=x:{_bad_dir(t, 'short')}", "calibrate_size=8", "input_type=BIN"]},
     ["calibration file", "003.bin holds 100 bytes", "input 'x' (float32[1, 3, 16, 16]) takes 3072 bytes"]),
    ({"pre": lambda c, t: c.preprocess()[:2] + ["input_type=IMAGE"]},
     ["input_type=IMAGE is not supported", "image decoder", "input_type=BIN"]),
    ({"pre": lambda c, t: c.preprocess()[:2]}, ["input_type is missing"]),
    ({"pre": lambda c, t: c.preprocess()[1:]}, ["calibrate_path is missing"]),
    ({"pre": lambda c, t: ["calibrate_path=x", "calibrate_size=8", "input_type=BIN"]},
     ["calibrate_path: 'x' is not of the form input_name:directory"]),
    ({"pre": lambda c, t: c.preprocess(size=0)}, ["calibrate_size=0: out of range [1, 65535]"]),
    ({"pre": lambda c, t: c.preprocess() + ["calibrate_sise=8"]},
     ["[data_preprocess_param]", "unknown key 'calibrate_sise'; did you mean 'calibrate_size'?"]),
    ({"pre": lambda c, t: c.preprocess() + ["resize_method=FOO"]}, ["resize_method='FOO': must be LINEAR"]),
    ({"pre": lambda c, t: c.preprocess() + ["normalize_std=[1, 0, 1]"]}, ["normalize_std: a standard deviation of 0"]),
    ({"full": ["activation_quant_method=FOO"]},
     ["[full_quant_param]", "activation_quant_method='FOO': must be MAX_MIN, KL or REMOVAL_OUTLIER"]),
    ({"full": ["per_chanel=true"]}, ["unknown key 'per_chanel'; did you mean 'per_channel'?"]),
    ({"full": ["per_channel=maybe"]}, ["per_channel='maybe': must be true or false"]),
    ({"full": ["target_device=NVGPU"]}, ["target_device=NVGPU", "CPU models only"]),
    ({"full": ["enable_all_ops=true"]}, ["enable_all_ops=true", "Micro"]),
]


@pytest.mark.parametrize("spec, words", BAD, ids=[w[-1][:40] for _, w in BAD])
def test_bad_configs_fail_naming_the_key_and_write_nothing(cases, tmp_path, spec, words):
    case = cases["small"]
    kwargs = {k: v for k, v in spec.items() if k in ("common", "full")}
    if spec.get("preprocess") is False:
        kwargs["preprocess"] = None
        cfg = _config(tmp_path, "bad", None, **kwargs)
    else:
        pre = spec["pre"](case, tmp_path) if "pre" in spec else None
        cfg = _config(tmp_path, "bad", case, preprocess=pre, **kwargs)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(case.path, str(out / "q"), config_file=cfg)
    assert e.value.code == -600
    for w in words:
        assert w in str(e.value), (w, str(e.value))
    assert os.listdir(out) == []


def test_sections_need_full_quant(cases, tmp_path):
    case = cases["small"]
    for body, words in [
        ("[data_preprocess_param]\ninput_type=BIN\n", "[data_preprocess_param] applies to [common_quant_param]"),
        ("[common_quant_param]\nquant_type=DYNAMIC_QUANT\n[full_quant_param]\nper_channel=true\n",
         "[full_quant_param] applies to [common_quant_param]"),
    ]:
        cfg = tmp_path / "s.cfg"
        cfg.write_text(body)
        with pytest.raises(converter_lite.ConverterError) as e:
            converter_lite.convert(case.path, str(tmp_path / "q"), config_file=str(cfg))
        assert e.value.code == -600 and words in str(e.value) and "FULL_QUANT" in str(e.value)
        assert not (tmp_path / "q.ms").exists()
    with pytest.raises(converter_lite.ConverterError) as e:
        parse_quant_sections({"full_quant_param": {}})
    assert "[full_quant_param] needs [common_quant_param] quant_type=FULL_QUANT" in str(e.value)


def test_fp16_and_input_value_are_refused(cases, tmp_path):
    case = cases["small"]
    cfg = _config(tmp_path, "q", case)
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(case.path, str(tmp_path / "q"), config_file=cfg, fp16=True)
    assert e.value.code == -600 and "FULL_QUANT" in str(e.value) and "use one of them" in str(e.value)
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(case.path, str(tmp_path / "q"), config_file=cfg, input_value="x:0")
    assert e.value.code == -600 and "--inputValue" in str(e.value)
    assert not (tmp_path / "q.ms").exists()


def test_config_defaults(cases):
    case = cases["small"]
    cfg = parse_quant_sections({"common_quant_param": {"quant_type": "FULL_QUANT"},
                                "data_preprocess_param": dict(line.split("=", 1) for line in case.preprocess())})
    assert isinstance(cfg, FullQuantConfig) and cfg.quant_type == "FULL_QUANT"
    assert (cfg.bit_num, cfg.activation_quant_method, cfg.per_channel, cfg.bias_correction, cfg.target_device) == \
        (8, "MAX_MIN", True, True, "CPU")
    assert (cfg.min_quant_weight_size, cfg.min_quant_weight_channel, cfg.calibrate_size, cfg.input_type) == \
        (0, 0, N_CAL, "BIN")
    assert cfg.calibrate_path == (("x", case.cal),)


def test_input_names_with_colons_resolve(tmp_path):
    from converter_lite.frontend.calibration import _resolve
    assert _resolve([("onnx", ":x:/data/a"), ("y", "/b")], ["onnx::x", "y"]) == {"onnx::x": "/data/a", "y": "/b"}


# -- the CLI -------------------------------------------------------------------------------------------------------
def test_cli(cases, tmp_path):
    case = cases["small"]
    cfg = _config(tmp_path, "q", case, full=["activation_quant_method=REMOVAL_OUTLIER"])
    r = run_cli("--fmk=ONNX", f"--modelFile={case.path}", f"--outputFile={tmp_path}/q", f"--configFile={cfg}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert last_line(r) == "CONVERT RESULT SUCCESS:0"
    assert "Collecting tensor data" not in r.stdout + r.stderr          # onnxruntime's prints stay quiet
    assert load_model(str(tmp_path / "q.ms")).metadata["full_quant"]["activation_quant_method"] == "REMOVAL_OUTLIER"
    bad = _config(tmp_path, "bad", case, preprocess=[f"calibrate_path=x:{_bad_dir(tmp_path, 'short')}",
                                                     "calibrate_size=8", "input_type=BIN"])
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli("--fmk=ONNX", f"--modelFile={case.path}", f"--outputFile={out}/q", f"--configFile={bad}")
    assert_failed(r, -600, "003.bin holds 100 bytes", "takes 3072 bytes", out_dir=out)
