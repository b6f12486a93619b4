"""The native recurrent-layer driver (kernels/rnn/) against the reference kernel (ops/rnn.py) and onnxruntime:
LSTM, GRU (with and without linear_before_reset) and RNN, directions, layouts, batch rows split across threads
and taken 1-4 at a time,
hidden sizes off the 16-lane and 128-column blocks, without bias or initial state, fewer outputs, NaN and
infinities; configurations it does not take keep the numpy or reference kernel."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import record_drivers
from runtime_graphs import single_node_graph
from test_fast_lstm import _lstm_inputs

from converter_lite.api import convert, load
from converter_lite.kernels.rnn.abi import SYMBOL
from converter_lite.kernels.rnn.bind import GATES, RnnWeights
from converter_lite.ops.interpret import eval_graph
from converter_lite.runtime.plan import Plan
from tests.helpers import make_model, run_ort, tensor_info

F32 = np.float32


def _run(resolver, inputs, attrs, n_outputs=3, native=True, tol=3e-6, op="LSTM"):
    g, feeds = single_node_graph(op, inputs, attrs, (1, 2, 3), n_outputs, name=op.lower())
    with np.errstate(all="ignore"):
        want = eval_graph(g, feeds)
    plan = Plan(record_drivers(g), resolver, num_threads=2, adaptive=False)
    for nt in (1, 2, 3):
        for _ in range(2):                                   # a second run reuses the bound step
            got = plan.execute(feeds, num_threads=nt)
            for gv, wv in zip(got, want):
                assert gv.dtype == wv.dtype and gv.shape == wv.shape
                np.testing.assert_allclose(gv, wv, rtol=tol, atol=tol)
        step = plan._free[-1].calls(nt)[0]
        assert (getattr(step, "conv_desc", None) is not None) == native   # the driver's bound call, or numpy
        if native:                    # more than one input row: the input's part is one GEMM per direction first
            seq_batch = inputs[0].shape[0] * inputs[0].shape[1]
            assert len(getattr(step, "products", ())) == (inputs[1].shape[0] if seq_batch > 1 else 0)
    return plan


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("seq,batch,inp,hidden", [(1, 1, 64, 64), (5, 3, 7, 9), (17, 2, 33, 16), (3, 2, 5, 130),
                                                  (6, 5, 8, 20)])     # groups of 4 + 1, 2 + 2 + 1 batch rows
def test_against_reference(rng, resolver, direction, layout, seq, batch, inp, hidden):
    nd = 2 if direction == "bidirectional" else 1
    inputs = _lstm_inputs(rng, seq, batch, inp, hidden, nd, layout)
    _run(resolver, inputs, {"hidden_size": hidden, "direction": direction, "layout": layout})


@pytest.mark.parametrize("bias,initial", [(False, False), (True, False), (False, True)])
def test_without_bias_or_initial_state(rng, resolver, bias, initial):
    inputs = _lstm_inputs(rng, 4, 2, 5, 20, 2, bias=bias, initial=initial)
    _run(resolver, inputs, {"hidden_size": 20, "direction": "bidirectional"})


def test_only_one_initial_state(rng, resolver):
    inputs = _lstm_inputs(rng, 3, 2, 6, 8, 1)
    _run(resolver, inputs[:6] + [None], {"hidden_size": 8})          # initial_h only
    _run(resolver, inputs[:5] + [None, inputs[6]], {"hidden_size": 8})  # initial_c only


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_fewer_outputs(rng, resolver, n_outputs):
    inputs = _lstm_inputs(rng, 4, 1, 6, 5, 1)
    _run(resolver, inputs, {"hidden_size": 5}, n_outputs=n_outputs)


def test_special_values(rng, resolver):
    """NaN and infinities in the input and the initial state propagate as in the reference; large gate inputs
    saturate the sigmoid and tanh to their limits."""
    inputs = _lstm_inputs(rng, 3, 2, 4, 4, 1)
    inputs[0].reshape(-1)[:2] = [np.nan, np.inf]
    inputs[6].reshape(-1)[:3] = [np.inf, -np.inf, np.nan]
    inputs[0][2] *= 1e4
    _run(resolver, inputs, {"hidden_size": 4})


def test_sequence_of_one_hundred_steps(rng, resolver):
    """Rounding does not grow along a long recurrence (state bounded by the gates)."""
    inputs = _lstm_inputs(rng, 100, 2, 16, 32, 1)
    _run(resolver, inputs, {"hidden_size": 32}, tol=2e-5)


@pytest.mark.parametrize("attrs", [{"clip": 0.5}, {"input_forget": 1},
                                   {"activations": ["Sigmoid", "Tanh", "Relu"]}])
def test_declined_configurations_keep_numpy(rng, resolver, attrs):
    inputs = _lstm_inputs(rng, 3, 2, 5, 4, 1)
    _run(resolver, inputs, {"hidden_size": 4, **attrs}, native=False, tol=1e-6)


def test_float64_keeps_numpy(rng, resolver):
    inputs = _lstm_inputs(rng, 3, 2, 5, 4, 1, dtype=np.float64)
    _run(resolver, inputs, {"hidden_size": 4}, native=False, tol=1e-12)


def test_dynamic_sequence_against_onnxruntime(tmp_path):
    """A bidirectional LSTM whose sequence length is a dynamic dim (so the converter cannot unroll it) runs on the
    driver in the converted model, at several lengths, against onnxruntime."""
    rng = np.random.default_rng(3)
    inputs = _lstm_inputs(rng, 1, 1, 12, 24, 2)
    nodes = [oh.make_node("LSTM", ["x", "w", "r", "b"], ["y", "yh", "yc"], hidden_size=24,
                          direction="bidirectional")]
    model = make_model(nodes, [tensor_info("x", F32, ["T", 1, 12])],
                       [tensor_info(n, F32, None) for n in ("y", "yh", "yc")],
                       initializers={"w": inputs[1], "r": inputs[2], "b": inputs[3]})
    onnx.save(model, tmp_path / "lstm.onnx")
    ms = convert(str(tmp_path / "lstm.onnx"), str(tmp_path / "lstm"), graph_kernel_flags="--opt_level=2")
    m = load(ms, num_threads=2)
    assert SYMBOL in m.graph.nodes[0].attrs.get("native_drivers", ())
    for t in (1, 7, 30):
        feeds = {"x": rng.standard_normal((t, 1, 12)).astype(F32)}
        got = m.run(feeds)
        for name, want in zip(("y", "yh", "yc"), run_ort(model, feeds)):
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)


CELLS = [("GRU", {}), ("GRU", {"linear_before_reset": 1}), ("RNN", {})]


def _cell_inputs(rng, op, seq, batch, inp, hidden, nd, layout=0, bias=True, initial=True, dtype=F32):
    """X, W, R, B, sequence_lens, initial_h of a GRU (3 gates) or RNN (1 gate)."""
    g = 3 if op == "GRU" else 1
    x = rng.standard_normal((seq, batch, inp) if layout == 0 else (batch, seq, inp)).astype(dtype)
    w = (rng.standard_normal((nd, g * hidden, inp)) * 0.3).astype(dtype)
    r = (rng.standard_normal((nd, g * hidden, hidden)) * 0.3).astype(dtype)
    b = (rng.standard_normal((nd, 2 * g * hidden)) * 0.1).astype(dtype) if bias else None
    state = (nd, batch, hidden) if layout == 0 else (batch, nd, hidden)
    h0 = rng.standard_normal(state).astype(dtype) if initial else None
    return [x, w, r, b, None, h0]


@pytest.mark.parametrize("op,extra", CELLS)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("seq,batch,inp,hidden", [(1, 1, 64, 64), (5, 3, 7, 9), (3, 2, 5, 130), (4, 9, 6, 33)])
def test_gru_and_rnn_against_reference(rng, resolver, op, extra, direction, layout, seq, batch, inp, hidden):
    nd = 2 if direction == "bidirectional" else 1
    inputs = _cell_inputs(rng, op, seq, batch, inp, hidden, nd, layout)
    _run(resolver, inputs, {"hidden_size": hidden, "direction": direction, "layout": layout, **extra},
         n_outputs=2, op=op)


@pytest.mark.parametrize("op,extra", CELLS)
@pytest.mark.parametrize("bias,initial", [(False, False), (True, False)])
def test_gru_and_rnn_without_bias_or_initial_state(rng, resolver, op, extra, bias, initial):
    inputs = _cell_inputs(rng, op, 4, 2, 5, 20, 2, bias=bias, initial=initial)
    _run(resolver, inputs, {"hidden_size": 20, "direction": "bidirectional", **extra}, n_outputs=2, op=op)


@pytest.mark.parametrize("op,extra", CELLS)
def test_gru_and_rnn_special_values_and_one_output(rng, resolver, op, extra):
    inputs = _cell_inputs(rng, op, 3, 2, 4, 4, 1)
    inputs[0].reshape(-1)[:2] = [np.nan, np.inf]
    inputs[5].reshape(-1)[:2] = [-np.inf, np.nan]
    inputs[0][2] *= 1e4
    _run(resolver, inputs, {"hidden_size": 4, **extra}, n_outputs=2, op=op)
    _run(resolver, inputs, {"hidden_size": 4, **extra}, n_outputs=1, op=op)


@pytest.mark.parametrize("op,attrs", [("GRU", {"clip": 1.0}), ("RNN", {"activations": ["Relu"]}),
                                      ("GRU", {"activations": ["HardSigmoid", "Tanh"]})])
def test_gru_and_rnn_declined_keep_the_reference(rng, resolver, op, attrs):
    inputs = _cell_inputs(rng, op, 3, 2, 5, 4, 1)
    _run(resolver, inputs, {"hidden_size": 4, **attrs}, n_outputs=2, native=False, op=op, tol=1e-6)


@pytest.mark.parametrize("op", ["GRU", "RNN"])
def test_gru_and_rnn_dynamic_sequence_against_onnxruntime(tmp_path, op):
    rng = np.random.default_rng(4)
    inputs = _cell_inputs(rng, op, 1, 1, 12, 24, 2)
    nodes = [oh.make_node(op, ["x", "w", "r", "b"], ["y", "yh"], hidden_size=24, direction="bidirectional")]
    model = make_model(nodes, [tensor_info("x", F32, ["T", 1, 12])],
                       [tensor_info(n, F32, None) for n in ("y", "yh")],
                       initializers={"w": inputs[1], "r": inputs[2], "b": inputs[3]})
    onnx.save(model, tmp_path / "m.onnx")
    m = load(convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2"),
             num_threads=2)
    for t in (1, 9, 40):
        feeds = {"x": rng.standard_normal((t, 1, 12)).astype(F32)}
        got = m.run(feeds)
        for name, want in zip(("y", "yh"), run_ort(model, feeds)):
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)


def test_packed_sections(rng):
    """The packing puts each gate's weights where the driver reads them: GRU without linear_before_reset keeps
    h's state weights for its second phase, with it in a fourth section; padding is zero."""
    w, r = rng.standard_normal((1, 3 * 5, 4)).astype(F32), rng.standard_normal((1, 3 * 5, 5)).astype(F32)
    b = rng.standard_normal((1, 30)).astype(F32)
    reset = RnnWeights(2, w, r, b, 5)
    assert (reset.hp, reset.gt, reset.gt2) == (16, 128, 128) and GATES[2] == 3
    np.testing.assert_array_equal(reset.wt[0, :, 16:21], w[0, 5:10].T)              # r's input weights
    np.testing.assert_array_equal(reset.rt[0, :, 32:37], 0)                          # h's state part not here
    np.testing.assert_array_equal(reset.rt2[0, :, :5], r[0, 10:15].T)                # but in phase two
    np.testing.assert_allclose(reset.bias[0, 32:37], b[0, 10:15] + b[0, 25:30])
    linear = RnnWeights(1, w, r, b, 5)
    np.testing.assert_array_equal(linear.rt[0, :, 48:53], r[0, 10:15].T)
    np.testing.assert_array_equal(linear.wt[0, :, 48:53], 0)
    np.testing.assert_allclose(linear.bias[0, 48:53], b[0, 25:30])
    assert not linear.wt[0, :, 5:16].any() and linear.gt2 == 0
