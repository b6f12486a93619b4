"""converter_lite --bf16=on|off: the flag converts MatMul/Gemm to bfloat16 products and says so on stdout; a host
without AVX-512 BF16 fails -600 naming the flag and the feature, writing nothing; off (the default) changes
nothing; a bad value is -600."""
import os

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, tensor_info

import converter_lite
from converter_lite.cli.converter import main
from converter_lite.runtime import native
from tests.cli.test_converter_cli import assert_failed, last_line, run_cli

HAS_BF16 = "avx512_bf16" in native.host_cpu_flags()


@pytest.fixture
def onnx_path(tmp_path):
    rng = np.random.default_rng(1)
    m = make_model([oh.make_node("MatMul", ["x", "w"], ["h"], name="mm"), oh.make_node("Add", ["h", "b"], ["y"])],
                   [tensor_info("x", np.float32, [4, 64])], [tensor_info("y", np.float32, [4, 96])],
                   {"w": rng.standard_normal((64, 96)).astype(np.float32),
                    "b": rng.standard_normal(96).astype(np.float32)})
    path = tmp_path / "src" / "m.onnx"
    path.parent.mkdir()
    path.write_bytes(m.SerializeToString())
    return str(path)


def test_help_lists_bf16():
    assert "--bf16" in run_cli("--help").stdout


def test_bad_value(tmp_path, onnx_path):
    out = tmp_path / "out"
    out.mkdir()
    assert_failed(run_cli("--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={out}/m", "--bf16=maybe"), -600,
                  "--bf16=maybe", out_dir=out)


@pytest.mark.skipif(not HAS_BF16, reason="the host has no AVX-512 BF16")
def test_on_reports_and_off_unchanged(tmp_path, onnx_path):
    r = run_cli("--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={tmp_path}/b", "--bf16=on")
    assert last_line(r) == "CONVERT RESULT SUCCESS:0", r.stdout + r.stderr
    assert "bf16: 1 nodes as bfloat16 products (1 MatMul; 1 biases folded)" in r.stdout
    for name, flag in (("off", ["--bf16=off"]), ("none", [])):
        r = run_cli("--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={tmp_path}/{name}", *flag)
        assert last_line(r) == "CONVERT RESULT SUCCESS:0" and "bf16:" not in r.stdout
    x = {"x": np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)}
    off, none = (converter_lite.load(str(tmp_path / f"{n}.ms")).run(x)["y"] for n in ("off", "none"))
    np.testing.assert_array_equal(off, none)
    on = converter_lite.load(str(tmp_path / "b.ms")).run(x)["y"]
    np.testing.assert_allclose(on, off, rtol=0.03, atol=0.03 * float(np.abs(off).max()))


def test_refused_on_a_host_without_avx512_bf16(tmp_path, onnx_path, monkeypatch, capsys):
    """In process, with /proc/cpuinfo's flags replaced by a host's without avx512_bf16: one model, and batch mode
    (refused once, before any model)."""
    monkeypatch.setattr(native, "host_cpu_flags", lambda: frozenset({"avx512f", "avx512bw", "avx512_vnni"}))
    out = tmp_path / "out"
    out.mkdir()
    for model, output in ((onnx_path, f"{out}/m"), (os.path.dirname(onnx_path), f"{out}/batch")):
        with pytest.raises(SystemExit) as e:
            main(["--fmk=ONNX", f"--modelFile={model}", f"--outputFile={output}", "--bf16=on"])
        assert e.value.code == 1
        text = capsys.readouterr().out
        line = text.strip().splitlines()[-1]
        assert line.startswith("CONVERT RESULT FAILED:-600 ") and "--bf16=on" in line and "avx512_bf16" in line, text
        assert os.listdir(out) == []
