"""Control flow end to end: If/Loop/Scan with bodies optimized and planned on their own, sequences and
optionals through Model.run, --inputValue, and the errors of broken bodies and run-time failures.

The two models of models/make_models.py (vad_streaming: an If on the sample rate choosing between two
conv + LSTM branches with state in and out; greedy_decoder: a Loop whose condition depends on the data) are
checked against onnxruntime at opt_level 0 and 2; the generated ones below each exercise one rule.
"""
import os

import numpy as np
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.model.format import load_model

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "models")
F32 = TP.FLOAT


def _model(graph, opset=17):
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=10)


def _ort(model, feeds):
    src = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)


def _convert(tmp_path, model, level, tag="m", **kw):
    return converter_lite.convert(model, str(tmp_path / f"{tag}{level}"), graph_kernel_flags=f"--opt_level={level}",
                                  **kw)


def _kernels_per_graph(ms):
    g = load_model(ms).graph
    return {sub.name: sum(n.op == "GraphKernel" for n in sub.nodes) for sub in g.all_graphs()}


def _match(actual: dict, expected: list, rtol=1e-4, atol=1e-5):
    assert len(actual) == len(expected)
    for a, e in zip(actual.values(), expected):
        assert a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def _vad_feeds(sr, seed=0):
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 512)).astype(np.float32),
            "state": (rng.standard_normal((2, 1, 64)) * 0.2).astype(np.float32), "sr": np.array(sr, np.int64)}


# -- the two sample models -------------------------------------------------------------------------------------
@pytest.mark.parametrize("level", [0, 2])
def test_vad_streaming_matches_onnxruntime_and_fuses_inside_branches(tmp_path, level):
    path = os.path.join(MODELS, "vad_streaming.onnx")
    ms = _convert(tmp_path, path, level)
    model = converter_lite.load(ms)
    for sr in (16000, 8000):
        state = _vad_feeds(sr)["state"]
        for step in range(3):                      # streaming: the state output feeds the next call
            feeds = {**_vad_feeds(sr, step), "state": state}
            out = model.run(feeds)
            _match(out, _ort(path, feeds))
            state = out["stateN"]
    kernels = _kernels_per_graph(ms)
    assert kernels["vad_streaming"] == 0           # the main graph is the If
    if level:
        assert kernels["sr16k_branch"] >= 4 and kernels["sr8k_branch"] >= 4, kernels
        assert model.uses_native_code
        body_kernels = [k for p in model.plan.body_plans() for k in p.kernels]
        assert any(k.native and k.node.op == "GraphKernel" for k in body_kernels)
    else:
        assert sum(kernels.values()) == 0


@pytest.mark.parametrize("level", [0, 2])
def test_greedy_decoder_loop_with_data_dependent_stop(tmp_path, level):
    path = os.path.join(MODELS, "greedy_decoder.onnx")
    model = converter_lite.load(_convert(tmp_path, path, level))
    lengths = set()
    for start in range(6):
        for max_len in (0, 1, 5, 30):
            feeds = {"start": np.array([start], np.int64), "h0": np.zeros((1, 64), np.float32),
                     "max_len": np.array(max_len, np.int64)}
            out = model.run(feeds)
            expected = _ort(path, feeds)
            _match(out, expected)
            lengths.add(out["tokens"].shape[0])
    assert len(lengths) >= 4                        # stops at the end token, at max_len, and at 0
    if level:
        assert _kernels_per_graph(_convert(tmp_path, path, level, "k"))["decode_step"] >= 1


