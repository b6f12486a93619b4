"""Benchmark inputs: random data, input files, --inputShapes (converter_lite/cli/inputs.py)."""
from __future__ import annotations

import numpy as np
import pytest
from runtime_graphs import chain_graph

from converter_lite.errors import RET_INPUT_PARAM_INVALID, ConverterError
from converter_lite.ir import DType, Graph, Node, TensorType, Value
from converter_lite.model import save_model
from converter_lite.runtime import load
from converter_lite.cli.inputs import (check_input_shapes, parse_input_shapes, random_inputs,
                                           read_input_files)


@pytest.fixture
def model(tmp_path):
    return load(save_model(tmp_path / "c.ms", chain_graph(), {}))


def _all_dtypes_model(tmp_path, metadata=None):
    ins = [Value(f"in_{d.name}", TensorType(d, (4, 5))) for d in DType if d is not DType.string]
    return load(save_model(tmp_path / "d.ms", Graph("d", ins, list(ins), []), metadata or {}))


def test_random_inputs_are_reproducible_and_in_range(tmp_path):
    m = _all_dtypes_model(tmp_path)
    a, b = random_inputs(m, seed=1), random_inputs(m, seed=1)
    c = random_inputs(m, seed=2)
    for v, t in zip(m.input_names, m.input_types):
        assert a[v].dtype == t.dtype.np and a[v].shape == t.shape
        np.testing.assert_array_equal(a[v], b[v])
        if t.dtype.is_low_precision and t.dtype.is_float:     # the range rounded to the type (float4: 0 .. 1)
            lo, hi = np.array([0.1, 1.0]).astype(t.dtype.np)
            assert lo <= a[v].min() and a[v].max() <= hi
            assert not np.array_equal(a[v], c[v])
        elif t.dtype.is_float:
            assert 0.1 <= a[v].min() and a[v].max() < 1.0
            assert not np.array_equal(a[v], c[v])
        elif t.dtype.is_int:
            assert 0 <= a[v].min() and a[v].max() < 100
    assert set(np.unique(a["in_bool"])) <= {False, True}


def test_gather_indices_and_metadata_ranges(tmp_path):
    data = Value("table", const=np.zeros((7, 3), np.float32))
    idx = Value("idx", TensorType(DType.int64, (50,)))
    other = Value("other", TensorType(DType.int32, (50,)))
    out = Value("out", TensorType(DType.float32, (50, 3)))
    g = Graph("g", [idx, other], [out, other], [Node("Gather", [data, idx], [out], {"axis": 0}, name="gather")])
    m = load(save_model(tmp_path / "g.ms", g, {"input_ranges": {"other": [-5, -3]}}))
    feeds = random_inputs(m)
    assert feeds["idx"].min() >= 0 and feeds["idx"].max() < 7
    assert set(np.unique(feeds["other"])) <= {-5, -4}
    m.run(feeds)


def test_read_bin_npy_npz(tmp_path, model, rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    n = np.array([5, 6, 7], np.int64)
    x.astype("<f4").tofile(tmp_path / "x.bin")
    n.astype("<i8").tofile(tmp_path / "n.data")        # raw data, any extension
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "n.npy", n)
    np.savez(tmp_path / "both.npz", n=n, x=x)
    np.savez(tmp_path / "positional.npz", x, n)
    for paths in ([tmp_path / "x.bin", tmp_path / "n.data"], [tmp_path / "x.npy", tmp_path / "n.npy"],
                  [tmp_path / "x.npy", tmp_path / "n.data"], [tmp_path / "both.npz"],
                  [tmp_path / "positional.npz"]):
        feeds = read_input_files(model, [str(p) for p in paths])
        assert list(feeds) == ["x", "n"]
        np.testing.assert_array_equal(feeds["x"], x)
        np.testing.assert_array_equal(feeds["n"], n)


@pytest.mark.parametrize("files, pattern", [
    (["x.bin"], r"1 file\(s\) but the model has 2 input\(s\): x, n"),
    (["x.bin", "n.bin", "x.bin"], r"3 file\(s\)"),
    (["short.bin", "n.bin"], r"short.bin has 20 bytes; input 'x' \(f32\[2,3\]\) needs 24 bytes"),
    (["x64.npy", "n.bin"], r"x64.npy: input 'x' needs dtype float32 .* has float64"),
    (["x32.npy", "n.bin"], r"x32.npy: input 'x' needs shape \[2, 3\] .* has \[3, 2\]"),
    (["missing.npz"], r"missing: n; unknown: y"),
    (["x.bin", "both.npz"], "must be the only input file"),
])
def test_bad_input_files(tmp_path, model, files, pattern):
    np.zeros((2, 3), np.float32).tofile(tmp_path / "x.bin")
    np.zeros(3, np.int64).tofile(tmp_path / "n.bin")
    np.zeros(5, np.float32).tofile(tmp_path / "short.bin")
    np.save(tmp_path / "x64.npy", np.zeros((2, 3)))
    np.save(tmp_path / "x32.npy", np.zeros((3, 2), np.float32))
    np.savez(tmp_path / "missing.npz", x=np.zeros((2, 3), np.float32), y=np.zeros(3))
    np.savez(tmp_path / "both.npz", x=np.zeros((2, 3), np.float32))
    with pytest.raises(ConverterError, match=pattern) as e:
        read_input_files(model, [str(tmp_path / f) for f in files])
    assert e.value.code == RET_INPUT_PARAM_INVALID


def test_input_shapes(model):
    assert parse_input_shapes("1,3,224,224:1,128") == [(1, 3, 224, 224), (1, 128)]
    check_input_shapes(model, "2,3:3")
    with pytest.raises(ConverterError, match="static shape 2,3, not 1,3"):
        check_input_shapes(model, "1,3:3")
    with pytest.raises(ConverterError, match=r"gives 1 shape\(s\) but the model has 2"):
        check_input_shapes(model, "2,3")
    with pytest.raises(ConverterError, match="not a comma-separated list"):
        check_input_shapes(model, "2,x:3")


def test_random_indices_follow_control_flow_bodies(tmp_path):
    """Issue 16: greedy_decoder's start token reaches a Gather only inside the Loop body; random feeds still keep
    it inside the embedding's 50 rows (before: [0, 100), and runs failed on an out-of-range index)."""
    import os

    import converter_lite
    from converter_lite.model.format import load_model
    models = os.path.join(os.path.dirname(__file__), "..", "..", "models")
    ms = converter_lite.convert(os.path.join(models, "greedy_decoder.onnx"), str(tmp_path / "g"))
    model = converter_lite.load(ms)
    for seed in range(20):
        feeds = random_inputs(load_model(ms), seed)
        assert 0 <= int(feeds["start"][0]) < 50
        model.run(feeds)
