"""Issue 20: MindSpore's command lines and config files as its users write them.  Every converter_lite and
benchmark flag MindSpore documents is accepted at its default and either honoured or refused with a message
naming it; every config section is honoured or refused; no flag, section or key is accepted in silence."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import numpy as np
import onnx.helper as oh
import pytest
from click.testing import CliRunner

from helpers import make_model, tensor_info
from tests.cli.test_converter_cli import assert_failed, last_line

from converter_lite.cli import benchmark_core
from converter_lite.cli.benchmark import main as bench_main
from converter_lite.cli.converter import main as convert_main
from converter_lite.config import NO_EFFECT_KEYS, parse_flags
from converter_lite.pipeline import build_config, convert_model
from converter_lite.api import load
from converter_lite.cli.accuracy import write_calibration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MYNET = os.path.join(ROOT, "models", "mynet.onnx")
CONV_NET = os.path.join(ROOT, "models", "conv_net.onnx")
AKG = os.path.join(ROOT, "cfg", "akg.cfg")


def run_cli(*args, env=None, module="converter_lite.cli.converter", cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=e, cwd=cwd)
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r


def assert_ok(r, out_file=None):
    assert r.returncode == 0, r.stdout + r.stderr
    assert last_line(r) == "CONVERT RESULT SUCCESS:0"
    if out_file is not None:
        assert os.path.isfile(out_file)


def convert(tmp_path, *flags, model=MYNET, name="m"):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return run_cli("--fmk=ONNX", f"--modelFile={model}", f"--outputFile={out}/{name}", *flags), out


# -- converter_lite flags ---------------------------------------------------------------------------------------
def test_all_mindspore_flags_at_their_defaults_convert(tmp_path):
    r, out = convert(tmp_path, "--saveType=MINDIR_LITE", "--NoFusion=false", "--infer=false", "--device=CPU",
                     "--encryption=false", "--inputDataType=DEFAULT", "--outputDataType=DEFAULT",
                     "--trainModel=false", "--optimizeTransformer=false", "--inputDataFormat=NCHW")
    assert_ok(r, out / "m.ms")


@pytest.mark.parametrize("flag", ["--NoFusion=true", "--inputDataFormat=NHWC", "--inputDataType=FLOAT32",
                                  "--outputDataType=FLOAT32", "--optimizeTransformer=true", "--infer=true"])
def test_honoured_values_convert(tmp_path, flag):
    r, out = convert(tmp_path, flag)
    assert_ok(r, out / "m.ms")


@pytest.mark.parametrize("flag, code, words", [
    ("--saveType=MINDIR", -600, ["--saveType=MINDIR", "only MINDIR_LITE"]),
    ("--saveType=ONNX", -600, ["--saveType=ONNX"]),
    ("--inputDataType=INT8", -600, ["--inputDataType=INT8", "not supported yet (needs quantization)"]),
    ("--inputDataType=UINT8", -600, ["--inputDataType=UINT8", "not supported yet (needs quantization)"]),
    ("--outputDataType=INT8", -600, ["--outputDataType=INT8", "not supported yet (needs quantization)"]),
    ("--outputDataType=FLOAT16", -600, ["--outputDataType=FLOAT16", "needs quantization"]),
    ("--inputDataType=BOGUS", -600, ["--inputDataType=BOGUS", "INPUT ILLEGAL"]),
    ("--device=GPU", -7, ["--device=GPU", "CPU models only"]),
    ("--device=Ascend", -7, ["--device=Ascend"]),
    ("--encryption=true", -600, ["--encryption=true", "no encryption"]),
    ("--encryptKey=30313233343536373839414243444546", -600, ["--encryptKey", "no encryption"]),
    ("--trainModel=true", -600, ["--trainModel=true", "inference models only"]),
    ("--inputDataFormat=NC1HWC0", -600, ["--inputDataFormat=NC1HWC0", "NCHW or NHWC"]),
    ("--NoFusion=maybe", -600, ["--NoFusion=maybe"]),
    ("--infer=maybe", -600, ["--infer=maybe"]),
])
def test_refused_values_name_the_flag_and_write_nothing(tmp_path, flag, code, words):
    r, out = convert(tmp_path, flag)
    assert_failed(r, code, *words, out_dir=out)


def test_nofusion_true_is_optimize_none(tmp_path):
    r, out = convert(tmp_path, f"--configFile={AKG}", "--NoFusion=true", model=CONV_NET)
    assert_ok(r, out / "m.ms")
    assert "0 fused kernels (opt_level 0)" in r.stdout
    r, _ = convert(tmp_path, f"--configFile={AKG}", "--NoFusion=false", model=CONV_NET, name="f")
    assert_ok(r)
    assert re.search(r"[1-9]\d* fused kernels \(opt_level 2\)", r.stdout), r.stdout


def test_optimize_transformer_says_so_at_info(tmp_path):
    r, _ = convert(tmp_path, "--optimizeTransformer=true")
    assert "--optimizeTransformer" not in r.stderr          # INFO is off by default (GLOG_v=2)
    out = tmp_path / "o2"
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={out}/m", "--optimizeTransformer=true",
                env={"GLOG_v": "1"})
    assert_ok(r)
    assert "--optimizeTransformer=true: graph-kernel fusion" in r.stderr


def test_infer_prints_the_compare_model_lines(tmp_path):
    r, out = convert(tmp_path, "--infer=true", f"--configFile={AKG}", model=CONV_NET)
    assert_ok(r, out / "m.ms")
    assert "Mean bias of node/tensor y : " in r.stdout
    assert "Mean bias of all nodes/tensors: 0%" in r.stdout


def test_infer_mismatch_fails_and_removes_the_file(tmp_path, monkeypatch, capsys):
    from converter_lite.cli import benchmark_compare

    def wrong(onnx_path, feeds, output_names, num_threads=2):
        return {n: np.full((4, 4), 1000.0, np.float32) for n in output_names}
    monkeypatch.setattr(benchmark_compare, "onnxruntime_outputs", wrong)
    logger = logging.getLogger("converter_lite")
    saved = (logger.level, list(logger.handlers))
    try:
        with pytest.raises(SystemExit) as e:
            convert_main(["--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m", "--infer=true"])
    finally:        # main() adds a handler on capsys's stderr, closed after this test: later tests must not log to it
        logger.setLevel(saved[0])
        logger.handlers[:] = saved[1]
    assert e.value.code != 0
    cap = capsys.readouterr()
    last = cap.out.strip().splitlines()[-1]
    assert last.startswith("CONVERT RESULT FAILED:-1 "), last
    assert "--infer:" in last and "accuracy threshold" in last and "was removed" in last
    assert "Mean bias of all nodes/tensors:" in cap.out
    assert os.listdir(tmp_path) == []


def test_infer_with_nhwc_compares_against_the_nhwc_source(tmp_path):
    r, out = convert(tmp_path, "--infer=true", "--inputDataFormat=NHWC", f"--configFile={AKG}", model=CONV_NET)
    assert_ok(r, out / "m.ms")
    assert "Mean bias of all nodes/tensors: 0%" in r.stdout


def test_nhwc_model_equals_nchw_model_on_transposed_inputs(tmp_path):
    cfg = build_config(AKG)
    nchw = load(convert_model(CONV_NET, tmp_path / "nchw", config=cfg).output_path)
    res = convert_model(CONV_NET, tmp_path / "nhwc", config=cfg, input_format="NHWC")
    nhwc = load(res.output_path)
    assert res.graph.nodes[0].op == "Transpose"            # the layout change comes first, before the Conv
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = nchw.run({"x": x})
    got = nhwc.run({"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))})
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception):
        nhwc.run({"x": x})                                  # NCHW data is the wrong shape now


def test_nhwc_transpose_is_fused_into_an_elementwise_first_kernel(tmp_path):
    model = make_model([oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Add", ["r", "x"], ["y"])],
                       [tensor_info("x", np.float32, [1, 3, 4, 5])], [tensor_info("y", np.float32, [1, 3, 4, 5])])
    res = convert_model(model, tmp_path / "m", config=build_config(AKG), input_format="NHWC")
    ops = [n.op for n in res.graph.nodes]
    assert "Transpose" not in ops and "GraphKernel" in ops, ops
    x = np.random.default_rng(1).standard_normal((1, 4, 5, 3)).astype(np.float32)
    t = x.transpose(0, 3, 1, 2)
    np.testing.assert_allclose(load(res.output_path).run({"x": x})["y"], np.maximum(t, 0) + t, rtol=1e-6)


def test_nhwc_leaves_non_4d_inputs_alone(tmp_path):
    res = convert_model(MYNET, tmp_path / "m", config=build_config(None), input_format="NHWC")
    assert [n.op for n in res.graph.nodes][0] != "Transpose"
    m = load(res.output_path)
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    ref = load(convert_model(MYNET, tmp_path / "r", config=build_config(None)).output_path)
    np.testing.assert_array_equal(m.run({"x": x})["y"], ref.run({"x": x})["y"])


def test_batch_mode_refuses_infer_and_nhwc(tmp_path):
    d = tmp_path / "models"
    d.mkdir()
    (d / "a.onnx").write_bytes(open(MYNET, "rb").read())
    r = run_cli("--fmk=ONNX", f"--modelFile={d}", f"--outputFile={tmp_path}/out", "--infer=true")
    assert_failed(r, -600, "--infer=true")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("module", ["converter_lite.cli.converter", "converter_lite.cli.benchmark"])
def test_help_prints_help_and_nothing_else(module):
    r = run_cli("--help", module=module)
    assert r.returncode == 0
    assert "--modelFile" in r.stdout
    assert "RESULT" not in r.stdout and "Run Benchmark" not in r.stdout + r.stderr
    assert r.stdout.rstrip().endswith("Show this message and exit.")


def test_help_lists_the_mindspore_flags():
    r = run_cli("--help")
    for flag in ("--saveType", "--NoFusion", "--infer", "--inputDataFormat", "--inputDataType", "--outputDataType",
                 "--device", "--encryption", "--encryptKey", "--optimizeTransformer", "--trainModel"):
        assert flag in r.stdout, flag


# -- config sections ----------------------------------------------------------------------------------------------
QUANT = ["common_quant_param", "full_quant_param", "data_preprocess_param", "mixed_bit_weight_quant_param",
         "weight_quant_param", "dynamic_quant_param"]
HARDWARE = ["ascend_context", "acl_option_cfg_param", "micro_param", "registry", "cpu_option_cfg_param",
            "custom_opp_path"]


@pytest.mark.parametrize("section, words", [
    ("full_quant_param", ["applies to [common_quant_param] quant_type=FULL_QUANT only"]),
    ("data_preprocess_param", ["applies to [common_quant_param] quant_type=FULL_QUANT only"]),
    ("mixed_bit_weight_quant_param", ["unknown key 'bit_num'", "init_scale, auto_tune"]),
    ("weight_quant_param", ["unknown key 'bit_num'", "per_channel, bias_correction, dequant_strategy"]),
])
def test_quantization_sections_are_checked_against_the_quant_type(tmp_path, section, words):
    cfg = tmp_path / "q.cfg"
    cfg.write_text(f"[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=0\n[{section}]\nbit_num=8\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, f"[{section}]", *words, out_dir=out)


@pytest.mark.parametrize("body, words", [
    ("bit_num=8\n[mixed_bit_weight_quant_param]\ninit_scale=0.05\n", ["applies to bit_num=0", "bit_num=8"]),
    ("bit_num=0\n[mixed_bit_weight_quant_param]\ninit_scale=1.5\n", ["init_scale=1.5: out of range (0, 1)"]),
    ("bit_num=0\n[mixed_bit_weight_quant_param]\ninit_scale=small\n", ["init_scale='small': not a number"]),
    ("bit_num=0\n[mixed_bit_weight_quant_param]\nauto_tune=maybe\n", ["auto_tune='maybe': must be true or false"]),
    ("bit_num=4\n[weight_quant_param]\nbias_correction=true\n", ["bias_correction=true", "calibration data"]),
    ("bit_num=4\n[weight_quant_param]\ndequant_strategy=ON_THE_FLY\n", ["ON_THE_FLY is Ascend's"]),
    ("bit_num=4\nenable_encode=false\n", ["enable_encode=false", "bit_num=4 is stored packed only"]),
])
def test_bad_mixed_bit_and_weight_params_fail_naming_the_key(tmp_path, body, words):
    cfg = tmp_path / "q.cfg"
    cfg.write_text("[common_quant_param]\nquant_type=WEIGHT_QUANT\n" + body)
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, *words, out_dir=out)


def test_mixed_bit_section_needs_weight_quant(tmp_path):
    cfg = tmp_path / "q.cfg"
    cfg.write_text("[common_quant_param]\nquant_type=DYNAMIC_QUANT\n[mixed_bit_weight_quant_param]\ninit_scale=0.1\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, "[mixed_bit_weight_quant_param] applies to quant_type=WEIGHT_QUANT only", out_dir=out)
    cfg.write_text("[mixed_bit_weight_quant_param]\ninit_scale=0.1\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, "needs [common_quant_param] quant_type=WEIGHT_QUANT bit_num=0", out_dir=out)


def test_dynamic_quant_section_only_with_dynamic_quant(tmp_path):
    cfg = tmp_path / "q.cfg"
    cfg.write_text("[common_quant_param]\nquant_type=WEIGHT_QUANT\n[dynamic_quant_param]\nquant_strategy=ALWC\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, "[dynamic_quant_param] applies to quant_type=DYNAMIC_QUANT only", out_dir=out)
    cfg.write_text("[common_quant_param]\nquant_type=DYNAMIC_QUANT\n[dynamic_quant_param]\nquant_strategy=ALWC\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_ok(r, out / "m.ms")


@pytest.mark.parametrize("body, words", [
    ("quant_type=INT8_QUANT\n", ["quant_type='INT8_QUANT'", "WEIGHT_QUANT, FULL_QUANT, DYNAMIC_QUANT"]),
    ("bit_num=8\n", ["quant_type is missing"]),
    ("quant_type=FULL_QUANT\n", ["quant_type=FULL_QUANT needs a [data_preprocess_param] section"]),
    ("quant_type=DYNAMIC_QUANT\nbit_num=7\n", ["bit_num=7: quant_type=DYNAMIC_QUANT supports 8 bits only"]),
    ("quant_type=WEIGHT_QUANT\nbit_num=17\n", ["bit_num=17: out of range [0, 16]"]),
    ("quant_type=WEIGHT_QUANT\nbit_num=eight\n", ["bit_num='eight': not an integer"]),
    ("quant_type=WEIGHT_QUANT\nmin_quant_weight_size=-1\n", ["min_quant_weight_size=-1: out of range"]),
    ("quant_type=WEIGHT_QUANT\nbit_nums=8\n", ["unknown key 'bit_nums'; did you mean 'bit_num'?"]),
])
def test_bad_weight_quant_configs_fail_naming_the_key(tmp_path, body, words):
    cfg = tmp_path / "q.cfg"
    cfg.write_text("[common_quant_param]\n" + body)
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, "[common_quant_param]", *words, out_dir=out)


@pytest.mark.parametrize("section", HARDWARE)
def test_hardware_and_plugin_sections_fail_naming_the_section(tmp_path, section):
    cfg = tmp_path / "h.cfg"
    cfg.write_text(f"[graph_kernel_param]\nopt_level=2\n[{section}]\nplugin_path=/nonexistent/libplugin.so\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_failed(r, -600, f"[{section}] is not supported:", out_dir=out)


def test_misspelt_section_warns_with_the_closest_name(tmp_path):
    cfg = tmp_path / "m.cfg"
    cfg.write_text("[graph_kernel_parm]\nopt_level=2\n")
    r, out = convert(tmp_path, f"--configFile={cfg}")
    assert_ok(r, out / "m.ms")
    assert "unknown section [graph_kernel_parm] is ignored; did you mean [graph_kernel_param]?" in r.stderr


def test_keys_outside_any_section_warn(tmp_path):
    cfg = tmp_path / "k.cfg"
    cfg.write_text("opt_level=2\n[graph_kernel_param]\nopt_level=1\n")
    r, _ = convert(tmp_path, f"--configFile={cfg}")
    assert_ok(r)
    assert "keys before any [section] are ignored: opt_level" in r.stderr


@pytest.mark.parametrize("key, value", [("enable_vectorization", "false"), ("fusion_ops_level", "2"),
                                        ("online_tuning", "1"), ("kernel_generator", "BISHENG")])
def test_graph_kernel_keys_without_effect_warn(tmp_path, key, value):
    cfg = tmp_path / "g.cfg"
    cfg.write_text(f"[graph_kernel_param]\nopt_level=2\n{key}={value}\n")
    r, _ = convert(tmp_path, f"--configFile={cfg}")
    assert_ok(r)
    assert f"the flag '{key}' is accepted but has no effect" in r.stderr


def test_every_graph_kernel_key_has_an_effect_or_a_warning():
    """A key is read by a pass/codegen (grep), or is in NO_EFFECT_KEYS / HARDWARE_ONLY_KEYS (both warn)."""
    from converter_lite.config import FLAG_KEYS, HARDWARE_ONLY_KEYS
    pkg = os.path.join(ROOT, "converter_lite")
    sources = []
    for d, _, files in os.walk(pkg):
        for f in files:
            if f.endswith(".py") and os.path.join(d, f) != os.path.join(pkg, "config.py"):
                sources.append(open(os.path.join(d, f), encoding="utf-8").read())
    text = "\n".join(sources)
    read_in_config = {"opt_level", "enable_expand_ops", "disable_expand_ops", "enable_expand_ops_only",
                      "enable_cluster_ops", "disable_cluster_ops", "enable_cluster_ops_only",
                      "enable_simplify_exprs_only", "disable_simplify_exprs", "enable_pass", "disable_pass"}
    silent = [k for k in FLAG_KEYS if k not in NO_EFFECT_KEYS | HARDWARE_ONLY_KEYS | read_in_config
              and not re.search(rf"\b{k}\b", text)]
    assert silent == []
    for key in NO_EFFECT_KEYS:
        assert not re.search(rf"\b{key}\b", text), f"{key} is read somewhere: remove it from NO_EFFECT_KEYS"
    warnings = []
    parse_flags("--enable_dynamic_batch=true", warnings.append)
    assert any("no effect" in w for w in warnings)


# -- MindSpore's documented converter example lines (converter_tool page, ONNX) ------------------------------------
def test_mindspore_converter_examples(tmp_path):
    # ./converter_lite --fmk=ONNX --modelFile=model.onnx --outputFile=model
    (tmp_path / "model.onnx").write_bytes(open(MYNET, "rb").read())
    r = run_cli("--fmk=ONNX", "--modelFile=model.onnx", "--outputFile=model", cwd=tmp_path,
                env={"PYTHONPATH": ROOT})
    assert_ok(r, tmp_path / "model.ms")
    # ./converter_lite --fmk=ONNX --modelFile=model.onnx --outputFile=model --configFile=... (weight quantization)
    (tmp_path / "quant.cfg").write_text("[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\n"
                                        "min_quant_weight_size=0\nmin_quant_weight_channel=16\n")
    r = run_cli("--fmk=ONNX", "--modelFile=model.onnx", "--outputFile=model_q", "--configFile=quant.cfg",
                cwd=tmp_path, env={"PYTHONPATH": ROOT})
    assert_ok(r, tmp_path / "model_q.ms")
    # ./converter_lite --fmk=ONNX --modelFile=model.onnx --outputFile=model --inputDataFormat=NHWC --saveType=MINDIR_LITE
    r = run_cli("--fmk=ONNX", "--modelFile=model.onnx", "--outputFile=model2", "--inputDataFormat=NHWC",
                "--saveType=MINDIR_LITE", "--optimize=general", cwd=tmp_path, env={"PYTHONPATH": ROOT})
    assert_ok(r, tmp_path / "model2.ms")
    # ./converter_lite --fmk=MINDIR --modelFile=model.mindir --outputFile=model
    r = run_cli("--fmk=MINDIR", "--modelFile=model.mindir", "--outputFile=model3", cwd=tmp_path,
                env={"PYTHONPATH": ROOT})
    assert_failed(r, -600, "--fmk=MINDIR", "ONNX models only")


# -- benchmark ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mynet_ms(tmp_path_factory):
    d = tmp_path_factory.mktemp("ms")
    return str(convert_model(MYNET, d / "mynet", config=build_config(None)).output_path)


def bench(*args):
    return CliRunner().invoke(bench_main, [str(a) for a in args])


def assert_bench_failed(r, *words, code=-600):
    assert r.exit_code == 1, r.output
    assert "Traceback" not in r.output
    assert r.stderr.strip().splitlines()[-1].endswith(f"Failed : {code}"), r.stderr
    for w in words:
        assert w in r.output, f"{w!r} not in {r.output}"


def test_benchmark_flags_at_defaults_run(mynet_ms):
    r = bench(f"--modelFile={mynet_ms}", "--loopCount=1", "--enableFp16=false", "--perfProfiling=false",
              "--enableParallel=false", "--benchmarkDataType=FLOAT", "--cpuBindMode=0", "--device=CPU",
              "--modelType=MindIR_Lite", "--cosineDistanceThreshold=-1.1")
    assert r.exit_code == 0, r.output
    assert "cpuBindMode = 0 (no bind): no binding asked" in r.stdout


def test_cosine_distance_passes_and_fails(mynet_ms, tmp_path):
    r = bench(f"--modelFile={mynet_ms}", f"--compareModel={MYNET}", "--cosineDistanceThreshold=0.99")
    assert r.exit_code == 0, r.output
    assert "Cosine distance of node/tensor y : 1" in r.stdout
    x = np.random.default_rng(0).random((4, 4), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    y = load(mynet_ms).run({"x": x})["y"]
    write_calibration(str(tmp_path / "neg.out"), {"y": -y})
    r = bench(f"--modelFile={mynet_ms}", f"--inDataFile={tmp_path / 'x.npy'}",
              f"--benchmarkDataFile={tmp_path / 'neg.out'}", "--accuracyThreshold=1000",
              "--cosineDistanceThreshold=0.5")
    assert_bench_failed(r, "Cosine distance of node/tensor y : -1", "below the threshold 0.5", code=-1)
    # the same file passes with the cosine check off (MindSpore's default -1.1)
    r = bench(f"--modelFile={mynet_ms}", f"--inDataFile={tmp_path / 'x.npy'}",
              f"--benchmarkDataFile={tmp_path / 'neg.out'}", "--accuracyThreshold=1000")
    assert r.exit_code == 0, r.output


def test_cosine_distance_needs_a_reference(mynet_ms):
    assert_bench_failed(bench(f"--modelFile={mynet_ms}", "--cosineDistanceThreshold=0.9"),
                        "--cosineDistanceThreshold=0.9 needs a reference")


def test_cosine_similarity_values():
    cs = benchmark_core.cosine_similarity
    assert cs(np.array([1.0, 0]), np.array([2.0, 0])) == pytest.approx(1)
    assert cs(np.array([1.0, 0]), np.array([0, 1.0])) == pytest.approx(0)
    assert cs(np.zeros(3), np.zeros(3)) == 1 and cs(np.zeros(3), np.ones(3)) == 0


def test_cpu_bind_sets():
    caps = {0: 1024, 1: 1024, 2: 512, 3: 512}
    assert benchmark_core.bind_cpu_set(1, caps) == {0, 1}
    assert benchmark_core.bind_cpu_set(2, caps) == {2, 3}
    assert benchmark_core.bind_cpu_set(0, caps) is None
    assert benchmark_core.bind_cpu_set(1, {0: 1024, 1: 1024}) is None     # all alike: no big/little
    assert benchmark_core.bind_cpu_set(1, {}) is None                     # kernel does not say


def test_cpu_bind_mode_binds_and_restores(mynet_ms, monkeypatch):
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity")
    before = os.sched_getaffinity(0)
    first = min(before)
    monkeypatch.setattr(benchmark_core, "core_capacities",
                        lambda: {c: (1024 if c == first else 512) for c in before})
    seen = []
    real_run = benchmark_core._run
    monkeypatch.setattr(benchmark_core, "_run", lambda *a: (seen.append(os.sched_getaffinity(0)), real_run(*a)))
    r = bench(f"--modelFile={mynet_ms}", "--loopCount=1", "--cpuBindMode=1")
    assert r.exit_code == 0, r.output
    if len(before) > 1:
        assert seen == [{first}] and f"bound to cores {first}" in r.stdout
    assert os.sched_getaffinity(0) == before


@pytest.mark.parametrize("flags, words", [
    (["--cpuBindMode=3"], ["--cpuBindMode=3", "must be 0"]),
    (["--benchmarkDataType=INT8"], ["--benchmarkDataType=INT8", "quantized"]),
    (["--benchmarkDataType=UINT8"], ["--benchmarkDataType=UINT8", "quantized"]),
    (["--benchmarkDataType=INT32"], ["--benchmarkDataType=INT32", "--benchmarkDataFile, which is not given"]),
    (["--enableFp16=true"], ["--enableFp16=true", "float32"]),
    (["--perfProfiling=true"], ["--perfProfiling", "hardware performance counters"]),
    (["--perfEvent=CACHE"], ["--perfEvent", "hardware performance counters"]),
    (["--enableParallel=true"], ["--enableParallel=true"]),
    (["--workersNum=2"], ["--workersNum=2"]),
    (["--device=GPU"], ["--device=GPU"]),
])
def test_benchmark_refusals_name_the_flag(mynet_ms, flags, words):
    code = -7 if flags == ["--device=GPU"] else -600
    assert_bench_failed(bench(f"--modelFile={mynet_ms}", *flags), *words, code=code)


def test_benchmark_model_type_other_than_mindir_is_refused(mynet_ms):
    r = bench(f"--modelFile={mynet_ms}", "--modelType=ONNX")
    assert r.exit_code == 1 and "--modelType" in r.output


def test_benchmark_data_type_int32(mynet_ms, tmp_path):
    x = np.ones((4, 4), np.float32)
    np.save(tmp_path / "x.npy", x)
    y = load(mynet_ms).run({"x": x})["y"]
    write_calibration(str(tmp_path / "y.out"), {"y": np.round(y)})
    r = bench(f"--modelFile={mynet_ms}", f"--inDataFile={tmp_path / 'x.npy'}", "--benchmarkDataType=INT32",
              f"--benchmarkDataFile={tmp_path / 'y.out'}", "--accuracyThreshold=100")
    assert r.exit_code == 0, r.output
    assert "BenchmarkDataType = INT32" in r.stdout
    write_calibration(str(tmp_path / "f.out"), {"y": y + 0.25})
    r = bench(f"--modelFile={mynet_ms}", f"--inDataFile={tmp_path / 'x.npy'}", "--benchmarkDataType=INT32",
              f"--benchmarkDataFile={tmp_path / 'f.out'}")
    assert_bench_failed(r, "non-integer values")


# -- MindSpore's documented benchmark example lines (benchmark_tool page) -----------------------------------------------
def test_mindspore_benchmark_examples(mynet_ms, tmp_path):
    x = np.random.default_rng(3).random((4, 4), dtype=np.float32)
    x.tofile(tmp_path / "input.bin")
    y = load(mynet_ms).run({"x": x})["y"]
    write_calibration(str(tmp_path / "output.out"), {"y": y})
    # ./benchmark --modelFile=/path/to/model.ms
    assert bench(f"--modelFile={mynet_ms}").exit_code == 0
    # ./benchmark --modelFile=/path/to/model.ms --timeProfiling=true
    r = bench(f"--modelFile={mynet_ms}", "--timeProfiling=true")
    assert r.exit_code == 0 and "opType" in r.stdout
    # ./benchmark --modelFile=/path/to/model.ms --perfProfiling=true --perfEvent="CACHE"
    assert_bench_failed(bench(f"--modelFile={mynet_ms}", "--perfProfiling=true", "--perfEvent=CACHE"),
                        "--perfProfiling")
    # ./benchmark --modelFile=/path/to/model.ms --inDataFile=/path/to/input.bin --device=CPU --accuracyThreshold=3
    #             --benchmarkDataFile=/path/to/output.out
    r = bench(f"--modelFile={mynet_ms}", f"--inDataFile={tmp_path / 'input.bin'}", "--device=CPU",
              "--accuracyThreshold=3", f"--benchmarkDataFile={tmp_path / 'output.out'}")
    assert r.exit_code == 0, r.output
    assert "Mean bias of all nodes/tensors: 0%" in r.stdout
    # ... --inputShapes=4,4 --cosineDistanceThreshold=0.99 --numThreads=2 --warmUpLoopCount=3 --loopCount=10
    r = bench(f"--modelFile={mynet_ms}", f"--inDataFile={tmp_path / 'input.bin'}", "--inputShapes=4,4",
              f"--benchmarkDataFile={tmp_path / 'output.out'}", "--cosineDistanceThreshold=0.99",
              "--numThreads=2", "--warmUpLoopCount=3", "--loopCount=10", "--cpuBindMode=1")
    assert r.exit_code == 0, r.output
