"""NonMaxSuppression and RoiAlign (detection.py) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, data, i64

from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ops.registry import DynamicShapeError, infer_types


def nms_inputs(batches, classes, n, seed=0, center=False):
    rng = np.random.default_rng(seed)
    lo = rng.random((batches, n, 2)) * 10
    size = rng.random((batches, n, 2)) * 4 + 0.5
    if center:
        boxes = np.concatenate([lo[..., ::-1] + size[..., ::-1] / 2, size[..., ::-1]], axis=-1)
    else:   # (y1, x1, y2, x2), some given with flipped corners
        boxes = np.concatenate([lo, lo + size], axis=-1)
        boxes[:, ::3] = boxes[:, ::3][..., [2, 3, 0, 1]]
    scores = rng.permutation(batches * classes * n).reshape(batches, classes, n) / (batches * classes * n)
    return boxes.astype(np.float32), scores.astype(np.float32)


@pytest.mark.parametrize("batches,classes,n", [(1, 1, 10), (2, 3, 12), (1, 2, 0)])
@pytest.mark.parametrize("limit,iou,score", [(3, 0.5, None), (100, 0.3, 0.4), (0, 0.5, None), (5, 0.0, 0.1),
                                             (None, None, None)])
@pytest.mark.parametrize("center", [0, 1])
def test_non_max_suppression(batches, classes, n, limit, iou, score, center):
    boxes, scores = nms_inputs(batches, classes, n, seed=batches + n, center=center)
    inputs = {"b": boxes, "s": scores, "m": None if limit is None else i64(limit),
              "i": None if iou is None else np.array([iou], np.float32),
              "t": None if score is None else np.array([score], np.float32)}
    check("NonMaxSuppression", inputs, const=tuple(inputs), center_point_box=center)


def test_non_max_suppression_needs_constants_for_inference():
    boxes, scores = nms_inputs(1, 1, 4)
    node = Node("NonMaxSuppression", [Value("b", TensorType.of(boxes)), Value("s", const=scores)], [Value("y")])
    with pytest.raises(DynamicShapeError, match="run-time data"):
        infer_types(node)


ROIS = np.array([[0, 0, 5, 5], [1.5, 2.2, 7.9, 6.1], [3, 3, 3.4, 3.2], [-2, -1, 4, 12], [6, 6, 2, 2]], np.float32)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("oh,ow,ratio,scale", [(1, 1, 0, 1.0), (3, 2, 2, 1.0), (2, 4, 0, 0.5), (4, 4, 1, 2.0)])
def test_roi_align(mode, ctm, oh, ow, ratio, scale):
    x = data((2, 3, 8, 9)) / 10
    inputs = {"x": x, "r": ROIS, "b": i64(0, 1, 1, 0, 1)}
    check("RoiAlign", inputs, rtol=1e-4, atol=1e-5, mode=mode, coordinate_transformation_mode=ctm,
          output_height=oh, output_width=ow, sampling_ratio=ratio, spatial_scale=scale)


def test_roi_align_rejects_bad_rois():
    check_rejects("RoiAlign", {"x": data((1, 2, 4, 4)), "r": ROIS[:, :3], "b": i64(0, 0, 0, 0, 0)})
