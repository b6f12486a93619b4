"""SwiGLU (ops/swiglu.py, opset 28) against onnx's reference implementation (onnxruntime has no SwiGLU yet) and
against Swish(A) * B computed by onnxruntime's own Sigmoid/Mul."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, single_op_model, tensor_info
from onnx.reference import ReferenceEvaluator
from test_nn_oracle import TOLERANCE, check_infer, check_rejects, ours


def reference(a, b, **attrs):
    return ReferenceEvaluator(single_op_model("SwiGLU", {"a": a, "b": b}, opset=28, **attrs)).run(
        None, {"a": a, "b": b})[0]


def ort_swish_mul(a, b, alpha):
    nodes = [oh.make_node("Constant", [], ["k"], value_float=alpha), oh.make_node("CastLike", ["k", "a"], ["kt"]),
             oh.make_node("Mul", ["a", "kt"], ["ka"]), oh.make_node("Sigmoid", ["ka"], ["s"]),
             oh.make_node("Mul", ["a", "s"], ["g"]), oh.make_node("Mul", ["g", "b"], ["y"])]
    model = make_model(nodes, [tensor_info("a", a.dtype, a.shape), tensor_info("b", b.dtype, b.shape)],
                       [tensor_info("y", a.dtype, a.shape)])
    return run_ort(model, {"a": a, "b": b})[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 8), (0, 4), ()])
@pytest.mark.parametrize("alpha", [None, 1.702, -0.5])
def test_swiglu(rng, dtype, shape, alpha):
    a, b = np.asarray(rng.standard_normal(shape) * 4, dtype), np.asarray(rng.standard_normal(shape), dtype)
    attrs = {} if alpha is None else {"alpha": alpha}
    got = ours("SwiGLU", {"a": a, "b": b}, **attrs)[0]
    rtol, atol = TOLERANCE[np.dtype(dtype)]
    assert_close(got, reference(a, b, **attrs), rtol=rtol, atol=atol, what="vs onnx reference")
    if dtype != np.float64:                     # onnxruntime's float64 Sigmoid is computed in float32
        assert_close(got, ort_swish_mul(a, b, 1.0 if alpha is None else alpha), rtol=rtol, atol=atol,
                     what="vs onnxruntime Swish * B")
    check_infer("SwiGLU", {"a": a, "b": b}, [got], **attrs)


def test_swiglu_extremes():
    a = np.array([-np.inf, -100, 0, 100, np.inf, np.nan], np.float32)
    y = ours("SwiGLU", {"a": a, "b": np.full(6, 2, np.float32)})[0]
    assert abs(y[1]) < 1e-30 and y[2] == 0 and y[3] == 200 and y[4] == np.inf and np.isnan(y[5])


def test_swiglu_rejects_broadcasting_and_mixed_types():
    check_rejects("SwiGLU", {"a": np.ones((2, 3), np.float32), "b": np.ones((1, 3), np.float32)})
    check_rejects("SwiGLU", {"a": np.ones(3, np.float32), "b": np.ones(3, np.float16)})
