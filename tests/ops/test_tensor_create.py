"""Shape/creation ops (tensor_create.py) and padding ops (tensor_pad.py) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import DTYPES, check, check_rejects, data, i64, ours

from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import KernelError


# -- Shape / Size ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (0, 5), (7,)])
@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-1, None), (0, -1), (-10, 10), (2, 1), (5, 7)])
def test_shape(shape, start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    check("Shape", {"x": data(shape)}, **attrs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (0, 5)])
def test_size(shape, dtype):
    check("Size", {"x": data(shape, dtype)})


# -- ConstantOfShape -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (5,)])
@pytest.mark.parametrize("value", [None, np.array([1.5], np.float32), np.array([7], np.int64),
                                   np.array([True]), np.array([2.5], np.float16), np.array([-3], np.int32)])
def test_constant_of_shape(shape, value):
    attrs = {} if value is None else {"value": value}
    check("ConstantOfShape", {"s": np.array(shape, np.int64)}, const=("s",), **attrs)


def test_constant_of_shape_rejects_negative_dims():
    check_rejects("ConstantOfShape", {"s": i64(2, -1)}, const=("s",))


# -- Range -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.float64])
@pytest.mark.parametrize("start,limit,delta", [(0, 10, 3), (10, 0, -2), (1, 1, 1), (5, 0, 1), (-3, 4, 2),
                                               (0.5, 3.2, 0.3), (0, 1, 0.1)])
def test_range(start, limit, delta, dtype):
    if np.dtype(dtype).kind == "i" and any(v != int(v) for v in (start, limit, delta)):
        pytest.skip("fractional range for an integer type")
    inputs = {k: np.array(v, dtype) for k, v in (("s", start), ("l", limit), ("d", delta))}
    check("Range", inputs, const=("s", "l", "d"))


def test_range_rejects_zero_delta():
    check_rejects("Range", {"s": i64(0)[0], "l": i64(3)[0], "d": i64(0)[0]}, const=("s", "l", "d"))


# -- EyeLike ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])   # onnxruntime has no bool EyeLike
@pytest.mark.parametrize("shape,k", [((3, 3), 0), ((3, 5), 1), ((4, 2), -1), ((3, 3), 5), ((0, 3), 0)])
def test_eye_like(shape, k, dtype):
    check("EyeLike", {"x": data(shape, np.float32)}, k=k, dtype=int(DType.from_np(dtype)))
    check("EyeLike", {"x": data(shape, dtype)}, k=k)


# -- Pad -------------------------------------------------------------------------------------------------------
PADS = [((3, 4), (1, 2, 0, 1), None), ((3, 4), (0, 0, 2, 3), None), ((2, 3, 4), (1, 2), (-1,)),
        ((2, 3, 4), (1, 0, 1, 2), (0, -1)), ((4, 5), (-1, 0, 0, -2), None), ((3, 4), (0, 0, 0, 0), None),
        ((1, 3, 4, 4), (0, 0, 1, 1, 0, 0, 1, 1), None)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("shape,pads,axes", PADS)
def test_pad(shape, pads, axes, mode, dtype):
    if mode != "constant" and min(pads) < 0:
        pytest.skip("negative pads are only compared in constant mode")
    cv = None if mode != "constant" else np.array(True if dtype == np.bool_ else 3, dtype)
    inputs = {"x": data(shape, dtype), "p": i64(*pads), "c": cv, "a": None if axes is None else i64(*axes)}
    check("Pad", inputs, const=("p", "a"), mode=mode)


@pytest.mark.parametrize("shape,pads", [((3, 4), (1, 1, 1, 1)), ((0, 2), (1, 0, 1, 0)), ((2, 3), (-2, 0, 0, 0))])
def test_pad_constant_default_value(shape, pads):
    check("Pad", {"x": data(shape), "p": i64(*pads)}, const=("p",))


def test_pad_rejects():
    check_rejects("Pad", {"x": data((3, 4)), "p": i64(1, 2, 3)}, const=("p",))
    check_rejects("Pad", {"x": data((3, 4)), "p": i64(-4, 0, 0, 0)}, const=("p",))
    check_rejects("Pad", {"x": data((3, 4)), "p": i64(1, 0, 0, 0)}, const=("p",), mode="mirror")
    with pytest.raises(KernelError, match="empty axis"):
        ours("Pad", {"x": data((0, 4)), "p": i64(1, 0, 0, 0)}, mode="edge")


# -- CenterCropPad ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,target,axes", [((5, 6), (3, 4), None), ((5, 6), (8, 9), None),
                                               ((5, 6), (2, 10), None), ((2, 5, 6, 3), (4, 4), (1, 2)),
                                               ((2, 5, 6, 3), (7,), (-2,)), ((4, 4), (4, 0), None)])
def test_center_crop_pad(shape, target, axes, dtype):
    attrs = {} if axes is None else {"axes": list(axes)}
    check("CenterCropPad", {"x": data(shape, dtype), "s": i64(*target)}, const=("s",), **attrs)
