"""Indexing ops (converter_lite/ops/tensor_index.py) against onnxruntime, plus inference == kernel."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import DTYPES, check, check_rejects, data, i64, ours

from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ops.registry import DynamicShapeError, infer_types


def idx(shape, dim, seed=1, negative=True):
    """Random indices in [-dim, dim) (or [0, dim))."""
    rng = np.random.default_rng(seed)
    return np.asarray(rng.integers(-dim if negative else 0, dim, size=shape), np.int64)


# -- Gather ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,ishape", [((5, 4), 0, (3,)), ((5, 4), 1, (2, 3)), ((5, 4, 3), -1, ()),
                                               ((5, 4, 3), -2, (2, 2)), ((5, 4), 0, (0,)), ((5, 0), 0, (2,))])
def test_gather(shape, axis, ishape, dtype):
    dim = shape[axis]
    check("Gather", {"x": data(shape, dtype), "i": idx(ishape, dim)}, axis=axis)


def test_gather_int32_indices_and_default_axis():
    check("Gather", {"x": data((6, 2)), "i": np.array([[0, -1], [5, 2]], np.int32)})
    check_rejects("Gather", {"x": data((3,)), "i": i64(3)}, infer=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,ishape", [((4, 5), 0, (3, 5)), ((4, 5), 1, (4, 2)), ((4, 5), -1, (2, 2)),
                                               ((3, 4, 5), 1, (3, 6, 5)), ((3, 4), 0, (0, 4))])
def test_gather_elements(shape, axis, ishape, dtype):
    check("GatherElements", {"x": data(shape, dtype), "i": idx(ishape, shape[axis])}, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,ishape,batch_dims", [
    ((4, 5), (3, 2), 0), ((4, 5), (3, 1), 0), ((4, 5, 6), (2, 2, 2), 0), ((4, 5, 6), (4, 3, 1), 1),
    ((2, 3, 4, 5), (2, 3, 2), 2), ((2, 3, 4), (2, 0, 1), 1), ((4, 5), (2, 3, 0), 0), ((4, 5), (2,), 0),
])
def test_gather_nd(shape, ishape, batch_dims, dtype):
    k = ishape[-1]
    dims = np.array(shape[batch_dims:batch_dims + k])
    rng = np.random.default_rng(2)
    ind = (rng.integers(0, 1 << 30, size=ishape) % np.maximum(dims, 1) - (rng.random(ishape) < 0.3) * dims)
    check("GatherND", {"x": data(shape, dtype), "i": ind.astype(np.int64)}, batch_dims=batch_dims)


def test_gather_nd_rejects_bad_indices():
    check_rejects("GatherND", {"x": data((4, 5)), "i": i64(1, 2, 3)})


# -- Scatter ---------------------------------------------------------------------------------------------------
REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
@pytest.mark.parametrize("shape,axis,ishape", [((4, 5), 0, (3, 5)), ((4, 5), -1, (4, 2)),
                                               ((3, 4, 5), 1, (2, 6, 3)), ((4, 5), 1, (0, 5))])
def test_scatter_elements(shape, axis, ishape, dtype, reduction):
    if reduction == "none":   # duplicate targets are unspecified without a reduction: use distinct ones
        rng = np.random.default_rng(3)
        ishape = ishape[:axis % len(shape)] + (min(ishape[axis], shape[axis]),) + ishape[axis % len(shape) + 1:]
        ind = np.argsort(rng.random(shape), axis=axis)[tuple(slice(0, n) for n in ishape)] - shape[axis] // 2
    else:
        ind = idx(ishape, shape[axis])
    if dtype == np.float16 and reduction != "none":
        pytest.skip("onnxruntime has no float16 ScatterElements reductions")
    check("ScatterElements", {"x": data(shape, dtype), "i": ind, "u": data(ind.shape, dtype, seed=4)},
          axis=axis, reduction=reduction)


def test_scatter_elements_bool_and_rejects():
    check("ScatterElements", {"x": data((3, 3), np.bool_), "i": i64([1, 0, 2]).reshape(1, 3),
                              "u": np.array([[True, True, False]])}, axis=0)
    check_rejects("ScatterElements", {"x": data((3, 3)), "i": i64(5).reshape(1, 1), "u": data((1, 1))}, infer=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("shape,ind", [((6,), [[1], [-2], [4]]), ((4, 5), [[0, 1], [3, -1]]), ((4, 5), [[2], [-4]]),
                                       ((2, 3, 4), [[[0, 2], [1, 0]]]), ((4, 5), [[1, 1], [1, 1]]),
                                       ((4, 5), np.zeros((0, 1), np.int64))])
def test_scatter_nd(shape, ind, dtype, reduction):
    ind = np.asarray(ind, np.int64)
    if reduction == "none" and len({tuple(r) for r in ind.reshape(-1, ind.shape[-1]).tolist()}) < len(ind.reshape(
            -1, ind.shape[-1])):
        pytest.skip("duplicate targets are unspecified without a reduction")
    k = ind.shape[-1]
    check("ScatterND", {"x": data(shape, dtype), "i": ind, "u": data(ind.shape[:-1] + shape[k:], dtype, seed=5)},
          reduction=reduction)


@pytest.mark.parametrize("mode,write", [("linear", None), ("linear", [0, 3]), ("circular", [6, 1])])
def test_tensor_scatter(mode, write):
    cache, update = data((2, 3, 8, 4)), data((2, 3, 2, 4), seed=9)
    inputs = {"c": cache, "u": update, "w": None if write is None else i64(*write)}
    check("TensorScatter", inputs, opset=24, mode=mode)
    check("TensorScatter", {"c": data((2, 7, 4), np.float16), "u": data((2, 3, 4), np.float16), "w": i64(4, 0)},
          opset=24, mode=mode, axis=1)


# -- OneHot ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vdtype", [np.float32, np.int64, np.float16])
@pytest.mark.parametrize("ishape,depth,axis", [((4,), 5, -1), ((2, 3), 4, 0), ((2, 3), 4, 1), ((2, 3), 6, -2),
                                               ((0, 2), 3, -1)])
def test_one_hot(ishape, depth, axis, vdtype):
    ind = idx(ishape, depth + 1)   # includes out-of-range (all off) and negative indices
    check("OneHot", {"i": ind, "d": i64(depth), "v": np.array([2, 7], vdtype)}, const=("d",), axis=axis)


def test_one_hot_float_indices_and_depth():
    check("OneHot", {"i": np.array([0.0, 2.0, -1.0, 7.0], np.float32), "d": np.array([3.0], np.float32),
                     "v": np.array([0, 1], np.float32)}, const=("d",))


# -- Compress / NonZero ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,cond,axis", [((3, 4), [1, 0, 1], 0), ((3, 4), [0, 1, 1, 0], 1), ((3, 4), [1, 0], -2),
                                             ((3, 4), [0, 1, 1, 0, 1], None), ((3, 4), [0, 0, 0], 0)])
def test_compress(shape, cond, axis, dtype):
    attrs = {} if axis is None else {"axis": axis}
    check("Compress", {"x": data(shape, dtype), "c": np.array(cond, bool)}, const=("c",), **attrs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 0, 3), (2, 2, 2)])
def test_nonzero(shape, dtype):
    x = data(shape, dtype) * (data(shape, np.float32, seed=7) > 0).astype(dtype)
    check("NonZero", {"x": x}, const=("x",))


def test_nonzero_inference_needs_a_constant():
    node = Node("NonZero", [Value("x", TensorType.of(data((3,))))], [Value("y")])
    with pytest.raises(DynamicShapeError, match="run-time data"):
        infer_types(node)
    assert ours("NonZero", {"x": np.array(3.0)})[0].shape == (0, 1)


# -- ReverseSequence / Trilu -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,batch_axis,time_axis,lens", [((4, 3, 2), 1, 0, [4, 1, 2]), ((3, 5), 0, 1, [5, 0, 3]),
                                                             ((2, 4, 3, 2), 0, 1, [1, 4])])
def test_reverse_sequence(shape, batch_axis, time_axis, lens, dtype):
    check("ReverseSequence", {"x": data(shape, dtype), "l": i64(*lens)}, batch_axis=batch_axis,
          time_axis=time_axis)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (5, 2), (0, 3)])
@pytest.mark.parametrize("upper,k", [(1, None), (0, None), (1, 1), (0, -1), (1, -7), (0, 9)])
def test_trilu(shape, upper, k, dtype):
    check("Trilu", {"x": data(shape, dtype), "k": None if k is None else i64(k)}, upper=upper)


def test_trilu_rejects_vectors():
    check_rejects("Trilu", {"x": data((4,))})
