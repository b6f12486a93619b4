"""Reduction reference kernels vs onnxruntime (single-op models), and inference vs the kernels' outputs.

Known, deliberate differences from onnxruntime (tested against explicit expectations instead):
NaN in ReduceMax/ReduceMin/ArgMax/ArgMin/Hardmax (ORT's answer depends on where the NaN is), constant slices
in MeanVarianceNormalization (ORT omits the spec's epsilon and returns NaN), TopK ``sorted=0`` order.
"""
from __future__ import annotations

import numpy as np
import onnx.defs
import pytest
from helpers import assert_close, check_infer, run_ort, single_op_model

import converter_lite.ops  # noqa: F401  (registers the op table)
from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ops.reduce import REDUCERS
from converter_lite.ops.registry import OPS, KernelError, OpKind, evaluate, infer_types

F16, F32, F64 = np.float16, np.float32, np.float64
FLOATS = (F32, F16, F64)
TOL = {np.dtype(F16): (5e-3, 5e-3), np.dtype(F32): (2e-5, 1e-5), np.dtype(F64): (1e-12, 1e-12)}
SPECIALS = np.array([[np.nan, 1, 2, 3], [np.inf, 1, 2, 3], [-np.inf, 1, 2, 3], [np.inf, -np.inf, 0, 1],
                     [-np.inf, -np.inf, -np.inf, -np.inf], [np.inf, np.inf, 1, 1]])


# -- the oracle check (twin of tests/ops/test_elementwise.py's) ---------------------------------------------
def check(op, inputs: dict, n_outputs=1, opset=21, const=(), tol=None, **attrs):
    """Kernel == onnxruntime (dtype, shape, values; ORT on float32 inputs where it lacks the dtype) and
    infer_types == the kernel's output types."""
    ours = evaluate(op, attrs, list(inputs.values()), n_outputs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    fallback = False
    try:
        theirs = run_ort(single_op_model(op, inputs, n_outputs, opset, const, **attrs), feeds)
    except Exception as e:  # ORT raises its own exception types
        if "NOT_IMPLEMENTED" not in str(e):
            raise
        fallback = True
        cast = {k: (v.astype(F32) if k not in const and v is not None else v) for k, v in inputs.items()}
        theirs = run_ort(single_op_model(op, cast, n_outputs, opset, const, **attrs),
                         {k: v for k, v in cast.items() if v is not None})
    for i, (a, e) in enumerate(zip(ours, theirs)):
        e = e.astype(a.dtype) if fallback else e
        rtol, atol = tol or TOL.get(np.dtype(F32) if fallback and a.dtype == F64 else a.dtype, (0, 0))
        assert_close(a, e, rtol, atol, what=f"{op} output {i}")
    check_infer(op, inputs, const, attrs, ours)
    return ours



def allowed(op, dtype, opset=21) -> bool:
    name = {"float32": "float", "float64": "double"}.get(np.dtype(dtype).name, np.dtype(dtype).name)
    return f"tensor({name})" in onnx.defs.get_schema(op, opset).type_constraints[0].allowed_type_strs


def data(rng, shape, dtype, lo=-5.0, hi=5.0):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return np.asarray(rng.integers(int(np.ceil(max(lo, np.iinfo(dtype).min))), int(hi) + 1, size=shape), dtype)
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype)


# -- Reduce* ---------------------------------------------------------------------------------------------------
# (shape, axes or None); None = the axes input is omitted
REDUCE_CASES = [((2, 3, 4), None), ((2, 3, 4), [1]), ((2, 3, 4), [-1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-3, -1]),
                ((7, 13), [0]), ((7, 13), [1]), ((), None), ((5,), [0]), ((1, 1, 5), [0, 1]), ((2, 0, 3), [1]),
                ((2, 0, 3), [0]), ((2, 0, 3), None)]
RANGE = {"ReduceProd": (-2, 2), "ReduceLogSum": (0.5, 5), "ReduceSumSquare": (-10, 10), "ReduceL2": (-10, 10)}


def _reduce_cases():
    for op in REDUCERS:
        for dtype in FLOATS + (np.int32, np.int64, np.uint8):
            if allowed(op, dtype):
                yield pytest.param(op, dtype, id=f"{op}-{np.dtype(dtype).name}")


def _reduce(op, x, axes, **attrs):
    inputs = {"x": x} if axes is None else {"x": x, "axes": np.array(axes, np.int64)}
    return check(op, inputs, const=("axes",), **attrs)


@pytest.mark.parametrize("op,dtype", list(_reduce_cases()))
def test_reduce(op, dtype, rng):
    lo, hi = RANGE.get(op, (-10, 10))
    if np.dtype(dtype).kind == "u":
        lo = 0
    for shape, axes in REDUCE_CASES:
        x = data(rng, shape, dtype, lo, hi)
        for keepdims in (1, 0):
            _reduce(op, x, axes, keepdims=keepdims)
    x = data(rng, (3, 4), dtype, lo, hi)
    for noop in (0, 1):   # no axes / empty axes: everything, or nothing (the per-element part still applies)
        _reduce(op, x, None, noop_with_empty_axes=noop)
        _reduce(op, x, [], noop_with_empty_axes=noop, keepdims=0)


