"""DepthwiseConv: a depthwise 2-D Conv (``group == C_in == C_out``, constant weights) -> Pad + shifted
Slices, each times its per-channel weight, summed.

    y[n, c, i, j] = bias[c] + sum_{p, q} W[c, 0, p, q] * xp[n, c, i*sh + p*dh, j*sw + q*dw]

where ``xp = Pad(x, pads)`` (zeros).  One ``Slice(xp, starts=(p*dh, q*dw), ends, steps=(sh, sw))`` per tap
gives the ``[N, C, OH, OW]`` window of that tap; it is multiplied by the constant ``W[:, 0, p, q]`` as a
``[C, 1, 1]`` constant and the products are added in tap order (then the bias, when given).  Every emitted
op but the Pad is an index map or elementwise, so the clusterer makes one kernel of the whole convolution
together with its epilogue (BatchNorm's scale/shift, Relu/Clip/GELU); the code generator reads the taps
through index maps and never materializes a slice.  The Pad, read only by the Slices, is a window Pad
(fuse/cluster.py window_pad): it joins the kernel, which reads the unpadded input with bounds checks only on
the border (codegen/interior.py); with Pad in disable_cluster_ops it runs before the kernel, one copy.

NHWC variant: when the output is read only by ``Transpose(perm=(0, 2, 3, 1))`` (ConvNeXt's permute before
LayerNorm), the same sum is taken on ``Transpose(x)`` in ``[N, H, W, C]`` with ``[C]`` weights and transposed
back; the two transposes then cancel, and the kernel's innermost loop runs over contiguous channels instead of
gathering with stride H*W (measured 1.7x faster on convnext_mini than fusing the transpose into the NCHW
kernel).  The native driver still comes first: with the taps, convnext_mini ran 0.738 ms on 2 threads, with the
driver and a separate transpose 0.656 (onnxruntime 0.788); timm's convnext_nano at 224 x 224 14.66 -> 13.96 ms
(onnxruntime 12.72).

Declined: not 2-D (rank-4 input), group != C_in, channel multiplier != 1, a non-constant weight or bias,
``auto_pad`` other than NOTSET, a kernel larger than ``MAX_KERNEL`` per axis, non-float dtype; and float32
stride-1 Convs with a square kernel whose output is as wide as the input (before a zero Pad the runtime absorbs),
whatever reads them: the native depthwise driver runs those as flat planes, faster than the taps; and stride-2
ones on inputs at most STRIDE2_MAX_WIDTH wide (its row form), unless they feed NHWC transposes.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ops.builder import GraphBuilder
from .emit import const_input, input_value, require_float
from .registry import Declined, expander

NHWC, NCHW = (0, 2, 3, 1), (0, 3, 1, 2)
MAX_KERNEL = 7          # 7x7 = 49 taps; larger kernels make kernels too long to be worth unrolling
# stride-2 depthwise Convs on inputs at most this wide run on the driver's row form: PP-LCNet's at 1 thread,
# 256x14x14 5x5 83 us (taps 114), 128x28x28 3x3 32 (59), 64x56x56 3x3 54 (79); 32x112x112 3x3 156 (110)
STRIDE2_MAX_WIDTH = 56


@expander("Conv")
def expand_depthwise_conv(b: GraphBuilder, node: Node) -> list:
    """The expand-list entry "Conv" (DepthwiseConv): declines every Conv that is not depthwise."""
    x = input_value(b, node, 0)
    require_float(x, "DepthwiseConv")
    if x.type.rank != 4:
        raise Declined(f"rank {x.type.rank} input (only 2-D depthwise convolutions are expanded)")
    c = x.shape[1]
    group = int(node.attrs.get("group", 1))
    wt = const_input(node, 1)
    if group != c or wt.shape[0] != c or wt.shape[1] != 1:
        raise Declined(f"not depthwise (group={group}, C_in={c}, weight {tuple(wt.shape)})")
    if node.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", ""):
        raise Declined(f"auto_pad={node.attrs['auto_pad']}")
    kh, kw = int(wt.shape[2]), int(wt.shape[3])
    if kh > MAX_KERNEL or kw > MAX_KERNEL:
        raise Declined(f"kernel {kh}x{kw} larger than {MAX_KERNEL}x{MAX_KERNEL}")
    bias = const_input(node, 2)
    sh, sw = (int(s) for s in node.attrs.get("strides", (1, 1)))
    dh, dw = (int(d) for d in node.attrs.get("dilations", (1, 1)))
    pads = tuple(int(p) for p in node.attrs.get("pads", (0, 0, 0, 0)))
    if len(pads) != 4 or min(pads) < 0:
        raise Declined(f"pads {pads}")
    out = node.outputs[0].type.shape
    oh, ow = int(out[2]), int(out[3])
    nhwc = _feeds_nhwc_transposes(b, node)
    if native_driver_runs(x, (kh, kw), (sh, sw), ow, nhwc):
        raise Declined("the native depthwise driver runs this depthwise Conv")
    if nhwc:                            # work in [N, H, W, C]: the taps are then contiguous over C
        x = b.op("Transpose", x, perm=NHWC)
    h_ax, w_ax = (1, 2) if nhwc else (2, 3)
    chan = (c,) if nhwc else (c, 1, 1)
    xp = x
    if any(pads):
        begin, end = [0] * 4, [0] * 4
        begin[h_ax], begin[w_ax], end[h_ax], end[w_ax] = pads
        xp = b.op("Pad", x, b.const(np.asarray(begin + end, np.int64)))
    axes = b.const(np.asarray((h_ax, w_ax), np.int64))
    steps = b.const(np.asarray((sh, sw), np.int64))
    wt = wt.astype(x.dtype.np)
    acc = None
    for p in range(kh):
        for q in range(kw):
            r0, c0 = p * dh, q * dw
            starts = b.const(np.asarray((r0, c0), np.int64))
            ends = b.const(np.asarray((r0 + (oh - 1) * sh + 1, c0 + (ow - 1) * sw + 1), np.int64))
            tap = b.op("Slice", xp, starts, ends, axes, steps)
            term = tap * b.const(np.ascontiguousarray(wt[:, 0, p, q]).reshape(chan))
            acc = term if acc is None else acc + term
    if bias is not None:
        acc = acc + b.const(bias.astype(x.dtype.np).reshape(chan))
    if nhwc:
        acc = b.op("Transpose", acc, perm=NCHW)
    return [acc]


def native_driver_runs(x, kernel: tuple[int, int], strides: tuple[int, int], ow: int, nhwc: bool = False) -> bool:
    """Whether the Conv is left to the native depthwise driver (kernels/conv_depthwise/), float32 only:
    * stride 1, a square kernel, output rows as wide as the input's ("same" padding; a zero Pad in front was
      folded into the Conv's pads by pad_conv_fusion, which runs before the expander): the driver's flat planes,
      2-4x faster than the fused tap kernel (mobilenet_v2_half, one thread: 96 x 40 x 40 3x3 32 us against 65,
      96 x 20 x 20 8 against 21);
    * stride 2 on an input at most ``STRIDE2_MAX_WIDTH`` wide, not feeding NHWC transposes: its row form
      (PP-LCNet orientation at 2 threads: 3% faster in all, measured in one process)."""
    if x.dtype.np != np.float32:
        return False
    if strides == (1, 1):
        return kernel[0] == kernel[1] and ow == int(x.shape[3])
    return strides == (2, 2) and not nhwc and int(x.shape[3]) <= STRIDE2_MAX_WIDTH



def _feeds_nhwc_transposes(b: GraphBuilder, node: Node) -> bool:
    """The output is read only by Transposes to [N, H, W, C] (ConvNeXt's permute before LayerNorm)."""
    y = node.outputs[0]
    if not y.uses or any(y is o for o in b.graph.outputs):
        return False
    return all(u.op == "Transpose" and tuple(u.attrs.get("perm", ())) == NHWC for u, _ in y.uses)
