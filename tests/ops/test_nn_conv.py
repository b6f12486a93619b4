"""Conv, ConvTranspose and Col2Im reference kernels against onnxruntime (and their inference)."""
from __future__ import annotations

import numpy as np
import pytest

from converter_lite.ops.nn_window import resolve_window
from test_nn_oracle import check, check_rejects, check_via_f32, ours, randn

# (X shape, W shape, attributes)
CONV_CASES = [
    ((2, 3, 9, 7), (4, 3, 3, 3), {}),
    ((1, 4, 11, 13), (6, 2, 3, 2), dict(group=2, strides=[2, 3], dilations=[2, 1], pads=[1, 0, 2, 3])),
    ((2, 6, 7, 5), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),            # depthwise
    ((2, 6, 7, 5), (12, 1, 3, 3), dict(group=6, strides=[2, 2])),              # depthwise, multiplier 2
    ((1, 5, 8, 8), (7, 5, 1, 1), {}),                                          # 1x1
    ((2, 16, 7, 6), (8, 16, 3, 3), dict(pads=[1, 1, 1, 1])),                   # wide: tap-by-tap path
    ((1, 16, 9, 8), (6, 8, 2, 3), dict(group=2, dilations=[2, 1], strides=[1, 2])),
    ((1, 16, 5, 6), (16, 16, 1, 1), {}),
    ((1, 3, 5, 5), (2, 3, 5, 5), {}),                                          # kernel == input
    ((1, 2, 1, 9), (3, 2, 1, 3), dict(strides=[1, 2])),                         # size-1 dim
    ((3, 2, 17), (5, 2, 4), dict(strides=[3], pads=[2, 1])),                    # 1-D
    ((1, 2, 23), (4, 1, 5), dict(group=2, dilations=[3], auto_pad="VALID")),     # 1-D grouped dilated
    ((1, 2, 5, 6, 7), (3, 2, 3, 2, 3), dict(strides=[1, 2, 2], pads=[1, 0, 1, 1, 1, 0])),   # 3-D
    ((1, 4, 4, 5, 3), (4, 2, 2, 2, 2), dict(group=2, dilations=[2, 2, 1])),      # 3-D grouped dilated
    ((1, 3, 10, 10), (2, 3, 2, 2), dict(strides=[4, 3])),                       # stride > kernel
    ((1, 3, 10, 11), (2, 3, 2, 2), dict(strides=[4, 3], auto_pad="SAME_UPPER")),  # ... and no SAME padding
    ((2, 3, 9, 7), (4, 3, 3, 2), dict(auto_pad="SAME_UPPER", strides=[2, 3])),
    ((2, 3, 9, 7), (4, 3, 3, 2), dict(auto_pad="SAME_LOWER", strides=[2, 3])),
    ((2, 3, 8, 6), (4, 3, 4, 3), dict(auto_pad="SAME_LOWER", strides=[1, 1])),
    ((2, 3, 9, 7), (4, 3, 3, 2), dict(auto_pad="VALID", strides=[2, 2])),
    ((1, 3, 6, 6), (2, 3, 3, 3), dict(kernel_shape=[3, 3], pads=[0, 2, 1, 0])),  # explicit kernel_shape
    ((0, 3, 6, 6), (2, 3, 3, 3), {}),                                          # empty batch
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES)
def test_conv(rng, x_shape, w_shape, attrs):
    x, w = randn(rng, *x_shape), randn(rng, *w_shape)
    check("Conv", {"x": x, "w": w}, **attrs)


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES[:4] + CONV_CASES[7:10])
def test_conv_with_bias(rng, x_shape, w_shape, attrs):
    x, w, b = randn(rng, *x_shape), randn(rng, *w_shape), randn(rng, w_shape[0])
    check("Conv", {"x": x, "w": w, "b": b}, **attrs)


def test_conv_float16(rng):
    x, w, b = randn(rng, 2, 4, 9, 8, dtype=np.float16), randn(rng, 6, 2, 3, 3, dtype=np.float16), \
        randn(rng, 6, dtype=np.float16)
    check("Conv", {"x": x, "w": w, "b": b}, group=2, pads=[1, 0, 1, 2], strides=[2, 1])


def test_conv_float64_against_float32_oracle(rng):
    # onnxruntime has no float64 Conv on CPU
    x, w = randn(rng, 2, 3, 9, 7, dtype=np.float64), randn(rng, 4, 3, 3, 3, dtype=np.float64)
    check_via_f32("Conv", {"x": x, "w": w}, strides=[2, 1], pads=[1, 1, 0, 1])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_same_with_dilation_equals_explicit_pads(rng, auto_pad):
    # onnxruntime refuses SAME_* with dilations; the ONNX rule gives these explicit pads
    x, w = randn(rng, 1, 2, 9, 8), randn(rng, 3, 2, 3, 2)
    attrs = dict(strides=[2, 1], dilations=[2, 3])
    win = resolve_window("Conv", dict(attrs, auto_pad=auto_pad), (9, 8), (3, 2))
    assert win.out == (5, 8)
    pads = list(win.pads_begin + win.pads_end)
    explicit = check("Conv", {"x": x, "w": w}, pads=pads, **attrs)[0]
    np.testing.assert_array_equal(ours("Conv", {"x": x, "w": w}, auto_pad=auto_pad, **attrs)[0], explicit)


