"""BatchNormalization (inference, ``training_mode=0``) -> one multiply-add per element.

    Y = (X - mean) / sqrt(var + epsilon) * scale + B  =  X * s + t,
    s = scale / sqrt(var + epsilon),  t = B - mean * s            (per channel, axis 1)

When scale, B, mean and var are all constants (the usual case after import), ``s`` and ``t`` are folded
here with numpy (in float32 for float16 models) and become ``[C, 1, ..., 1]`` constants, so the expansion is
exactly two ops.  Otherwise the same formula is emitted as ops.  Source: MindSpore ``batchnorm`` expander
(inference branch) and the ONNX operator definition.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ir.dtype import DType
from ...ops.builder import BValue, GraphBuilder
from .emit import (
    cast,
    input_value,
    output_used,
    reciprocal,
    require_float,
    reshape,
    sqrt,
)
from .registry import Declined, expander

DEFAULT_EPSILON = 1e-5


@expander("BatchNormalization")
def expand_batch_norm(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "BatchNormalization")
    if node.attrs.get("training_mode", 0):
        raise Declined("training_mode=1")
    if any(output_used(b, node, i) for i in range(1, len(node.outputs))):
        raise Declined("running mean/var outputs are used")
    if x.type.rank < 2:
        raise Declined(f"rank {x.type.rank} < 2")
    eps = float(node.attrs.get("epsilon", DEFAULT_EPSILON))
    params = [node.inputs[i] for i in range(1, 5)]
    channel_shape = (x.shape[1],) + (1,) * (x.type.rank - 2)
    if all(p.const is not None for p in params):
        ct = np.dtype(np.float32) if x.dtype == DType.float16 else x.dtype.np
        scale, bias, mu, var = (p.const.astype(ct) for p in params)
        s = scale / np.sqrt(var + ct.type(eps))
        t = bias - mu * s
        s_v = b.const(s.astype(x.dtype.np).reshape(channel_shape))
        t_v = b.const(t.astype(x.dtype.np).reshape(channel_shape))
        return [x * s_v + t_v] + [None] * (len(node.outputs) - 1)
    scale, bias, mu, var = (reshape(cast(b.wrap(p), x.dtype), channel_shape) for p in params)
    s = scale * reciprocal(sqrt(var + eps))
    y: BValue = (x - mu) * s + bias
    return [y] + [None] * (len(node.outputs) - 1)