def test_input_value_folds_the_if_and_guards_other_values(tmp_path):
    path = os.path.join(MODELS, "vad_streaming.onnx")
    general = converter_lite.load(_convert(tmp_path, path, 2, "general"))
    ms = _convert(tmp_path, path, 2, "fixed", input_value={"sr": 16000})
    fixed = converter_lite.load(ms)
    graph = load_model(ms).graph
    assert "If" not in graph.op_counts() and len(graph.all_graphs()) == 1
    assert sum(n.op == "GraphKernel" for n in graph.nodes) >= 4
    assert fixed.input_names == general.input_names and fixed.output_names == general.output_names
    feeds = _vad_feeds(16000)
    _match(fixed.run(feeds), list(general.run(feeds).values()), rtol=1e-5, atol=1e-6)
    with pytest.raises(ConverterError) as e:
        fixed.run(_vad_feeds(8000))
    assert e.value.code == -600 and "'sr'" in str(e.value) and "16000" in str(e.value)
    _match(fixed.run(feeds), list(general.run(feeds).values()), rtol=1e-5, atol=1e-6)   # still usable


def test_input_value_errors(tmp_path):
    path = os.path.join(MODELS, "vad_streaming.onnx")
    for value, words in (("rate:16000", "not an input"), ("sr:16000,8000", "2 value(s)"), ("sr:1.5", "integers"),
                         ("sr", "name:value"), ("sr:abc", "not a number")):
        with pytest.raises(ConverterError) as e:
            _convert(tmp_path, path, 0, input_value=value)
        assert e.value.code == -600 and words in str(e.value), str(e.value)
    assert not list(tmp_path.glob("*.ms"))


# -- captures, nesting, Scan -----------------------------------------------------------------------------
def _loop_with_nested_if():
    """A Loop whose body reads an outer value (x) and holds an If reading the outer-outer value (bias) and a
    value of the body (acc); the trip count is an input."""
    then_g = oh.make_graph([oh.make_node("Add", ["acc_next", "bias"], ["r"])], "then", [],
                           [oh.make_tensor_value_info("r", F32, [2, 3])])
    else_g = oh.make_graph([oh.make_node("Sub", ["acc_next", "x"], ["r2"])], "else", [],
                           [oh.make_tensor_value_info("r2", F32, [2, 3])])
    body = oh.make_graph(
        [oh.make_node("Mul", ["x", "scale"], ["xs"]),
         oh.make_node("Add", ["acc", "xs"], ["acc_sum"]),
         oh.make_node("Tanh", ["acc_sum"], ["acc_next"]),
         oh.make_node("Mod", ["i", "two"], ["parity"]),
         oh.make_node("Equal", ["parity", "zero"], ["even"]),
         oh.make_node("If", ["even"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         oh.make_node("Identity", ["cond"], ["cond_out"]),
         oh.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0)],
        "body", [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("cond", TP.BOOL, []),
                 oh.make_tensor_value_info("acc", F32, [2, 3])],
        [oh.make_tensor_value_info("cond_out", TP.BOOL, []), oh.make_tensor_value_info("acc_out", F32, [2, 3]),
         oh.make_tensor_value_info("total", F32, [])],
        initializer=[onh.from_array(np.array(2, np.int64), "two"), onh.from_array(np.array(0, np.int64), "zero")])
    g = oh.make_graph(
        [oh.make_node("Loop", ["n", "", "acc0"], ["acc_final", "totals"], body=body)], "nested",
        [oh.make_tensor_value_info("x", F32, [2, 3]), oh.make_tensor_value_info("acc0", F32, [2, 3]),
         oh.make_tensor_value_info("n", TP.INT64, [])],
        [oh.make_tensor_value_info("acc_final", F32, [2, 3]), oh.make_tensor_value_info("totals", F32, ["t"])],
        initializer=[onh.from_array(np.full((2, 3), 0.5, np.float32), "scale"),
                     onh.from_array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), "bias")])
    return _model(g)