@pytest.mark.parametrize("op", [op for op in REDUCERS if op not in ("ReduceMax", "ReduceMin")])
def test_reduce_nan_inf(op):
    for dtype in FLOATS:
        for axes in ([1], [0]):
            _reduce(op, SPECIALS.astype(dtype), axes)


@pytest.mark.parametrize("op,fn", [("ReduceMax", np.max), ("ReduceMin", np.min)])
def test_reduce_max_min_nan_inf(op, fn):
    finite = SPECIALS[1:]   # infinities: compared with onnxruntime
    for dtype in FLOATS:
        _reduce(op, finite.astype(dtype), [1])
        _reduce(op, finite.astype(dtype), [0])
    # NaN propagates (onnxruntime keeps a NaN only when it comes first)
    out = evaluate(op, {"keepdims": 0}, [SPECIALS.astype(F32), np.array([1])])[0]
    assert_close(out, fn(SPECIALS.astype(F32), axis=1))
    assert np.isnan(out[0])


def test_reduce_bool_max_min():
    x = np.array([[True, False, False], [False, False, False]])
    assert evaluate("ReduceMax", {"keepdims": 0}, [x, np.array([1])])[0].tolist() == [True, False]
    assert evaluate("ReduceMin", {"keepdims": 0}, [x, None])[0].tolist() is False


def test_reduce_mean_int_truncates():
    x = np.array([[-1, -2, -4], [1, 2, 4]], np.int32)
    assert _reduce("ReduceMean", x, [1], keepdims=0)[0].tolist() == [-2, 2]


def test_reduce_rejects_bad_axes():
    with pytest.raises(KernelError):
        evaluate("ReduceSum", {}, [np.ones((2, 3), F32), np.array([2])])
    with pytest.raises(KernelError):
        evaluate("ReduceSum", {}, [np.ones((2, 3), F32), np.array([1, -1])])


def test_reduce_needs_constant_axes():
    node = Node("ReduceSum", [Value("x", TensorType(1, (2, 3))), Value("axes", TensorType(7, (1,)))], [Value("y")])
    with pytest.raises(KernelError, match="run time"):    # a DynamicShapeError: the importer runs it unfused
        infer_types(node)


# -- ArgMax / ArgMin -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", FLOATS + (np.int32, np.int64, np.uint8))
def test_arg(op, dtype, rng):
    for shape, axis in [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1), ((7, 13), 1), ((5,), 0), ((1, 6), 0),
                        ((2, 0, 3), 2)]:
        x = data(rng, shape, dtype, 0, 3)   # few distinct values: many ties
        for keepdims in (1, 0):
            for last in (0, 1):
                check(op, {"x": x}, axis=axis, keepdims=keepdims, select_last_index=last)
    if np.dtype(dtype).kind == "f":
        check(op, {"x": SPECIALS[1:].astype(dtype)}, axis=1)


def test_arg_nan_wins_and_empty_axis_fails():
    x = np.array([[1, np.nan, 4, np.nan], [3, np.inf, 2, 2]], F32)
    assert evaluate("ArgMax", {"axis": 1, "keepdims": 0}, [x])[0].tolist() == [1, 1]
    assert evaluate("ArgMin", {"axis": 1, "keepdims": 0, "select_last_index": 1}, [x])[0].tolist() == [3, 3]
    with pytest.raises(KernelError):
        evaluate("ArgMax", {"axis": 1}, [np.zeros((2, 0), F32)])


