"""AveragePool / MaxPool (2-D, float32/float64, no Indices output) -> Pad + one strided Slice per tap, combined
in the reference kernels' order (ops/nn_pool.py), so that the pool becomes one fused native kernel whose Pad
the code generator reads without materializing (a window Pad, passes/fuse/window.py) and whose epilogue
(PoolFormer's ``pool(x) - x``, an activation) joins it:

    AveragePool:  s = t0 + t1 + ... (taps in row-major order);  y = s / count
    MaxPool:      y = t0;  y = Where(t > y, t, y) for each further tap (strict: the first maximum wins,
                  a NaN tap never replaces y; the pad value is -inf)

``count`` is the reference's per-position count (``count_include_pad``; never ``ceil_mode``'s overhang), a
constant broadcast over the channels (a scalar when every window counts the same).  The Pad covers the
explicit pads and ``ceil_mode``'s overhang.

An int8/uint8 MaxPool (a QDQ model's, on the quantized bytes: passes/rewrite/quantized_moves.py) pads with the
type's lowest value.

Declined: rank other than 4, a float16 input, an integer one other than MaxPool's int8/uint8, MaxPool with the
Indices output, negative pads, more than ``MAX_TAPS`` taps.

GlobalAveragePool (float32/float64, rank >= 3) -> ReduceSum over the spatial axes (kept) times 1/count, as
MindSpore's ReduceMean expander: one native reduction kernel (one loop over the spatial block), fused with the
elementwise ops before it (a residual Add and Relu), in place of numpy's mean.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ir.dtype import DType
from ...ops.builder import GraphBuilder
from ...ops.nn_pool import _axis_counts
from ...ops.nn_window import resolve_window
from .emit import input_value, mean
from .registry import Declined, expander

MAX_TAPS = 49
INT8 = (DType.int8, DType.uint8)       # MaxPool's integer inputs: a QDQ model's pools on the bytes (quantized_moves)


@expander("AveragePool", "MaxPool")
def expand_pool(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    if x.dtype not in (DType.float32, DType.float64) + (INT8 if node.op == "MaxPool" else ()):
        raise Declined(f"{x.dtype.name} input (float32/float64 only; MaxPool int8/uint8 too)")
    if x.type.rank != 4:
        raise Declined(f"rank {x.type.rank} input (only 2-D pools are expanded)")
    idx = node.outputs[1] if len(node.outputs) > 1 else None
    if node.op == "MaxPool" and idx is not None and (idx.uses or any(idx is o for o in b.graph.outputs)):
        raise Declined("the Indices output is used")
    if "kernel_shape" not in node.attrs:
        raise Declined("no kernel_shape")
    kernel = tuple(int(k) for k in node.attrs["kernel_shape"])
    spatial = tuple(int(d) for d in x.shape[2:])
    win = resolve_window(node.op, node.attrs, spatial, kernel, ceil_mode=bool(node.attrs.get("ceil_mode", 0)))
    if min(win.pads_begin + win.pads_end) < 0:
        raise Declined(f"negative pads {win.pads_begin + win.pads_end}")
    if kernel[0] * kernel[1] > MAX_TAPS:
        raise Declined(f"{kernel[0]}x{kernel[1]} window (more than {MAX_TAPS} taps)")
    (oh, ow), (sh, sw), (dh, dw) = win.out, win.strides, win.dilations
    need = [max(o - 1, 0) * s + e for o, s, e in zip(win.out, win.strides, win.effective)]
    end = [max(0, need[i] - win.pads_begin[i] - spatial[i]) for i in range(2)]
    xp = x
    if any(win.pads_begin) or any(end):
        fill = 0.0 if node.op != "MaxPool" else -np.inf if x.dtype.np.kind == "f" else np.iinfo(x.dtype.np).min
        xp = b.op("Pad", x, b.const(np.asarray([0, 0, *win.pads_begin, 0, 0, *end], np.int64)),
                  b.const(np.asarray(fill, x.dtype.np)))
    axes = b.const(np.asarray((2, 3), np.int64))
    steps = b.const(np.asarray((sh, sw), np.int64))
    acc = None
    for p in range(kernel[0]):
        for q in range(kernel[1]):
            r0, c0 = p * dh, q * dw
            tap = b.op("Slice", xp, b.const(np.asarray((r0, c0), np.int64)),
                       b.const(np.asarray((r0 + (oh - 1) * sh + 1, c0 + (ow - 1) * sw + 1), np.int64)), axes, steps)
            if acc is None:
                acc = tap
            elif node.op == "MaxPool":
                acc = b.op("Where", b.op("Greater", tap, acc), tap, acc)
            else:
                acc = acc + tap
    if node.op == "MaxPool":
        return [acc] + [None] * (len(node.outputs) - 1)
    count = _axis_counts(win, spatial, bool(node.attrs.get("count_include_pad", 0))).astype(x.dtype.np)
    count = np.broadcast_to(count, (oh, ow))
    if (count == count.flat[0]).all():
        return [acc / b.const(np.asarray(count.flat[0], x.dtype.np))]
    return [acc / b.const(np.ascontiguousarray(count).reshape(1, 1, oh, ow))]


@expander("GlobalAveragePool")
def expand_global_average_pool(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    if x.dtype not in (DType.float32, DType.float64):
        raise Declined(f"{x.dtype.name} input (float32/float64 only)")
    if x.type.rank < 3:
        raise Declined(f"rank {x.type.rank} input (no spatial axes)")
    return [mean(x, range(2, x.type.rank))]