@pytest.mark.parametrize("level", [0, 2])
def test_captured_outer_values_and_nested_if_in_loop(tmp_path, level):
    model_proto = _loop_with_nested_if()
    ms = _convert(tmp_path, model_proto, level)
    model = converter_lite.load(ms)
    rng = np.random.default_rng(3)
    for n in (0, 1, 4, 7):
        feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32),
                 "acc0": rng.standard_normal((2, 3)).astype(np.float32), "n": np.array(n, np.int64)}
        _match(model.run(feeds), _ort(model_proto, feeds))
    loop = next(n for n in load_model(ms).graph.nodes if n.op == "Loop")
    body = loop.attrs["body"]
    assert loop.attrs["captures"] == 1 and [v.name for v in body.inputs][-1] == "x"   # x is an explicit input
    inner_if = next(n for n in body.nodes if n.op == "If")
    assert inner_if.attrs["captures"] >= 1     # the If reads the body's acc_next (and x) as inputs


def _scan_model():
    body = oh.make_graph(
        [oh.make_node("Add", ["s", "xe"], ["s_next"]), oh.make_node("Mul", ["s_next", "ye"], ["out"])],
        "scan_body", [oh.make_tensor_value_info("s", F32, [3]), oh.make_tensor_value_info("xe", F32, [3]),
                      oh.make_tensor_value_info("ye", F32, [3])],
        [oh.make_tensor_value_info("s_next", F32, [3]), oh.make_tensor_value_info("out", F32, [3])])
    g = oh.make_graph(
        [oh.make_node("Scan", ["s0", "x", "y"], ["s_final", "ys"], body=body, num_scan_inputs=2,
                      scan_input_axes=[0, 1], scan_input_directions=[1, 0], scan_output_axes=[-1],
                      scan_output_directions=[1])], "scan",
        [oh.make_tensor_value_info("s0", F32, [3]), oh.make_tensor_value_info("x", F32, [5, 3]),
         oh.make_tensor_value_info("y", F32, [3, 5])],
        [oh.make_tensor_value_info("s_final", F32, [3]), oh.make_tensor_value_info("ys", F32, [3, 5])])
    return _model(g)


@pytest.mark.parametrize("level", [0, 2])
def test_scan_axes_and_directions(tmp_path, level):
    proto = _scan_model()
    model = converter_lite.load(_convert(tmp_path, proto, level))
    rng = np.random.default_rng(4)
    feeds = {"s0": rng.standard_normal(3).astype(np.float32), "x": rng.standard_normal((5, 3)).astype(np.float32),
             "y": rng.standard_normal((3, 5)).astype(np.float32)}
    _match(model.run(feeds), _ort(proto, feeds))
    assert [t.shape for t in model.output_types] == [(3,), (3, 5)]     # static: the scan length is known


# -- sequences and optionals through Model.run -----------------------------------------------------------
def test_sequence_inputs_and_outputs_are_lists(tmp_path):
    seq_t = oh.make_sequence_type_proto(oh.make_tensor_type_proto(F32, None))
    g = oh.make_graph(
        [oh.make_node("SequenceInsert", ["seq", "t"], ["seq2"]),
         oh.make_node("SequenceLength", ["seq2"], ["n"]),
         oh.make_node("ConcatFromSequence", ["seq2"], ["cat"], axis=0)], "seq",
        [oh.make_value_info("seq", seq_t), oh.make_tensor_value_info("t", F32, [2])],
        [oh.make_value_info("seq2", seq_t), oh.make_tensor_value_info("n", TP.INT64, []),
         oh.make_tensor_value_info("cat", F32, None)])
    model = converter_lite.load(_convert(tmp_path, _model(g), 0))
    seq = [np.ones(2, np.float32), np.arange(3, dtype=np.float32)]
    out = model.run({"seq": seq, "t": np.array([7, 8], np.float32)})
    assert isinstance(out["seq2"], list) and len(out["seq2"]) == 3
    np.testing.assert_array_equal(out["seq2"][2], [7, 8])
    assert int(out["n"]) == 3
    np.testing.assert_array_equal(out["cat"], [1, 1, 0, 1, 2, 7, 8])
    assert seq[0] is not out["seq2"][0]            # outputs are the caller's own arrays
    with pytest.raises(ConverterError) as e:
        model.run({"seq": np.ones(2, np.float32), "t": np.array([7, 8], np.float32)})
    assert e.value.code == -600 and "sequence" in str(e.value)


