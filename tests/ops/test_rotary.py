"""RotaryEmbedding (rotary.py) against onnxruntime (opset 23)."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, data


def caches(rows, half, seed=2, batch_seq=None):
    rng = np.random.default_rng(seed)
    angles = rng.random(batch_seq + (half,) if batch_seq else (rows, half)) * 6
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank,rot_dim,with_pos", [(4, 0, True), (4, 4, True), (3, 0, True), (3, 6, False),
                                                   (4, 0, False)])
def test_rotary_embedding(rank, rot_dim, with_pos, interleaved, dtype):
    b, h, s, d = 2, 3, 5, 8
    x = data((b, h, s, d) if rank == 4 else (b, s, h * d), dtype) / 10
    half = (rot_dim or d) // 2
    if with_pos:
        cos, sin = caches(16, half)
        pos = np.random.default_rng(4).integers(0, 16, size=(b, s)).astype(np.int64)
    else:
        cos, sin = caches(0, half, batch_seq=(b, s))
        pos = None
    attrs = {"interleaved": interleaved} | ({"rotary_embedding_dim": rot_dim} if rot_dim else {}) | (
        {"num_heads": h} if rank == 3 else {})
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check("RotaryEmbedding", {"x": x, "c": cos.astype(dtype), "s": sin.astype(dtype), "p": pos}, opset=23,
          rtol=tol, atol=tol, **attrs)


def test_rotary_embedding_rejects():
    cos, sin = caches(4, 4)
    check_rejects("RotaryEmbedding", {"x": data((1, 2, 3, 8)), "c": cos, "s": sin,
                                      "p": np.array([[0, 1, 9]], np.int64)}, infer=False)
    check_rejects("RotaryEmbedding", {"x": data((1, 3, 16)), "c": cos, "s": sin,
                                      "p": np.zeros((1, 3), np.int64)}, infer=False)
