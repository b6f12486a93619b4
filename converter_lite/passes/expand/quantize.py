"""QuantizeLinear / DequantizeLinear -> elementwise ops, so that a QDQ model's activation quantization fuses into
kernels (the QDQ form onnxruntime's ``quantize_static`` writes: every activation goes through a Q->DQ pair).

    QuantizeLinear:   y = Cast(Min(Max(Where(IsNaN(t), 0, t), qmin), qmax)),  t = Round(x / scale) + zero_point
    DequantizeLinear: y = (Cast(x, float) - zero_point) * scale

with per-tensor or per-axis ``scale``/``zero_point`` reshaped to broadcast along ``axis``; exactly the reference
kernels' arithmetic (ops/quantize.py: the division in the scale's precision, round half to even, NaN -> 0,
saturation).  The weights' DequantizeLinear nodes are constants and were folded before this (constant_folding),
so only the activations' pairs remain.  Before, each ran as a numpy reference kernel: resnet_mini quantized by
onnxruntime (18 Q/DQ pairs) ran 5.9 ms where the float model takes 1.5.

Declined: blocked quantization (``block_size``), non-constant scale or zero point, a ``precision``/``output_dtype``
other than the scale's, float outputs other than float32/float64, integer types other than int8/uint8/int16/
uint16 (int32 DequantizeLinear only without a zero point: float32 could not hold the int64 difference the
reference takes).
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ir.dtype import DType
from ...ops.builder import GraphBuilder
from .emit import const_input, input_value
from .registry import Declined, expander

QUANT_TYPES = (DType.int8, DType.uint8, DType.int16, DType.uint16)
FLOAT_TYPES = (DType.float32, DType.float64)


def _param(b: GraphBuilder, p: np.ndarray | None, rank: int, axis: int, n: int, dtype, what: str):
    """``p`` (one element or one per ``axis`` entry) as a constant of ``dtype`` broadcasting along ``axis``."""
    if p is None:
        return None
    p = np.asarray(p)
    if p.size == 1:
        return b.const(np.asarray(p.reshape(()), dtype=dtype))
    if p.ndim != 1 or p.shape[0] != n:
        raise Declined(f"{what} of shape {list(p.shape)} is neither per-tensor nor per-axis")
    return b.const(p.astype(dtype).reshape((n,) + (1,) * (rank - axis - 1)))


def _geometry(node: Node, x) -> tuple[int, int]:
    if int(node.attrs.get("block_size", 0) or 0):
        raise Declined("blocked quantization (block_size)")
    if x.shape is None:
        raise Declined("dynamic shape")
    rank = len(x.shape)
    axis = int(node.attrs.get("axis", 1))
    if rank == 0:
        return 0, 0
    if not -rank <= axis < rank:
        raise Declined(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    return axis, int(x.shape[axis])


@expander("QuantizeLinear")
def expand_quantize_linear(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    scale = const_input(node, 1)
    zp = const_input(node, 2)
    out = node.outputs[0].dtype
    if out not in QUANT_TYPES:
        raise Declined(f"output {out.name}")
    if x.dtype not in FLOAT_TYPES or DType.from_np(scale.dtype) not in FLOAT_TYPES:
        raise Declined(f"input {x.dtype.name}, scale {scale.dtype}")
    if int(node.attrs.get("precision", 0) or 0) not in (0, int(DType.from_np(scale.dtype))):
        raise Declined("precision other than the scale's")
    ct = np.float64 if scale.dtype == np.float64 else np.float32
    axis, n = _geometry(node, x)
    rank = len(x.shape)
    xc = x if x.dtype.np == ct else b.op("Cast", x, to=int(DType.from_np(np.dtype(ct))))
    t = b.op("Round", b.op("Div", xc, _param(b, scale, rank, axis, n, ct, "scale")))
    if zp is not None and np.any(zp):
        t = b.op("Add", t, _param(b, zp, rank, axis, n, ct, "zero point"))
    t = b.op("Where", b.op("IsNaN", t), b.const(np.asarray(0, ct)), t)
    info = np.iinfo(out.np)
    t = b.op("Min", b.op("Max", t, b.const(np.asarray(info.min, ct))), b.const(np.asarray(info.max, ct)))
    return [b.op("Cast", t, to=int(out))]


@expander("DequantizeLinear")
def expand_dequantize_linear(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    scale = const_input(node, 1)
    zp = const_input(node, 2)
    out = node.outputs[0].dtype
    if out not in FLOAT_TYPES or DType.from_np(scale.dtype) is not out:
        raise Declined(f"output {out.name} with a {scale.dtype} scale")
    if x.dtype not in QUANT_TYPES and not (x.dtype is DType.int32 and (zp is None or not np.any(zp))):
        raise Declined(f"input {x.dtype.name}")
    axis, n = _geometry(node, x)
    rank = len(x.shape)
    t = b.op("Cast", x, to=int(out))
    if zp is not None and np.any(zp):
        t = b.op("Sub", t, _param(b, zp, rank, axis, n, out.np, "zero point"))
    return [b.op("Mul", t, _param(b, scale, rank, axis, n, out.np, "scale"))]
