"""The ONNX Attention op (ops/attention.py) against onnxruntime (opset 23/24) and, for what onnxruntime does not
run (opset-25 sliding windows, rank-1 masks, masks shorter than the keys), against onnx's reference
implementation.  Every case also checks the cheap inference against the kernel's outputs."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, single_op_model
from onnx.reference import ReferenceEvaluator
from test_nn_oracle import TOLERANCE, check, check_infer, check_rejects, ours, randn


def qkv(rng, b=2, qh=3, kvh=3, sq=4, skv=6, d=8, dv=8, dtype=np.float32, rank=4):
    q, k, v = randn(rng, b, qh, sq, d, dtype=dtype), randn(rng, b, kvh, skv, d, dtype=dtype), \
        randn(rng, b, kvh, skv, dv, dtype=dtype)
    if rank == 3:
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v))
    return {"q": q, "k": k, "v": v}


def check_ref(inputs: dict, n_outputs: int = 1, opset: int = 25, **attrs):
    """Kernel and inference vs onnx.reference (for the cases onnxruntime cannot run)."""
    model = single_op_model("Attention", inputs, n_outputs, opset=opset, **attrs)
    feeds = {k: v for k, v in inputs.items() if v is not None}
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = ours("Attention", inputs, n_outputs, **attrs)
    for i, (g, e) in enumerate(zip(got, expected)):
        rtol, atol = TOLERANCE[np.dtype(e.dtype)]
        assert_close(g, e, rtol=rtol, atol=atol, what=f"Attention output {i}")
    check_infer("Attention", inputs, got[:n_outputs], **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("heads", [(3, 3), (6, 2), (4, 1)])
def test_attention_4d_heads_and_dtypes(rng, dtype, heads):
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float64 else {}     # onnxruntime: float64 in float32
    check("Attention", qkv(rng, qh=heads[0], kvh=heads[1], dtype=dtype), opset=23, **tol)


@pytest.mark.parametrize("attrs", [{}, {"scale": 0.1}, {"is_causal": 1}, {"softcap": 2.0}])
def test_attention_3d(rng, attrs):
    check("Attention", qkv(rng, qh=6, kvh=2, dv=5, rank=3), opset=23, q_num_heads=6, kv_num_heads=2, **attrs)


@pytest.mark.parametrize("sq,skv", [(4, 6), (5, 5), (6, 3), (1, 7)])
def test_attention_causal_shapes(rng, sq, skv):
    check("Attention", qkv(rng, sq=sq, skv=skv, dv=3), opset=23, is_causal=1)


@pytest.mark.parametrize("mshape", [(4, 6), (2, 1, 4, 6), (3, 4, 6), (2, 3, 4, 6), (1, 1, 4, 6)])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_attention_masks(rng, mshape, kind):
    x = qkv(rng)
    mask = randn(rng, *mshape) if kind == "float" else rng.random(mshape) > 0.3
    check("Attention", x | {"mask": mask}, opset=23)
    check("Attention", x | {"mask": mask}, opset=23, is_causal=1)


def test_attention_fully_masked_rows_are_zero(rng):
    x = qkv(rng, b=1, qh=2, kvh=2, sq=3, skv=3)
    mask = np.ones((3, 3), bool)
    mask[1] = False
    y, qk = check("Attention", x | {"mask": mask}, n_outputs=4, opset=23, qk_matmul_output_mode=3)[::3]
    assert not np.isnan(y).any() and (y[:, :, 1] == 0).all() and (qk[:, :, 1] == 0).all()
    fmask = np.where(mask, 0, -np.inf).astype(np.float32)
    x["q"][0, 0, 1, 0] = np.inf           # logits of a fully masked row are ignored
    y = ours("Attention", x | {"mask": fmask}, softcap=0.5)[0]
    assert (y[:, :, 1] == 0).all()


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_past_present_and_qk_output(rng, mode):
    x = qkv(rng, skv=3, dv=5)
    past = {"mask": randn(rng, 4, 8), "pk": randn(rng, 2, 3, 5, 8), "pv": randn(rng, 2, 3, 5, 5)}
    check("Attention", x | past, n_outputs=4, opset=23, qk_matmul_output_mode=mode, softcap=3.0)


def test_attention_causal_with_past_is_bottom_right(rng):
    x = qkv(rng, qh=4, kvh=2, skv=4)
    past = {"mask": None, "pk": randn(rng, 2, 2, 3, 8), "pv": randn(rng, 2, 2, 3, 8)}
    check("Attention", x | past, n_outputs=3, opset=24, is_causal=1)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_nonpad_kv_seqlen(rng, causal):
    x = qkv(rng, b=3, qh=4, kvh=2, sq=2, skv=6)
    lens = np.array([2, 6, 4], np.int64)
    check("Attention", x | {"mask": None, "pk": None, "pv": None, "n": lens}, opset=24, is_causal=causal)


def test_attention_softmax_precision(rng):
    x = qkv(rng, dtype=np.float16)
    check("Attention", x, n_outputs=4, opset=24, qk_matmul_output_mode=3, softmax_precision=1)
    check("Attention", qkv(rng), n_outputs=4, opset=24, qk_matmul_output_mode=3, softmax_precision=11)


def test_attention_qk_mode0_is_before_softcap(rng):
    """The spec (and onnxruntime): mode 0 is the raw product; onnx's reference returns it softcapped."""
    x = qkv(rng)
    raw, capped = (ours("Attention", x, 4, softcap=1.0, qk_matmul_output_mode=m)[3] for m in (0, 1))
    assert np.abs(raw).max() > 1.0 >= np.abs(capped).max()
    check("Attention", x, n_outputs=4, opset=23, softcap=1.0)


