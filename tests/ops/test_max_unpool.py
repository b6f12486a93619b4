"""MaxUnpool (ops/max_unpool.py) against onnxruntime, fed with MaxPool's own outputs (and arbitrary indices)."""
from __future__ import annotations

import numpy as np
import pytest
from test_nn_oracle import check, check_rejects, check_via_f32, ours, randn


def pooled(rng, shape, dtype=np.float32, **attrs):
    x = randn(rng, *shape, dtype=dtype)
    return ours("MaxPool", {"x": x}, 2, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("shape,attrs", [((1, 1, 4, 4), {"kernel_shape": [2, 2], "strides": [2, 2]}),
                                         ((2, 3, 7, 5), {"kernel_shape": [3, 2], "strides": [2, 1]}),
                                         ((2, 2, 9), {"kernel_shape": [3], "strides": [3]}),
                                         ((1, 2, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
                                         ((1, 2, 5, 5), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                         "pads": [1, 1, 1, 1]})])
def test_max_unpool_inverts_max_pool(rng, dtype, shape, attrs):
    y, idx = pooled(rng, shape, dtype, **attrs)
    (check_via_f32 if dtype == np.float64 else check)("MaxUnpool", {"x": y, "i": idx}, **attrs)  # no f64 in ORT


def test_max_unpool_with_output_shape(rng):
    """The indices address the given (larger) output directly, as onnxruntime does."""
    y, idx = pooled(rng, (1, 2, 5, 5), kernel_shape=[2, 2], strides=[2, 2])
    out = check("MaxUnpool", {"x": y, "i": idx, "s": np.array([1, 2, 5, 5], np.int64)}, const=("s",),
                kernel_shape=[2, 2], strides=[2, 2])[0]
    assert out.shape == (1, 2, 5, 5)


def test_max_unpool_arbitrary_indices(rng):
    x = randn(rng, 2, 1, 2, 2)
    idx = np.array([0, 5, 11, 15, 16, 21, 27, 31], np.int64).reshape(2, 1, 2, 2)
    check("MaxUnpool", {"x": x, "i": idx}, kernel_shape=[2, 2], strides=[2, 2])


def test_max_unpool_rejects(rng):
    x = randn(rng, 1, 1, 2, 2)
    i = np.arange(4, dtype=np.int64).reshape(1, 1, 2, 2)
    check_rejects("MaxUnpool", {"x": x, "i": i[..., :1]}, kernel_shape=[2, 2])
    check_rejects("MaxUnpool", {"x": x, "i": i})                                  # no kernel_shape
    check_rejects("MaxUnpool", {"x": x, "i": i, "s": np.array([1, 2, 4, 4], np.int64)}, const=("s",),
                  kernel_shape=[2, 2])
    with pytest.raises(Exception, match="outside"):
        ours("MaxUnpool", {"x": x, "i": i + 60}, kernel_shape=[2, 2], strides=[2, 2])