# -- Softmax family ----------------------------------------------------------------------------------------
SOFTMAX_CASES = [((2, 3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), 1), ((7, 13), -1), ((5,), 0), ((1, 1), -1),
                 ((0, 3), 1), ((0, 3), 0)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_family(op, dtype, rng):
    for shape, axis in SOFTMAX_CASES:
        x = data(rng, shape, dtype, -10, 10)
        if op == "Hardmax":
            x = np.asarray(np.round(x / 5), dtype)   # ties: the first maximum wins
        check(op, {"x": x}, axis=axis)
        if axis == -1:
            check(op, {"x": x})
    x = SPECIALS.astype(dtype)
    if op == "Hardmax":
        x = x[1:]
    elif op == "LogSoftmax" and dtype == F64:   # ORT's float64 kernel gives [nan,-inf,-inf,-inf] for [inf,1,2,3]
        x = x[~np.isposinf(x).any(axis=1)]       # (its float32 kernel, like ours, gives NaN everywhere)
    check(op, {"x": x}, axis=1)


def test_softmax_large_values_are_stable():
    x = np.array([[1000, 1001, 1002], [-1000, -1001, -1002]], F32)
    check("Softmax", {"x": x})
    check("LogSoftmax", {"x": x})


@pytest.mark.parametrize("dtype", FLOATS)
def test_lp_normalization(dtype, rng):
    for shape, axis in [((2, 3, 4), -1), ((2, 3, 4), 1), ((7, 13), 0), ((5,), 0), ((0, 3), 1)]:
        x = data(rng, shape, dtype)
        for p in (1, 2):
            check("LpNormalization", {"x": x}, axis=axis, p=p)
    check("LpNormalization", {"x": np.array([[0, 0], [3, -4]], dtype)}, axis=1)   # zero rows stay zero
    check("LpNormalization", {"x": np.array([[0, 0], [3, -4]], dtype)}, axis=1, p=1)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mean_variance_normalization(dtype, rng):
    check("MeanVarianceNormalization", {"x": data(rng, (2, 3, 4, 5), dtype)})
    for shape, axes in [((2, 3, 4, 5), (1,)), ((2, 3, 4), (0, 2)), ((7, 13), (1,)), ((3, 5), (-1,))]:
        check("MeanVarianceNormalization", {"x": data(rng, shape, dtype)}, axes=axes)
    # constant slices: (x - mean) / (0 + 1e-9) = 0 per the ONNX function (ORT returns NaN)
    out = evaluate("MeanVarianceNormalization", {"axes": (1,)}, [np.full((2, 4), 0.1, dtype)])[0]
    assert out.dtype == dtype and not out.any()


# -- CumSum ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + (np.int32, np.int64, np.uint32))
def test_cum_sum(dtype, rng):
    if not allowed("CumSum", dtype):
        pytest.skip(f"ONNX CumSum does not take {np.dtype(dtype).name}")
    for shape, axis in [((2, 3, 4), 0), ((2, 3, 4), -1), ((7, 13), 1), ((5,), 0), ((0, 3), 1), ((2, 0), 1)]:
        x = data(rng, shape, dtype, 0 if np.dtype(dtype).kind == "u" else -10, 10)
        for ax in (np.array(axis, np.int64), np.array([axis], np.int32)):
            for exclusive in (0, 1):
                for reverse in (0, 1):
                    check("CumSum", {"x": x, "axis": ax}, const=("axis",), exclusive=exclusive, reverse=reverse)
    if np.dtype(dtype).kind == "f":
        check("CumSum", {"x": SPECIALS.astype(dtype), "axis": np.array(1)}, const=("axis",), exclusive=1)


# -- TopK ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + (np.int32, np.int64, np.uint8))
def test_top_k(dtype, rng):
    for shape, axis, ks in [((2, 3, 7), -1, (0, 1, 3, 7)), ((2, 3, 7), 1, (2,)), ((7, 13), 0, (4,)),
                            ((13,), 0, (5, 13)), ((0, 4), 1, (2,)), ((3, 0), 1, (0,))]:
        x = data(rng, shape, dtype, 0, 4)   # many ties: the lower index comes first
        for k in ks:
            for largest in (1, 0):
                check("TopK", {"x": x, "k": np.array([k], np.int64)}, 2, const=("k",), axis=axis, largest=largest)
    x = SPECIALS[:, 1:].astype(dtype) if np.dtype(dtype).kind == "f" else data(rng, (3, 5), dtype, 0, 100)
    check("TopK", {"x": x, "k": np.array([2], np.int64)}, 2, const=("k",))


def test_top_k_nan_is_largest():
    x = np.array([[1, np.nan, 3, 3, 2]], F32)
    _, idx = check("TopK", {"x": x, "k": np.array([3], np.int64)}, 2, const=("k",))
    assert idx.tolist() == [[1, 2, 3]]


def test_top_k_unsorted_returns_the_same_set(rng):
    x = np.stack([rng.permutation(11) for _ in range(4)]).astype(F32)
    inputs = {"x": x, "k": np.array([4], np.int64)}
    ours = evaluate("TopK", {"sorted": 0}, list(inputs.values()), 2)
    theirs = run_ort(single_op_model("TopK", inputs, 2, const_inputs=("k",), sorted=0), {"x": x})
    for a, e in zip(ours, theirs):
        assert_close(np.sort(a, axis=-1), np.sort(e, axis=-1))


def test_top_k_rejects_bad_k():
    with pytest.raises(KernelError):
        evaluate("TopK", {}, [np.ones((2, 3), F32), np.array([4])], 2)


# -- the table itself --------------------------------------------------------------------------------------------
COMPOSITES = ["Softmax", "LogSoftmax", "Hardmax", "LpNormalization", "MeanVarianceNormalization", "CumSum", "TopK"]


@pytest.mark.parametrize("op", list(REDUCERS) + ["ArgMax", "ArgMin"] + COMPOSITES)
def test_registered_with_kind_and_infer(op):
    assert OPS[op].infer is not None
    assert OPS[op].kind == (OpKind.OPAQUE if op in COMPOSITES else OpKind.REDUCE)
