"""Det and the loss ops (converter_lite/ops/losses.py) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, data


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 3, 1, 1), (0, 2, 2), (5, 5)])
def test_det(shape):
    check("Det", {"x": data(shape) / 10}, rtol=1e-4, atol=1e-5)   # onnxruntime: float32 only


def test_det_rejects_non_square():
    check_rejects("Det", {"x": data((2, 3))})


def targets(shape, classes, ignore=None, seed=1):
    t = np.random.default_rng(seed).integers(0, classes, size=shape).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 2), (2, 3, 2, 2)])
@pytest.mark.parametrize("weighted,ignore", [(False, None), (True, None), (True, 2), (False, -1)])
def test_negative_log_likelihood_loss(shape, reduction, weighted, ignore):
    c = shape[1]
    inputs = {"x": data(shape), "t": targets((shape[0],) + shape[2:], c, ignore),
              "w": (np.random.default_rng(3).random(c) + 0.5).astype(np.float32) if weighted else None}
    attrs = {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})
    check("NegativeLogLikelihoodLoss", inputs, rtol=1e-5, atol=1e-5, **attrs)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 2)])
@pytest.mark.parametrize("weighted,ignore", [(False, None), (True, 1), (False, -100)])
def test_softmax_cross_entropy_loss(shape, reduction, weighted, ignore):
    c = shape[1]
    inputs = {"x": data(shape), "t": targets((shape[0],) + shape[2:], c, ignore),
              "w": (np.random.default_rng(3).random(c) + 0.5).astype(np.float32) if weighted else None}
    attrs = {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})
    check("SoftmaxCrossEntropyLoss", inputs, n_outputs=2, rtol=1e-5, atol=1e-5, **attrs)


def test_loss_rejects_shape_mismatch():
    check_rejects("NegativeLogLikelihoodLoss", {"x": data((4, 5)), "t": targets((3,), 5)})
