"""The runtime's LSTM (runtime/fast/rnn.py) against the reference kernel (ops/rnn.py): bit for bit, since it runs
the reference's float64 operations in the same order; configurations it does not take stay on the reference."""
from __future__ import annotations

import numpy as np
import pytest
from runtime_graphs import single_node_graph
from test_runtime_fast_kernels import run_case

from converter_lite.runtime.plan import Plan

F32 = np.float32


def _lstm_inputs(rng, seq, batch, inp, hidden, nd, layout=0, bias=True, initial=True, dtype=F32):
    x = rng.standard_normal((seq, batch, inp) if layout == 0 else (batch, seq, inp)).astype(dtype)
    w = (rng.standard_normal((nd, 4 * hidden, inp)) * 0.3).astype(dtype)
    r = (rng.standard_normal((nd, 4 * hidden, hidden)) * 0.3).astype(dtype)
    b = (rng.standard_normal((nd, 8 * hidden)) * 0.1).astype(dtype) if bias else None
    state = (nd, batch, hidden) if layout == 0 else (batch, nd, hidden)
    h0 = rng.standard_normal(state).astype(dtype) if initial else None
    c0 = rng.standard_normal(state).astype(dtype) if initial else None
    return [x, w, r, b, None, h0, c0]


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("seq,batch,inp,hidden", [(1, 1, 64, 64), (5, 3, 7, 9), (17, 2, 33, 16)])
def test_lstm_is_the_reference(rng, direction, layout, seq, batch, inp, hidden):
    nd = 2 if direction == "bidirectional" else 1
    inputs = _lstm_inputs(rng, seq, batch, inp, hidden, nd, layout)
    run_case("LSTM", inputs, {"hidden_size": hidden, "direction": direction, "layout": layout}, consts=(1, 2, 3),
             n_outputs=3)


@pytest.mark.parametrize("bias,initial,dtype", [(False, False, F32), (True, False, F32), (True, True, np.float64)])
def test_lstm_without_bias_or_initial_state(rng, bias, initial, dtype):
    inputs = _lstm_inputs(rng, 3, 2, 5, 4, 1, bias=bias, initial=initial, dtype=dtype)
    run_case("LSTM", inputs, {"hidden_size": 4}, consts=(1, 2, 3), n_outputs=3)


def test_lstm_special_values_in_the_state(rng):
    """NaN and infinities in the initial state and input propagate as in the reference (0 * inf of the absent
    peepholes included)."""
    inputs = _lstm_inputs(rng, 2, 2, 4, 4, 1)
    inputs[0].reshape(-1)[:2] = [np.nan, np.inf]
    inputs[6].reshape(-1)[:3] = [np.inf, -np.inf, np.nan]
    run_case("LSTM", inputs, {"hidden_size": 4}, consts=(1, 2, 3), n_outputs=3)


def test_lstm_fewer_outputs(rng):
    inputs = _lstm_inputs(rng, 4, 1, 6, 5, 1)
    run_case("LSTM", inputs, {"hidden_size": 5}, consts=(1, 2, 3), n_outputs=1)
    run_case("LSTM", inputs, {"hidden_size": 5}, consts=(1, 2, 3), n_outputs=2)


@pytest.mark.parametrize("attrs,consts", [({"clip": 0.5}, (1, 2, 3)), ({"input_forget": 1}, (1, 2, 3)),
                                          ({}, (2, 3)),                        # W computed at run time
                                          ({"activations": ["Sigmoid", "Tanh", "Relu"]}, (1, 2, 3))])
def test_lstm_declined_configurations_stay_on_the_reference(rng, attrs, consts):
    inputs = _lstm_inputs(rng, 3, 2, 5, 4, 1)
    g, _ = single_node_graph("LSTM", inputs, {"hidden_size": 4, **attrs}, consts, 3, name="lstm_node")
    steps = Plan(g).program.steps
    assert len(steps) == 1 and steps[0].impl.bind is None
    run_case("LSTM", inputs, {"hidden_size": 4, **attrs}, consts=consts, n_outputs=3, fast=False)


def test_lstm_with_full_sequence_lengths(rng):
    inputs = _lstm_inputs(rng, 3, 2, 5, 4, 1)
    inputs[4] = np.array([3, 3], np.int32)
    run_case("LSTM", inputs, {"hidden_size": 4}, consts=(1, 2, 3, 4), n_outputs=3)
    inputs[4] = np.array([3, 1], np.int32)                  # a shorter row: the reference
    g, _ = single_node_graph("LSTM", inputs, {"hidden_size": 4}, (1, 2, 3, 4), 3, name="lstm_node")
    assert Plan(g).program.steps[0].impl.bind is None
