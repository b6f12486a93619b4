"""MindSpore's mean-bias metric and calibration files (converter_lite/cli/accuracy.py)."""
from __future__ import annotations

import numpy as np
import pytest

from converter_lite.errors import ConverterError
from converter_lite.cli.accuracy import (compare_outputs, failure_lines, fmt, read_calibration, tensor_bias,
                                             write_calibration)


@pytest.mark.parametrize("actual, expected, bias", [
    ([1.0, 2.0], [1.0, 2.0], 0.0),                          # exact
    ([1.000001, 2.0], [1.0, 2.0], 0.0),                     # within 1e-8 + 1e-5*|e|
    ([1.1, 2.0], [1.0, 2.0], 0.1),                          # one counted element: relative error
    ([1.1, 2.4], [1.0, 2.0], (0.1 + 0.2) / 2),              # mean over counted elements only
    ([1e-6, 0.0], [0.0, 0.0], 0.0),                         # expected 0: |err| <= 1e-5 is ignored
    ([1e-3, 5.0], [0.0, 5.0], 1e-3),                        # expected 0: absolute error counts
    ([0.5, 3.0], [0.0, 2.0], (0.5 + 0.5) / 2),
    ([], [], 0.0),
])
def test_tensor_bias(actual, expected, bias):
    assert tensor_bias(np.array(actual), np.array(expected)) == pytest.approx(bias, rel=1e-6)


def test_tensor_bias_brute_force(rng):
    """Vectorised metric == the element loop of MindSpore's CompareData."""
    e = rng.standard_normal(200) * np.where(rng.random(200) < 0.2, 0, 1)
    a = e + rng.standard_normal(200) * 10.0 ** rng.integers(-9, 0, 200)
    total, count = 0.0, 0
    for x, y in zip(a, e):
        err = abs(x - y)
        if err > 1e-8 + 1e-5 * abs(y):
            if abs(y) < np.finfo(np.float32).eps:
                if err > 1e-5:
                    total, count = total + err, count + 1
            else:
                total, count = total + err / (abs(y) + np.finfo(np.float32).tiny), count + 1
    assert tensor_bias(a, e) == pytest.approx(total / count if total > 0 else 0.0, rel=1e-9)


def test_compare_outputs_lines_and_mean():
    outs = {"a": np.array([1.1, 2.0], np.float32), "b": np.array([[3, 4]], np.int64)}
    res = compare_outputs(outs, {"a": np.array([1.0, 2.0]), "b": np.array([[3, 4]])}, threshold=5)
    assert res.lines[0] == "================ Comparing Output data ================"
    assert res.lines[1] == "Data of node a : 1.1 2 "
    assert res.lines[2].startswith("Mean bias of node/tensor a : 10") and res.lines[2].endswith("%")
    assert res.lines[4] == "Mean bias of node/tensor b : 0%"
    assert res.mean_bias == pytest.approx(5.0, rel=1e-5)
    assert res.lines[5] == f"Mean bias of all nodes/tensors: {fmt(res.mean_bias)}%"
    assert res.lines[6] == "=" * 55
    assert res.passed is False       # 5.00000x% > 5
    assert failure_lines(res)[0].startswith("Mean bias of all nodes/tensors is too big: 5")


def test_only_first_50_values_printed():
    res = compare_outputs({"a": np.arange(100.0)}, {"a": np.arange(100.0)})
    assert res.lines[1].split(":")[1].split() == [str(i) for i in range(50)]


def test_compare_errors():
    with pytest.raises(ConverterError, match=r"Shape of mslite output\(2,\) and shape source model output\(1,2,\)"):
        compare_outputs({"a": np.zeros(2)}, {"a": np.zeros((1, 2))})
    with pytest.raises(ConverterError, match="Cannot find output node: zz"):
        compare_outputs({"a": np.zeros(2)}, {"zz": np.zeros(2)})
    with pytest.raises(ConverterError, match="nan or inf"):
        compare_outputs({"a": np.array([np.nan, 1.0])}, {"a": np.array([0.0, 1.0])})
    with pytest.raises(ConverterError, match="nan or inf"):
        compare_outputs({"a": np.array([1.0, 1.0])}, {"a": np.array([np.inf, 1.0])})


def test_matching_non_finite_values_are_equal():
    got = np.array([np.nan, np.inf, -np.inf, 1.0])
    res = compare_outputs({"a": got}, {"a": got.copy()})
    assert res.mean_bias == 0 and res.passed


def test_outputs_missing_from_calibration_are_listed():
    res = compare_outputs({"a": np.zeros(1), "b": np.zeros(1)}, {"a": np.zeros(1)})
    assert res.uncompared == ["b"]


def test_calibration_round_trip(tmp_path, rng):
    data = {"out_0": rng.standard_normal((2, 3)).astype(np.float32), "scalar": np.array(3.5),
            "empty": np.zeros((0, 4), np.float32), "ints": np.array([1, -2, 3], np.int64),
            "flags": np.array([True, False])}
    p = str(tmp_path / "model.out")
    write_calibration(p, data)
    back = read_calibration(p)
    assert list(back) == list(data)
    for k, v in data.items():
        assert back[k].shape == v.shape
        np.testing.assert_array_equal(back[k], v.astype(np.float64))


def test_read_mindspore_example(tmp_path):
    p = tmp_path / "m.out"
    p.write_text("out_0 2 2 3\n1.0 2.0 3.0 4.0 5.0 6.0\n\n")
    np.testing.assert_array_equal(read_calibration(str(p))["out_0"], [[1, 2, 3], [4, 5, 6]])


def test_read_npz(tmp_path):
    p = str(tmp_path / "ref.npz")
    np.savez(p, y=np.ones(3, np.float32))
    assert read_calibration(p)["y"].dtype == np.float32


@pytest.mark.parametrize("text, pattern", [
    ("out 2 2\n1 2\n", "2 dims announced"),
    ("out x 2\n1 2\n", "expected '<name> <ndim>"),
    ("out 1 3\n1 2\n", "needs 3 values, got 2"),
    ("out 1 2\n1 abc\n", "line 2"),
    ("\n\n", "no tensors"),
])
def test_bad_calibration_files(tmp_path, text, pattern):
    p = tmp_path / "bad.out"
    p.write_text(text)
    with pytest.raises(ConverterError, match=pattern):
        read_calibration(str(p))
