"""Untrusted models: shipped machine code is never run with trust_native_code=False / --rebuildKernels=true."""
import os
import subprocess
import sys

import numpy as np
import pytest

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.model.format import load_model, save_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FEEDS = {"x": np.linspace(-2, 2, 64 * 128, dtype=np.float32).reshape(1, 64, 128),
         "mask": np.zeros((1, 1, 1, 64), np.float32)}


@pytest.fixture(scope="module")
def ms(tmp_path_factory):
    d = tmp_path_factory.mktemp("untrusted")
    return converter_lite.convert(os.path.join(ROOT, "models", "attention_block.onnx"), str(d / "att"),
                                  graph_kernel_flags="--opt_level=3")


def _with_sections(ms, tmp_path, change):
    loaded = load_model(ms)
    sections = {k: bytes(v) for k, v in loaded.sections.items()}
    change(sections)
    out = str(tmp_path / "tampered.ms")
    save_model(out, loaded.graph, dict(loaded.metadata), sections)
    return out


def test_rebuilt_kernels_give_the_same_outputs(ms):
    trusted = converter_lite.load(ms).run(FEEDS)["y"]
    model = converter_lite.load(ms, trust_native_code=False)
    assert sum(k.native for k in model.kernels) == sum(k.native for k in converter_lite.load(ms).kernels) > 0
    np.testing.assert_allclose(model.run(FEEDS)["y"], trusted, rtol=1e-6, atol=1e-6)


def test_tampered_shared_object_is_refused_but_rebuild_ignores_it(ms, tmp_path):
    def flip(sections):
        so = bytearray(sections["native/lib.so"])
        so[len(so) // 2] ^= 0xFF                   # the .ms CRC is recomputed on save: only the .so hash can tell
        sections["native/lib.so"] = bytes(so)
    bad = _with_sections(ms, tmp_path, flip)
    with pytest.raises(ConverterError):
        converter_lite.load(bad)
    out = converter_lite.load(bad, trust_native_code=False).run(FEEDS)["y"]
    np.testing.assert_allclose(out, converter_lite.load(ms).run(FEEDS)["y"], rtol=1e-6, atol=1e-6)


def test_benchmark_rebuild_kernels_flag(ms):
    r = subprocess.run([sys.executable, "-m", "converter_lite.cli.benchmark", f"--modelFile={ms}",
                        "--rebuildKernels=true", "--loopCount=2", "--warmUpLoopCount=1"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rebuilt for this host" in r.stderr and "Run Benchmark att.ms Success." in r.stdout


def test_out_of_memory_during_run_is_a_clear_error(ms, monkeypatch):
    model = converter_lite.load(ms)

    def no_memory(*args, **kwargs):
        raise MemoryError
    monkeypatch.setattr(model.plan, "execute", no_memory)
    with pytest.raises(ConverterError, match="not enough memory") as e:
        model.run(FEEDS)
    assert e.value.code == -6
