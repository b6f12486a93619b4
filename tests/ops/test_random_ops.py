"""Random generators (random_ops.py): shapes and dtypes (against onnxruntime), seeded reproducibility,
inference == kernel, and rough distribution checks."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import run_ort, single_op_model
from test_tensor_harness import check_infer, data, ours

from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import OPS

F32, F16, F64 = int(DType.float32), int(DType.float16), int(DType.float64)


def ort_type(op, inputs, out_shape, **attrs):
    """(dtype, shape) of onnxruntime's output; onnxruntime has no float16 generators and onnx.helper cannot
    type an empty ``shape`` attribute, so those cases state the expected type directly."""
    code = attrs.get("dtype") or (int(DType.from_np(inputs["x"].dtype)) if inputs else F32)
    if code == F16 or not out_shape:
        return DType(code).np, tuple(out_shape)
    out = run_ort(single_op_model(op, inputs, **attrs), inputs)[0]
    return out.dtype, out.shape


@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
@pytest.mark.parametrize("shape,dtype", [((2, 3), None), ((4,), F16), ((0, 2), F64), ((), F32)])
def test_random_fixed_shape(op, shape, dtype):
    attrs = {"shape": list(shape), "seed": 3.0} | ({} if dtype is None else {"dtype": dtype})
    a = ours(op, {}, **attrs)
    assert (a[0].dtype, a[0].shape) == ort_type(op, {}, shape, **attrs)
    check_infer(op, {}, a, **attrs)
    np.testing.assert_array_equal(a[0], ours(op, {}, **attrs)[0])     # seeded: reproducible


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike", "Bernoulli"])
@pytest.mark.parametrize("dtype", [None, F16, F64])
@pytest.mark.parametrize("shape", [(3, 4), (0,), ()])
def test_random_like(op, dtype, shape):
    x = np.full(shape, 0.5, np.float32)
    attrs = {"seed": 1.5} | ({} if dtype is None else {"dtype": dtype})
    a = ours(op, {"x": x}, **attrs)
    assert (a[0].dtype, a[0].shape) == ort_type(op, {"x": x}, shape, **attrs)
    check_infer(op, {"x": x}, a, **attrs)
    np.testing.assert_array_equal(a[0], ours(op, {"x": x}, **attrs)[0])


@pytest.mark.parametrize("dtype", [None, int(DType.int64)])
@pytest.mark.parametrize("shape,samples", [((2, 5), 1), ((3, 4), 7), ((0, 3), 2)])
def test_multinomial(shape, samples, dtype):
    attrs = {"sample_size": samples, "seed": 0.0} | ({} if dtype is None else {"dtype": dtype})
    x = data(shape)
    a = ours("Multinomial", {"x": x}, **attrs)
    assert a[0].dtype == (np.int32 if dtype is None else np.int64) and a[0].shape == (shape[0], samples)
    assert ((a[0] >= 0) & (a[0] < shape[1])).all()
    check_infer("Multinomial", {"x": x}, a, **attrs)
    np.testing.assert_array_equal(a[0], ours("Multinomial", {"x": x}, **attrs)[0])


def test_seeds_differ_and_unseeded_runs_differ():
    a = ours("RandomUniform", {}, shape=[64], seed=1.0)[0]
    assert not np.array_equal(a, ours("RandomUniform", {}, shape=[64], seed=2.0)[0])
    assert not np.array_equal(ours("RandomUniform", {}, shape=[64])[0], ours("RandomUniform", {}, shape=[64])[0])
    assert all(not OPS[op].deterministic for op in ("RandomNormal", "RandomUniform", "RandomNormalLike",
                                                    "RandomUniformLike", "Bernoulli", "Multinomial"))


def test_distributions_roughly_right():
    n = ours("RandomNormal", {}, shape=[20000], mean=3.0, scale=2.0, seed=5.0)[0]
    assert abs(n.mean() - 3.0) < 0.1 and abs(n.std() - 2.0) < 0.1
    u = ours("RandomUniform", {}, shape=[20000], low=-1.0, high=3.0, seed=5.0)[0]
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.1
    b = ours("Bernoulli", {"p": np.array([0.0, 1.0, 0.25] * 5000, np.float32)}, seed=5.0)[0]
    assert b[0::3].sum() == 0 and b[1::3].sum() == 5000 and abs(b[2::3].mean() - 0.25) < 0.05
    m = ours("Multinomial", {"x": np.log(np.array([[0.1, 0.0001, 0.9]], np.float32))}, sample_size=5000,
             seed=5.0)[0]
    assert abs((m == 2).mean() - 0.9) < 0.03 and abs((m == 0).mean() - 0.1) < 0.03
