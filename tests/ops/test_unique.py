"""Unique (ops/unique.py) against onnxruntime (opset 11 models: onnxruntime has no newer Unique), and its
data-dependent inference: DynamicShapeError unless X is constant; the dtype-only rule for run-time shapes."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, ir_node, ours

from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import DynamicShapeError, infer_dynamic, infer_types

OPSET = 11


def few(shape, dtype, seed=0):
    """Values with many repeats."""
    return np.random.default_rng(seed).integers(0, 4, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int8, np.float64])   # onnxruntime's types
@pytest.mark.parametrize("shape,axis", [((12,), None), ((3, 4), None), ((6, 3), 0), ((3, 6), 1), ((2, 5, 2), 1),
                                        ((4, 3), -1), ((1,), None), ((0,), None), ((5, 2), 0)])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique(dtype, shape, axis, sorted_):
    x = few(shape, dtype)
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    check("Unique", {"x": x}, n_outputs=4, opset=OPSET, infer=False, **attrs)
    check("Unique", {"x": x}, n_outputs=4, const=("x",), opset=OPSET, **attrs)     # constant X: static types


def test_unique_spec_examples():
    y, idx, inv, cnt = ours("Unique", {"x": np.array([2, 1, 1, 3, 4, 3], np.int64)}, 4, sorted=0)
    assert (y.tolist(), idx.tolist(), inv.tolist(), cnt.tolist()) == ([2, 1, 3, 4], [0, 1, 3, 4],
                                                                      [0, 1, 1, 2, 3, 2], [1, 2, 2, 1])
    x = np.array([[[1, 1], [0, 1], [2, 1], [0, 1]], [[1, 1], [0, 1], [2, 1], [0, 1]]], np.float32)
    y, idx, inv, cnt = ours("Unique", {"x": x}, 4, axis=1)
    assert y[0].tolist() == [[0, 1], [1, 1], [2, 1]] and idx.tolist() == [1, 0, 2]
    assert inv.tolist() == [1, 0, 2, 0] and cnt.tolist() == [2, 1, 1]


def test_unique_strings_and_nan():
    s = np.array(["b", "a", "b", "", "a"], object)
    check("Unique", {"s": s}, n_outputs=4, opset=OPSET, infer=False)
    check("Unique", {"s": s}, n_outputs=4, opset=OPSET, infer=False, sorted=0)
    y = ours("Unique", {"x": np.array([np.nan, 1, np.nan], np.float32)})[0]
    assert y.shape == (2,) and np.isnan(y[1])


def test_unique_inference_is_dynamic_unless_constant():
    x = few((3, 4), np.float32)
    node = ir_node("Unique", {"x": x}, 4, (), {})
    with pytest.raises(DynamicShapeError):
        infer_types(node)
    assert [t.dtype for t in infer_dynamic(node)] == [DType.float32] + [DType.int64] * 3
    assert all(t.shape is None for t in infer_dynamic(node))
    const = infer_types(ir_node("Unique", {"x": x}, 2, ("x",), {}))
    assert [t.shape for t in const] == [(4,), (4,)]


def test_unique_rejects():
    check_rejects("Unique", {"x": np.ones((2, 3), np.float32)}, 4, const=("x",), axis=2)
    check_rejects("Unique", {"x": np.float32(1)}, 4, const=("x",), axis=0)
