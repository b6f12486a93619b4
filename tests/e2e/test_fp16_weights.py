"""--fp16=on stores float32 weights as float16: the file shrinks, outputs stay close, runs compute in float32."""
import os

import numpy as np
import onnx

import converter_lite
from converter_lite.model.format import load_model
from helpers import run_ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "models", "mlp_block.onnx")


def test_fp16_weights_halve_the_file_and_keep_float32_outputs(tmp_path):
    full = converter_lite.convert(MLP, str(tmp_path / "f32"), graph_kernel_flags="--opt_level=2")
    half = converter_lite.convert(MLP, str(tmp_path / "f16"), graph_kernel_flags="--opt_level=2", fp16=True)
    # the weights halve (the native sections, the same in both files, are left out of the comparison)
    def weight_bytes(path):
        m = load_model(path)
        return os.path.getsize(path) - sum(len(v) for v in m.sections.values())
    assert weight_bytes(half) < 0.6 * weight_bytes(full)
    consts = [v for n in load_model(half).graph.nodes for v in n.inputs if v is not None and v.const is not None]
    assert any(v.const.dtype == np.float16 for v in consts)
    x = np.random.default_rng(0).standard_normal((1, 64, 128)).astype(np.float32)
    out = converter_lite.load(half).run({"x": x})["y"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, run_ort(onnx.load(MLP), {"x": x})[0], rtol=2e-2, atol=2e-2)


def test_fp16_cli_flag(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "converter_lite.cli.converter", "--fmk=ONNX", f"--modelFile={MLP}",
                        f"--outputFile={tmp_path}/m", "--fp16=on"], capture_output=True, text=True)
    assert r.returncode == 0 and load_model(str(tmp_path / "m.ms")).metadata["fp16_weights"] is True
    r = subprocess.run([sys.executable, "-m", "converter_lite.cli.converter", "--fmk=ONNX", f"--modelFile={MLP}",
                        f"--outputFile={tmp_path}/n", "--fp16=maybe"], capture_output=True, text=True)
    assert r.returncode == 1 and "--fp16=maybe" in r.stdout
