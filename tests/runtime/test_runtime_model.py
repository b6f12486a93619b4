"""load()/Model.run(): feed validation, outputs, threads, the native hook (converter_lite/runtime/model.py)."""
from __future__ import annotations

import subprocess
import sys
import threading
import types

import numpy as np
import pytest
from runtime_graphs import chain_graph, fused_graph, fused_reference

from converter_lite.errors import RET_INPUT_PARAM_INVALID, ConverterError
from converter_lite.model import save_model
from converter_lite.runtime import load


@pytest.fixture
def chain_model(tmp_path):
    return load(save_model(tmp_path / "chain.ms", chain_graph(), {}))


def _feeds(rng):
    return {"x": rng.standard_normal((2, 3)).astype(np.float32), "n": np.array([1, 2, 3], np.int64)}


def test_run_outputs_in_graph_order(chain_model, rng):
    feeds = _feeds(rng)
    out = chain_model.run(feeds)
    assert list(out) == ["out", "mid", "n1"] == chain_model.output_names
    assert chain_model.input_names == ["x", "n"]
    assert [str(t) for t in chain_model.input_types] == ["f32[2,3]", "i64[3]"]
    np.testing.assert_allclose(out["mid"], feeds["x"] * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(out["out"], np.maximum(feeds["x"] * 2 + 1, 0), rtol=1e-6)
    np.testing.assert_array_equal(out["n1"], [2, 3, 4])
    assert out["n1"].dtype == np.int64


def test_fused_model_and_constant_output(tmp_path, rng):
    m = load(save_model(tmp_path / "f.ms", fused_graph(), {}))
    x, y = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    out = m.run({"x": x, "y": y})
    for k, v in fused_reference(x, y).items():
        np.testing.assert_allclose(out[k], v, rtol=1e-6, atol=1e-7)
    out["w"] += 1                                      # constant outputs are copies, not views of the file
    assert [k.op for k in m.kernels] == ["GraphKernel", "Tanh"]
    assert m.kernels[0].source_nodes == ("mul0", "add0", "relu0", "sub0")
    assert not m.uses_native_code


@pytest.mark.parametrize("feeds, pattern", [
    ({"x": np.zeros((2, 3), np.float32)}, r"missing input 'n' \(i64\[3\]\)"),
    ({"x": np.zeros((2, 3), np.float32), "n": np.zeros(3, np.int64), "z": 1}, r"unknown input 'z'.*x \(f32"),
    ({"x": np.zeros((2, 3), np.float64), "n": np.zeros(3, np.int64)}, r"input 'x': expected dtype float32.*float64"),
    ({"x": np.zeros((3, 2), np.float32), "n": np.zeros(3, np.int64)}, r"input 'x': expected shape \[2, 3\].*\[3, 2\]"),
    ({"x": np.zeros((2, 3), np.float32), "n": np.zeros(3, np.int32)}, r"input 'n': expected dtype int64.*int32"),
    ({"x": np.zeros((2, 3), np.float32), "n": [1, 2]}, r"input 'n': expected shape \[3\]"),
    ({"x": np.zeros((2, 3), np.float32), "n": "abc"}, r"input 'n'"),
], ids=["missing", "unknown", "dtype", "shape", "int-width", "list-shape", "not-convertible"])
def test_feed_validation(chain_model, feeds, pattern):
    with pytest.raises(ConverterError, match=pattern) as e:
        chain_model.run(feeds)
    assert e.value.code == RET_INPUT_PARAM_INVALID


def test_lists_are_accepted_when_they_fit(chain_model):
    out = chain_model.run({"x": [[0, 1, 2], [3, 4, 5]], "n": [1, 2, 3]})
    np.testing.assert_array_equal(out["mid"], [[1, 3, 5], [7, 9, 11]])


def test_not_a_mapping(chain_model):
    with pytest.raises(ConverterError, match="dict"):
        chain_model.run([np.zeros((2, 3), np.float32)])


def test_bad_num_threads(tmp_path):
    with pytest.raises(ConverterError, match="num_threads"):
        load(save_model(tmp_path / "c.ms", chain_graph(), {}), num_threads=0)


def test_concurrent_runs(tmp_path, rng):
    m = load(save_model(tmp_path / "f.ms", fused_graph(), {}))
    cases = [(rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((4, 8)).astype(np.float32))
             for _ in range(6)]
    errors = []

    def worker(x, y):
        try:
            for _ in range(50):
                out = m.run({"x": x, "y": y})
                np.testing.assert_allclose(out["t"], fused_reference(x, y)["t"], rtol=1e-6, atol=1e-7)
        except Exception as e:   # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=c) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# -- native hook ---------------------------------------------------------------------------------------------
class _FakeLibrary:
    """Stands in for runtime/native.py's NativeLibrary: knows one kernel, computes it with numpy."""
    instances: list = []

    def __init__(self, sections):
        self.sections = sections
        self.threads = None
        self.calls = 0
        _FakeLibrary.instances.append(self)

    @classmethod
    def from_sections(cls, sections, **_options):          # e.g. trust_native_code
        return cls(dict(sections))

    def set_num_threads(self, n):
        self.threads = n

    def kernel(self, name):
        if name != "Fused_Mul_Add_Relu_Sub_0":
            raise KeyError(name)

        def fn(inputs, outputs):
            self.calls += 1
            x, y = inputs
            assert x.flags.c_contiguous and x.dtype == np.float32
            outputs[0][...] = np.maximum(x * y + np.float32(0.5), 0)
            outputs[1][...] = x - y
        return fn


@pytest.fixture
def fake_native(monkeypatch):
    import converter_lite.runtime.native as real
    mod = types.ModuleType("converter_lite.runtime.native")
    mod.__dict__.update({k: v for k, v in vars(real).items() if not k.startswith("__")})
    mod.NativeLibrary = _FakeLibrary
    monkeypatch.setitem(sys.modules, "converter_lite.runtime.native", mod)
    _FakeLibrary.instances.clear()
    return _FakeLibrary


def test_native_kernels_replace_graph_kernels(tmp_path, rng, fake_native):
    path = save_model(tmp_path / "n.ms", fused_graph(), {}, {"native/kernels.so": b"\0" * 10})
    m = load(path, num_threads=3)
    assert [k.native for k in m.kernels] == [True, False] and m.uses_native_code
    lib = fake_native.instances[0]
    assert lib.threads == 3 and bytes(lib.sections["native/kernels.so"]) == b"\0" * 10
    x, y = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    out = m.run({"x": x.T.copy().T, "y": y})          # a non-contiguous input is made contiguous
    assert lib.calls == 1
    for k, v in fused_reference(x, y).items():
        np.testing.assert_allclose(out[k], v, rtol=1e-6, atol=1e-7)


def test_native_disabled_or_absent(tmp_path, rng, fake_native):
    path = save_model(tmp_path / "n.ms", fused_graph(), {}, {"native/kernels.so": b"x"})
    assert not load(path, native=False).uses_native_code
    assert fake_native.instances == []
    plain = save_model(tmp_path / "p.ms", fused_graph(), {}, {"other": b"x"})
    assert not load(plain).uses_native_code and fake_native.instances == []


def test_missing_native_kernel_falls_back(tmp_path, rng, fake_native):
    g = fused_graph()
    g.nodes[0].attrs["kernel_name"] = "Unknown_Kernel"
    m = load(save_model(tmp_path / "n.ms", g, {}, {"native/kernels.so": b"x"}))
    assert not m.uses_native_code
    x, y = (rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(m.run({"x": x, "y": y})["d"], x - y)


def test_runtime_imports_no_onnx_or_llvmlite(tmp_path):
    path = save_model(tmp_path / "f.ms", fused_graph(), {})
    code = ("import sys, numpy as np; from converter_lite.runtime import load; "
            f"m = load({str(path)!r}); m.run({{'x': np.ones((4, 8), np.float32), 'y': np.ones((4, 8), np.float32)}}); "
            "bad = [k for k in ('onnx', 'onnxruntime', 'llvmlite') if k in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
