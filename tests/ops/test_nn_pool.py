"""MaxPool, AveragePool, LpPool and the global pools against onnxruntime (and their inference)."""
from __future__ import annotations

import numpy as np
import pytest

from test_nn_oracle import check, check_rejects, check_via_f32, randn

# (X shape, attributes) shared by the three windowed pools
POOL_CASES = [
    ((2, 3, 9, 7), dict(kernel_shape=[3, 2])),
    ((2, 3, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])),
    ((2, 3, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1)),
    ((1, 2, 9, 7), dict(kernel_shape=[3, 3], strides=[2, 3], pads=[1, 1, 1, 1], ceil_mode=1, dilations=[2, 1])),
    ((1, 2, 9, 7), dict(kernel_shape=[2, 3], strides=[3, 2], ceil_mode=1, dilations=[2, 2])),
    ((1, 2, 11, 10), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 2, 2], ceil_mode=1)),  # overhang
    ((1, 2, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad="SAME_UPPER")),
    ((1, 2, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad="SAME_LOWER")),
    ((1, 2, 8, 8), dict(kernel_shape=[4, 4], strides=[1, 1], auto_pad="SAME_LOWER")),
    ((1, 2, 10, 11), dict(kernel_shape=[2, 2], strides=[4, 3], auto_pad="SAME_LOWER")),   # stride > kernel
    ((1, 2, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad="VALID")),
    ((1, 2, 9, 7), dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad="VALID", ceil_mode=1)),
    ((1, 2, 1, 13), dict(kernel_shape=[1, 5], strides=[1, 4])),                       # size-1 dim
    ((3, 2, 17), dict(kernel_shape=[4], strides=[3], pads=[2, 1])),                    # 1-D
    ((1, 2, 17), dict(kernel_shape=[3], dilations=[3], ceil_mode=1, strides=[2])),      # 1-D dilated
    ((1, 2, 5, 6, 7), dict(kernel_shape=[3, 2, 2], strides=[2, 2, 1], pads=[1, 0, 1, 1, 0, 0])),   # 3-D
    ((1, 2, 5, 6, 7), dict(kernel_shape=[2, 2, 3], strides=[2, 2, 2], ceil_mode=1)),  # 3-D ceil
    ((0, 2, 6, 6), dict(kernel_shape=[2, 2])),                                         # empty batch
]


@pytest.mark.parametrize("x_shape,attrs", POOL_CASES)
def test_max_pool_with_indices(rng, x_shape, attrs):
    check("MaxPool", {"x": randn(rng, *x_shape)}, n_outputs=2, **attrs)


@pytest.mark.parametrize("x_shape,attrs", [POOL_CASES[1], POOL_CASES[3]] + [c for c in POOL_CASES if len(c[0]) == 5])
def test_max_pool_column_major_indices(rng, x_shape, attrs):
    check("MaxPool", {"x": randn(rng, *x_shape)}, n_outputs=2, storage_order=1, **attrs)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int8, np.uint8])
def test_max_pool_dtypes(rng, dtype):
    x = (rng.standard_normal((2, 3, 7, 6)) * 50).astype(dtype)
    check("MaxPool", {"x": x}, n_outputs=2, kernel_shape=[3, 2], pads=[1, 1, 1, 0], strides=[2, 1])


def test_max_pool_single_output(rng):
    check("MaxPool", {"x": randn(rng, 1, 2, 6, 5)}, kernel_shape=[2, 2])


@pytest.mark.parametrize("x_shape,attrs", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(rng, x_shape, attrs, count_include_pad):
    check("AveragePool", {"x": randn(rng, *x_shape)}, count_include_pad=count_include_pad, **attrs)


def test_average_pool_float16(rng):
    check("AveragePool", {"x": randn(rng, 2, 3, 7, 6, dtype=np.float16)}, kernel_shape=[3, 3], pads=[1, 1, 1, 1])


def test_average_pool_float64_against_float32_oracle(rng):
    check_via_f32("AveragePool", {"x": randn(rng, 2, 3, 7, 6, dtype=np.float64)}, kernel_shape=[3, 2],
                  ceil_mode=1, strides=[2, 2])


@pytest.mark.parametrize("x_shape,attrs", POOL_CASES)
def test_lp_pool(rng, x_shape, attrs):
    check("LpPool", {"x": randn(rng, *x_shape)}, **attrs)


@pytest.mark.parametrize("p", [1, 3])
def test_lp_pool_p(rng, p):
    check("LpPool", {"x": randn(rng, 1, 3, 7, 6)}, p=p, kernel_shape=[2, 3], strides=[2, 1])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (2, 3, 11), (1, 2, 3, 4, 5), (1, 1, 1, 1), (0, 3, 4, 4)])
def test_global_pools(rng, op, shape):
    check(op, {"x": randn(rng, *shape)})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def test_global_pools_float16(rng, op):
    check(op, {"x": randn(rng, 2, 3, 5, 7, dtype=np.float16)})


def test_global_lp_pool_p(rng):
    check("GlobalLpPool", {"x": randn(rng, 2, 3, 5, 7)}, p=3)


def test_pools_reject_bad_attributes(rng):
    x = randn(rng, 1, 2, 5, 5)
    check_rejects("MaxPool", {"x": x})                                           # kernel_shape missing
    check_rejects("AveragePool", {"x": x}, kernel_shape=[2])                      # wrong rank
    check_rejects("LpPool", {"x": x}, kernel_shape=[7, 7])                        # window > input
    check_rejects("MaxPool", {"x": x}, kernel_shape=[2, 2], strides=[0, 1])       # zero stride
    check_rejects("GlobalAveragePool", {"x": randn(rng, 2, 3)})
