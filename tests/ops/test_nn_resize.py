"""Resize (opset 19) against onnxruntime (and its inference): every mode x coordinate transformation, nearest
modes, sizes/scales/axes/keep_aspect_ratio_policy, cubic options, tf_crop_and_resize, antialias, dtypes."""
from __future__ import annotations

import numpy as np
import pytest

from test_nn_oracle import check, check_infer, check_rejects, check_via_f32, oracle, ours, randn

CONST = ("roi", "scales", "sizes")
MODES = ["nearest", "linear", "cubic"]
TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]


def f32(*v):
    return np.array(v, np.float32)


def i64(*v):
    return np.array(v, np.int64)


def resize(x, roi=None, scales=None, sizes=None, **attrs):
    inputs = {"x": x, "roi": roi, "scales": scales, "sizes": sizes}
    return check("Resize", inputs, const=CONST, opset=19, **attrs)


# scales chosen so that no source coordinate lands within float rounding of a nearest-rounding tie
# (onnxruntime's half_pixel_symmetric rounds such a case differently from its own linear path)
SCALES = [f32(1, 1, 2, 3), f32(1, 1, 0.5, 0.4), f32(1, 1, 1.7, 0.45), f32(1, 1, 0.2, 1)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("scales", SCALES, ids=["up", "down", "mixed", "one-axis"])
def test_resize_scales(rng, mode, transform, scales):
    resize(randn(rng, 2, 3, 5, 7), scales=scales, mode=mode, coordinate_transformation_mode=transform)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("sizes", [i64(2, 3, 1, 1), i64(2, 3, 9, 4), i64(2, 3, 3, 13)])
def test_resize_sizes(rng, mode, transform, sizes):
    resize(randn(rng, 2, 3, 5, 7), sizes=sizes, mode=mode, coordinate_transformation_mode=transform)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("transform", ["half_pixel", "asymmetric", "align_corners"])
def test_resize_nearest_modes(rng, nearest_mode, transform):
    # scale 2 and 0.5 put half_pixel/asymmetric coordinates exactly on .5 and integer ties
    x = randn(rng, 1, 2, 6, 5)
    for scales in (f32(1, 1, 2, 0.5), f32(1, 1, 1.5, 2.5)):
        resize(x, scales=scales, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=transform)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1, -2]])
def test_resize_axes_and_aspect_policy(rng, mode, policy, axes):
    x = randn(rng, 2, 3, 5, 7)
    if axes[0] >= 0 or policy == "stretch":
        resize(x, sizes=i64(9, 4), axes=axes, mode=mode, keep_aspect_ratio_policy=policy)
        return
    # onnxruntime ignores the policy for negative axes (returns X's shape); ONNX normalizes the axes first
    inputs = {"x": x, "roi": None, "scales": None, "sizes": i64(9, 4)}
    positive = [a % 4 for a in axes]
    want = ours("Resize", inputs, mode=mode, axes=positive, keep_aspect_ratio_policy=policy)
    got = ours("Resize", inputs, mode=mode, axes=axes, keep_aspect_ratio_policy=policy)
    np.testing.assert_array_equal(got[0], want[0])
    check_infer("Resize", inputs, got, const=CONST, mode=mode, axes=axes, keep_aspect_ratio_policy=policy)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_scales_on_some_axes(rng, mode):
    resize(randn(rng, 2, 3, 5, 7), scales=f32(1.5), axes=[2], mode=mode)


