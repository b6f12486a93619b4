"""Recurrent layers writing into the plan's buffers.  A float32 LSTM, GRU or RNN whose node records the native
driver (kernels/rnn/: every step of every direction and batch row in one foreign call, gates in registers,
weights packed at load) runs there: openWakeWord's silero VAD's one-step LSTMs, hidden 64, 15 -> 2.2 us each
(float32 results, within 1e-6 of the reference).  Otherwise an LSTM (float64, a model converted before the
driver, no native code) runs the reference kernel's numpy operations (``ops/rnn.py`` ``_recurrence``) in the
same order and in float64, so results are bit-identical, with what the reference redoes every call done once
per plan: the weights converted to float64, the input order of each direction, the step buffers; a GRU or RNN
runs the reference kernel itself.

The converter unrolls a layer of known length into MatMuls and fused gate kernels (passes/expand/rnn.py: up to
4 steps where the driver takes the layer, 96 otherwise); these kernels run the others: a sequence length known only at run time (a model
converted without ``--inputShape``, planned per shape by runtime/shape_plans.py, and If branches made static
there by concretize.py) or a long one.  openWakeWord's copy of silero VAD has two such LSTMs of one step,
hidden 64: 88 us each on the reference kernel (float64 conversions of the weights, splits, ``np.where`` of the
state, fancy-indexed stores), 12-20 us on the numpy path here (about 20 numpy calls a step), 2.2 us on the
driver.

Without peepholes (``P`` absent, so zero) the reference's ``pi * C`` and ``pf * C`` are one array (0, or NaN where
C is not finite), computed once, and the output gate ``sigmoid(go + po * C')`` is computed as ``sigmoid(go) +
po * C'``: the same bits, since adding 0 changes neither a sigmoid's input (but -0, which it maps like 0) nor its
output, and a NaN term makes both NaN.  So the i, o and f gates take one sigmoid of their three slices together.

Taken (``_layer``): constant W, R and B, no ``sequence_lens`` (or a constant one of full lengths), no ``clip``,
the default activations, and for an LSTM no peepholes and no ``input_forget``; the reference kernel runs the
rest.
"""
from __future__ import annotations

import math

import numpy as np

from ...kernels.gemm.bind import PackedB, gemm_driver, gemm_step
from ...kernels.native_call import data_address
from ...kernels.rnn.abi import DEFAULT_ACTIVATIONS, GATES, GRU_LINEAR, GRU_RESET, LSTM, RNN
from ...kernels.rnn.abi import SYMBOL as RNN_SYMBOL
from ...kernels.rnn.bind import RnnWeights, rnn_step
from ..program import Impl, NodeCtx

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
ALIGN = 64
# input rows (steps x batch) from which the input's part of the gates is one GEMM ahead of the recurrence: below,
# two extra foreign calls cost more than the driver's own loop over the rows (a 2-step layer, hidden 64: 7.4 us
# with them, where the unrolled layer takes 3.8)
XW_MIN_ROWS = 4
STATES = {"LSTM": (5, 6), "GRU": (5,), "RNN": (5,)}     # initial_h (, initial_c) input positions


def _layer(ctx: NodeCtx) -> dict | None:
    """The layer's geometry when either kernel here takes it (see the module doc), else None."""
    op, attrs = ctx.node.op, ctx.attrs
    x, w, r = ctx.value(0), ctx.const(1), ctx.const(2)
    if (x is None or x.dtype not in FLOATS or w is None or r is None or len(x.shape) != 3 or 0 in x.shape
            or (op == "LSTM" and (ctx.value(7) is not None or attrs.get("input_forget", 0)))
            or attrs.get("clip") is not None or any(ctx.out(k).dtype != x.dtype for k in range(len(ctx.outs)))):
        return None
    acts = attrs.get("activations")
    direction = attrs.get("direction", "forward")
    nd = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(direction)
    if nd is None or (acts and tuple(a.lower() for a in acts) != DEFAULT_ACTIVATIONS[op] * nd):
        return None
    layout = int(attrs.get("layout", 0))
    seq, batch, inp = x.shape if layout == 0 else (x.shape[1], x.shape[0], x.shape[2])
    hidden, g = int(attrs.get("hidden_size", r.shape[-1])), GATES[op]
    if w.shape != (nd, g * hidden, inp) or r.shape != (nd, g * hidden, hidden):
        return None
    b = ctx.const(3) if ctx.value(3) is not None else None
    if (ctx.value(3) is not None and b is None) or (b is not None and b.shape != (nd, 2 * g * hidden)):
        return None
    if ctx.value(4) is not None:
        lens = ctx.const(4)
        if lens is None or lens.shape != (batch,) or not (np.asarray(lens) == seq).all():
            return None
    want = (nd, batch, hidden) if layout == 0 else (batch, nd, hidden)
    for pos in STATES[op]:                             # initial state: any values, the state's shape
        v = ctx.value(pos)
        if v is not None and (v.shape != want or v.dtype != x.dtype):
            return None
    return {"x": x, "w": w, "r": r, "b": b, "nd": nd, "layout": layout, "seq": seq, "batch": batch, "inp": inp,
            "hidden": hidden, "reverse": [direction == "reverse" or d == 1 for d in range(nd)],
            "has": [ctx.value(p) is not None for p in (5, 6)], "nouts": len(ctx.outs)}


