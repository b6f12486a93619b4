"""The sample models end to end: the seeds' exact outputs, and every model against onnxruntime at opt_level 0-3."""
import os
import subprocess
import sys

import numpy as np
import pytest

import converter_lite
from helpers import assert_close, run_ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "models")
SAMPLES = ["mynet", "custom_op", "mlp_block", "attention_block", "conv_net", "legacy_opset9"]


def _feeds(model, rng):
    feeds = {}
    for name, t in zip(model.input_names, model.input_types):
        feeds[name] = rng.standard_normal(t.shape).astype(t.dtype.np)
    return feeds


def test_mynet_seed_output_through_api(tmp_path):
    ms = converter_lite.convert(os.path.join(MODELS, "mynet.onnx"), str(tmp_path / "mynet"),
                                config_file=os.path.join(ROOT, "cfg", "akg.cfg"))
    assert ms == str(tmp_path / "mynet.ms")
    out = converter_lite.load(ms).run({"x": np.full((4, 4), 0.5, np.float32)})
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], np.full((4, 4), 2.0, np.float32))


def test_custom_op_seed_output_through_api(tmp_path):
    ms = converter_lite.convert(os.path.join(MODELS, "custom_op.onnx"), str(tmp_path / "custom"),
                                enable_graph_kernel=True)
    out = converter_lite.load(ms).run({"x": np.full((4, 4), 0.2, np.float32), "y": np.full((4, 4), 0.3, np.float32)})
    np.testing.assert_allclose(out["res"], np.full((4, 4), -0.015104, np.float32), rtol=1e-5)


def _cli(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "converter_lite.cli.converter", *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


def test_seeds_through_cli(tmp_path):
    for name, feeds, expected in [
        ("mynet", {"x": np.full((4, 4), 0.5, np.float32)}, 2.0),
        ("custom_op", {"x": np.full((4, 4), 0.2, np.float32), "y": np.full((4, 4), 0.3, np.float32)}, -0.015104),
    ]:
        r = _cli("--fmk=ONNX", f"--modelFile={MODELS}/{name}.onnx", f"--outputFile={tmp_path}/{name}",
                 f"--configFile={ROOT}/cfg/akg.cfg")
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.strip().splitlines()[-1] == "CONVERT RESULT SUCCESS:0"
        out = converter_lite.load(tmp_path / f"{name}.ms").run(feeds)
        np.testing.assert_allclose(next(iter(out.values())), np.full((4, 4), expected, np.float32), rtol=1e-5)


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
def test_sample_model_matches_onnxruntime(tmp_path, name, opt_level):
    import onnx

    path = os.path.join(MODELS, f"{name}.onnx")
    ms = converter_lite.convert(path, str(tmp_path / name), graph_kernel_flags=f"--opt_level={opt_level}")
    model = converter_lite.load(ms)
    feeds = _feeds(model, np.random.default_rng(opt_level))
    ours = model.run(feeds)
    ref = run_ort(onnx.load(path), feeds)
    assert list(ours) == model.output_names
    for (name_, a), e in zip(ours.items(), ref):
        assert_close(a, e, rtol=1e-4, atol=1e-5, what=f"{name}:{name_} at opt_level {opt_level}")
