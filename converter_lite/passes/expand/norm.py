"""Layer, RMS, instance and group normalization -> reductions and elementwise ops.

With ``mean(v) = ReduceSum(v, axes) * (1/n)`` (keepdims) and ``inv = 1 / sqrt(var + epsilon)``
(Reciprocal of Sqrt: no Rsqrt op in ONNX):

* LayerNormalization(X, Scale, B; axis, epsilon):  axes = axis..rank-1,
  ``mean = mean(X)``, ``d = X - mean``, ``var = mean(d * d)``, ``Y = d * inv * Scale + B``;
  optional outputs ``Mean = mean`` and ``InvStdDev = inv``.  (MindSpore ``layernorm`` expander.)
* RMSNormalization(X, Scale; axis, epsilon):  ``Y = X * (1 / sqrt(mean(X * X) + epsilon)) * Scale``.
* InstanceNormalization(X, scale, B; epsilon): the LayerNorm formula over the spatial axes 2..rank-1, then
  per-channel ``scale[c]``, ``B[c]`` (reshaped to ``[C, 1, ..., 1]``).
* GroupNormalization(X, scale, bias; num_groups, epsilon) (opset 21): ``X[N, C, *S]`` is reshaped to
  ``[N, G, C/G * prod(S)]``, normalized over its last axis, reshaped back, then per-channel scale/bias.

Statistics are computed in float32 for float16 inputs (``stash_type=1``, the default) and cast back; the
optional LayerNormalization statistics have the stash type, as the op table's shape inference says.
"""
from __future__ import annotations

import math

from ...ir.core import Node
from ...ir.dtype import DType
from ...ops.builder import BValue, GraphBuilder
from ...ops.registry import normalize_axis
from .emit import (
    cast,
    input_value,
    mean,
    output_used,
    reciprocal,
    require_float,
    reshape,
    sqrt,
)
from .registry import Declined, expander

DEFAULT_EPSILON = 1e-5


def _compute_type(x: BValue, node: Node) -> DType:
    """float32 for float16 inputs under stash_type=1, else the input's type."""
    if x.dtype == DType.float16 and node.attrs.get("stash_type", 1) == 1:
        return DType.float32
    return x.dtype


def _epsilon(node: Node) -> float:
    return float(node.attrs.get("epsilon", DEFAULT_EPSILON))


def _normalize(x: BValue, axes: tuple[int, ...], epsilon: float) -> tuple[BValue, BValue, BValue]:
    """(x - mean) * inv, mean, inv over ``axes``."""
    mu = mean(x, axes)
    d = x - mu
    inv = reciprocal(sqrt(mean(d * d, axes) + epsilon))
    return d * inv, mu, inv


def _per_channel(v: BValue, rank: int, dtype: DType) -> BValue:
    """A ``[C]`` parameter shaped ``[C, 1, ..., 1]`` to broadcast along axis 1 of a rank-``rank`` tensor."""
    return reshape(cast(v, dtype), (v.shape[0],) + (1,) * (rank - 2))


@expander("LayerNormalization")
def expand_layer_norm(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "LayerNormalization")
    axis = normalize_axis(int(node.attrs.get("axis", -1)), x.type.rank)
    ct = _compute_type(x, node)
    stats_type = DType.float32 if node.attrs.get("stash_type", 1) == 1 else x.dtype
    normed, mu, inv = _normalize(cast(x, ct), tuple(range(axis, x.type.rank)), _epsilon(node))
    y = normed * cast(input_value(b, node, 1), ct)
    bias = input_value(b, node, 2)
    if bias is not None:
        y = y + cast(bias, ct)
    outs = [cast(y, x.dtype)]
    for i, stat in ((1, mu), (2, inv)):
        if i < len(node.outputs):
            outs.append(cast(stat, stats_type) if output_used(b, node, i) else None)
    return outs


@expander("RMSNormalization")
def expand_rms_norm(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "RMSNormalization")
    axis = normalize_axis(int(node.attrs.get("axis", -1)), x.type.rank)
    ct = _compute_type(x, node)
    xc = cast(x, ct)
    inv = reciprocal(sqrt(mean(xc * xc, range(axis, x.type.rank)) + _epsilon(node)))
    return [cast(xc * inv * cast(input_value(b, node, 1), ct), x.dtype)]


@expander("InstanceNormalization")
def expand_instance_norm(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "InstanceNormalization")
    rank = x.type.rank
    if rank < 3:
        raise Declined(f"rank {rank} < 3")
    ct = _compute_type(x, node)
    normed, _, _ = _normalize(cast(x, ct), tuple(range(2, rank)), _epsilon(node))
    y = normed * _per_channel(input_value(b, node, 1), rank, ct) + _per_channel(input_value(b, node, 2), rank, ct)
    return [cast(y, x.dtype)]


@expander("GroupNormalization")
def expand_group_norm(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "GroupNormalization")
    rank, shape = x.type.rank, x.shape
    groups = int(node.attrs.get("num_groups", 0))
    if rank < 2 or groups < 1 or shape[1] % groups:
        raise Declined(f"num_groups={groups} does not divide the channels of {list(shape)}")
    scale, bias = input_value(b, node, 1), input_value(b, node, 2)
    if scale.shape != (shape[1],) or bias.shape != (shape[1],):
        raise Declined("scale/bias are not per-channel vectors (opset 18 per-group form)")
    ct = _compute_type(x, node)
    grouped = reshape(cast(x, ct), (shape[0], groups, math.prod(shape[1:]) // groups))
    normed, _, _ = _normalize(grouped, (2,), _epsilon(node))
    y = reshape(normed, shape) * _per_channel(scale, rank, ct) + _per_channel(bias, rank, ct)
    return [cast(y, x.dtype)]
