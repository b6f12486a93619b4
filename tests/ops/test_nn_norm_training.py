"""BatchNormalization with ``training_mode=1`` (ops/nn_norm.py): Y from the batch statistics plus the updated
running mean/variance, against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_nn_oracle import check, ours, randn
from test_tensor_harness import ir_node

from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import infer_dynamic


def bn_inputs(rng, shape, dtype=np.float32, stats=np.float32):
    c = shape[1]
    return {"x": randn(rng, *shape, dtype=dtype) * 3 + 1, "scale": randn(rng, c, dtype=dtype),
            "b": randn(rng, c, dtype=dtype), "mean": randn(rng, c, dtype=stats),
            "var": (rng.random(c) + 0.5).astype(stats)}


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (3, 4, 5, 6), (1, 2, 3, 2, 2)])
@pytest.mark.parametrize("attrs", [{}, {"momentum": 0.5, "epsilon": 1e-2}, {"momentum": 0.0}])
def test_batch_norm_training(rng, shape, attrs):
    check("BatchNormalization", bn_inputs(rng, shape), n_outputs=3, opset=15, training_mode=1, **attrs)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_batch_norm_training_dtypes(rng, dtype):
    check("BatchNormalization", bn_inputs(rng, (2, 3, 4), dtype, dtype), n_outputs=3, opset=15, training_mode=1)


def test_batch_norm_training_float16_with_float32_statistics(rng):
    y, rm, rv = check("BatchNormalization", bn_inputs(rng, (2, 3, 4), np.float16, np.float32), n_outputs=3,
                      opset=15, training_mode=1)
    assert y.dtype == np.float16 and rm.dtype == rv.dtype == np.float32
    node = ir_node("BatchNormalization", bn_inputs(rng, (2, 3, 4), np.float16, np.float32), 3, (), {})
    assert [t.dtype for t in infer_dynamic(node)] == [DType.float16, DType.float32, DType.float32]


def test_batch_norm_training_ignores_the_running_statistics_for_y(rng):
    a = bn_inputs(rng, (4, 2, 3))
    b = a | {"mean": a["mean"] + 100, "var": a["var"] * 9}
    assert np.array_equal(ours("BatchNormalization", a, 3, training_mode=1)[0],
                          ours("BatchNormalization", b, 3, training_mode=1)[0])