@pytest.mark.parametrize("a,exclude", [(-0.5, 1), (-0.75, 1), (-0.5, 0)])
@pytest.mark.parametrize("scales", [f32(1, 1, 2, 3), f32(1, 1, 0.6, 1.3)])
def test_resize_cubic_options(rng, a, exclude, scales):
    resize(randn(rng, 2, 3, 5, 7), scales=scales, mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("roi", [f32(0, 0, 0.1, 0.3, 1, 1, 0.8, 0.9), f32(0, 0, -0.2, 0.3, 1, 1, 1.2, 0.7)],
                         ids=["inside", "outside"])
def test_resize_tf_crop_and_resize(rng, mode, roi):
    x = randn(rng, 2, 3, 5, 7)
    resize(x, roi=roi, scales=f32(1, 1, 2, 0.7), mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
           extrapolation_value=3.0)
    resize(x, roi=roi, sizes=i64(2, 3, 6, 1), mode=mode, coordinate_transformation_mode="tf_crop_and_resize")


def test_resize_tf_crop_and_resize_with_axes(rng):
    resize(randn(rng, 2, 3, 5, 7), roi=f32(0.2, 0.9), sizes=i64(4), axes=[3], mode="linear",
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [f32(1, 1, 0.5, 0.3), f32(1, 1, 0.7, 2), f32(1, 1, 0.33, 0.45)])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("transform", ["half_pixel", "align_corners"])
def test_resize_antialias(rng, mode, scales, exclude, transform):
    resize(randn(rng, 2, 3, 9, 11), scales=scales, mode=mode, antialias=1, exclude_outside=exclude,
           coordinate_transformation_mode=transform)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_other_ranks(rng, mode):
    resize(randn(rng, 3, 7), scales=f32(2, 0.5), mode=mode)                         # 2-D
    resize(randn(rng, 2, 4, 5), sizes=i64(3, 7, 2), mode=mode)                      # 3-D, every axis
    resize(randn(rng, 1, 2, 3, 4, 5), scales=f32(1, 1, 2, 0.5, 1.5), mode=mode)     # 5-D


def test_resize_float16_and_empty_batch(rng):
    resize(randn(rng, 2, 3, 5, 7, dtype=np.float16), scales=f32(1, 1, 1.6, 0.5), mode="linear")
    resize(np.zeros((0, 3, 4, 4), np.float32), scales=f32(1, 1, 2, 2), mode="linear")


@pytest.mark.parametrize("mode", MODES)
def test_resize_float64_against_float32_oracle(rng, mode):
    inputs = {"x": randn(rng, 2, 3, 5, 7, dtype=np.float64), "roi": None, "scales": f32(1, 1, 1.6, 0.6)}
    check_via_f32("Resize", inputs, const=CONST, opset=19, mode=mode)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
@pytest.mark.parametrize("mode,antialias", [("nearest", 0), ("linear", 0), ("linear", 1), ("cubic", 1)])
def test_resize_integers(rng, dtype, mode, antialias):
    if dtype == np.int8 and antialias:
        pytest.skip("onnxruntime clamps int8 antialias results through its uint8 table")
    info = np.iinfo(dtype)
    x = np.clip(rng.standard_normal((2, 3, 9, 7)) * 60 + (100 if info.min == 0 else 0), info.min, info.max)
    inputs = {"x": x.astype(dtype), "roi": None, "scales": f32(1, 1, 0.5, 0.3) if antialias else f32(1, 1, 1.6, 0.5)}
    (expected,) = oracle("Resize", inputs, const=CONST, opset=19, mode=mode, antialias=antialias)
    (got,) = ours("Resize", inputs, mode=mode, antialias=antialias)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    # onnxruntime truncates float sums that may land a rounding error below an integer (and uses fixed-point
    # weights for 8-bit antialias): results agree within one unit
    diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    assert diff.max() <= (0 if mode == "nearest" else 1)
    assert (diff > 0).mean() < 0.3
    check_infer("Resize", inputs, [got], const=CONST, mode=mode, antialias=antialias)


def test_resize_output_sizes_follow_float32_products():
    # floor(in * scale) with the float32 product, like onnxruntime: 3 * 1.3333334f = 4.0000002 -> 4
    x = np.zeros((1, 1, 3, 10), np.float32)
    resize(x, scales=f32(1, 1, 4 / 3, 0.29), mode="nearest")


def test_resize_rejects_bad_inputs(rng):
    x = randn(rng, 1, 1, 4, 4)
    check_rejects("Resize", {"x": x, "roi": None, "scales": None, "sizes": None}, const=CONST)
    check_rejects("Resize", {"x": x, "roi": None, "scales": f32(1, 2)}, const=CONST)          # wrong length
    check_rejects("Resize", {"x": x, "roi": None, "scales": f32(1, 1, 2, 2), "sizes": i64(1, 1, 8, 8)},
                  const=CONST)                                                                 # both given
    check_rejects("Resize", {"x": x, "roi": None, "scales": f32(1, 1, 2, 2)}, const=CONST, mode="area")