def test_sequence_at_out_of_range_names_the_node_and_the_model_stays_usable(tmp_path):
    seq_t = oh.make_sequence_type_proto(oh.make_tensor_type_proto(F32, None))
    g = oh.make_graph([oh.make_node("SequenceAt", ["seq", "pos"], ["y"], name="pick")], "at",
                      [oh.make_value_info("seq", seq_t), oh.make_tensor_value_info("pos", TP.INT64, [])],
                      [oh.make_tensor_value_info("y", F32, None)])
    model = converter_lite.load(_convert(tmp_path, _model(g), 0))
    seq = [np.zeros(2, np.float32), np.ones(2, np.float32)]
    with pytest.raises(ConverterError) as e:
        model.run({"seq": seq, "pos": np.array(5, np.int64)})
    assert e.value.code == -303 and "'pick'" in str(e.value) and "out of range" in str(e.value)
    np.testing.assert_array_equal(model.run({"seq": seq, "pos": np.array(-1, np.int64)})["y"], [1, 1])


def test_optional_input_may_be_none(tmp_path):
    opt_t = oh.make_optional_type_proto(oh.make_tensor_type_proto(F32, [2]))
    g = oh.make_graph([oh.make_node("OptionalHasElement", ["o"], ["has"])], "opt",
                      [oh.make_value_info("o", opt_t)], [oh.make_tensor_value_info("has", TP.BOOL, [])])
    model = converter_lite.load(_convert(tmp_path, _model(g, 18), 0))
    assert bool(model.run({"o": None})["has"]) is False
    assert bool(model.run({"o": np.ones(2, np.float32)})["has"]) is True


# -- bad input -----------------------------------------------------------------------------------------------
def _loop_model(body_nodes, body_outputs, trip="n", extra_inits=()):
    body = oh.make_graph(body_nodes, "the_body",
                         [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("c", TP.BOOL, []),
                          oh.make_tensor_value_info("v", F32, [2])], body_outputs)
    g = oh.make_graph([oh.make_node("Loop", [trip, "", "v0"], ["v_out"], body=body, name="the_loop")], "g",
                      [oh.make_tensor_value_info("v0", F32, [2]), oh.make_tensor_value_info("n", TP.INT64, [])],
                      [oh.make_tensor_value_info("v_out", F32, [2])], initializer=list(extra_inits))
    return _model(g)


def test_body_reading_an_undefined_name_fails_naming_node_and_body(tmp_path):
    m = _loop_model([oh.make_node("Add", ["v", "nowhere"], ["v2"]), oh.make_node("Identity", ["c"], ["c2"])],
                    [oh.make_tensor_value_info("c2", TP.BOOL, []), oh.make_tensor_value_info("v2", F32, [2])])
    with pytest.raises(ConverterError) as e:
        _convert(tmp_path, m, 0)
    assert e.value.code == -200 and "the_loop" in str(e.value) and "body" in str(e.value) \
        and "nowhere" in str(e.value)
    assert not list(tmp_path.glob("*.ms"))


def test_body_outputs_that_do_not_match_the_node_fail(tmp_path):
    m = _loop_model([oh.make_node("Identity", ["c"], ["c2"])], [oh.make_tensor_value_info("c2", TP.BOOL, [])])
    with pytest.raises(ConverterError) as e:
        _convert(tmp_path, m, 0)
    assert e.value.code == -200 and "the_loop" in str(e.value) and "returns 1" in str(e.value)