def test_conv_rejects_bad_shapes(rng):
    check_rejects("Conv", {"x": randn(rng, 1, 4, 5, 5), "w": randn(rng, 2, 3, 3, 3)})             # channels
    check_rejects("Conv", {"x": randn(rng, 1, 4, 5, 5), "w": randn(rng, 3, 2, 3, 3)}, group=2)    # M % group
    check_rejects("Conv", {"x": randn(rng, 1, 2, 2, 2), "w": randn(rng, 1, 2, 3, 3)})             # kernel > input
    check_rejects("Conv", {"x": randn(rng, 1, 2, 5, 5), "w": randn(rng, 1, 2, 3, 3)}, auto_pad="BOGUS")


CONV_TRANSPOSE_CASES = [
    ((2, 3, 5, 4), (3, 2, 3, 3), {}),
    ((1, 4, 5, 6), (4, 3, 3, 2), dict(group=2, strides=[2, 3], dilations=[2, 1], pads=[1, 0, 2, 1])),
    ((1, 4, 5, 6), (4, 1, 3, 3), dict(group=4, strides=[2, 2], output_padding=[1, 1])),     # depthwise
    ((1, 2, 4, 4), (2, 3, 2, 2), dict(strides=[2, 2])),                                     # k == s
    ((2, 3, 7), (3, 2, 4), dict(strides=[3], pads=[1, 2], output_padding=[2])),             # 1-D
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), dict(strides=[2, 1, 2], pads=[0, 1, 1, 1, 0, 0])),   # 3-D
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], auto_pad="SAME_UPPER")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], auto_pad="SAME_LOWER")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[3, 2], dilations=[1, 2], auto_pad="SAME_UPPER")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[3, 2], dilations=[1, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], auto_pad="VALID")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], output_shape=[18, 17])),              # odd total pads
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], output_shape=[18, 17], auto_pad="SAME_UPPER")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], output_shape=[18, 17], auto_pad="SAME_LOWER")),
    ((1, 2, 9, 7), (2, 2, 3, 2), dict(strides=[2, 3], output_shape=[20, 22])),              # larger than full
    ((0, 2, 4, 4), (2, 3, 3, 3), {}),                                                      # empty batch
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_TRANSPOSE_CASES)
def test_conv_transpose(rng, x_shape, w_shape, attrs):
    x, w = randn(rng, *x_shape), randn(rng, *w_shape)
    check("ConvTranspose", {"x": x, "w": w}, **attrs)


def test_conv_transpose_rejects_bad_output_shape(rng):
    x, w = randn(rng, 1, 2, 9, 7), randn(rng, 2, 2, 3, 2)
    check_rejects("ConvTranspose", {"x": x, "w": w}, output_shape=[1, 2, 19, 20])
    check_rejects("ConvTranspose", {"x": x, "w": randn(rng, 3, 2, 3, 2)})          # channels


def test_conv_transpose_with_bias_and_float16(rng):
    x, w = randn(rng, 2, 4, 5, 6), randn(rng, 4, 3, 3, 3)
    b = randn(rng, 6)
    check("ConvTranspose", {"x": x, "w": w, "b": b}, group=2, strides=[2, 1], pads=[1, 0, 0, 1])
    half = {k: v.astype(np.float16) for k, v in dict(x=x, w=w, b=b).items()}
    check("ConvTranspose", half, group=2, strides=[2, 1])


def test_conv_transpose_float64_against_float32_oracle(rng):
    x, w = randn(rng, 1, 3, 5, 4, dtype=np.float64), randn(rng, 3, 2, 3, 3, dtype=np.float64)
    check_via_f32("ConvTranspose", {"x": x, "w": w}, strides=[2, 2], output_padding=[1, 0])


COL2IM_CASES = [
    ((5, 4), (2, 3), {}),
    ((7, 6), (2, 2), dict(strides=[2, 3], pads=[1, 0, 0, 1], dilations=[2, 1])),
    ((6, 6), (3, 3), dict(pads=[1, 1, 1, 1])),
    ((4, 5, 3), (2, 2, 2), dict(strides=[2, 1, 1])),
]


@pytest.mark.parametrize("image,block,attrs", COL2IM_CASES)
def test_col2im(rng, image, block, attrs):
    win = resolve_window("Col2Im", attrs, image, block)
    c = 3
    x = randn(rng, 2, c * int(np.prod(block)), int(np.prod(win.out)))
    check("Col2Im", {"x": x, "image_shape": np.array(image, np.int64), "block_shape": np.array(block, np.int64)},
          const=("image_shape", "block_shape"), opset=18, **attrs)


def test_resolved_windows_are_memoised_by_every_attribute_they_read():
    """resolve_window caches by op, shapes, ceil_mode and strides/dilations/pads/auto_pad: a change in any of
    them gives its own window, list and tuple attributes the same, and bad geometry raises each time."""
    from converter_lite.ops.registry import KernelError
    base = {"strides": [2, 2], "pads": [1, 1, 1, 1]}
    w = resolve_window("Conv", base, (9, 9), (3, 3))
    assert w.out == (5, 5) and resolve_window("Conv", {"strides": (2, 2), "pads": (1, 1, 1, 1)}, (9, 9), (3, 3)) == w
    assert resolve_window("Conv", {**base, "pads": [0, 0, 0, 0]}, (9, 9), (3, 3)).out == (4, 4)
    assert resolve_window("Conv", {**base, "dilations": [2, 2]}, (9, 9), (3, 3)).out == (4, 4)
    assert resolve_window("Conv", {**base, "auto_pad": "SAME_UPPER"}, (9, 9), (3, 3)).pads_begin == (1, 1)
    assert resolve_window("MaxPool", base, (8, 8), (3, 3), ceil_mode=True).out == (5, 5)
    assert resolve_window("MaxPool", base, (8, 8), (3, 3)).out == (4, 4)
    for _ in range(2):
        with pytest.raises(KernelError, match="larger than padded input"):
            resolve_window("Conv", {}, (2, 2), (3, 3))
