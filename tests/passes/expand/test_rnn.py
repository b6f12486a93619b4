"""LSTM/GRU/RNN of a few steps unrolled into MatMuls and gate arithmetic (passes/expand/rnn.py), compared
with onnxruntime over directions, layouts, initial states, peepholes, clip, GRU's linear_before_reset and
activations; longer sequences and run-time weights are declined (the node stays)."""
import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.expand.rnn import DRIVER_STEPS, MAX_UNROLL_STEPS

from .expand_testing import run_expander

F32 = np.float32
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _rnn_model(rng, op, steps, batch=2, size=5, hidden=4, direction="forward", layout=0, init=True, peep=False,
               outputs=(0, 1, 2), **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    w = (rng.standard_normal((dirs, g * hidden, size)) * 0.5).astype(F32)
    r = (rng.standard_normal((dirs, g * hidden, hidden)) * 0.5).astype(F32)
    b = (rng.standard_normal((dirs, 2 * g * hidden)) * 0.3).astype(F32)
    x_shape = [steps, batch, size] if layout == 0 else [batch, steps, size]
    s_shape = [dirs, batch, hidden] if layout == 0 else [batch, dirs, hidden]
    inits = {"W": w, "R": r, "B": b}
    ins = ["x", "W", "R", "B", "", "h0" if init else ""]
    graph_inputs = [tensor_info("x", F32, x_shape)]
    if init:
        graph_inputs.append(tensor_info("h0", F32, s_shape))
    if op == "LSTM":
        ins.append("c0" if init else "")
        if init:
            graph_inputs.append(tensor_info("c0", F32, s_shape))
        if peep:
            p = (rng.standard_normal((dirs, 3 * hidden)) * 0.3).astype(F32)
            inits["P"] = p
            ins.append("P")
    n_out = 3 if op == "LSTM" else 2
    names = [f"out{k}" if k in outputs else "" for k in range(n_out)]
    node = oh.make_node(op, ins, names, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    y_shape = [steps, dirs, batch, hidden] if layout == 0 else [batch, steps, dirs, hidden]
    shapes = [y_shape, s_shape, s_shape]
    outs = [tensor_info(f"out{k}", F32, shapes[k]) for k in outputs if k < n_out]
    model = make_model([node], graph_inputs, outs, initializers=inits)
    feeds = {"x": rng.standard_normal(x_shape).astype(F32)}
    if init:
        feeds["h0"] = (rng.standard_normal(s_shape) * 0.5).astype(F32)
        if op == "LSTM":
            feeds["c0"] = (rng.standard_normal(s_shape) * 0.5).astype(F32)
    return model, feeds


def _expand_and_compare(model, feeds, op, expanded=True, oracle="onnxruntime"):
    """Expands, checks the op is gone (or stays), compares with onnxruntime or (where it lacks the form, as
    layout=1) with the reference kernel of the unexpanded graph."""
    want = run_ort(model, feeds) if oracle == "onnxruntime" else eval_graph(import_model(model), feeds)
    graph = import_model(model)
    assert run_expander(graph) == expanded
    ops = graph.op_counts()
    assert (op not in ops) == expanded, ops
    got = eval_graph(graph, feeds)
    for g_, w_ in zip(got, want):
        assert_close(g_, w_, rtol=1e-4, atol=1e-5, what=op)
    return ops


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("steps", [1, 3])
def test_unrolled_matches_onnxruntime(rng, op, direction, steps):
    model, feeds = _rnn_model(rng, op, steps, direction=direction)
    ops = _expand_and_compare(model, feeds, op)
    dirs = 2 if direction == "bidirectional" else 1
    per_step = 2 if op == "GRU" else 1          # GRU: the z/r gates' and the h gate's recurrent products
    assert ops["MatMul"] == dirs * (1 + per_step * steps), ops


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_layout_1_and_no_initial_state(rng, op):
    model, feeds = _rnn_model(rng, op, 2, layout=1, init=False, direction="bidirectional")
    _expand_and_compare(model, feeds, op, oracle="reference")      # onnxruntime has no layout=1 kernels
    model, feeds = _rnn_model(rng, op, 3, layout=1, direction="reverse")
    _expand_and_compare(model, feeds, op, oracle="reference")


def test_lstm_peepholes_and_clip(rng):
    model, feeds = _rnn_model(rng, "LSTM", 3, peep=True, clip=0.7)
    _expand_and_compare(model, feeds, "LSTM")


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset(rng, lbr):
    model, feeds = _rnn_model(rng, "GRU", 3, linear_before_reset=lbr)
    _expand_and_compare(model, feeds, "GRU")


def test_activations_and_only_used_outputs(rng):
    model, feeds = _rnn_model(rng, "RNN", 2, activations=["Relu"], outputs=(1,))
    _expand_and_compare(model, feeds, "RNN")
    model, feeds = _rnn_model(rng, "GRU", 2, activations=["Relu", "Tanh"], outputs=(0,))
    _expand_and_compare(model, feeds, "GRU")


def test_declined_cases_keep_the_node(rng):
    model, feeds = _rnn_model(rng, "LSTM", MAX_UNROLL_STEPS + 1)
    _expand_and_compare(model, feeds, "LSTM", expanded=False)
    model, feeds = _rnn_model(rng, "GRU", 2, activations=["HardSigmoid", "Tanh"])
    _expand_and_compare(model, feeds, "GRU", expanded=False)
    model, feeds = _rnn_model(rng, "LSTM", 2, input_forget=1)
    _expand_and_compare(model, feeds, "LSTM", expanded=False)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_layers_the_driver_takes_unroll_only_a_few_steps(rng, op):
    """Past DRIVER_STEPS steps a layer the native recurrent driver runs stays one node; the same length with an
    activation or a clip the driver lacks is still unrolled (up to MAX_UNROLL_STEPS)."""
    model, feeds = _rnn_model(rng, op, DRIVER_STEPS)
    _expand_and_compare(model, feeds, op)
    model, feeds = _rnn_model(rng, op, DRIVER_STEPS + 1)
    _expand_and_compare(model, feeds, op, expanded=False)
    model, feeds = _rnn_model(rng, op, DRIVER_STEPS + 1, clip=2.0)
    _expand_and_compare(model, feeds, op)
