"""RNN / GRU / LSTM (rnn.py) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_infer, check_rejects, ours

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_OUT = {"RNN": 2, "GRU": 2, "LSTM": 3}


def rnn_inputs(op, seq=4, batch=3, inp=5, hidden=6, nd=1, layout=0, bias=True, lens=None, init=False, peep=False,
               dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    g = GATES[op]

    def r(*shape):
        return (rng.standard_normal(shape) * 0.5).astype(dtype)

    x = r(seq, batch, inp) if layout == 0 else r(batch, seq, inp)
    state = (nd, batch, hidden) if layout == 0 else (batch, nd, hidden)
    ins = {"x": x, "w": r(nd, g * hidden, inp), "r": r(nd, g * hidden, hidden),
           "b": r(nd, 2 * g * hidden) if bias else None, "sl": None if lens is None else np.array(lens, np.int32), "h0": r(*state) if init else None}
    if op == "LSTM":
        ins["c0"] = r(*state) if init else None
        ins["p"] = r(nd, 3 * hidden) if peep else None
    return ins


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens,init", [(None, False), ([4, 2, 3], True), ([1, 4, 4], False)])
def test_recurrent(op, direction, lens, init):
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(op, nd=nd, lens=lens, init=init, peep=init)
    check(op, ins, n_outputs=N_OUT[op], rtol=1e-4, atol=1e-5, hidden_size=6, direction=direction)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batch_major_layout_matches_time_major(op, direction):
    """onnxruntime has no layout=1 kernels: layout 1 must equal the (ORT-checked) layout 0 result, transposed."""
    nd = 2 if direction == "bidirectional" else 1
    ins = rnn_inputs(op, nd=nd, lens=[4, 2, 3], init=True, peep=True, seed=11)
    t0 = ours(op, ins, N_OUT[op], hidden_size=6, direction=direction)
    swapped = {k: (None if v is None else v.transpose(1, 0, 2) if k in ("x", "h0", "c0") else v)
               for k, v in ins.items()}
    t1 = ours(op, swapped, N_OUT[op], hidden_size=6, direction=direction, layout=1)
    check_infer(op, swapped, t1, hidden_size=6, direction=direction, layout=1)
    np.testing.assert_allclose(t1[0], t0[0].transpose(2, 0, 1, 3))
    for a, b in zip(t1[1:], t0[1:]):
        np.testing.assert_allclose(a, b.transpose(1, 0, 2))


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset_and_no_bias(lbr):
    ins = rnn_inputs("GRU", bias=False, init=True, seed=3)
    check("GRU", ins, n_outputs=2, rtol=1e-4, atol=1e-5, hidden_size=6, linear_before_reset=lbr)


@pytest.mark.parametrize("op,acts,alpha,beta", [
    ("RNN", ["Relu"], [], []), ("RNN", ["LeakyRelu", "HardSigmoid"], [0.1, 0.3], [0.4]),
    ("GRU", ["HardSigmoid", "Softsign"], [0.25], [0.45]), ("LSTM", ["Sigmoid", "Affine", "ScaledTanh"], [0.5, 1.5],
                                                            [0.1, 0.7]),
])
def test_custom_activations(op, acts, alpha, beta):
    nd = len(acts) // len({"RNN": ["x"], "GRU": ["x", "y"], "LSTM": ["x", "y", "z"]}[op])
    attrs = {"activations": acts} | ({"activation_alpha": alpha} if alpha else {}) | (
        {"activation_beta": beta} if beta else {})
    ins = rnn_inputs(op, nd=nd, init=True, seed=5)
    check(op, ins, n_outputs=N_OUT[op], rtol=1e-4, atol=1e-5, hidden_size=6,
          direction="bidirectional" if nd == 2 else "forward", **attrs)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op):
    ins = rnn_inputs(op, init=True, seed=7)
    check(op, {k: (None if v is None else v * 4) for k, v in ins.items()}, n_outputs=N_OUT[op], rtol=1e-4,
          atol=1e-5, hidden_size=6, clip=0.8)


def test_float64_runs_in_float64():
    y = ours("LSTM", rnn_inputs("LSTM", dtype=np.float64), 3, hidden_size=6)
    assert all(o.dtype == np.float64 for o in y)


def test_lstm_input_forget_and_peepholes():
    ins = rnn_inputs("LSTM", init=True, peep=True, lens=[4, 3, 1], seed=9)
    check("LSTM", ins, n_outputs=3, rtol=1e-4, atol=1e-5, hidden_size=6, input_forget=1)


def test_rejects_bad_shapes():
    ins = rnn_inputs("LSTM")
    check_rejects("LSTM", ins, n_outputs=3, hidden_size=5)
    check_rejects("GRU", rnn_inputs("GRU"), n_outputs=2, hidden_size=6, direction="sideways")
