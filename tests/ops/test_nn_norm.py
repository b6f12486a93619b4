"""Normalization kernels and LRN against onnxruntime (and their inference)."""
from __future__ import annotations

import numpy as np
import pytest

from test_nn_oracle import check, check_rejects, check_via_f32, ours, randn

FLOATS = [np.float32, np.float64, np.float16]
SHAPES = [(2, 6, 5, 3), (3, 6), (2, 6, 7), (1, 6, 2, 3, 2), (0, 6, 4, 4)]


def _channel_params(rng, c, dtype):
    return {"scale": randn(rng, c, dtype=dtype), "bias": randn(rng, c, dtype=dtype)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_batch_normalization(rng, dtype, shape):
    c = shape[1]
    mean, var = randn(rng, c, dtype=dtype), (np.abs(randn(rng, c)) + 0.1).astype(dtype)
    check("BatchNormalization", {"x": randn(rng, *shape, dtype=dtype), **_channel_params(rng, c, dtype),
                                 "mean": mean, "var": var}, epsilon=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) > 2])
def test_instance_normalization(rng, dtype, shape):
    check("InstanceNormalization", {"x": randn(rng, *shape, dtype=dtype), **_channel_params(rng, shape[1], dtype)},
          epsilon=1e-4)


def test_instance_normalization_float64_against_float32_oracle(rng):
    check_via_f32("InstanceNormalization", {"x": randn(rng, 2, 3, 5, 4, dtype=np.float64),
                                            **_channel_params(rng, 3, np.float64)})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
def test_layer_normalization(rng, dtype, axis):
    x = randn(rng, 2, 3, 4, 5, dtype=dtype)
    normalized = x.shape[axis % 4:]
    inputs = {"x": x, "scale": randn(rng, *normalized, dtype=dtype), "b": randn(rng, *normalized, dtype=dtype)}
    check("LayerNormalization", inputs, n_outputs=3, axis=axis, epsilon=1e-4)


def test_layer_normalization_broadcast_scale_no_bias_single_output(rng):
    x = randn(rng, 3, 4, 6)
    check("LayerNormalization", {"x": x, "scale": randn(rng, 6)}, axis=-2)
    check("LayerNormalization", {"x": x, "scale": randn(rng, 1, 6)}, n_outputs=3, axis=1)
    check("LayerNormalization", {"x": np.zeros((0, 4, 6), np.float32), "scale": randn(rng, 6)}, n_outputs=3)


def test_layer_normalization_stash_type_0_keeps_x_dtype_for_statistics(rng):
    # onnxruntime's type inference refuses stash_type=0; the IR gives statistics in X's dtype
    x = randn(rng, 2, 5, dtype=np.float64)
    _, mean, inv = ours("LayerNormalization", {"x": x, "s": np.ones(5)}, 3, stash_type=0)
    assert mean.dtype == inv.dtype == np.float64
    np.testing.assert_allclose(mean[:, 0], x.mean(axis=1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 3), 3), ((2, 6, 7), 2), ((1, 6, 4), 6), ((3, 6), 1),
                                          ((1, 4, 2, 3, 2), 2)])
def test_group_normalization(rng, dtype, shape, groups):
    # stash_type=1 normalizes in float32 even for float64 X: float32 tolerance there
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float64 else {}
    check("GroupNormalization", {"x": randn(rng, *shape, dtype=dtype), **_channel_params(rng, shape[1], dtype)},
          num_groups=groups, epsilon=1e-4, **tol)


def test_group_normalization_rejects_indivisible_groups(rng):
    check_rejects("GroupNormalization", {"x": randn(rng, 1, 6, 4), **_channel_params(rng, 6, np.float32)},
                  num_groups=4)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [-1, 1, 2])
def test_rms_normalization(rng, dtype, axis):
    x = randn(rng, 2, 3, 4, 5, dtype=dtype)
    check("RMSNormalization", {"x": x, "scale": randn(rng, *x.shape[axis % 4:], dtype=dtype)}, opset=23,
          axis=axis, epsilon=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,attrs", [
    ((2, 7, 4, 3), dict(size=3)),
    ((2, 7, 4, 3), dict(size=5, alpha=0.1, beta=0.6, bias=2.0)),
    ((1, 3, 5, 1), dict(size=7, alpha=1e-2)),            # window wider than the channels
    ((1, 4, 2, 2), dict(size=1)),
])
def test_lrn(rng, dtype, shape, attrs):
    check("LRN", {"x": randn(rng, *shape, dtype=dtype) * 4}, **attrs)


def _lrn_formula(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    lo = (size - 1) // 2
    sq = np.pad(x * x, [(0, 0), (lo, size - 1 - lo)] + [(0, 0)] * (x.ndim - 2))
    window = sum(sq[:, i:i + x.shape[1]] for i in range(size))
    return x / (bias + alpha / size * window) ** beta


@pytest.mark.parametrize("shape", [(3, 5), (1, 3, 5), (1, 4, 2, 2, 2)])
def test_lrn_other_ranks_follow_the_onnx_formula(rng, shape):
    # onnxruntime's LRN is 4-D only
    x = randn(rng, *shape, dtype=np.float64)
    (got,) = ours("LRN", {"x": x}, size=3, alpha=0.3)
    np.testing.assert_allclose(got, _lrn_formula(x, 3, alpha=float(np.float32(0.3))), rtol=1e-12)


def test_lrn_even_size_follows_the_onnx_formula(rng):
    # onnxruntime only takes odd sizes; ONNX sums channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
    x = randn(rng, 1, 5, 2, dtype=np.float64)
    (got,) = ours("LRN", {"x": x}, size=4, alpha=0.5, beta=0.75, bias=1.0)
    np.testing.assert_allclose(got, _lrn_formula(x, 4, alpha=0.5), rtol=1e-12)


def test_lrn_float64_against_float32_oracle(rng):
    check_via_f32("LRN", {"x": randn(rng, 2, 5, 3, 2, dtype=np.float64)}, size=3, alpha=0.2)
