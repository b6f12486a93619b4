"""Recurrent layers: RNN, GRU, LSTM (opset 22: ``layout``, ``direction``, ``sequence_lens``, ``clip``,
custom ``activations``; LSTM peepholes ``P`` and ``input_forget``; GRU ``linear_before_reset``).

Per direction, with ``clip`` bounding every gate activation's input to [-clip, clip] (not the input of LSTM's
output activation h(C), as in onnxruntime):

    RNN:  H = f(X W^T + H R^T + Wb + Rb)                                      f = Tanh
    GRU:  z = f(X Wz^T + H Rz^T + Wbz + Rbz),  r = f(X Wr^T + H Rr^T + Wbr + Rbr)      f = Sigmoid
          h = g(X Wh^T + (r * H) Rh^T + Rbh + Wbh)        (linear_before_reset = 0)   g = Tanh
          h = g(X Wh^T + r * (H Rh^T + Rbh) + Wbh)        (linear_before_reset = 1)
          H = (1 - z) * h + z * H
    LSTM: i = f(.. + Pi * C), f_ = f(.. + Pf * C) (or 1 - i with input_forget), c = g(..)
          C = f_ * C + i * c,  o = f(.. + Po * C),  H = o * h(C)                      f, g, h = Sigmoid, Tanh, Tanh

Gate order in W/R/B: GRU z, r, h; LSTM i, o, f, c; P: i, o, f.  Batch row b only runs its first
``sequence_lens[b]`` steps (the reverse direction starts at its last valid step); Y is 0 past that length and
Y_h/Y_c hold the state after the last valid step.  Computed in float64, returned in X's dtype.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from .registry import KernelError, reference

# name -> (function of (x, alpha, beta), default alpha, default beta); names compare case-insensitively
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), None, None),
}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}


def _activations(op: str, attrs, num_dirs: int) -> list[list]:
    """Per direction, the list of activation callables (alphas/betas are consumed in order by the functions
    that take them, as onnxruntime does)."""
    names = list(attrs.get("activations") or _DEFAULT_ACTS[op] * num_dirs)
    per_dir = len(_DEFAULT_ACTS[op])
    if len(names) != per_dir * num_dirs:
        raise KernelError(f"{op} needs {per_dir * num_dirs} activations, got {names}")
    alphas, betas = list(attrs.get("activation_alpha", ())), list(attrs.get("activation_beta", ()))
    funcs = []
    for name in names:
        try:
            fn, da, db = _ACTIVATIONS[name.lower()]
        except KeyError:
            raise KernelError(f"{op} activation {name!r} is not supported") from None
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        funcs.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    return [funcs[d * per_dir:(d + 1) * per_dir] for d in range(num_dirs)]


def _dims(op: str, attrs, x_shape, w_shape, r_shape) -> tuple[int, int, int, int]:
    """(seq_length, batch, hidden, num_directions), checking W/R shapes."""
    num_dirs = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(attrs.get("direction", "forward"))
    if num_dirs is None:
        raise KernelError(f"{op} direction {attrs.get('direction')!r} is not forward/reverse/bidirectional")
    if len(x_shape) != 3:
        raise KernelError(f"{op} X must be 3-D, got {list(x_shape)}")
    seq, batch, inp = x_shape if attrs.get("layout", 0) == 0 else (x_shape[1], x_shape[0], x_shape[2])
    hidden = attrs.get("hidden_size", r_shape[-1])
    g = _GATES[op]
    if tuple(w_shape) != (num_dirs, g * hidden, inp) or tuple(r_shape) != (num_dirs, g * hidden, hidden):
        raise KernelError(f"{op} W {list(w_shape)} / R {list(r_shape)} do not fit X {list(x_shape)}, "
                          f"hidden_size {hidden}, {num_dirs} direction(s)")
    return seq, batch, hidden, num_dirs


def _out_types(op: str, node) -> list[TensorType]:
    x, w, r = (node.inputs[i].type for i in range(3))
    seq, batch, hidden, nd = _dims(op, node.attrs, x.shape, w.shape, r.shape)
    if node.attrs.get("layout", 0) == 0:
        y, state = (seq, nd, batch, hidden), (nd, batch, hidden)
    else:
        y, state = (batch, seq, nd, hidden), (batch, nd, hidden)
    return [TensorType(x.dtype, y)] + [TensorType(x.dtype, state)] * (2 if op == "LSTM" else 1)


def _recurrence(op: str, attrs, x, w, r, b, seq_lens, h0, c0, p):
    seq, batch, hidden, nd = _dims(op, attrs, x.shape, w.shape, r.shape)
    layout, g = attrs.get("layout", 0), _GATES[op]
    f64 = np.float64
    x = (x if layout == 0 else x.transpose(1, 0, 2)).astype(f64)

    def state(v):
        if v is None:
            return np.zeros((nd, batch, hidden))
        return (v if layout == 0 else v.transpose(1, 0, 2)).astype(f64)

    h_all, c_all = state(h0), state(c0)
    b = np.zeros((nd, 2 * g * hidden)) if b is None else b.astype(f64)
    p = np.zeros((nd, 3 * hidden)) if p is None else p.astype(f64)
    lens = np.full(batch, seq, np.int64) if seq_lens is None else np.asarray(seq_lens, np.int64)
    if lens.shape != (batch,) or (lens < 0).any() or (lens > seq).any():
        raise KernelError(f"{op} sequence_lens {lens.tolist()} do not fit seq_length {seq}, batch {batch}")
    clip = attrs.get("clip")
    acts = _activations(op, attrs, nd)
    y = np.zeros((seq, nd, batch, hidden))
    cols = np.arange(batch)
    for d in range(nd):
        reverse = attrs.get("direction", "forward") == "reverse" or d == 1
        steps = np.arange(seq)[:, None]
        valid = steps < lens                                               # [seq, batch]
        order = np.where(valid, lens - 1 - steps if reverse else steps, 0)  # time index of step s, row b
        xw = x[order, cols] @ w[d].astype(f64).T + b[d, :g * hidden]         # [seq, batch, g*hidden]
        rw, rb = r[d].astype(f64), b[d, g * hidden:]
        pi, po, pf = np.split(p[d], 3)
        h, c = h_all[d], c_all[d]
        def act(k, v, clipped=True, fa=acts[d]):
            return fa[k](np.clip(v, -clip, clip) if clip is not None and clipped else v)

        for s in range(seq):
            if op == "RNN":
                h_new, c_new = act(0, xw[s] + h @ rw.T + rb), c
            elif op == "GRU":
                xz, xr, xh = np.split(xw[s], 3, axis=1)
                rz, rr, rh = np.split(rw, 3)
                bz, br, bh = np.split(rb, 3)
                z = act(0, xz + h @ rz.T + bz)
                rt = act(0, xr + h @ rr.T + br)
                if attrs.get("linear_before_reset", 0):
                    hh = act(1, xh + rt * (h @ rh.T + bh))
                else:
                    hh = act(1, xh + (rt * h) @ rh.T + bh)
                h_new, c_new = (1 - z) * hh + z * h, c
            else:
                gi, go, gf, gc = np.split(xw[s] + h @ rw.T + rb, 4, axis=1)
                i = act(0, gi + pi * c)
                f = 1 - i if attrs.get("input_forget", 0) else act(0, gf + pf * c)
                c_new = f * c + i * act(1, gc)
                o = act(0, go + po * c_new)
                h_new = o * act(2, c_new, clipped=False)   # onnxruntime clips the gates, not the cell
            m = valid[s][:, None]
            h, c = np.where(m, h_new, h), np.where(m, c_new, c)
            y[order[s][valid[s]], d, cols[valid[s]]] = h_new[valid[s]]
        h_all[d], c_all[d] = h, c
    if layout == 0:
        return y, h_all, c_all
    return y.transpose(2, 0, 1, 3), h_all.transpose(1, 0, 2), c_all.transpose(1, 0, 2)


@reference("RNN", infer=lambda n: _out_types("RNN", n))
def rnn(attrs, x, w, r, b=None, sequence_lens=None, initial_h=None):
    y, h, _ = _recurrence("RNN", attrs, x, w, r, b, sequence_lens, initial_h, None, None)
    return y.astype(x.dtype), h.astype(x.dtype)


@reference("GRU", infer=lambda n: _out_types("GRU", n))
def gru(attrs, x, w, r, b=None, sequence_lens=None, initial_h=None):
    y, h, _ = _recurrence("GRU", attrs, x, w, r, b, sequence_lens, initial_h, None, None)
    return y.astype(x.dtype), h.astype(x.dtype)


@reference("LSTM", infer=lambda n: _out_types("LSTM", n))
def lstm(attrs, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None):
    y, h, c = _recurrence("LSTM", attrs, x, w, r, b, sequence_lens, initial_h, initial_c, p)
    return y.astype(x.dtype), h.astype(x.dtype), c.astype(x.dtype)
