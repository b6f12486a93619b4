"""DepthToSpace, SpaceToDepth, AffineGrid and GridSample against onnxruntime (and their inference)."""
from __future__ import annotations

import numpy as np
import pytest

from test_nn_oracle import check, check_infer, check_rejects, check_via_f32, ours, randn


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,block", [((2, 8, 3, 5), 2), ((1, 27, 2, 1), 3), ((1, 5, 4, 4), 1),
                                         ((0, 4, 2, 2), 2)])
def test_depth_to_space(rng, mode, shape, block):
    check("DepthToSpace", {"x": randn(rng, *shape)}, blocksize=block, mode=mode)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.uint8])
def test_depth_to_space_dtypes(rng, dtype):
    check("DepthToSpace", {"x": (randn(rng, 1, 8, 2, 3) * 10).astype(dtype)}, blocksize=2)


@pytest.mark.parametrize("dtype", [np.int64, np.bool_])
def test_space_rearrangements_of_other_dtypes_move_the_same_elements(rng, dtype):
    # onnxruntime has no int64/bool kernels for these; the permutation is dtype-independent
    x = np.arange(2 * 8 * 2 * 4).reshape(2, 8, 2, 4)
    for op in ("DepthToSpace", "SpaceToDepth"):
        (ref,) = ours(op, {"x": x.astype(np.float64)}, blocksize=2)
        (got,) = ours(op, {"x": x.astype(dtype)}, blocksize=2)
        np.testing.assert_array_equal(got, ref.astype(dtype))
        check_infer(op, {"x": x.astype(dtype)}, [got], blocksize=2)


@pytest.mark.parametrize("shape,block", [((2, 3, 4, 6), 2), ((1, 2, 9, 3), 3), ((0, 2, 4, 4), 2)])
def test_space_to_depth(rng, shape, block):
    check("SpaceToDepth", {"x": randn(rng, *shape)}, blocksize=block)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_inverts_depth_to_space(rng, mode):
    # SpaceToDepth's mode is opset 28, newer than onnxruntime 1.31: check it as the inverse of DepthToSpace
    x = randn(rng, 2, 12, 3, 5)
    (y,) = ours("DepthToSpace", {"x": x}, blocksize=2, mode=mode)
    (back,) = ours("SpaceToDepth", {"y": y}, blocksize=2, mode=mode)
    np.testing.assert_array_equal(back, x)
    check_infer("SpaceToDepth", {"y": y}, [back], blocksize=2, mode=mode)


def test_space_rearrangements_reject_bad_shapes(rng):
    check_rejects("DepthToSpace", {"x": randn(rng, 1, 6, 2, 2)}, blocksize=2)
    check_rejects("SpaceToDepth", {"x": randn(rng, 1, 2, 5, 4)}, blocksize=2)
    check_rejects("DepthToSpace", {"x": randn(rng, 8, 2, 2)}, blocksize=2)
    check_rejects("DepthToSpace", {"x": randn(rng, 1, 8, 2, 2)}, blocksize=2, mode="XYZ")


@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("size", [(2, 3, 5, 4), (2, 3, 1, 6), (2, 3, 5, 4, 3)])
def test_affine_grid(rng, align_corners, size):
    if align_corners and 1 in size[2:]:
        # linspace(-1, 1, 1): onnxruntime yields 1, the ONNX reference and PyTorch -1 (which we follow)
        (grid,) = ours("AffineGrid", {"theta": np.eye(2, 3, dtype=np.float32)[None].repeat(2, 0),
                                      "size": np.array(size)}, align_corners=1)
        assert np.all(grid[..., 1] == -1)
        return
    r = len(size) - 2
    check("AffineGrid", {"theta": randn(rng, size[0], r, r + 1), "size": np.array(size, np.int64)},
          const=("size",), opset=20, align_corners=align_corners)


def test_affine_grid_float64(rng):
    check("AffineGrid", {"theta": randn(rng, 1, 2, 3, dtype=np.float64), "size": np.array([1, 1, 3, 4])},
          const=("size",), opset=20)


GRID_MODES = ["linear", "nearest", "cubic"]
PADDING = ["zeros", "border", "reflection"]


@pytest.mark.parametrize("mode", GRID_MODES)
@pytest.mark.parametrize("padding_mode", PADDING)
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d(rng, mode, padding_mode, align_corners):
    grid = (rng.random((2, 4, 6, 2)) * 3 - 1.5).astype(np.float32)     # reaches well outside [-1, 1]
    check("GridSample", {"x": randn(rng, 2, 3, 5, 7), "grid": grid}, opset=22, mode=mode,
          padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding_mode", PADDING)
def test_grid_sample_3d(rng, mode, padding_mode):
    grid = (rng.random((2, 4, 3, 2, 3)) * 3 - 1.5).astype(np.float32)
    check("GridSample", {"x": randn(rng, 2, 3, 5, 7, 4), "grid": grid}, opset=22, mode=mode,
          padding_mode=padding_mode)


def test_grid_sample_legacy_mode_names_and_float64(rng):
    x, grid = randn(rng, 1, 2, 4, 5), (rng.random((1, 3, 3, 2)) * 2 - 1).astype(np.float32)
    check("GridSample", {"x": x, "grid": grid}, opset=16, mode="bilinear")
    check("GridSample", {"x": x, "grid": grid}, opset=16, mode="bicubic")
    check_via_f32("GridSample", {"x": x.astype(np.float64), "grid": grid.astype(np.float64)}, opset=22)


def test_grid_sample_float16_and_empty(rng):
    check("GridSample", {"x": randn(rng, 1, 2, 4, 5, dtype=np.float16),
                         "grid": (rng.random((1, 3, 3, 2)) * 2 - 1).astype(np.float16)}, opset=22)
    check("GridSample", {"x": randn(rng, 0, 2, 4, 5), "grid": np.zeros((0, 3, 3, 2), np.float32)}, opset=22)


def test_grid_sample_rejects_mismatched_grid(rng):
    check_rejects("GridSample", {"x": randn(rng, 1, 2, 4, 5), "grid": randn(rng, 1, 3, 3, 3)})
