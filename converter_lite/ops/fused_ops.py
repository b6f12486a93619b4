"""Reference kernels of the ops the named pattern fusions create (passes/rewrite/).  Each is defined as
the composition of the ONNX ops it replaces, computed with those ops' own reference kernels, so a fusion
never changes numerics beyond float rounding.

* ``FusedMatMul(A, B, bias?)``: ``act(MatMul(A, B) + bias)``; attrs ``activation`` ("" = none, "Relu",
  "Gelu"), ``approximate`` (Gelu's, "none"/"tanh"), ``has_bias`` (0/1).  The bias broadcasts to the
  product's shape without enlarging it.
* ``AddLayerNorm(A, B, scale, bias?)``: ``S = A + B``; outputs ``(LayerNormalization(S, scale, bias), S)``;
  attrs ``axis`` (default -1), ``epsilon`` (default 1e-5).
* ``AddRmsNorm(A, B, scale)``: ``S = A + B``; outputs ``(RMSNormalization(S, scale), S)``; attrs as above.
* ``Attention(Q, Kt, V, mask?)``: ``Softmax(MatMul(Q, Kt) * scale + mask, axis=-1) @ V``; attr ``scale``
  (default 1.0).  ``Kt`` is the key already laid out as the right operand of the product.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from .nn import matmul_shape
from .registry import KernelError, broadcast_shapes, evaluate, reference

ACTIVATIONS = ("", "Relu", "Gelu")


def _infer_fused_matmul(node: Node) -> list[TensorType]:
    a, b = node.inputs[0].type, node.inputs[1].type
    shape = matmul_shape(a.shape, b.shape)
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if bias is not None and broadcast_shapes(shape, bias.type.shape) != shape:
        raise KernelError(f"FusedMatMul: bias {list(bias.type.shape)} would enlarge the product {list(shape)}")
    return [TensorType(a.dtype, shape)]


@reference("FusedMatMul", infer=_infer_fused_matmul)
def fused_matmul(attrs, a, b, bias=None):
    y = evaluate("MatMul", {}, [a, b])[0]
    if bias is not None:
        y = evaluate("Add", {}, [y, bias])[0]
    act = attrs.get("activation", "")
    if act not in ACTIVATIONS:
        raise KernelError(f"FusedMatMul: unknown activation {act!r}")
    if act == "Gelu":
        y = evaluate("Gelu", {"approximate": attrs.get("approximate", "none")}, [y])[0]
    elif act:
        y = evaluate(act, {}, [y])[0]
    return y


def _infer_add_norm(node: Node) -> list[TensorType]:
    a, b = node.inputs[0].type, node.inputs[1].type
    t = TensorType(a.dtype, broadcast_shapes(a.shape, b.shape))
    return [t, t]


def _norm_attrs(attrs) -> dict:
    return {"axis": attrs.get("axis", -1), "epsilon": attrs.get("epsilon", 1e-5)}


@reference("AddLayerNorm", infer=_infer_add_norm)
def add_layer_norm(attrs, a, b, scale, bias=None):
    s = evaluate("Add", {}, [a, b])[0]
    y = evaluate("LayerNormalization", _norm_attrs(attrs), [s, scale, bias])[0]
    return y, s


@reference("AddRmsNorm", infer=_infer_add_norm)
def add_rms_norm(attrs, a, b, scale):
    s = evaluate("Add", {}, [a, b])[0]
    y = evaluate("RMSNormalization", _norm_attrs(attrs), [s, scale])[0]
    return y, s


def _infer_attention(node: Node) -> list[TensorType]:
    q, kt, v = (node.inputs[i].type for i in range(3))
    scores = matmul_shape(q.shape, kt.shape)
    mask = node.inputs[3] if len(node.inputs) > 3 else None
    if mask is not None:
        scores = broadcast_shapes(scores, mask.type.shape)
    return [TensorType(q.dtype, matmul_shape(scores, v.shape))]


@reference("FusedAttention", infer=_infer_attention)
def attention(attrs, q, kt, v, mask=None):
    scores = evaluate("MatMul", {}, [q, kt])[0]
    scale = attrs.get("scale", 1.0)
    if scale != 1.0:
        scores = evaluate("Mul", {}, [scores, np.asarray(scale, dtype=scores.dtype)])[0]
    if mask is not None:
        scores = evaluate("Add", {}, [scores, mask])[0]
    probs = evaluate("Softmax", {"axis": -1}, [scores])[0]
    return evaluate("MatMul", {}, [probs, v])[0]
