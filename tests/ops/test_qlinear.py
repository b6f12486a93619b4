"""QLinearMatMul, ConvInteger, QLinearConv (qlinear.py) against onnxruntime.

Requantized outputs may differ from onnxruntime's by one step where x.5 ties meet float rounding: they are
compared to within 1 (and must be exact for at least 99% of the elements).
"""
from __future__ import annotations

import numpy as np
import pytest
from helpers import OPSET, run_ort, single_op_model
from test_tensor_harness import check, check_infer, ours


def q(shape, dtype, seed):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, size=shape).astype(dtype)


def check_requantized(op, inputs: dict, const=(), opset=OPSET, **attrs):
    inputs = {k: None if v is None else np.asarray(v) for k, v in inputs.items()}
    expected = run_ort(single_op_model(op, inputs, const_inputs=const, opset=opset, **attrs),
                       {k: v for k, v in inputs.items() if v is not None})[0]
    got = ours(op, inputs, **attrs)
    assert got[0].dtype == expected.dtype and got[0].shape == expected.shape
    diff = np.abs(got[0].astype(np.int64) - expected.astype(np.int64))
    assert diff.max(initial=0) <= 1 and (diff == 0).mean() >= 0.99 if diff.size else True
    check_infer(op, inputs, got, const, **attrs)


@pytest.mark.parametrize("adt,bdt", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("ashape,bshape,per_axis", [((4, 6), (6, 5), False), ((2, 3, 6), (6, 4), False),
                                                     ((4, 6), (6, 5), True)])
def test_qlinear_matmul(ashape, bshape, per_axis, adt, bdt):
    n = bshape[-1]
    inputs = {"a": q(ashape, adt, 0), "as": np.float32(0.02), "az": q((), adt, 1) // 4,
              "b": q(bshape, bdt, 2), "bs": (np.full(n, 0.03) * np.arange(1, n + 1)).astype(np.float32) if per_axis
              else np.float32(0.03), "bz": q((n,), bdt, 3) // 4 if per_axis else q((), bdt, 3) // 4,
              "ys": np.float32(0.9), "yz": q((), adt, 4)}
    check_requantized("QLinearMatMul", inputs, opset=20)   # onnxruntime registers int8 kernels up to 20 only


@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, {"group": 2, "dilations": [2, 1]},
                                   {"auto_pad": "SAME_UPPER"}])
def test_conv_integer(attrs, xdt, wdt):
    x, w = q((2, 4, 7, 6), xdt, 0), q((6, 4 // attrs.get("group", 1), 3, 3), wdt, 1)
    check("ConvInteger", {"x": x, "w": w, "xz": q((), xdt, 2), "wz": q((), wdt, 3)}, **attrs)
    check("ConvInteger", {"x": x, "w": w}, **attrs)


@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("per_channel,bias", [(False, False), (True, True)])
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 0, 1, 2], "strides": [1, 2]}, {"group": 2}])
def test_qlinear_conv(attrs, per_channel, bias, xdt, wdt):
    m = 6
    x, w = q((1, 4, 6, 7), xdt, 0), q((m, 4 // attrs.get("group", 1), 3, 3), wdt, 1)
    rng = np.random.default_rng(5)
    inputs = {"x": x, "xs": np.float32(0.05), "xz": q((), xdt, 2) // 2, "w": w,
              "ws": (rng.random(m) * 0.02 + 0.005).astype(np.float32) if per_channel else np.float32(0.01),
              "wz": np.zeros(m, wdt) if per_channel else q((), wdt, 3) // 8,
              "ys": np.float32(0.7), "yz": q((), xdt, 4) // 2,
              "B": rng.integers(-500, 500, size=m).astype(np.int32) if bias else None}
    check_requantized("QLinearConv", inputs, **attrs)
