"""CumProd (ops/cumprod.py) against onnxruntime (opset 26)."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects

OPSET = 26


def values(shape, dtype, seed=0):
    """Factors near +-1 (so products neither vanish nor overflow quickly), some zeros and negatives."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else -3
        return rng.integers(lo, 4, size=shape).astype(dtype)
    return (rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.5, 1.6, size=shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), -1), ((2, 3, 4), -2),
                                        ((0, 3), 1), ((3, 0), 1)])
def test_cum_prod(dtype, shape, axis):
    x = values(shape, dtype)
    for ax in (np.array(axis, np.int64), np.array([axis], np.int32)):
        for exclusive in (0, 1):
            for reverse in (0, 1):
                check("CumProd", {"x": x, "axis": ax}, const=("axis",), opset=OPSET, rtol=1e-3 if dtype == np.float16
                      else 1e-5, exclusive=exclusive, reverse=reverse)


def test_cum_prod_specials_and_wrap():
    x = np.array([[2.0, np.inf, 0.0, np.nan, 3.0], [-1e30, 1e30, 10.0, -2.0, 0.5]], np.float32)
    check("CumProd", {"x": x, "axis": np.array(1)}, const=("axis",), opset=OPSET)
    big = np.full((1, 70), 3, np.int64)
    check("CumProd", {"x": big, "axis": np.array(1)}, const=("axis",), opset=OPSET)     # wraps like ORT


def test_cum_prod_rejects():
    x = np.ones((2, 3), np.float32)
    check_rejects("CumProd", {"x": x, "axis": np.array(2)}, const=("axis",))
    check_rejects("CumProd", {"x": x, "axis": np.array([0, 1])}, const=("axis",))
    check_rejects("CumProd", {"x": np.float32(1), "axis": np.array(0)}, const=("axis",))
