"""passes/rewrite/quantized_handoff.py + the uint8 variants of ops/quantized_conv.py + kernels/qconv: int8
convolutions hand their outputs to the int8 convolutions reading them as uint8.  The values are the float hand-off's
bit for bit (the same model converted with the pass disabled, natively and on the reference kernels), close to
onnxruntime on the QDQ models it quantized itself (odd shapes, strides, padding, dilation, per-channel weights,
asymmetric zero points, YOLOv8's quantized SiLU) and on FULL_QUANT's."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import run_ort
from quant_models import LAYERS, _feeds, float_cnn, mobile_cnn, ort_qdq, residual_cnn

import converter_lite
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.model.format import load_model
from converter_lite.ops.quantize import dequantize_linear, quantize_linear
from converter_lite.ops.registry import OPS, KernelError
from converter_lite.passes.base import PassContext
from converter_lite.passes.rewrite.quantized_handoff import QuantizedHandoffPass

F32 = np.float32
OFF = "--opt_level=2 --disable_pass=quantized_handoff"


def test_quantize_of_dequantize_is_the_identity():
    """The pass's premise: QuantizeLinear(DequantizeLinear(q)) == q for every uint8 q and zero point, over the scales
    it accepts (positive, 255 * s finite)."""
    q = np.arange(256, dtype=np.uint8)
    rng = np.random.default_rng(0)
    scales = np.concatenate([10.0 ** rng.uniform(-38, 36, 3000), rng.uniform(1e-4, 1.0, 1000),
                             [np.finfo(F32).tiny, np.finfo(F32).max / 256]]).astype(F32)
    for z in (0, 1, 100, 128, 255):
        zp = np.uint8(z)
        for s in scales:
            assert np.array_equal(quantize_linear({}, dequantize_linear({}, q, s, zp), s, zp), q), (s, z)


def _conv_args(rng, c=5, m=7, k=3):
    x = (rng.standard_normal((2, c, 9, 11)) * 2).astype(F32)
    w = rng.integers(-128, 128, (m, c, k, k)).astype(np.int8)
    return x, F32(0.04), np.uint8(117), w, rng.uniform(0.002, 0.01, m).astype(F32), rng.standard_normal(m).astype(F32)


@pytest.mark.parametrize("attrs", [{"pads": [1, 1, 1, 1]},
                                   {"pads": [0, 1, 2, 1], "strides": [2, 1], "clamp": [0.0, 6.0]},
                                   {"pads": [1, 1, 1, 1], "silu": 1, "silu_sigmoid_q": [1 / 255, 0],
                                    "silu_product_q": [0.05, 11]}])
def test_reference_uint8_variants_are_the_float_forms(attrs):
    """A uint8 input is the float input's QuantizeLinear, read as such; ``uint8_out`` is QuantizeLinear of the
    float output with its last pair, whose DequantizeLinear is that output bit for bit."""
    rng = np.random.default_rng(1)
    x, xs, xz, w, ws, b = _conv_args(rng)
    f = OPS["QuantizedConv"].compute
    ys, yz = F32(0.03), np.uint8(40)
    want = f(attrs, x, xs, xz, w, ws, b, ys, yz)
    np.testing.assert_array_equal(f(attrs, quantize_linear({}, x, xs, xz), xs, xz, w, ws, b, ys, yz), want)
    got = f({**attrs, "uint8_out": 1}, x, xs, xz, w, ws, b, ys, yz)
    s, z = (F32(0.05), np.uint8(11)) if attrs.get("silu") else (ys, yz)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, quantize_linear({}, want, s, z))
    np.testing.assert_array_equal(dequantize_linear({}, got, s, z), want)


def test_reference_uint8_out_needs_a_pair():
    rng = np.random.default_rng(2)
    x, xs, xz, w, ws, b = _conv_args(rng)
    with pytest.raises(KernelError):
        OPS["QuantizedConv"].compute({"uint8_out": 1}, x, xs, xz, w, ws, b)
    with pytest.raises(KernelError):
        OPS["QuantizedConv"].compute({"uint8_out": 1, "silu": 1}, x, xs, xz, w, ws, b, F32(0.1), np.uint8(0))


# -- the pass on hand-made graphs ---------------------------------------------------------------------------------
def _qconv(x: Value, pair, m=4, name="c", **attrs) -> Node:
    c = x.type.shape[1]
    ins = [x, Value(f"{name}_s", const=np.asarray(F32(pair[0]))),
           Value(f"{name}_z", const=np.asarray(np.uint8(pair[1]))),
           Value(f"{name}_w", const=np.ones((m, c, 1, 1), np.int8)), Value(f"{name}_ws", const=np.ones(m, F32))]
    out = Value(f"{name}_y", TensorType(DType.float32, (1, m) + tuple(x.type.shape[2:])))
    return Node("QuantizedConv", ins, [out], attrs, name=name)


def _graph(*readers, producer=None):
    """x -> p (a QuantizedConv, or ``producer(x)``) -> the readers (each a function of p's output making a
    node or a list of nodes, the last one's output a graph output)."""
    x = Value("x", TensorType(DType.float32, (1, 4, 6, 6)))
    p = _qconv(x, (0.1, 3), name="p") if producer is None else producer(x)
    nodes, outs = [p], []
    for k, r in enumerate(readers):
        made = r(p.outputs[0], k)
        made = made if isinstance(made, list) else [made]
        nodes += made
        outs.append(made[-1].outputs[0])
    return Graph("g", [x], outs, nodes), p


def _unary(op, x, name, out_type=None):
    return Node(op, [x], [Value(name, out_type or TensorType(DType.float32, x.type.shape))], name=name)


def _quantize(y, k, pair=(0.05, 7)):
    """QuantizeLinear(y, pair) -> DequantizeLinear: a QDQ model's branch quantizing y."""
    s, z = Value(f"qs{k}", const=np.asarray(F32(pair[0]))), Value(f"qz{k}", const=np.asarray(np.uint8(pair[1])))
    q = Node("QuantizeLinear", [y, s, z], [Value(f"q{k}", TensorType(DType.uint8, y.type.shape))], name=f"q{k}")
    return [q, Node("DequantizeLinear", [q.outputs[0], s, z], [Value(f"dq{k}", TensorType(DType.float32,
                                                                                           y.type.shape))])]


def _requantized(x):
    p = _qconv(x, (0.1, 3), name="p")
    p.add_input(None)
    p.add_input(Value("ys", const=np.asarray(F32(0.05))))
    p.add_input(Value("yz", const=np.asarray(np.uint8(7))))
    return p


def _run(graph) -> bool:
    return QuantizedHandoffPass().run(graph, PassContext(config=None))


def test_the_pass_hands_off_to_convolutions_agreeing_on_the_pair():
    g, p = _graph(lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"), lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"))
    assert _run(g)
    assert p.attrs["uint8_out"] == 1 and p.outputs[0].type.dtype is DType.uint8
    assert float(p.inputs[6].const) == F32(0.05) and int(p.inputs[7].const) == 7 and p.inputs[5] is None
    assert not _run(g)                                                     # done once


