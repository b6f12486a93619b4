"""Reference kernel of the ONNX ``Attention`` op (opset 23-25): scaled dot-product attention with GQA/MQA,
boolean or additive masks, causal and sliding-window masking, softcap, KV cache and the debug output.

Inputs ``Q, K, V, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?``; outputs
``Y, present_key?, present_value?, qk_matmul_output?``.  3-D inputs ``[B, S, heads * head]`` need
``q_num_heads``/``kv_num_heads`` and are split into heads first; 4-D inputs are ``[B, heads, S, head]``.

    K, V      = Concat(past, K/V, axis=2)                     (present_key/present_value)
    QK        = (Q * sqrt(scale)) @ (K * sqrt(scale))^T        scale defaults to 1/sqrt(head_size)
    QK        = softcap * tanh(QK / softcap)                   if softcap > 0
    P         = Softmax(QK + bias, axis=-1)                    in softmax_precision if given
    Y         = P @ V                                          KV heads repeated q_heads/kv_heads times

``bias`` (broadcast to ``[B, q_heads, S_q, S_total]``) sums the mask (bool: True -> 0, False -> -inf; float:
added as is; padded with -inf/False up to ``S_total``), the causal bound ``j <= i + offset``, the sliding
window ``offset + i - left <= j <= offset + i + right`` and the padding of ``nonpad_kv_seqlen``; ``offset`` is
the past length, or ``nonpad_kv_seqlen[b] - S_q`` per batch for an external cache, else 0.  A query row whose
bias is -inf everywhere gets all-zero probabilities (Y row = 0), whatever its logits.
``qk_matmul_output`` is QK before softcap (mode 0, as the spec and onnxruntime say; onnx's reference returns
it softcapped), after softcap (1), with the bias (2) or the probabilities (3).  Every step is computed in the input type, as in the ONNX function body (numpy rounds float16 after
each operation, accumulating its matmuls in float32), except the softmax when ``softmax_precision`` is set.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .registry import KernelError, broadcast_shapes, reference


@dataclass(frozen=True)
class Geometry:
    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int       # new keys (K's sequence length)
    past_len: int
    head: int         # Q/K head size
    v_head: int
    rank: int         # 3 or 4 (the rank of Q, K, V)

    @property
    def total(self) -> int:
        return self.past_len + self.kv_len

    def y_shape(self) -> tuple[int, ...]:
        if self.rank == 3:
            return (self.batch, self.q_len, self.q_heads * self.v_head)
        return (self.batch, self.q_heads, self.q_len, self.v_head)


def _split_heads(shape, heads, what: str) -> tuple[int, int, int, int]:
    if heads is None or heads <= 0 or shape[2] % heads:
        raise KernelError(f"Attention: 3-D {what} {list(shape)} needs q_num_heads and kv_num_heads dividing its "
                          "hidden size")
    return shape[0], heads, shape[1], shape[2] // heads


def geometry(attrs: dict, q, k, v, mask=None, past_key=None, past_value=None, nonpad=None) -> Geometry:
    """Checks the input shapes (tuples, None for omitted inputs) against each other and the attributes."""
    if not len(q) == len(k) == len(v) or len(q) not in (3, 4):
        raise KernelError(f"Attention: Q, K, V must all be 3-D or all 4-D, got {list(q)}, {list(k)}, {list(v)}")
    qh, kvh = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if len(q) == 3:
        q4, k4, v4 = _split_heads(q, qh, "Q"), _split_heads(k, kvh, "K"), _split_heads(v, kvh, "V")
    else:
        q4, k4, v4 = tuple(q), tuple(k), tuple(v)
        if (qh is not None and qh != q4[1]) or (kvh is not None and kvh != k4[1]):
            raise KernelError(f"Attention: q_num_heads/kv_num_heads {qh}/{kvh} disagree with 4-D Q {list(q)}, "
                              f"K {list(k)}")
    if not q4[0] == k4[0] == v4[0] or k4[1] != v4[1] or k4[2] != v4[2] or q4[3] != k4[3]:
        raise KernelError(f"Attention: Q {list(q)}, K {list(k)}, V {list(v)} do not fit together")
    if q4[1] % k4[1]:
        raise KernelError(f"Attention: {q4[1]} query heads are not a multiple of {k4[1]} key/value heads")
    if (past_key is None) != (past_value is None):
        raise KernelError("Attention: past_key and past_value must be given together")
    past = 0
    if past_key is not None:
        if nonpad is not None:
            raise KernelError("Attention: nonpad_kv_seqlen cannot be combined with past_key/past_value")
        if (len(past_key) != 4 or len(past_value) != 4 or past_key[:2] != k4[:2] or past_value[:2] != v4[:2]
                or past_key[3] != k4[3] or past_value[3] != v4[3] or past_key[2] != past_value[2]):
            raise KernelError(f"Attention: past_key {list(past_key)} / past_value {list(past_value)} do not fit "
                              f"K {list(k4)} / V {list(v4)}")
        past = past_key[2]
    g = Geometry(q4[0], q4[1], k4[1], q4[2], k4[2], past, q4[3], v4[3], len(q))
    if nonpad is not None and tuple(nonpad) != (g.batch,):
        raise KernelError(f"Attention: nonpad_kv_seqlen must be [{g.batch}], got {list(nonpad)}")
    if mask is not None:
        if not 1 <= len(mask) <= 4 or mask[-1] > g.total:
            raise KernelError(f"Attention: attn_mask {list(mask)} does not fit [{g.batch}, {g.q_heads}, "
                              f"{g.q_len}, {g.total}]")
        scores = (g.batch, g.q_heads, g.q_len, g.total)
        if broadcast_shapes(scores, tuple(mask[:-1]) + (g.total,)) != scores:
            raise KernelError(f"Attention: attn_mask {list(mask)} does not broadcast to {list(scores)}")
    for key in ("left_window_size", "right_window_size"):
        if attrs.get(key, -1) < -1:
            raise KernelError(f"Attention: {key} must be -1 or non-negative, got {attrs[key]}")
    if attrs.get("qk_matmul_output_mode", 0) not in (0, 1, 2, 3):
        raise KernelError(f"Attention: qk_matmul_output_mode {attrs['qk_matmul_output_mode']} is not 0-3")
    return g


def _shape(v):
    return None if v is None else v.type.shape


def _infer_attention(node: Node) -> list[TensorType]:
    ins = list(node.inputs) + [None] * (7 - len(node.inputs))
    g = geometry(node.attrs, *(_shape(v) for v in ins[:7]))
    qt, vt = ins[0].type.dtype, ins[2].type.dtype
    return [TensorType(qt, g.y_shape()),
            TensorType(ins[1].type.dtype, (g.batch, g.kv_heads, g.total, g.head)),
            TensorType(vt, (g.batch, g.kv_heads, g.total, g.v_head)),
            TensorType(qt, (g.batch, g.q_heads, g.q_len, g.total))][:len(node.outputs)]


def _to_heads(x: np.ndarray, g: Geometry, heads: int) -> np.ndarray:
    if x.ndim == 4:
        return x
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)


def _bias(attrs: dict, g: Geometry, mask, nonpad, ct) -> np.ndarray:
    """The additive bias (-inf = key not attended), broadcastable to ``[B, q_heads, S_q, S_total]``."""
    ninf = ct.type(-np.inf)
    bias = np.zeros((g.q_len, g.total), ct)
    if mask is not None:
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, g.total - mask.shape[-1])]
        if mask.dtype == np.bool_:
            mask = np.where(np.pad(mask, pad, constant_values=False), ct.type(0), ninf)
        else:
            mask = np.pad(mask.astype(ct), pad, constant_values=ninf)
        bias = bias + mask
    if nonpad is not None and g.past_len == 0:
        offset = np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1) - g.q_len      # per batch
    else:
        offset = np.asarray(g.past_len, np.int64)
    i = np.arange(g.q_len).reshape(-1, 1)
    j = np.arange(g.total).reshape(1, -1)
    diff = i + offset - j                # query position minus key position
    allowed = np.ones(diff.shape, np.bool_)
    if attrs.get("is_causal", 0):
        allowed &= diff >= 0
    left, right = attrs.get("left_window_size", -1), attrs.get("right_window_size", -1)
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    if not allowed.all():
        bias = bias + np.where(allowed, ct.type(0), ninf)
    if nonpad is not None:
        valid = j.reshape(1, 1, 1, -1) < np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1)
        bias = bias + np.where(valid, ct.type(0), ninf)
    return bias


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; an all -inf row gives zeros instead of NaN."""
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(m), x.dtype.type(0), m))
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, x.dtype.type(1), s)


