"""Models with dynamic input dims converted with --inputShape fixing them run at other sizes of those dims by
converting again in the run process (runtime/respecialize.py; without --inputShape the model needs no converting
again: tests/e2e/test_dynamic_shapes.py)."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from click.testing import CliRunner

from converter_lite.api import convert, load
from converter_lite.cli.benchmark import main as benchmark_main
from converter_lite.errors import RET_INPUT_PARAM_INVALID, ConverterError
from converter_lite.model.format import load_model
from converter_lite.runtime import respecialize
from converter_lite.model.format import SOURCE_SECTION
from tests.helpers import make_model, run_ort, tensor_info

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0


def _model(batch="N"):
    """y = Relu(x * 2 + 1) @ W, then Softmax over the last axis; x: [batch, 4]."""
    nodes = [oh.make_node("Mul", ["x", "two"], ["a"]), oh.make_node("Add", ["a", "one"], ["b"]),
             oh.make_node("Relu", ["b"], ["c"]), oh.make_node("MatMul", ["c", "w"], ["d"]),
             oh.make_node("Softmax", ["d"], ["y"], axis=-1)]
    return make_model(nodes, [tensor_info("x", np.float32, [batch, 4])], [tensor_info("y", np.float32, [batch, 3])],
                      initializers={"two": np.float32(2), "one": np.float32(1), "w": W})


@pytest.fixture(scope="module")
def dyn_ms(tmp_path_factory):
    d = tmp_path_factory.mktemp("reshape")
    src = d / "dyn.onnx"
    onnx.save(_model(), src)
    return convert(str(src), str(d / "dyn"), graph_kernel_flags="--opt_level=2", input_shape={"x": (1, 4)}), _model()


def test_converted_shape_and_other_batch_sizes_match_onnxruntime(dyn_ms):
    path, proto = dyn_ms
    assert SOURCE_SECTION in load_model(path).sections
    m = load(path)
    assert m.input_types[0].shape == (1, 4)                # converted with --inputShape x:1,4
    rng = np.random.default_rng(0)
    for n in (1, 5, 0, 5, 17):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        got = m.run({"x": x})["y"]
        assert got.shape == (n, 3)
        np.testing.assert_allclose(got, run_ort(proto, {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert m._reshaper is not None and len(m._reshaper._models) == 3     # 5, 0 and 17, each converted once


def test_specialized_api_and_errors(dyn_ms):
    path, _ = dyn_ms
    m = load(path)
    assert m.specialized({"x": (1, 4)}) is m
    m7 = m.specialized({"x": [7, 4]})
    assert m7.input_types[0].shape == (7, 4) and m7.path == m.path
    assert m.specialized({"x": (7, 4)}) is m7
    with pytest.raises(ConverterError, match=r"input 'x': shape \[7, 5\] cannot be used.*dynamic axes: \[0\]") as e:
        m.specialized({"x": (7, 5)})                        # axis 1 is fixed in the source model
    assert e.value.code == RET_INPUT_PARAM_INVALID
    with pytest.raises(ConverterError, match="expected shape"):
        m.run({"x": np.zeros((2, 4, 1), np.float32)})      # another rank: the usual feed error
    with pytest.raises(ConverterError, match="unknown input 'z'"):
        m.specialized({"z": (1,)})


def test_cache_is_bounded(dyn_ms, monkeypatch):
    monkeypatch.setattr(respecialize, "MAX_SHAPES", 2)
    m = load(dyn_ms[0])
    for n in (2, 3, 4):
        m.run({"x": np.ones((n, 4), np.float32)})
    assert [k[0][1][0] for k in m._reshaper._models] == [3, 4]


def test_static_models_embed_no_source(tmp_path):
    src = tmp_path / "static.onnx"
    onnx.save(_model(batch=2), src)
    path = convert(str(src), str(tmp_path / "static"), graph_kernel_flags="--opt_level=2")
    assert SOURCE_SECTION not in load_model(path).sections
    m = load(path)
    assert m._reshaper is None
    with pytest.raises(ConverterError, match="shapes are fixed at conversion"):
        m.run({"x": np.ones((3, 4), np.float32)})


def test_benchmark_input_shapes_specializes(dyn_ms):
    result = CliRunner().invoke(benchmark_main, [f"--modelFile={dyn_ms[0]}", "--inputShapes=6,4", "--loopCount=2"])
    assert result.exit_code == 0, result.output
    assert "Run Benchmark dyn.ms Success" in result.output or "Success" in result.output
    bad = CliRunner().invoke(benchmark_main, [f"--modelFile={dyn_ms[0]}", "--inputShapes=6,5", "--loopCount=2"])
    assert bad.exit_code != 0 and "cannot be used" in bad.output
