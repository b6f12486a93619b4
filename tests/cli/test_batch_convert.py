"""Batch conversion: directories and globs, parallel jobs, shards, per-model lines, summary, failures."""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["mynet", "custom_op", "legacy_opset9", "conv_net"]


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "models"
    (d / "sub").mkdir(parents=True)
    for name in SMALL[:3]:
        shutil.copy(os.path.join(ROOT, "models", f"{name}.onnx"), d / f"{name}.onnx")
    shutil.copy(os.path.join(ROOT, "models", "conv_net.onnx"), d / "sub" / "conv_net.onnx")
    (d / "broken.onnx").write_bytes(b"\x08\x07garbage")
    return d


def cli(*args):
    r = subprocess.run([sys.executable, "-m", "converter_lite.cli.converter", "--fmk=ONNX", *args],
                       capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in r.stdout + r.stderr
    return r


def test_directory_batch_converts_the_rest_and_reports_the_broken_one(model_dir, tmp_path):
    out = tmp_path / "out"
    r = cli(f"--modelFile={model_dir}", f"--outputFile={out}", "--configFile=cfg/akg.cfg", "--jobs=2")
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert lines[-1].startswith("CONVERT RESULT FAILED:-1 1 model(s) failed")
    assert sum("CONVERT RESULT SUCCESS:0" in ln for ln in lines) == 4
    assert any("broken.onnx: CONVERT RESULT FAILED:-200" in ln for ln in lines)
    assert sorted(os.listdir(out)) == ["convert_summary.json", "custom_op.ms", "legacy_opset9.ms", "mynet.ms", "sub"]
    assert os.listdir(out / "sub") == ["conv_net.ms"]
    summary = json.loads((out / "convert_summary.json").read_text())
    assert summary["converted"] == 4 and summary["failed"] == 1
    assert {m["status"] for m in summary["models"]} == {"SUCCESS", "FAILED"}


def test_all_good_batch_succeeds(model_dir, tmp_path):
    (model_dir / "broken.onnx").unlink()
    r = cli(f"--modelFile={model_dir}/*.onnx", f"--outputFile={tmp_path}/o")
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "CONVERT RESULT SUCCESS:0"
    assert sorted(os.listdir(tmp_path / "o")) == ["convert_summary.json", "custom_op.ms", "legacy_opset9.ms",
                                                  "mynet.ms"]


def test_shards_partition_the_models(model_dir, tmp_path):
    seen = []
    for k in (1, 2, 3):
        out = tmp_path / f"s{k}"
        cli(f"--modelFile={model_dir}", f"--outputFile={out}", f"--shard={k}/3")
        summary = json.loads((out / "convert_summary.json").read_text())
        seen += [m["model"] for m in summary["models"]]
    assert sorted(seen) == sorted(str(p) for p in model_dir.rglob("*.onnx"))
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize("shard", ["0/2", "3/2", "a/b", "2"])
def test_bad_shard(model_dir, tmp_path, shard):
    r = cli(f"--modelFile={model_dir}", f"--outputFile={tmp_path}/o", f"--shard={shard}")
    assert r.returncode == 1 and "--shard" in r.stdout and "CONVERT RESULT FAILED:-600" in r.stdout


def test_empty_glob(tmp_path):
    r = cli(f"--modelFile={tmp_path}/*.onnx", f"--outputFile={tmp_path}/o")
    assert r.returncode == 1 and "no ONNX model found" in r.stdout


def test_two_batch_runs_share_an_output_directory(model_dir, tmp_path):
    (model_dir / "broken.onnx").unlink()
    out = tmp_path / "shared"
    cmd = [sys.executable, "-m", "converter_lite.cli.converter", "--fmk=ONNX", f"--modelFile={model_dir}",
           f"--outputFile={out}", "--configFile=cfg/akg.cfg"]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stdout + stderr
    import converter_lite
    for ms in ["mynet.ms", "custom_op.ms", "legacy_opset9.ms", "sub/conv_net.ms"]:
        converter_lite.load(out / ms)          # every file whole and valid
    assert not [f for f in os.listdir(out) if f.startswith(".")]   # no temp files left