@reference("Attention", infer=_infer_attention)
def attention(attrs, q, k, v, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None):
    g = geometry(attrs, *(None if a is None else a.shape
                          for a in (q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen)))
    ct = q.dtype
    k4, v4 = _to_heads(k, g, g.kv_heads), _to_heads(v, g, g.kv_heads)
    if past_key is not None:
        k4 = np.concatenate([past_key.astype(k.dtype, copy=False), k4], axis=2)
        v4 = np.concatenate([past_value.astype(v.dtype, copy=False), v4], axis=2)
    present_key, present_value = np.ascontiguousarray(k4), np.ascontiguousarray(v4)
    scale = attrs.get("scale")
    scale = 1.0 / np.sqrt(g.head) if scale is None else float(scale)
    root = np.asarray(np.sqrt(scale)).astype(q.dtype).astype(ct)      # the function body's Cast to T1
    rep = g.q_heads // g.kv_heads
    kk = np.repeat(k4.astype(ct) * root, rep, axis=1) if rep > 1 else k4.astype(ct) * root
    vv = np.repeat(v4.astype(ct), rep, axis=1) if rep > 1 else v4.astype(ct)
    with np.errstate(all="ignore"):
        qk = np.matmul(_to_heads(q, g, g.q_heads).astype(ct) * root, kk.swapaxes(-1, -2))
        raw = qk
        softcap = float(attrs.get("softcap", 0.0))
        if softcap > 0:
            qk = np.tanh(qk / ct.type(softcap)) * ct.type(softcap)
        bias = _bias(attrs, g, attn_mask, nonpad_kv_seqlen, ct)
        scores = qk + bias
        precision = attrs.get("softmax_precision")
        st = ct if precision is None else DType(precision).np
        probs = _softmax(scores.astype(st)).astype(ct)
        fully_masked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
        probs = np.where(fully_masked, ct.type(0), probs)
        y = np.matmul(probs, vv)
    mode = attrs.get("qk_matmul_output_mode", 0)
    qk_out = (raw, qk, scores, probs)[mode]
    qk_out = np.broadcast_to(qk_out, (g.batch, g.q_heads, g.q_len, g.total)).astype(q.dtype)
    if g.rank == 3:
        y = y.transpose(0, 2, 1, 3).reshape(g.y_shape())
    return y.astype(q.dtype), present_key, present_value, qk_out
