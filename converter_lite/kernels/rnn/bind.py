"""Recurrent layers (LSTM, GRU, RNN) on the native driver (emit.py): the weights packed once, a bound step one
call on a record.

``RnnWeights(cell, w, r, b, hidden)`` packs ``W [nd, G*H, inp]``, ``R [nd, G*H, H]`` and ``B [nd, 2*G*H]`` (or
None) into the driver's layouts for ``cell`` (abi.py; emit.py's module doc); ``rnn_step(address, weights, ...)``
-> the zero-argument step.  runtime/fast/rnn.py decides which layers come here (float32, default activations, no
clip, LSTM peepholes, input_forget or partial sequence lengths) and runs the others on other kernels.
"""
from __future__ import annotations

import numpy as np

from ...ops.registry import KernelError
from ..native_call import aligned, call_driver, data_address, record
from .abi import BLOCK, EXTRA, FIELDS, GRU_LINEAR, GRU_RESET, LSTM, RNN, ROWS_MAX

F32 = np.dtype(np.float32)
GATES = {LSTM: 4, GRU_LINEAR: 3, GRU_RESET: 3, RNN: 1}
# per cell, its first phase's sections: (ONNX gate, takes W, takes R, adds Wb, adds Rb)
SECTIONS = {
    LSTM: [(q, True, True, True, True) for q in range(4)],
    GRU_LINEAR: [(0, True, True, True, True), (1, True, True, True, True), (2, True, False, True, False),
                 (2, False, True, False, True)],
    GRU_RESET: [(0, True, True, True, True), (1, True, True, True, True), (2, True, False, True, True)],
    RNN: [(0, True, True, True, True)],
}