def test_negative_constant_trip_count_fails(tmp_path):
    m = _loop_model([oh.make_node("Identity", ["c"], ["c2"]), oh.make_node("Neg", ["v"], ["v2"])],
                    [oh.make_tensor_value_info("c2", TP.BOOL, []), oh.make_tensor_value_info("v2", F32, [2])],
                    trip="minus", extra_inits=[onh.from_array(np.array(-3, np.int64), "minus")])
    with pytest.raises(ConverterError) as e:
        _convert(tmp_path, m, 0)
    assert e.value.code == -500 and "the_loop" in str(e.value) and "negative" in str(e.value)


def test_sequence_op_given_a_tensor_fails_naming_the_node(tmp_path):
    g = oh.make_graph([oh.make_node("SequenceLength", ["x"], ["n"], name="len_of_tensor")], "g",
                      [oh.make_tensor_value_info("x", F32, [2])], [oh.make_tensor_value_info("n", TP.INT64, [])])
    with pytest.raises(ConverterError) as e:
        _convert(tmp_path, _model(g), 0)
    assert e.value.code == -500 and "len_of_tensor" in str(e.value) and "sequence" in str(e.value)


def test_loop_without_trip_count_stops_at_the_bound(tmp_path):
    m = _loop_model([oh.make_node("Identity", ["c"], ["c2"]), oh.make_node("Neg", ["v"], ["v2"])],
                    [oh.make_tensor_value_info("c2", TP.BOOL, []), oh.make_tensor_value_info("v2", F32, [2])],
                    trip="")
    m.graph.input.pop()                              # n is unused now
    model = converter_lite.load(_convert(tmp_path, m, 0), max_loop_iterations=50)
    with pytest.raises(ConverterError) as e:
        model.run({"v0": np.ones(2, np.float32)})
    assert e.value.code == -303 and "the_loop" in str(e.value) and "50 iterations" in str(e.value)
    with pytest.raises(ConverterError):
        model.run({"v0": np.ones(2, np.float32)})     # the same again, not a broken model


def test_run_time_failure_inside_a_body_names_the_loop_and_the_body_node(tmp_path):
    seq_t = oh.make_sequence_type_proto(oh.make_tensor_type_proto(F32, None))
    body = oh.make_graph([oh.make_node("SequenceAt", ["s", "i"], ["e"], name="pick_in_body"),
                          oh.make_node("Identity", ["c"], ["c2"]), oh.make_node("Identity", ["s"], ["s2"])],
                         "b", [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("c", TP.BOOL, []),
                               oh.make_value_info("s", seq_t)],
                         [oh.make_tensor_value_info("c2", TP.BOOL, []), oh.make_value_info("s2", seq_t),
                          oh.make_tensor_value_info("e", F32, None)])
    g = oh.make_graph([oh.make_node("Loop", ["n", "", "seq"], ["s_out", "es"], body=body, name="walk")], "g",
                      [oh.make_value_info("seq", seq_t), oh.make_tensor_value_info("n", TP.INT64, [])],
                      [oh.make_value_info("s_out", seq_t), oh.make_tensor_value_info("es", F32, None)])
    model = converter_lite.load(_convert(tmp_path, _model(g), 0))
    seq = [np.full(2, k, np.float32) for k in range(3)]
    np.testing.assert_array_equal(model.run({"seq": seq, "n": np.array(3, np.int64)})["es"], [[0, 0], [1, 1], [2, 2]])
    with pytest.raises(ConverterError) as e:
        model.run({"seq": seq, "n": np.array(4, np.int64)})
    assert e.value.code == -303 and "'walk'" in str(e.value) and "pick_in_body" in str(e.value)


