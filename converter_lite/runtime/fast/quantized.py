"""``QuantizedConv`` on the native int8 convolution (kernels/qconv/; a depthwise one on kernels/qconv_depthwise/):
the weights packed once (shared by every plan binding them), one record per bind; the reference kernel where the
model's native code lacks the driver or the buffers do not fit."""
from __future__ import annotations

from functools import partial

import numpy as np

from ...kernels.packing import shared
from ...kernels.qconv.abi import QCONV_SYMBOL
from ...kernels.qconv.bind import PackedQConv, qconv_step
from ...kernels.qconv_depthwise.abi import SYMBOL as QDW_SYMBOL
from ...kernels.qconv_depthwise.bind import PackedQDepthwise, qdw_step
from ...ops.registry import OPS
from ..program import Impl, NodeCtx


def _quantized_conv(ctx: NodeCtx):
    xs, xz, w, ws, b = (ctx.const(i) for i in range(1, 6))
    depthwise = w is not None and int(ctx.attrs.get("group", 1)) != 1
    addr = ctx.native(QDW_SYMBOL if depthwise else QCONV_SYMBOL)
    if not addr or any(v is None for v in (xs, xz, w, ws)):
        return None
    attrs = ctx.attrs
    pads = tuple(int(p) for p in attrs.get("pads", (0, 0, 0, 0))) if attrs.get("auto_pad", "NOTSET") == "NOTSET" \
        else (0, 0, 0, 0)
    dil = tuple(int(d) for d in attrs.get("dilations", (1, 1)))
    strides = tuple(int(d) for d in attrs.get("strides", (1, 1)))
    sx, zx = np.float32(np.asarray(xs).reshape(())), int(np.asarray(xz).reshape(()))
    ys, yz = ctx.const(6), ctx.const(7)
    requantize = None if ys is None else (float(np.asarray(ys).reshape(())), int(np.asarray(yz).reshape(())))
    clamp = attrs.get("clamp")
    clamp = None if clamp is None else (float(clamp[0]), float(clamp[1]))
    silu_q = tuple(None if attrs.get(k) is None else (float(attrs[k][0]), int(attrs[k][1]))
                   for k in ("silu_sigmoid_q", "silu_product_q"))
    if depthwise:
        packed = shared(w, ("qdw", float(sx), zx), lambda: PackedQDepthwise(w, ws, sx, zx, b))
        step_of = qdw_step
    else:
        packed = shared(w, ("qconv", float(sx), zx), lambda: PackedQConv(w, ws, sx, zx, b))
        step_of = qconv_step
    compute, node_attrs = OPS["QuantizedConv"].compute, ctx.node.attrs

    def bind(ins, outs, scratch, nt=1):
        step = step_of(addr, packed, ins[0], outs[0], pads, dil, nt, strides=strides, clamp=clamp,
                       requantize=requantize, silu=bool(attrs.get("silu")), silu_requantize=silu_q)
        return step or partial(lambda i, o: np.copyto(o, compute(node_attrs, *i)), ins, outs[0])
    return Impl(bind=bind)


QUANTIZED_FAST = {"QuantizedConv": _quantized_conv}