def _cell(ctx: NodeCtx) -> int:
    if ctx.node.op == "GRU":
        return GRU_LINEAR if int(ctx.attrs.get("linear_before_reset", 0)) else GRU_RESET
    return {"LSTM": LSTM, "RNN": RNN}[ctx.node.op]


def _on_driver(ctx: NodeCtx, lay: dict) -> Impl | None:
    """The layer on the native driver (kernels/rnn/) when its node records it and it is float32, else None.  With
    ``XW_MIN_ROWS`` rows of input (steps x batch) or more and the native GEMM recorded too, the input's part of
    the gates (``bias + X @ Wt``, every step and row) is one GEMM per direction before the driver runs the
    recurrence (timm's sequencer2d_s, a [1024, 192] x [192, 256] product per direction and layer)."""
    address = ctx.native(RNN_SYMBOL)
    if not address or any(lay[k].dtype != F32 for k in ("x", "w", "r")):
        return None
    pk = RnnWeights(_cell(ctx), lay["w"], lay["r"], lay["b"], lay["hidden"])
    reverse, layout, has, nd = lay["reverse"], lay["layout"], lay["has"], lay["nd"]
    rows = lay["seq"] * lay["batch"]
    gemm = gemm_driver(ctx) if rows >= XW_MIN_ROWS else None
    panels = [PackedB(np.ascontiguousarray(pk.wt[d])) for d in range(nd)] if gemm and gemm.sgemm else None
    xw_bytes = -(-nd * rows * pk.gt * 4 // ALIGN) * ALIGN if panels else 0

    def bind(ins, outs, ws, nt=1):
        x, outs = ins[0], list(outs) + [None] * (3 - len(outs))
        xw, products = None, []
        if panels and x.flags.c_contiguous:
            start = -data_address(ws) % ALIGN
            xw = ws[start:start + nd * rows * pk.gt * 4].view(F32).reshape(nd, rows, pk.gt)
            x2 = x.reshape(rows, x.shape[-1])
            products = [gemm_step(gemm, x2, panels[d], xw[d], nt, 1.0, 1.0, pk.bias[d][None, :]) for d in range(nd)]
            if any(p is None for p in products):
                xw, products = None, []
            ws = ws[start + xw.nbytes:] if xw is not None else ws
        recurrence = rnn_step(address, pk, reverse, layout, x, ins[5] if has[0] else None,
                              ins[6] if len(ins) > 6 and has[1] else None, *outs[:3], ws, nt, xw)
        if not products:
            return recurrence

        def run():
            for product in products:
                product()
            recurrence()
        run.conv_desc, run.products = recurrence.conv_desc, products     # (what the step runs, for tests)
        return run
    return Impl(bind=bind, workspace=xw_bytes + ALIGN + pk.scratch_bytes(lay["batch"]))


def _native_only(ctx: NodeCtx) -> Impl | None:
    """GRU and RNN: the driver, or the reference kernel."""
    lay = _layer(ctx)
    return None if lay is None else _on_driver(ctx, lay)


def _lstm(ctx: NodeCtx):
    lay = _layer(ctx)
    if lay is None:
        return None
    native = _on_driver(ctx, lay)
    if native is not None:
        return native
    w, r, nd, hidden, layout, batch = (lay[k] for k in ("w", "r", "nd", "hidden", "layout", "batch"))
    seq, inp, reverse, has, nouts = (lay[k] for k in ("seq", "inp", "reverse", "has", "nouts"))
    b = lay["b"] if lay["b"] is not None else np.zeros((nd, 8 * hidden))
    w64 = [w[d].astype(F64) for d in range(nd)]          # the reference's w[d].astype(f64), once
    r64 = [r[d].astype(F64) for d in range(nd)]
    b64 = b.astype(F64)
    bias_in = [b64[d, :4 * hidden] for d in range(nd)]
    bias_rec = [b64[d, 4 * hidden:] for d in range(nd)]
    pi = po = np.zeros(hidden)                           # P absent: zeros (pf * c is pi * c, see the module doc)
    shapes = {"x": (seq, batch, inp), "xr": (seq, batch, inp), "xw": (seq, batch, 4 * hidden), "y": (seq, nd, batch, hidden),
              "g": (batch, 4 * hidden), "hr": (batch, 4 * hidden), "h": (nd, batch, hidden),
              "c": (nd, batch, hidden), "t0": (batch, hidden), "t1": (batch, hidden), "s3": (batch, 3 * hidden),
              "e3": (batch, 3 * hidden)}
    sizes = {k: (math.prod(s) * 8 + 63) // 64 * 64 for k, s in shapes.items()}

    def bind(ins, outs, ws, nt=1):
        bufs, at = {}, 0
        for k, s in shapes.items():
            bufs[k] = ws[at:at + math.prod(s) * 8].view(F64).reshape(s)
            at += sizes[k]
        x64, xr, xw, y, g, hr, hs, cs = (bufs[k] for k in ("x", "xr", "xw", "y", "g", "hr", "h", "c"))
        t0, t1 = bufs["t0"], bufs["t1"]
        xin = ins[0] if layout == 0 else ins[0].transpose(1, 0, 2)
        h0 = None if not has[0] else (ins[5] if layout == 0 else ins[5].transpose(1, 0, 2))
        c0 = None if not has[1] else (ins[6] if layout == 0 else ins[6].transpose(1, 0, 2))
        gates = [(g[:, k * hidden:(k + 1) * hidden]) for k in range(4)]       # i, o, f, c
        xw_rows = [xw[s] for s in range(seq)]
        y_out = outs[0] if nouts > 0 else None
        y_view = None if y_out is None else (y_out if layout == 0 else y_out.transpose(1, 2, 0, 3))

        g3, s3, e3 = g[:, :3 * hidden], bufs["s3"], bufs["e3"]
        is_, os_, fs = s3[:, :hidden], s3[:, hidden:2 * hidden], s3[:, 2 * hidden:]

        one = np.ones((), F64)                         # (a Python 1 costs ~0.5 us a call to convert)

        def sig3(v, out):                              # the reference's 1 / (1 + np.exp(-x))
            np.negative(v, e3)
            np.exp(e3, e3)
            np.add(one, e3, e3)
            np.divide(one, e3, out)

        def run():
            np.copyto(x64, xin)
            if h0 is None:
                hs.fill(0.0)
            else:
                np.copyto(hs, h0)
            if c0 is None:
                cs.fill(0.0)
            else:
                np.copyto(cs, c0)
            for d in range(nd):
                xo = x64
                if reverse[d]:                         # the reference's x[order, cols]: a contiguous copy
                    np.copyto(xr, x64[::-1])
                    xo = xr
                np.matmul(xo, w64[d].T, out=xw)
                np.add(xw, bias_in[d], out=xw)
                rwt, rb = r64[d].T, bias_rec[d]
                h, c = hs[d], cs[d]
                gi, gf, gc = gates[0], gates[2], gates[3]
                for s in range(seq):
                    np.matmul(h, rwt, out=hr)
                    np.add(xw_rows[s], hr, out=g)
                    np.add(g, rb, out=g)
                    np.multiply(pi, c, out=t0)         # pi * c = pf * c (both zero): 0, or NaN where c is not finite
                    np.add(gi, t0, out=gi)
                    np.add(gf, t0, out=gf)
                    sig3(g3, s3)                       # i, o, f at once; o = sigmoid(go), see the module doc
                    np.multiply(fs, c, out=t0)
                    np.tanh(gc, out=t1)
                    np.multiply(is_, t1, out=t1)
                    np.add(t0, t1, out=c)              # C
                    np.multiply(po, c, out=t1)
                    np.add(os_, t1, out=os_)
                    np.tanh(c, out=t1)
                    np.multiply(os_, t1, out=h)        # H
                    y[seq - 1 - s if reverse[d] else s, d] = h
            if y_view is not None:
                np.copyto(y_view, y, casting="unsafe")
            if nouts > 1:
                np.copyto(outs[1] if layout == 0 else outs[1].transpose(1, 0, 2), hs, casting="unsafe")
            if nouts > 2:
                np.copyto(outs[2] if layout == 0 else outs[2].transpose(1, 0, 2), cs, casting="unsafe")
        return run
    return Impl(bind=bind, workspace=sum(sizes.values()) + 64)


RNN_FAST = {"LSTM": _lstm, "GRU": _native_only, "RNN": _native_only}
