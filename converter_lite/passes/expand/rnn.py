"""Recurrent layers (LSTM, GRU, RNN) of a few time steps -> MatMuls and gate arithmetic, unrolled (up to
``DRIVER_STEPS`` steps where the native recurrent driver could run the layer, ``MAX_UNROLL_STEPS`` otherwise).

Streaming models (voice-activity detectors, keyword spotters, per-token decoders) run an LSTM on one to a
few steps per call; interpreting it costs far more than its arithmetic.  Unrolled, each step is one MatMul
of the state (a GEMM driver) and gate arithmetic that the cluster pass fuses into native kernels; the input
projection of all steps is one MatMul up front.  Per direction d, with the weights transposed and the two
biases summed at conversion (``ops/rnn.py`` has the equations and gate orders):

    XW = X W^T + (Wb + Rb)                       all steps at once, [T*B, G*H]
    step t:  gates = XW[t] + H R^T               (GRU: the h gate's R part apart, see linear_before_reset)
             LSTM: i, o, f, c~ = f(..), f(..), f(..), g(..);  C = f*C + i*c~;  H = o * h(C)
             GRU:  z, r = f(..);  h~ = g(..);  H = (1 - z) * h~ + z * H
             RNN:  H = f(gates)

Declined (the node stays, run by the runtime's kernel): more than ``DRIVER_STEPS`` steps of a layer the native
recurrent driver takes (kernels/rnn/), more than ``MAX_UNROLL_STEPS`` steps, weights or
biases computed at run time, a ``sequence_lens`` that is not constant and full, LSTM ``input_forget``,
activations other than Sigmoid/Tanh/Relu, non-float32 data.  ``clip`` bounds each gate's input, as the
reference kernel does.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ir.dtype import DType
from ...ops.builder import BValue, GraphBuilder
from ...kernels.rnn.abi import GATES, driver_takes
from .emit import input_value, maximum, minimum, output_used, reshape, sigmoid, tanh
from .registry import Declined, expander

# Unrolled, consecutive steps run as one foreign call of native steps.  Measured (bidirectional LSTM, hidden 96,
# batch 1, one thread): 64 steps 0.51 ms (onnxruntime 0.29 ms, the interpreted layer 5.1 ms), conversion 5.0 s;
# 96 steps 0.87 ms (0.42 ms), conversion 6.3 s.  Longer sequences stay one node (reference kernel).
MAX_UNROLL_STEPS = 96
# ... but a layer the native recurrent driver takes (kernels/rnn/abi.py driver_takes) is unrolled only up to
# DRIVER_STEPS steps, the streaming case, where the unrolled gates fuse with their neighbours.  Measured on 2
# threads, bidirectional LSTM hidden 96, batch 1 (unrolled / driver / onnxruntime, us): 4 steps 12.8 / 14.8 /
# 23.3, 8 steps 25.9 / 22.4 / 36.1, 16 steps 51.2 / 35.1 / 63.2, 64 steps 201 / 131 / 235; a one-step LSTM of
# hidden 64: 3.8 / 7.4 / 8.6.  timm's sequencer2d_s (36 bidirectional LSTMs of 16-32 steps over 16-32 rows)
# took 635 s to convert unrolled (the cluster pass on ~10^4 nodes) and ran 1.69x onnxruntime; on the driver it
# converts in 1.2 s and runs 0.90x (40.3 vs 44.9 ms; 32 steps over 8 rows: unrolled 386 us, driver 217,
# onnxruntime 235).
DRIVER_STEPS = 4
_DEFAULTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
_ACTS = {"sigmoid": sigmoid, "tanh": tanh, "relu": lambda x: maximum(x, 0.0)}


def _const(node: Node, i: int, what: str) -> np.ndarray | None:
    v = node.inputs[i] if i < len(node.inputs) else None
    if v is None:
        return None
    if v.const is None:
        raise Declined(f"{what} is computed at run time")
    return np.asarray(v.const)


def _slice(b: GraphBuilder, x: BValue, axis: int, start: int, end: int) -> BValue:
    if start == 0 and end == x.shape[axis]:
        return x
    return b.op("Slice", x, b.const(np.array([start], np.int64)), b.const(np.array([end], np.int64)),
                b.const(np.array([axis], np.int64)))


def _matmul(b: GraphBuilder, x: BValue, w: np.ndarray) -> BValue:
    return b.op("MatMul", x, b.const(np.ascontiguousarray(w, dtype=np.float32)))


def _acts(node: Node, dirs: int) -> list[list]:
    names = list(node.attrs.get("activations") or _DEFAULTS[node.op] * dirs)
    if node.attrs.get("activation_alpha") or node.attrs.get("activation_beta"):
        raise Declined("activation alpha/beta")
    try:
        funcs = [_ACTS[n.lower()] for n in names]
    except KeyError as e:
        raise Declined(f"activation {e.args[0]!r}") from None
    per = len(_DEFAULTS[node.op])
    if len(funcs) != per * dirs:
        raise Declined(f"{len(funcs)} activations for {dirs} direction(s)")
    return [funcs[d * per:(d + 1) * per] for d in range(dirs)]


@expander("LSTM", "GRU", "RNN")
def expand_rnn(b: GraphBuilder, node: Node) -> list:
    op = node.op
    x = input_value(b, node, 0)
    if x.dtype is not DType.float32:
        raise Declined(f"{op} expansion handles float32, got {x.dtype.name}")
    if op == "LSTM" and int(node.attrs.get("input_forget", 0)):
        raise Declined("input_forget")
    layout = int(node.attrs.get("layout", 0))
    if layout:
        x = b.op("Transpose", x, perm=(1, 0, 2))
    steps, batch, size = x.shape
    if steps > MAX_UNROLL_STEPS or steps == 0 or batch == 0:
        raise Declined(f"{steps} time steps (unrolls at most {MAX_UNROLL_STEPS})")
    if steps > DRIVER_STEPS and driver_takes(node):
        raise Declined(f"{steps} time steps: the native recurrent driver runs them (unrolls at most {DRIVER_STEPS})")
    w, r = _const(node, 1, "W"), _const(node, 2, "R")
    bias = _const(node, 3, "B")
    lens = _const(node, 4, "sequence_lens")
    if lens is not None and not np.all(lens == steps):
        raise Declined("sequence_lens shorter than the sequence")
    peep = _const(node, 7, "P") if op == "LSTM" else None
    dirs, g = w.shape[0], GATES[op]
    hidden = r.shape[-1]
    acts = _acts(node, dirs)
    clip = node.attrs.get("clip")
    direction = node.attrs.get("direction", "forward")
    if (dirs == 2) != (direction == "bidirectional"):
        raise Declined(f"{dirs} weight directions for direction={direction!r}")
    init_h = input_value(b, node, 5)
    init_c = input_value(b, node, 6) if op == "LSTM" else None
    if layout:
        init_h = None if init_h is None else b.op("Transpose", init_h, perm=(1, 0, 2))
        init_c = None if init_c is None else b.op("Transpose", init_c, perm=(1, 0, 2))
    zeros = b.wrap(b.const(np.zeros((batch, hidden), np.float32)))
    x2 = reshape(x, (steps * batch, size))
    ys, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wb = bias[d, :g * hidden] + bias[d, g * hidden:] if bias is not None else np.zeros(g * hidden, np.float32)
        rb_h = bias[d, g * hidden + 2 * hidden:] if bias is not None and op == "GRU" else None
        lbr = op == "GRU" and int(node.attrs.get("linear_before_reset", 0))
        if op == "GRU":          # the h gate's recurrent bias stays apart (it is multiplied by r in lbr mode)
            wb = wb.copy()
            if rb_h is not None:
                wb[2 * hidden:] -= rb_h
        xw = _matmul(b, x2, w[d].T) + b.const(wb.astype(np.float32))
        h = zeros if init_h is None else reshape(_slice(b, init_h, 0, d, d + 1), (batch, hidden))
        c = zeros if init_c is None else reshape(_slice(b, init_c, 0, d, d + 1), (batch, hidden))
        outs: list = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            xt = _slice(b, xw, 0, t * batch, (t + 1) * batch)
            h, c = _step(b, op, xt, h, c, r[d], rb_h, lbr, peep[d] if peep is not None else None, acts[d], clip,
                         hidden)
            outs[t] = h
        ys.append(outs)
        hs.append(h)
        cs.append(c)
    results: list = [None, None, None][:len(node.outputs)]
    if output_used(b, node, 0):
        per_step = [b.op("Concat", *[reshape(ys[d][t], (1, 1, batch, hidden)) for d in range(dirs)], axis=1)
                    if dirs > 1 else reshape(ys[0][t], (1, 1, batch, hidden)) for t in range(steps)]
        y = b.op("Concat", *per_step, axis=0) if steps > 1 else per_step[0]
        results[0] = b.op("Transpose", y, perm=(2, 0, 1, 3)) if layout else y
    for k, states in ((1, hs), (2, cs)):
        if output_used(b, node, k):
            s = [reshape(v, (1, batch, hidden)) for v in states]
            s = b.op("Concat", *s, axis=0) if dirs > 1 else s[0]
            results[k] = b.op("Transpose", s, perm=(1, 0, 2)) if layout else s
    return results


def _clip(x: BValue, clip) -> BValue:
    return x if clip is None else minimum(maximum(x, -float(clip)), float(clip))


def _step(b, op, xt, h, c, r, rb_h, lbr, peep, acts, clip, hidden):
    if op == "RNN":
        return acts[0](_clip(xt + _matmul(b, h, r.T), clip)), c
    if op == "LSTM":
        gates = xt + _matmul(b, h, r.T)
        gi, go, gf, gc = (_slice(b, gates, 1, k * hidden, (k + 1) * hidden) for k in range(4))
        f_, g_, h_ = acts
        if peep is not None:
            gi, gf = _peephole(b, gi, peep, 0, c, hidden), _peephole(b, gf, peep, 2, c, hidden)
        c_new = f_(_clip(gf, clip)) * c + f_(_clip(gi, clip)) * g_(_clip(gc, clip))
        if peep is not None:
            go = _peephole(b, go, peep, 1, c_new, hidden)
        return f_(_clip(go, clip)) * h_(c_new), c_new
    # GRU: z, r, h gates
    f_, g_ = acts
    rz = r[:2 * hidden]
    gates = _slice(b, xt, 1, 0, 2 * hidden) + _matmul(b, h, rz.T)
    z = f_(_clip(_slice(b, gates, 1, 0, hidden), clip))
    rg = f_(_clip(_slice(b, gates, 1, hidden, 2 * hidden), clip))
    xh = _slice(b, xt, 1, 2 * hidden, 3 * hidden)
    rh = r[2 * hidden:]
    rbh = b.const((rb_h if rb_h is not None else np.zeros(hidden)).astype(np.float32))
    if lbr:
        cand = g_(_clip(xh + rg * (_matmul(b, h, rh.T) + rbh), clip))
    else:
        cand = g_(_clip(xh + _matmul(b, rg * h, rh.T) + rbh, clip))
    return (1.0 - z) * cand + z * h, c


def _peephole(b, gate, peep, k, c, hidden):
    """``gate + P_k * c`` (LSTM peepholes, P ordered input, output, forget)."""
    return gate + b.wrap(b.const(peep[k * hidden:(k + 1) * hidden].astype(np.float32))) * c
