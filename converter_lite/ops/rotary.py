"""Transformer helper ops: RotaryEmbedding (opset 23).  OPAQUE.

(The ONNX ``Attention`` op is not here: the op name is taken by the converter's own fused attention op in
``fused_ops.py``.)
"""
from __future__ import annotations

import numpy as np

from .registry import KernelError, infer_same, reference


@reference("RotaryEmbedding", infer=infer_same)
def rotary_embedding(attrs, x, cos_cache, sin_cache, position_ids=None):
    """Rotates the first ``rotary_embedding_dim`` features of every head by the position's angle:

        real = cos * x1 - sin * x2,  imag = sin * x1 + cos * x2

    with (x1, x2) the two halves of those features (or the even/odd ones when ``interleaved``), written back
    in the same layout.  X is [batch, heads, seq, head_size] or [batch, seq, heads * head_size] (``num_heads``
    given); the caches are [max_position, dim / 2] indexed by ``position_ids``, or [batch, seq, dim / 2].
    """
    if x.ndim == 4:
        xs = x.transpose(0, 2, 1, 3)                       # [B, S, H, D]
    elif x.ndim == 3:
        heads = attrs.get("num_heads", 0)
        if heads <= 0 or x.shape[2] % heads:
            raise KernelError(f"RotaryEmbedding on 3-D input {list(x.shape)} needs num_heads dividing the hidden size")
        xs = x.reshape(x.shape[0], x.shape[1], heads, x.shape[2] // heads)
    else:
        raise KernelError(f"RotaryEmbedding input must be 3-D or 4-D, got {list(x.shape)}")
    b, s, _, d = xs.shape
    rd = attrs.get("rotary_embedding_dim", 0) or d
    if rd % 2 or rd > d:
        raise KernelError(f"RotaryEmbedding dim {rd} must be even and at most the head size {d}")
    if position_ids is not None:
        if np.shape(position_ids) != (b, s) or cos_cache.ndim != 2:
            raise KernelError("RotaryEmbedding: position_ids must be [batch, seq] with 2-D caches")
        pos = np.asarray(position_ids, np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= cos_cache.shape[0]):
            raise KernelError("RotaryEmbedding position id outside the caches")
        cos, sin = cos_cache[pos], sin_cache[pos]
    else:
        cos, sin = cos_cache, sin_cache
    if cos.shape != (b, s, rd // 2) or sin.shape != cos.shape:
        raise KernelError(f"RotaryEmbedding caches give {list(cos.shape)}, expected {[b, s, rd // 2]}")
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    rot = xs[..., :rd]
    x1, x2 = (rot[..., 0::2], rot[..., 1::2]) if attrs.get("interleaved", 0) else np.split(rot, 2, axis=-1)
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if attrs.get("interleaved", 0):
        rotated = np.stack([real, imag], axis=-1).reshape(rot.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    out = np.concatenate([rotated, xs[..., rd:]], axis=-1).astype(x.dtype)
    return out.transpose(0, 2, 1, 3).copy() if x.ndim == 4 else out.reshape(x.shape)
