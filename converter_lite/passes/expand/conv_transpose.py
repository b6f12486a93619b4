"""ConvTranspose whose kernel equals its stride (the 2x2/stride-2 upsampling of FPN and DB-text-detector heads)
-> a 1x1 Conv and a depth-to-space rearrangement.

With ``kernel == stride`` the output windows do not overlap: every output pixel receives exactly one tap,

    y[n, m, i*kh + p, j*kw + q] = B[m] + sum_c x[n, c, i, j] * W[c, m, p, q]

so ``z = Conv1x1(x, W')`` with ``W'[(m, p, q), c] = W[c, m, p, q]`` (bias ``B[m]`` repeated per tap) computes every
value, and ``y = Reshape(Transpose(Reshape(z, [N, M, kh, kw, H, W]), [0, 1, 4, 2, 5, 3]), [N, M, H*kh, W*kw])``
puts them in place (then a Slice for ``pads``).  The Conv runs on the native pointwise driver; the
rearrangement is index maps that the clusterer fuses into the kernel reading it.  Before, the node ran on the
float64 reference kernel: PP-OCRv4's detector spent 2.2 ms of 13 in one such ConvTranspose (onnxruntime 0.64).

Declined: not 2-D, group != 1, a non-constant weight or bias, dilations, output_padding or output_shape given,
auto_pad other than NOTSET, kernel != strides, non-float dtype.  Overlapping ConvTransposes keep the reference
kernel.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ops.builder import GraphBuilder
from .emit import const_input, input_value, require_float
from .registry import Declined, expander


@expander("ConvTranspose")
def expand_conv_transpose(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    require_float(x, "ConvTranspose")
    if x.type.rank != 4:
        raise Declined(f"rank {x.type.rank} input (only 2-D ConvTransposes are expanded)")
    w = const_input(node, 1)
    bias = const_input(node, 2)
    a = node.attrs
    if int(a.get("group", 1)) != 1:
        raise Declined(f"group={a.get('group')}")
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", ""):
        raise Declined(f"auto_pad={a['auto_pad']}")
    if a.get("output_shape") or any(int(p) for p in a.get("output_padding", ()) or ()):
        raise Declined("output_shape/output_padding")
    if any(int(d) != 1 for d in a.get("dilations", (1, 1)) or (1, 1)):
        raise Declined(f"dilations {a.get('dilations')}")
    n, c, h, wd = x.shape
    if w.ndim != 4 or w.shape[0] != c:
        raise Declined(f"weight {tuple(w.shape)} for {c} input channels")
    m, kh, kw = (int(s) for s in w.shape[1:])
    strides = tuple(int(s) for s in a.get("strides", (1, 1)) or (1, 1))
    if strides != (kh, kw):
        raise Declined(f"kernel {kh}x{kw} with strides {strides}: windows overlap or leave gaps")
    pads = tuple(int(p) for p in a.get("pads", (0, 0, 0, 0)) or (0, 0, 0, 0))
    if len(pads) != 4 or min(pads) < 0:
        raise Declined(f"pads {pads}")
    dt = x.dtype.np
    w2 = np.ascontiguousarray(np.asarray(w).transpose(1, 2, 3, 0).reshape(m * kh * kw, c, 1, 1), dtype=dt)
    ins = [x, b.const(w2)]
    if bias is not None:
        ins.append(b.const(np.repeat(np.asarray(bias, dtype=dt).reshape(m), kh * kw)))
    z = b.op("Conv", *ins, kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
    z = b.op("Reshape", z, b.const(np.asarray([n, m, kh, kw, h, wd], np.int64)))
    z = b.op("Transpose", z, perm=[0, 1, 4, 2, 5, 3])
    y = b.op("Reshape", z, b.const(np.asarray([n, m, h * kh, wd * kw], np.int64)))
    if any(pads):
        starts = np.asarray(pads[:2], np.int64)
        ends = np.asarray([h * kh - pads[2], wd * kw - pads[3]], np.int64)
        y = b.op("Slice", y, b.const(starts), b.const(ends), b.const(np.asarray([2, 3], np.int64)))
    return [y]