def _carry_model():
    """A Loop whose carried values swap places (a -> b, b -> a + i), one passes through unchanged, a scan output
    records a, and the condition turns false when a grows past a limit (captured)."""
    body = oh.make_graph(
        [oh.make_node("Cast", ["i"], ["fi"], to=F32), oh.make_node("Add", ["a", "fi"], ["a_plus"]),
         oh.make_node("Identity", ["b"], ["a_next"]), oh.make_node("Identity", ["a_plus"], ["b_next"]),
         oh.make_node("Identity", ["k"], ["k_next"]), oh.make_node("ReduceSum", ["a"], ["total"], keepdims=0),
         oh.make_node("Less", ["total", "limit"], ["go"]), oh.make_node("Mul", ["a", "b"], ["rec"])],
        "carry_body",
        [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("c", TP.BOOL, []),
         oh.make_tensor_value_info("a", F32, [4]), oh.make_tensor_value_info("b", F32, [4]),
         oh.make_tensor_value_info("k", F32, [2])],
        [oh.make_tensor_value_info("go", TP.BOOL, []), oh.make_tensor_value_info("a_next", F32, [4]),
         oh.make_tensor_value_info("b_next", F32, [4]), oh.make_tensor_value_info("k_next", F32, [2]),
         oh.make_tensor_value_info("rec", F32, [4])])
    g = oh.make_graph(
        [oh.make_node("Loop", ["n", "", "a0", "b0", "k0"], ["a", "b", "k", "recs"], body=body)], "carry",
        [oh.make_tensor_value_info("n", TP.INT64, []), oh.make_tensor_value_info("a0", F32, [4]),
         oh.make_tensor_value_info("b0", F32, [4]), oh.make_tensor_value_info("k0", F32, [2]),
         oh.make_tensor_value_info("limit", F32, [])],
        [oh.make_tensor_value_info("a", F32, [4]), oh.make_tensor_value_info("b", F32, [4]),
         oh.make_tensor_value_info("k", F32, [2]), oh.make_tensor_value_info("recs", F32, [None, 4])])
    return _model(g)


@pytest.mark.parametrize("level", [0, 2])
def test_loop_on_fixed_body_buffers_matches_onnxruntime(tmp_path, level, monkeypatch):
    """A Loop with a static body runs on the body's own buffers (runtime/control_flow.py ``_fixed_loop``, never
    the generic body run): swapped and passed-through carried values, zero iterations, an early stop, scan
    outputs, each call of the model independent of the previous one."""
    from converter_lite.runtime.plan import Executor
    proto = _carry_model()
    model = converter_lite.load(_convert(tmp_path, proto, level))

    def generic(*a, **k):
        raise AssertionError("the generic body run was taken")
    monkeypatch.setattr(Executor, "run_in_place", generic)
    rng = np.random.default_rng(5)
    for n, limit in ((0, 100.0), (1, 100.0), (6, 100.0), (9, 12.0), (3, -1.0)):
        feeds = {"n": np.array(n, np.int64), "a0": rng.standard_normal(4).astype(np.float32),
                 "b0": rng.standard_normal(4).astype(np.float32), "k0": rng.standard_normal(2).astype(np.float32),
                 "limit": np.array(limit, np.float32)}
        got = model.run(feeds)
        _match(got, _ort(proto, feeds))
        assert got["k"] is not feeds["k0"]


def _counting_model(trip: bool, width: int):
    """A Loop whose body adds the iteration number to a carried [width] vector and records it (a scan output),
    its condition ``total < limit`` (no trip count unless ``trip``: then ``n`` bounds it too)."""
    body = oh.make_graph(
        [oh.make_node("Cast", ["i"], ["fi"], to=F32), oh.make_node("Add", ["v", "fi"], ["v_next"]),
         oh.make_node("Identity", ["v_next"], ["rec"]), oh.make_node("ReduceMax", ["v_next"], ["top"], keepdims=0),
         oh.make_node("Less", ["top", "limit"], ["go"])],
        "count_body",
        [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("c", TP.BOOL, []),
         oh.make_tensor_value_info("v", F32, [width])],
        [oh.make_tensor_value_info("go", TP.BOOL, []), oh.make_tensor_value_info("v_next", F32, [width]),
         oh.make_tensor_value_info("rec", F32, [width])])
    g = oh.make_graph(
        [oh.make_node("Loop", ["n" if trip else "", "", "v0"], ["v", "recs"], body=body)], "count",
        ([oh.make_tensor_value_info("n", TP.INT64, [])] if trip else []) +
        [oh.make_tensor_value_info("v0", F32, [width]), oh.make_tensor_value_info("limit", F32, [])],
        [oh.make_tensor_value_info("v", F32, [width]), oh.make_tensor_value_info("recs", F32, [None, width])])
    return _model(g)