@pytest.mark.parametrize("attrs", [{"is_causal": 1, "left_window_size": 2}, {"left_window_size": 1,
                                   "right_window_size": 2}, {"left_window_size": 0}, {"right_window_size": 0}])
def test_attention_sliding_window(rng, attrs):
    check_ref(qkv(rng, qh=4, kvh=2), **attrs)
    check_ref(qkv(rng, sq=3, skv=3) | {"mask": None, "pk": randn(rng, 2, 3, 4, 8), "pv": randn(rng, 2, 3, 4, 8)},
              n_outputs=3, **attrs)
    check_ref(qkv(rng, skv=8) | {"mask": randn(rng, 3, 4, 8), "pk": None, "pv": None,
                                 "n": np.array([5, 8], np.int64)}, **attrs)


def test_attention_rank1_and_short_masks(rng):
    x = qkv(rng)
    check_ref(x | {"mask": rng.random(6) > 0.2})
    check_ref(x | {"mask": rng.random(6) > 0.2}, is_causal=1, left_window_size=3)
    check_ref(x | {"mask": randn(rng, 1, 6)})
    check_ref(x | {"mask": randn(rng, 4, 4)})
    check_ref(x | {"mask": rng.random((2, 1, 4, 5)) > 0.2}, is_causal=1)


def test_attention_empty_query(rng):
    check_ref(qkv(rng, sq=0), n_outputs=4)


def test_attention_rejects_bad_inputs(rng):
    x = qkv(rng)
    check_rejects("Attention", {"q": x["q"], "k": x["k"][:, :2], "v": x["v"][:, :2]})       # 3 heads vs 2
    check_rejects("Attention", {"q": x["q"], "k": x["k"][..., :4], "v": x["v"]})             # head sizes
    check_rejects("Attention", qkv(rng, rank=3))                                             # no num_heads
    check_rejects("Attention", x | {"mask": randn(rng, 4, 7)})                               # mask too long
    check_rejects("Attention", x | {"mask": randn(rng, 3, 4, 6, 1)[..., 0].reshape(3, 1, 4, 6)})  # batch 3
    check_rejects("Attention", x | {"mask": None, "pk": randn(rng, 2, 3, 1, 8), "pv": None})
    check_rejects("Attention", x, left_window_size=-2)
    check_rejects("Attention", x, q_num_heads=2)
