"""converter_lite command: result lines, status codes, and every bad-input case of issue #2 (no traceback,
non-zero exit, nothing written)."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from helpers import make_model, tensor_info

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MYNET = os.path.join(ROOT, "models", "mynet.onnx")


def run_cli(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-m", "converter_lite.cli.converter", *args], capture_output=True, text=True,
                       env=e, cwd=cwd)
    assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    return r


def last_line(r):
    return r.stdout.strip().splitlines()[-1]


def assert_failed(r, code, *words, out_dir=None):
    assert r.returncode != 0
    assert last_line(r).startswith(f"CONVERT RESULT FAILED:{code} "), r.stdout
    text = r.stdout + r.stderr
    for w in words:
        assert w in text, f"{w!r} not in:\n{text}"
    if out_dir is not None:
        assert os.listdir(out_dir) == [], os.listdir(out_dir)


def test_success_line_and_ms_suffix(tmp_path):
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m")
    assert r.returncode == 0 and last_line(r) == "CONVERT RESULT SUCCESS:0"
    assert os.listdir(tmp_path) == ["m.ms"]
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/n.ms")
    assert sorted(os.listdir(tmp_path)) == ["m.ms", "n.ms"]


def test_output_directory_is_created(tmp_path):
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/a/b/m")
    assert r.returncode == 0 and os.path.exists(tmp_path / "a" / "b" / "m.ms")


def test_no_arguments_prints_usage():
    r = run_cli()
    assert r.returncode == 0 and "--modelFile" in r.stdout and "--fmk" in r.stdout


def test_help_lists_flags():
    r = run_cli("--help")
    for flag in ("--fmk", "--modelFile", "--outputFile", "--configFile", "--optimize", "--inputShape",
                 "--fusionSwitchFile", "--fp16"):
        assert flag in r.stdout


def test_missing_model_file(tmp_path):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/nope.onnx", f"--outputFile={tmp_path}/m"),
                  -200, "nope.onnx", "does not exist", out_dir=tmp_path)


def test_model_file_is_an_empty_directory(tmp_path):
    (tmp_path / "d").mkdir()    # a directory means batch mode; with no model in it that is a user error
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/d", f"--outputFile={tmp_path}/m"), -600,
                  "no ONNX model found")


def test_not_an_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("this is not a protobuf\n" * 10)
    out = tmp_path / "out"
    out.mkdir()
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={bad}", f"--outputFile={out}/m"), -200, "bad.onnx",
                  out_dir=out)


def test_empty_file(tmp_path):
    (tmp_path / "e.onnx").write_bytes(b"")
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/e.onnx", f"--outputFile={tmp_path}/m"), -200,
                  "empty")


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.95])
def test_truncated_onnx_file(tmp_path, fraction):
    data = open(os.path.join(ROOT, "models", "conv_net.onnx"), "rb").read()
    p = tmp_path / "trunc.onnx"
    p.write_bytes(data[: int(len(data) * fraction)])
    out = tmp_path / "out"
    out.mkdir()
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={p}", f"--outputFile={out}/m"), -200, "trunc.onnx",
                  out_dir=out)


@pytest.mark.parametrize("fmk", ["TF", "CAFFE", "TFLITE", "MINDIR", "PYTORCH"])
def test_other_frameworks_are_not_supported(tmp_path, fmk):
    assert_failed(run_cli(f"--fmk={fmk}", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m"), -600,
                  "not supported", out_dir=tmp_path)


def test_unknown_fmk(tmp_path):
    assert_failed(run_cli("--fmk=KERAS", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m"), -600,
                  "fmk must be")


@pytest.mark.parametrize("args,word", [
    (["--modelFile=X", "--outputFile=Y"], "--fmk"),
    (["--fmk=ONNX", "--outputFile=Y"], "--modelFile"),
    (["--fmk=ONNX", "--modelFile=X"], "--outputFile"),
])
def test_missing_required_flags(args, word):
    assert_failed(run_cli(*args), -600, word)


def test_unknown_flag(tmp_path):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m", "--bogus=1"), -600,
                  "bogus")


@pytest.mark.parametrize("shape,word", [("x", "not of the form"), ("x:a,b", "not integers"), (":1,2", "not of"),
                                        ("x:4,-1", "negative")])
def test_malformed_input_shape(tmp_path, shape, word):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m",
                          f"--inputShape={shape}"), -600, word, out_dir=tmp_path)


def test_input_shape_naming_no_input(tmp_path):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m",
                          "--inputShape=nothere:1,2"), -600, "nothere", out_dir=tmp_path)


def test_input_shape_contradicting_the_model(tmp_path):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m",
                          "--inputShape=x:2,2"), -600, "x", out_dir=tmp_path)


def test_input_shape_fixes_dynamic_dims(tmp_path):
    m = make_model([oh.make_node("Relu", ["x"], ["y"])], [tensor_info("x", np.float32, ["N", 3])],
                   [tensor_info("y", np.float32, ["N", 3])])
    onnx.save(m, tmp_path / "dyn.onnx")
    r = run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/dyn.onnx", f"--outputFile={tmp_path}/m",
                "--inputShape=x:5,3")
    assert r.returncode == 0
    import converter_lite
    model = converter_lite.load(tmp_path / "m.ms")
    assert model.input_types[0].shape == (5, 3)


def _save_pool(path, dims):
    m = make_model([oh.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], name="pool1")],
                   [tensor_info("x", np.float32, dims)], [tensor_info("y", np.float32, None)])
    onnx.save(m, path)


@pytest.mark.parametrize("dims", [[-1, 3, "?", "?"], [0, 3, None, "w"]], ids=["minus1_q", "zero_empty_named"])
def test_input_shape_sets_minus_one_zero_and_empty_dims(tmp_path, dims):
    _save_pool(tmp_path / "dyn.onnx", dims)
    r = run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/dyn.onnx", f"--outputFile={tmp_path}/m",
                "--inputShape=x:1,3,48,192")
    assert r.returncode == 0 and last_line(r) == "CONVERT RESULT SUCCESS:0", r.stdout + r.stderr
    import converter_lite
    assert converter_lite.load(tmp_path / "m.ms").input_types[0].shape == (1, 3, 48, 192)


def test_dynamic_dims_convert_without_input_shape(tmp_path):
    _save_pool(tmp_path / "dyn.onnx", [-1, 3, "?", "?"])
    r = run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/dyn.onnx", f"--outputFile={tmp_path}/out/m")
    assert r.returncode == 0 and "CONVERT RESULT SUCCESS:0" in r.stdout, r.stdout + r.stderr
    from converter_lite.api import load
    assert load(f"{tmp_path}/out/m.ms").input_shapes == {"x": ["x_d0", 3, "x_d2", "x_d3"]}


def test_opset_newer_than_known_with_a_changed_op(tmp_path):
    (tmp_path / "out").mkdir()
    m = make_model([oh.make_node("Relu", ["x"], ["y"], alpha=0.5, name="r1")], [tensor_info("x", np.float32, [2])],
                   [tensor_info("y", np.float32, [2])], opset=99)
    onnx.save(m, tmp_path / "o99.onnx")
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/o99.onnx", f"--outputFile={tmp_path}/out/m"),
                  -200, "opset 99", "'ai.onnx'", "Relu node 'r1'", out_dir=tmp_path / "out")


def test_output_directory_not_writable(tmp_path):
    (tmp_path / "file").write_text("x")
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/file/m"), -600,
                  "outputFile")


def test_unsupported_ops_listed_up_front(tmp_path):
    m = make_model([oh.make_node("Relu", ["x"], ["a"], name="r"),
                    oh.make_node("FancyOp", ["a"], ["b"], domain="acme", name="fancy1"),
                    oh.make_node("OtherOp", ["b"], ["y"], domain="acme", name="other2")],
                   [tensor_info("x", np.float32, [2])], [tensor_info("y", np.float32, [2])])
    m.opset_import.append(oh.make_opsetid("acme", 1))
    onnx.save(m, tmp_path / "u.onnx")
    out = tmp_path / "out"
    out.mkdir()
    r = run_cli("--fmk=ONNX", f"--modelFile={tmp_path}/u.onnx", f"--outputFile={out}/m")
    assert_failed(r, -300, "UNSUPPORTED OP LIST:", "OP TYPE: acme::FancyOp", "NODE NAME: fancy1",
                  "OP TYPE: acme::OtherOp", "NODE NAME: other2", out_dir=out)


def test_bad_config_file_line_number(tmp_path):
    cfg = tmp_path / "bad.cfg"
    cfg.write_text("[graph_kernel_param]\nopt_level=2\nthis line is wrong\n")
    out = tmp_path / "out"
    out.mkdir()
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={out}/m", f"--configFile={cfg}"),
                  -600, "bad.cfg:3", out_dir=out)


def test_missing_config_file(tmp_path):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m",
                          f"--configFile={tmp_path}/none.cfg"), -600, "none.cfg")


def test_bad_fusion_switch_file(tmp_path):
    f = tmp_path / "fs.json"
    f.write_text('{"Switch": {"GraphFusion": {"ALL": "on",}}}')
    out = tmp_path / "out"
    out.mkdir()
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={out}/m", f"--fusionSwitchFile={f}"),
                  -600, "fs.json", out_dir=out)


@pytest.mark.parametrize("opt", ["gpu_oriented", "ascend_oriented"])
def test_hardware_oriented_optimize_fails_clearly(tmp_path, opt):
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m", f"--optimize={opt}")
    assert r.returncode != 0 and "CPU only" in r.stdout and os.listdir(tmp_path) == []


def test_bad_optimize_value(tmp_path):
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m", "--optimize=max"),
                  -600, "optimize must be")


def test_optimize_none_means_no_fusion(tmp_path):
    cfg = os.path.join(ROOT, "cfg", "akg.cfg")
    r = run_cli("--fmk=ONNX", f"--modelFile={ROOT}/models/mlp_block.onnx", f"--outputFile={tmp_path}/m",
                f"--configFile={cfg}", "--optimize=none")
    assert r.returncode == 0 and "0 fused kernels (opt_level 0)" in r.stdout


def test_env_flags_replace_config_file(tmp_path):
    cfg = os.path.join(ROOT, "cfg", "akg.cfg")
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m", f"--configFile={cfg}",
                env={"MS_DEV_GRAPH_KERNEL_FLAGS": "--opt_level=1"})
    assert r.returncode == 0 and "(opt_level 1)" in r.stdout


def test_glog_v1_prints_pass_lines(tmp_path):
    cfg = os.path.join(ROOT, "cfg", "akg.cfg")
    r = run_cli("--fmk=ONNX", f"--modelFile={MYNET}", f"--outputFile={tmp_path}/m", f"--configFile={cfg}",
                env={"GLOG_v": "1"})
    assert r.returncode == 0
    assert "Run pass stage0_preprocess_0_empty_pass in" in r.stderr
    assert "pass stage5_stitch_0_stitch_fusion is disabled." in r.stderr