def _round(v: int, to: int) -> int:
    return -(-v // to) * to


class RnnWeights:
    """The packed weights of one layer (see the module doc); ``hp``, ``gt``, ``gt2``: padded sizes."""

    def __init__(self, cell: int, w: np.ndarray, r: np.ndarray, b: np.ndarray | None, hidden: int):
        nd, _, inp = w.shape
        self.cell, self.nd, self.inp, self.hidden = cell, nd, inp, hidden
        self.hp = hp = _round(hidden, 16)
        sections = SECTIONS[cell]
        self.gt = gt = _round(len(sections) * hp, BLOCK)
        self.gt2 = gt2 = _round(hp, BLOCK) if cell == GRU_RESET else 0
        self.wt, self.rt, self.bias = aligned((nd, inp, gt)), aligned((nd, hidden, gt)), aligned((nd, gt))
        self.rt2, self.bias2 = aligned((nd, hidden, max(gt2, 1))), aligned((nd, max(gt2, 1)))
        g = GATES[cell]
        for q, (gate, with_w, with_r, with_wb, with_rb) in enumerate(sections):
            rows = slice(gate * hidden, (gate + 1) * hidden)
            cols = slice(q * hp, q * hp + hidden)
            if with_w:
                self.wt[:, :, cols] = w[:, rows, :].transpose(0, 2, 1)
            if with_r:
                self.rt[:, :, cols] = r[:, rows, :].transpose(0, 2, 1)
            if b is not None:
                self.bias[:, cols] = (b[:, rows] if with_wb else 0) + (b[:, g * hidden:][:, rows] if with_rb else 0)
        if cell == GRU_RESET:                            # (r * h) @ Rh^T, the state part of h's gate
            self.rt2[:, :, :hidden] = r[:, 2 * hidden:3 * hidden, :].transpose(0, 2, 1)

    def scratch_bytes(self, batch: int) -> int:
        """Per unit ``rpg`` rows of gates (both phases), h, c and r*h; units cover at most ``batch + ROWS_MAX - 1``
        rows per direction."""
        return self.nd * (batch + ROWS_MAX - 1) * (self.gt + self.gt2 + 3 * self.hp) * 4 + 64


def rows_per_group(nd: int, batch: int, nt: int) -> int:
    """Batch rows a unit takes together: up to ``ROWS_MAX`` (a weight vector loaded once for all of them), but no
    fewer units than threads where there are enough rows."""
    return max(1, min(ROWS_MAX, batch, nd * batch // max(1, nt)))


def _strides(a: np.ndarray | None, axes: tuple[int, ...], what: str) -> list[int]:
    """Element strides of ``a`` along ``axes`` (0s for None); its last axis must be contiguous."""
    if a is None:
        return [0] * len(axes)
    if a.dtype != F32 or (a.shape[-1] > 1 and a.strides[-1] != 4) or any(s % 4 or s < 0 for s in a.strides):
        raise KernelError(f"recurrent layer: the native driver cannot read {what} of strides {a.strides}")
    return [a.strides[k] // 4 for k in axes]


def rnn_step(address: int, pk: RnnWeights, reverse: list[bool], layout: int, x: np.ndarray,
              h0: np.ndarray | None, c0: np.ndarray | None, y: np.ndarray | None, yh: np.ndarray | None,
              yc: np.ndarray | None, ws: np.ndarray, nt: int, xw: np.ndarray | None = None):
    """The bound step of one layer: ``x`` the input ([seq, batch, inp], or [batch, seq, inp] for layout 1),
    ``h0``/``c0`` the initial state or None (``c0``/``yc``: LSTM only), ``y``/``yh``/``yc`` the outputs wanted or
    None, ``ws`` the scratch (``pk.scratch_bytes(batch)`` bytes); ``xw`` ([nd, rows, gt], rows in ``x``'s order)
    the input's part of the gates, bias included, when the caller computes it (then ``pk.wt`` is not read)."""
    seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    state = (0, 1) if layout == 0 else (1, 0)           # (direction, batch) axes of h0, c0, Y_h, Y_c
    i_ds, i_bs = _strides(h0, state, "initial_h")
    if c0 is not None and h0 is not None and _strides(c0, state, "initial_c") != [i_ds, i_bs]:
        raise KernelError("LSTM: initial_h and initial_c have different strides")
    if h0 is None:
        i_ds, i_bs = _strides(c0, state, "initial_c")
    o_ds, o_bs = _strides(yh if yh is not None else yc, state, "Y_h")
    if yh is not None and yc is not None and _strides(yc, state, "Y_c") != [o_ds, o_bs]:
        raise KernelError("LSTM: Y_h and Y_c have different strides")
    x_ts, x_bs = _strides(x, (0, 1) if layout == 0 else (1, 0), "X")
    y_ts, y_ds, y_bs = _strides(y, (0, 1, 2) if layout == 0 else (1, 2, 0), "Y")
    xw_ts, xw_bs = (batch, 1) if layout == 0 else (1, seq)
    at = data_address(ws)
    scratch = at + (-at) % 64

    def addr(a):
        return 0 if a is None else data_address(a)
    desc = record(FIELDS, EXTRA, {
        "cell": pk.cell, "seq": seq, "batch": batch, "rpg": rows_per_group(pk.nd, batch, nt), "inp": pk.inp, "hidden": pk.hidden, "hp": pk.hp, "gt": pk.gt,
        "gt2": pk.gt2, "nd": pk.nd,
        "reverse": sum(1 << d for d, rev in enumerate(reverse) if rev),
        "x": addr(x), "x_ts": x_ts, "x_bs": x_bs, "wt": addr(pk.wt), "rt": addr(pk.rt), "bias": addr(pk.bias),
        "rt2": addr(pk.rt2), "bias2": addr(pk.bias2),
        "xw": addr(xw), "xw_ds": 0 if xw is None else xw.strides[0] // 4, "xw_ts": xw_ts, "xw_bs": xw_bs,
        "h0": addr(h0), "c0": addr(c0), "i_ds": i_ds, "i_bs": i_bs,
        "y": addr(y), "y_ts": y_ts, "y_ds": y_ds, "y_bs": y_bs,
        "yh": addr(yh), "yc": addr(yc), "o_ds": o_ds, "o_bs": o_bs, "scratch": scratch})
    return call_driver(address, desc, max(1, nt), (x, h0, c0, y, yh, yc, ws, pk, xw))