@pytest.mark.parametrize("readers", [
    [lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"), lambda y, k: _qconv(y, (0.05, 8), name=f"r{k}")],
    [lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"), lambda y, k: Node("Relu", [y], [Value(f"o{k}")])],
    [lambda y, k: _qconv(y, (0.0, 7), name=f"r{k}")],                      # not a positive scale
    [lambda y, k: _qconv(y, (1e37, 7), name=f"r{k}")]])                    # (q - z) * s overflows
def test_the_pass_declines(readers):
    g, p = _graph(*readers)
    assert not _run(g) and "uint8_out" not in p.attrs and p.outputs[0].type.dtype is DType.float32


def test_quantize_linear_readers_read_the_uint8_output():
    """A QuantizeLinear reader with the convolutions' pair goes; its readers read the producer's uint8 output."""
    g, p = _graph(lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"), _quantize)
    assert _run(g)
    assert not any(n.op == "QuantizeLinear" for n in g.nodes)
    dq = next(n for n in g.nodes if n.op == "DequantizeLinear")
    assert dq.inputs[0] is p.outputs[0] and p.outputs[0].type.dtype is DType.uint8


def test_an_elementwise_producer_quantizes_once_for_its_readers():
    """Case 3: a QuantizeLinear after the Relu, read by both convolutions and in place of the QuantizeLinear
    reader; not after a float Conv (its epilogue takes the Relu)."""
    g, relu = _graph(lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"), lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"),
                     _quantize, producer=lambda x: _unary("Relu", x, "relu"))
    assert _run(g)
    q = [n for n in g.nodes if n.op == "QuantizeLinear"]
    assert len(q) == 1 and q[0].inputs[0] is relu.outputs[0] and g.nodes.index(q[0]) == 1
    assert {id(u) for u, _ in q[0].outputs[0].uses} == {id(n) for n in g.nodes if n.op in ("QuantizedConv",
                                                                                         "DequantizeLinear")}

    def conv_relu(x):
        w = Value("w", const=np.ones((4, 4, 1, 1), F32))
        conv = Node("Conv", [x, w], [Value("c", TensorType(DType.float32, x.type.shape))], name="conv")
        return _unary("Relu", conv.outputs[0], "relu")
    g, relu = _graph(lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"), producer=conv_relu)
    g.nodes.insert(0, relu.inputs[0].producer)
    assert not _run(g)


def test_a_requantized_convolution_hands_bytes_to_an_elementwise_reader():
    """Case 4: the Add reads DequantizeLinear of the uint8 output; with a convolution reading it too (cases 1 and
    4), that one reads the bytes."""
    add = lambda y, k: Node("Add", [y, y], [Value(f"a{k}", TensorType(DType.float32, y.type.shape))], name=f"a{k}")
    for readers in ([add], [add, lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}")]):
        g, p = _graph(*readers, producer=_requantized)
        assert _run(g) and p.attrs["uint8_out"] == 1
        dq = next(n for n in g.nodes if n.op == "DequantizeLinear")
        a0 = next(n for n in g.nodes if n.op == "Add")
        assert dq.inputs[0] is p.outputs[0] and a0.inputs == [dq.outputs[0]] * 2
        assert all(n.inputs[0] is p.outputs[0] for n in g.nodes[1:] if n.op == "QuantizedConv")
    g, p = _graph(add, lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"))         # no round trip: the Add reads y
    assert not _run(g)


def test_the_pass_declines_a_graph_output_and_another_last_pair():
    g, p = _graph(lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"))
    g.outputs.append(p.outputs[0])
    assert not _run(g)
    g, p = _graph(lambda y, k: _qconv(y, (0.05, 7), name=f"r{k}"))
    p.add_input(None)
    p.add_input(Value("ys", const=np.asarray(F32(0.05))))
    p.add_input(Value("yz", const=np.asarray(np.uint8(9))))                # its own round trip, another pair
    assert not _run(g)
    p.set_input(7, Value("yz2", const=np.asarray(np.uint8(7))))            # the same pair: case 1
    assert _run(g) and p.attrs["uint8_out"] == 1


def test_quantize_linear_readers_alone_and_of_other_pairs():
    """A convolution ending in a round trip read only by QuantizeLinear nodes (case 1 without a convolution
    reader): those of its pair read its bytes; the others (case 5) DequantizeLinear of them, bit for bit the float
    output they quantized before."""
    from converter_lite.ops.interpret import eval_graph
    x = np.random.default_rng(5).standard_normal((1, 4, 6, 6)).astype(F32) * 3
    for readers in ([_quantize], [_quantize, lambda y, k: _quantize(y, k, pair=(0.031, 200))]):
        g, p = _graph(*readers, producer=_requantized)
        want = eval_graph(g, {"x": x})
        assert _run(g) and p.attrs["uint8_out"] == 1 and p.outputs[0].type.dtype is DType.uint8
        qs = [n for n in g.nodes if n.op == "QuantizeLinear"]
        assert len(qs) == len(readers) - 1 and all(q.inputs[0].producer.op == "DequantizeLinear" for q in qs)
        for w, a in zip(want, eval_graph(g, {"x": x})):
            np.testing.assert_array_equal(a, w)
    g, p = _graph(lambda y, k: _quantize(y, k, pair=(0.031, 200)), producer=_requantized)
    assert not _run(g)                                                     # no reader of its pair


# -- end to end: onnxruntime's QDQ models and FULL_QUANT (the models: tests/quant_models.py) ---------------------
def _convert(src, out, flags, config=None) -> str:
    return converter_lite.convert(src, out, config_file=config, graph_kernel_flags=flags)


def _uint8_edges(ms) -> int:
    return sum(1 for n in load_model(ms).graph.nodes if n.op == "QuantizedConv" and n.attrs.get("uint8_out"))


def _outputs(ms, feeds, **kw):
    return next(iter(converter_lite.load(ms, num_threads=2, **kw).run(feeds).values()))


def _cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", sorted(LAYERS) + ["residual_relu", "residual_silu"])
def test_onnxruntime_qdq_models(tmp_path, name):
    """onnxruntime's QDQ model of each network: uint8 between the int8 convolutions (through the residual Adds and
    the Concat too), the values of the float hand-off bit for bit (natively and on the reference kernels), and
    onnxruntime's within its quantization."""
    path = str(tmp_path / "q.onnx")
    residual = name.startswith("residual")
    qdq = ort_qdq(residual_cnn(name.split("_")[1]) if residual else float_cnn(name), path)
    on, off = _convert(path, str(tmp_path / "on"), "--opt_level=2"), _convert(path, str(tmp_path / "off"), OFF)
    graph = load_model(on).graph
    convs = [n for n in graph.nodes if n.op == "QuantizedConv"]
    if residual:                                   # every convolution but the first reads uint8
        assert len(convs) == 8 and all(n.inputs[0].type.dtype is DType.uint8 for n in convs[1:])
    else:
        assert _uint8_edges(on) >= len(LAYERS[name][1]) - 2
    assert _uint8_edges(off) == 0
    feeds = _feeds(qdq, 1)
    got = _outputs(on, feeds)
    np.testing.assert_array_equal(got, _outputs(off, feeds))
    np.testing.assert_array_equal(_outputs(on, feeds, native=False), _outputs(off, feeds, native=False))
    want = run_ort(qdq, feeds)[0]
    assert _cosine(got, want) > 0.9999
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 0.05 * scale and np.mean(np.abs(got - want) > 1e-3 * scale) < 0.05


def _full_quant_pair(model, tmp_path) -> tuple[str, str]:
    """``model`` converted with FULL_QUANT (4 BIN calibration inputs, per-channel), with and without the
    hand-off: the two .ms paths."""
    src = str(tmp_path / "f.onnx")
    onnx.save(model, src)
    cal = tmp_path / "cal"
    cal.mkdir()
    for k in range(4):
        _feeds(model, 20 + k)["x"].astype("<f4").tofile(cal / f"{k:03d}.bin")
    cfg = tmp_path / "q.cfg"
    cfg.write_text("[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n[data_preprocess_param]\n"
                   f"calibrate_path=x:{cal}\ncalibrate_size=4\ninput_type=BIN\n[full_quant_param]\nper_channel=true\n")
    return (_convert(src, str(tmp_path / "on"), "--opt_level=2", str(cfg)),
            _convert(src, str(tmp_path / "off"), OFF, str(cfg)))


def test_full_quant(tmp_path):
    """FULL_QUANT (the converter's own calibration and QDQ model) of the odd chain: the hand-off's values are the
    float hand-off's, and close to the float model."""
    model = float_cnn("odd", seed=3)
    on, off = _full_quant_pair(model, tmp_path)
    assert _uint8_edges(on) >= 3
    feeds = _feeds(model, 2)
    got = _outputs(on, feeds)
    np.testing.assert_array_equal(got, _outputs(off, feeds))
    assert _cosine(got, run_ort(model, feeds)[0]) > 0.99


def test_dynamic_batch(tmp_path):
    """A QDQ model with a dynamic batch: the uint8 values are typed per shape at run time too."""
    path = str(tmp_path / "q.onnx")
    qdq = ort_qdq(float_cnn("small"), path)
    qdq.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    onnx.save(qdq, path)
    on, off = _convert(path, str(tmp_path / "on"), "--opt_level=2"), _convert(path, str(tmp_path / "off"), OFF)
    assert _uint8_edges(on) >= 2
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 8, 10, 10)).astype(F32)
        np.testing.assert_array_equal(_outputs(on, {"x": x}), _outputs(off, {"x": x}))


# -- depthwise convolutions (kernels/qconv_depthwise/): MobileNetV2's expand -> depthwise -> project in uint8 ------
def _depthwise(ms) -> list:
    return [n for n in load_model(ms).graph.nodes if n.op == "QuantizedConv" and int(n.attrs.get("group", 1)) > 1]


def test_depthwise_qdq_model(tmp_path):
    """onnxruntime's QDQ model of the MobileNetV2 blocks: every depthwise convolution on the int8 depthwise driver,
    reading and writing uint8 (the expand convolution hands it bytes, the project convolution reads its bytes), the
    values the float hand-off's bit for bit and onnxruntime's within its quantization."""
    from converter_lite.kernels.qconv_depthwise.abi import SYMBOL
    path = str(tmp_path / "q.onnx")
    qdq = ort_qdq(mobile_cnn(), path)
    on, off = _convert(path, str(tmp_path / "on"), "--opt_level=2"), _convert(path, str(tmp_path / "off"), OFF)
    dw = _depthwise(on)
    assert len(dw) == 3 and all(SYMBOL in n.attrs.get("native_drivers", ()) for n in dw)
    assert all(n.attrs.get("uint8_out") for n in dw)
    assert all(n.inputs[0].type.dtype is DType.uint8 for n in dw[1:])          # (the first reads the stem's)
    assert not any(n.op == "Conv" for n in load_model(on).graph.nodes)
    feeds = _feeds(qdq, 1)
    got = _outputs(on, feeds)
    np.testing.assert_array_equal(got, _outputs(off, feeds))
    np.testing.assert_array_equal(_outputs(on, feeds, native=False), _outputs(off, feeds, native=False))
    np.testing.assert_array_equal(got, _outputs(off, feeds, native=False))
    want = run_ort(qdq, feeds)[0]
    assert _cosine(got, want) > 0.9999


def test_depthwise_full_quant(tmp_path):
    """FULL_QUANT quantizes the depthwise convolutions too (frontend/full_quant.py ``int8_conv_runs``): the model's
    values are the float hand-off's and close to the float model."""
    model = mobile_cnn(seed=4)
    on, off = _full_quant_pair(model, tmp_path)
    assert len(_depthwise(on)) == 3 and _uint8_edges(on) >= 6
    feeds = _feeds(model, 2)
    got = _outputs(on, feeds)
    np.testing.assert_array_equal(got, _outputs(off, feeds))
    assert _cosine(got, run_ort(model, feeds)[0]) > 0.99


@pytest.mark.parametrize("attrs,dims,runs", [({}, [8, 4, 3, 3], True), ({"strides": [1, 3]}, [8, 4, 3, 3], False),
                                             ({"group": 8}, [8, 1, 3, 3], True),
                                             ({"group": 8, "strides": [2, 2]}, [8, 1, 5, 5], True),
                                             ({"group": 8, "dilations": [1, 2]}, [8, 1, 3, 3], False),
                                             ({"group": 8, "strides": [1, 3]}, [8, 1, 3, 3], False),
                                             ({"group": 4}, [8, 2, 3, 3], False),    # grouped, not depthwise
                                             ({"group": 8}, None, False)])
def test_full_quant_quantizes_the_convolutions_a_driver_runs(attrs, dims, runs):
    from converter_lite.frontend.full_quant import int8_conv_runs
    node = oh.make_node("Conv", ["x", "w"], ["y"], **attrs)
    assert int8_conv_runs(node, dims) is runs