@pytest.mark.parametrize("trip, width, limit, n", [(False, 4, 800.0, None), (False, 4, -1.0, None),
                                                   (True, 1 << 16, 1e9, 40), (True, 4, 1e9, 0)])
def test_loop_scan_outputs_grow(tmp_path, monkeypatch, trip, width, limit, n):
    """The fixed-buffer Loop writes scan outputs into blocks that grow as the iterations go: no trip count (41
    iterations: 16 rows, then 32, then 64; one iteration), a trip count whose rows do not fit in SCAN_BYTES (40
    rows of 256 KB: 16, then 32, then 40), zero iterations; each call's arrays its own."""
    from converter_lite.runtime import control_flow
    from converter_lite.runtime.plan import Executor
    assert control_flow.SCAN_START == 16 and 40 * 4 * width > control_flow.SCAN_BYTES or width == 4
    proto = _counting_model(trip, width)
    model = converter_lite.load(_convert(tmp_path, proto, 2))

    def generic(*a, **k):
        raise AssertionError("the generic body run was taken")
    monkeypatch.setattr(Executor, "run_in_place", generic)
    feeds = {"v0": np.zeros(width, np.float32), "limit": np.array(limit, np.float32)}
    if trip:
        feeds["n"] = np.array(n, np.int64)
    first = model.run(feeds)
    want = _ort(proto, feeds)
    _match(first, want)
    if not trip and limit > 0:
        assert len(first["recs"]) == 41                   # 0 + 1 + ... + 39 = 780 < 800, then 820
    again = model.run(feeds)
    _match(again, want)
    assert not np.shares_memory(first["recs"], again["recs"]) and not np.shares_memory(first["v"], again["v"])


def test_if_on_fixed_branch_buffers(tmp_path, monkeypatch):
    """An If whose branches have static shapes runs on the branch's own buffers (runtime/control_flow.py
    ``_FixedBody``, never the generic body run): a branch computing from a captured value, one passing a
    captured value through; branches alternating; each call's outputs the caller's own (not the feed, not the
    previous call's)."""
    from converter_lite.runtime.plan import Executor
    then_b = oh.make_graph([oh.make_node("Mul", ["x", "x"], ["sq"]), oh.make_node("Add", ["sq", "x"], ["y"])],
                           "then", [], [oh.make_tensor_value_info("y", F32, [3])])
    else_b = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "else", [],
                           [oh.make_tensor_value_info("y", F32, [3])])
    g = oh.make_graph([oh.make_node("If", ["c"], ["out"], then_branch=then_b, else_branch=else_b)], "g",
                      [oh.make_tensor_value_info("c", TP.BOOL, []), oh.make_tensor_value_info("x", F32, [3])],
                      [oh.make_tensor_value_info("out", F32, [3])])
    proto = _model(g)
    model = converter_lite.load(_convert(tmp_path, proto, 2))
    assert [s.node.op for s in model.plan.program.steps] == ["If"]

    def generic(*a, **k):
        raise AssertionError("the generic body run was taken")
    monkeypatch.setattr(Executor, "run_in_place", generic)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    seen = []
    for c in (True, False, True, False):
        feeds = {"c": np.array(c), "x": x}
        got = model.run(feeds)
        _match(got, _ort(proto, feeds))
        assert not np.shares_memory(got["out"], x) and not any(np.shares_memory(got["out"], s) for s in seen)
        seen.append(got["out"])
    np.testing.assert_array_equal(seen[0], x * x + x)
