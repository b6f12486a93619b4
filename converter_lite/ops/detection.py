"""Detection ops: NonMaxSuppression (output size depends on the data: inference needs constant inputs) and
RoiAlign (static output ``[num_rois, C, output_height, output_width]``).  Both OPAQUE.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import DynamicShapeError, KernelError, reference


# -- NonMaxSuppression ---------------------------------------------------------------------------------------
def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[..., 4] boxes as (y1, x1, y2, x2) with y1 <= y2, x1 <= x2."""
    b = boxes.astype(np.float64)
    if center_point_box:
        xc, yc, w, h = np.moveaxis(b, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(b, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=-1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    ih = np.clip(np.minimum(box[2], others[:, 2]) - np.maximum(box[0], others[:, 0]), 0, None)
    iw = np.clip(np.minimum(box[3], others[:, 3]) - np.maximum(box[1], others[:, 1]), 0, None)
    inter = ih * iw
    union = area + areas - inter
    with np.errstate(all="ignore"):
        return np.where((area > 0) & (areas > 0) & (union > 0), inter / union, 0.0)


def _scalar(v, default, cast):
    return default if v is None or np.size(v) == 0 else cast(np.asarray(v).reshape(-1)[0])


@reference("NonMaxSuppression", infer=lambda n: _nms_infer(n))
def non_max_suppression(attrs, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                        score_threshold=None):
    """Per batch and class, greedily keeps the highest-scoring boxes (score > score_threshold) whose IoU with
    every kept box is <= iou_threshold, at most max_output_boxes_per_class of them.  Rows of the result are
    (batch, class, box index), in batch, class, then descending-score order."""
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise KernelError(f"NonMaxSuppression: boxes {list(boxes.shape)} / scores {list(scores.shape)} mismatch")
    limit = _scalar(max_output_boxes_per_class, 0, int)
    iou_max = _scalar(iou_threshold, 0.0, float)
    min_score = _scalar(score_threshold, None, float)
    corners = _corners(boxes, attrs.get("center_point_box", 0))
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            cand = np.arange(s.size) if min_score is None else np.flatnonzero(s > min_score)
            cand = cand[np.argsort(-s[cand], kind="stable")]
            kept: list[int] = []
            for i in cand:
                if len(kept) >= limit:
                    break
                if not kept or (_iou(corners[b, i], corners[b, kept]) <= iou_max).all():
                    kept.append(int(i))
            rows += [(b, c, i) for i in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _nms_infer(node):
    if any(v is not None and v.const is None for v in node.inputs):
        raise DynamicShapeError(f"NonMaxSuppression node {node.name!r}: the output shape depends on run-time data")
    out = non_max_suppression(node.attrs, *(None if v is None else v.const for v in node.inputs))
    return [TensorType(DType.int64, out.shape)]


# -- RoiAlign --------------------------------------------------------------------------------------------------
def _check_roi_shapes(x, rois, idx) -> None:
    if len(x) != 4 or len(rois) != 2 or rois[1] != 4 or tuple(idx) != (rois[0],):
        raise KernelError(f"RoiAlign: X {list(x)}, rois {list(rois)}, batch_indices {list(idx)} do not fit")


def _roi_align_type(node) -> TensorType:
    x, rois, idx = (node.inputs[i].type for i in range(3))
    _check_roi_shapes(x.shape, rois.shape, idx.shape)
    oh, ow = node.attrs.get("output_height", 1), node.attrs.get("output_width", 1)
    return TensorType(x.dtype, (rois.shape[0], x.shape[1], oh, ow))


def _samples(start: float, bin_size: float, bins: int, grid: int, limit: int):
    """Bilinear sample positions along one axis: (low index, high index, low weight, high weight, valid),
    each [bins * grid], following onnxruntime's RoiAlign (clamping at the border, 0 beyond [-1, limit])."""
    pos = start + np.repeat(np.arange(bins), grid) * bin_size + (np.tile(np.arange(grid), bins) + 0.5) * bin_size / grid
    valid = (pos >= -1.0) & (pos <= limit)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_end = low >= limit - 1
    low = np.where(at_end, limit - 1, low)
    high = np.where(at_end, limit - 1, low + 1)
    frac = np.where(at_end, 0.0, pos - low)
    return low, high, (1 - frac) * valid, frac * valid


@reference("RoiAlign", infer=lambda n: [_roi_align_type(n)])
def roi_align(attrs, x, rois, batch_indices):
    """Each output bin averages (mode avg) or maxes (mode max, of the weighted corner values, as onnxruntime
    does) a grid of bilinear samples; the grid is ``sampling_ratio`` per side, or ceil(roi size / bins)."""
    mode = attrs.get("mode", "avg")
    half_pixel = attrs.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    oh, ow = attrs.get("output_height", 1), attrs.get("output_width", 1)
    ratio, scale = attrs.get("sampling_ratio", 0), attrs.get("spatial_scale", 1.0)
    if mode not in ("avg", "max"):
        raise KernelError(f"RoiAlign mode {mode!r} is not avg/max")
    _check_roi_shapes(x.shape, rois.shape, np.shape(batch_indices))
    n, c, h, w = x.shape
    out = np.zeros((rois.shape[0], c, oh, ow))
    data = x.astype(np.float64)
    offset = 0.5 if half_pixel else 0.0
    for r, (roi, b) in enumerate(zip(rois.astype(np.float64), np.asarray(batch_indices, np.int64))):
        if not 0 <= b < n:
            raise KernelError(f"RoiAlign batch index {b} is out of range for batch {n}")
        x0, y0, x1, y1 = roi * scale - offset
        rw, rh = x1 - x0, y1 - y0
        if not half_pixel:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = ratio if ratio > 0 else math.ceil(rh / oh)
        gw = ratio if ratio > 0 else math.ceil(rw / ow)
        if gh <= 0 or gw <= 0:
            continue
        yl, yh, wyl, wyh = _samples(y0, rh / oh, oh, gh, h)
        xl, xh, wxl, wxh = _samples(x0, rw / ow, ow, gw, w)
        img = data[b]
        corners = [wyl[:, None] * wxl * img[:, yl][:, :, xl], wyl[:, None] * wxh * img[:, yl][:, :, xh],
                   wyh[:, None] * wxl * img[:, yh][:, :, xl], wyh[:, None] * wxh * img[:, yh][:, :, xh]]
        if mode == "avg":
            vals = sum(corners).reshape(c, oh, gh, ow, gw)
            out[r] = vals.sum(axis=(2, 4)) / max(gh * gw, 1)
        else:
            vals = np.maximum.reduce(corners).reshape(c, oh, gh, ow, gw)
            out[r] = vals.max(axis=(2, 4))
    return out.astype(x.dtype)
