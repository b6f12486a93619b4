"""DeformConv (ops/deform_conv.py) against onnxruntime (2-D, its only rank) and onnx's reference; with zero
offsets and no mask it must equal Conv."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from test_nn_oracle import check, check_rejects, ours, randn


def inputs(rng, n=2, c=4, hw=(6, 5), m=6, group=1, og=1, k=(3, 3), attrs=None, mask=True, bias=True,
           dtype=np.float32, spread=2.0):
    attrs = attrs or {}
    s, d, p = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
    out = [(hw[i] + p[i] + p[i + 2] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(2)]
    taps = k[0] * k[1]
    ins = {"x": randn(rng, n, c, *hw, dtype=dtype), "w": randn(rng, m, c // group, *k, dtype=dtype),
           "offset": (randn(rng, n, og * taps * 2, *out) * spread).astype(dtype),
           "b": randn(rng, m, dtype=dtype) if bias else None,
           "mask": rng.random((n, og * taps, *out)).astype(dtype) if mask else None}
    return ins


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 1, 1, 1]}, {"strides": [2, 2]}, {"dilations": [2, 1]},
                                   {"pads": [0, 2, 1, 0], "strides": [1, 2]}])
@pytest.mark.parametrize("groups", [(1, 1), (2, 1), (1, 2), (2, 4)])
def test_deform_conv(rng, attrs, groups):
    g, og = groups
    check("DeformConv", inputs(rng, group=g, og=og, attrs=attrs), opset=22, group=g, offset_group=og, **attrs)


@pytest.mark.parametrize("mask,bias", [(False, False), (True, False), (False, True)])
def test_deform_conv_optional_inputs(rng, mask, bias):
    check("DeformConv", inputs(rng, mask=mask, bias=bias, k=(2, 3)), opset=22)


def test_deform_conv_far_offsets_sample_zero(rng):
    x = inputs(rng, spread=20.0, n=1, c=2, m=2)
    check("DeformConv", x, opset=22)


def test_deform_conv_float16(rng):
    check("DeformConv", inputs(rng, dtype=np.float16, spread=1.0), opset=22, rtol=2e-2, atol=2e-2)


def test_deform_conv_zero_offsets_is_conv(rng):
    x = inputs(rng, mask=False, group=2, attrs={"pads": [1, 1, 1, 1], "strides": [2, 1]})
    x["offset"][:] = 0
    attrs = {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}
    assert_close(ours("DeformConv", x, **attrs)[0], ours("Conv", {k: x[k] for k in ("x", "w", "b")}, **attrs)[0],
                 rtol=1e-5, atol=1e-5)


def test_deform_conv_1d_and_3d_match_integer_offsets_shift(rng):
    """N-D: an integer offset along one axis equals sampling a shifted input (zeros entering at the edge)."""
    x = randn(rng, 1, 2, 7)
    w = randn(rng, 3, 2, 2)
    off = np.ones((1, 2, 6), np.float32)                  # every tap reads one to the right
    shifted = np.concatenate([x[..., 1:], np.zeros((1, 2, 1), np.float32)], axis=-1)
    assert_close(ours("DeformConv", {"x": x, "w": w, "offset": off})[0], ours("Conv", {"x": shifted, "w": w})[0],
                 rtol=1e-5, atol=1e-5)
    x3 = randn(rng, 1, 1, 3, 4, 4)
    w3 = randn(rng, 2, 1, 2, 2, 2)
    y = ours("DeformConv", {"x": x3, "w": w3, "offset": np.zeros((1, 24, 2, 3, 3), np.float32)})[0]
    assert_close(y, ours("Conv", {"x": x3, "w": w3})[0], rtol=1e-5, atol=1e-5)


def test_deform_conv_rejects(rng):
    x = inputs(rng)
    check_rejects("DeformConv", x | {"offset": x["offset"][:, :10]})
    check_rejects("DeformConv", x | {"mask": x["mask"][:, :, :1]})
    check_rejects("DeformConv", x, group=3)
    check_rejects("DeformConv", x, offset_group=3)
