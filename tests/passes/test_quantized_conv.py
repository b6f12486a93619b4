"""passes/rewrite/quantized_conv.py + kernels/qconv: a QDQ model's convolutions run on the native int8
convolution, against onnxruntime on the same QDQ graph; the weights' int8 values are found back exactly."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.kernels.qconv.abi import QCONV_SYMBOL
from converter_lite.model.format import load_model
from converter_lite.passes.rewrite.quantized_conv import int8_weights


def test_int8_weights_are_found_back_exactly():
    rng = np.random.default_rng(0)
    q = rng.integers(-127, 128, (8, 3, 3, 3)).astype(np.int8)
    q[:, 0, 0, 0] = 127                                                # per channel: the largest maps to 127
    s = rng.uniform(1e-4, 1e-1, 8).astype(np.float32)
    w = q.astype(np.float32) * s[:, None, None, None]
    got = int8_weights(w)
    assert got is not None
    np.testing.assert_array_equal(got[0].astype(np.float32) * got[1][:, None, None, None], w)
    per_tensor = q.astype(np.float32) * np.float32(0.0123)            # one scale for all channels
    q2 = q.copy()
    q2[1:, 0, 0, 0] = 5                                               # channels whose largest is not 127
    per_tensor = q2.astype(np.float32) * np.float32(0.0123)
    got = int8_weights(per_tensor)
    assert got is not None and np.array_equal(got[0].astype(np.float32) * got[1][:, None, None, None], per_tensor)
    assert int8_weights(rng.standard_normal((4, 2, 3, 3)).astype(np.float32)) is None   # float weights
    zero = np.zeros((2, 2, 1, 1), np.float32)
    assert int8_weights(zero) is not None


def _qdq_conv_model(c, m, k, strides=(1, 1), pads=None, dil=(1, 1), shared=False, scale=0.02, zp=120):
    """x -> Q -> DQ -> Conv(dequantized int8 weights, bias) -> Relu (-> + the DQ output when ``shared``)."""
    rng = np.random.default_rng(c * 10 + m)
    wq = rng.integers(-127, 128, (m, c, k, k)).astype(np.int8)
    wq[:, 0, 0, 0] = 127                      # symmetric per-channel quantization: each channel reaches 127
    ws = rng.uniform(0.002, 0.01, m).astype(np.float32)
    pads = [k // 2] * 4 if pads is None else pads
    nodes = [oh.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             oh.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=0),
             oh.make_node("Conv", ["xd", "w", "b"], ["c"], pads=pads, strides=list(strides), dilations=list(dil)),
             oh.make_node("Relu", ["c"], ["r"])]
    out = "r"
    if shared:                                                       # the DQ output read by another node too
        nodes.append(oh.make_node("Add", ["r", "xd"], ["y"]))
        out = "y"
    inits = {"s": np.array(scale, np.float32), "z": np.array(zp, np.uint8), "wq": wq, "ws": ws,
             "b": rng.standard_normal(m).astype(np.float32)}
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, 20, 22])], [tensor_info(out, np.float32, None)],
                       initializers=inits)
    return model, out


def _convert(tmp_path, model, level=2):
    onnx.save(model, tmp_path / "m.onnx")
    return converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"),
                                  graph_kernel_flags=f"--opt_level={level}")


@pytest.mark.parametrize("c,m,k,strides,dil", [(16, 16, 3, (1, 1), (1, 1)), (3, 8, 7, (2, 2), (1, 1)),
                                               (8, 20, 1, (2, 2), (1, 1)), (6, 5, 3, (1, 1), (2, 2)),
                                               (8, 8, 3, (2, 1), (1, 1))])
@pytest.mark.parametrize("shared", [False, True])
def test_qdq_conv_runs_on_the_int8_convolution(tmp_path, c, m, k, strides, dil, shared):
    model, out = _qdq_conv_model(c, m, k, strides, dil=dil, shared=shared and strides == (1, 1) and c == m)
    ms = _convert(tmp_path, model)
    nodes = load_model(ms).graph.nodes
    q = [n for n in nodes if n.op == "QuantizedConv"]
    assert len(q) == 1 and QCONV_SYMBOL in q[0].attrs.get("native_drivers", ())
    assert not any(n.op == "Conv" for n in nodes)
    x = (np.random.default_rng(1).standard_normal((1, c, 20, 22)) * 2).astype(np.float32)
    got = converter_lite.load(ms, num_threads=2).run({"x": x})[out]
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_what_the_driver_does_not_take_stays_a_float_conv(tmp_path):
    """A column stride of 3 and an int8 (signed) activation zero point keep the float Conv."""
    model, out = _qdq_conv_model(8, 8, 3, strides=(1, 3))
    ms = _convert(tmp_path, model)
    assert not any(n.op == "QuantizedConv" for n in load_model(ms).graph.nodes)
    x = np.random.default_rng(2).standard_normal((1, 8, 20, 22)).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(converter_lite.load(ms).run({"x": x})[out], want, rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())


def test_opt_level_0_keeps_the_graph(tmp_path):
    model, _ = _qdq_conv_model(4, 4, 3)
    ms = _convert(tmp_path, model, level=0)
    assert not any(n.op == "QuantizedConv" for n in load_model(ms).graph.nodes)


def test_reference_kernel_is_the_qdq_graph(tmp_path):
    """The op's reference (numpy) equals onnxruntime on the QDQ graph it stands for."""
    from converter_lite.ops.registry import OPS
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    w = rng.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8)
    ws, b = rng.uniform(0.01, 0.02, 6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    got = OPS["QuantizedConv"].compute(attrs, x, np.float32(0.05), np.uint8(100), w, ws, b)
    model = make_model([oh.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                        oh.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
                        oh.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0),
                        oh.make_node("Conv", ["d", "wd", "b"], ["y"], **attrs)],
                       [tensor_info("x", np.float32, [1, 4, 9, 9])], [tensor_info("y", np.float32, None)],
                       initializers={"s": np.array(0.05, np.float32), "z": np.array(100, np.uint8), "w": w,
                                     "ws": ws, "b": b})
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_a_pad_in_front_of_the_quantization_moves_into_the_conv(tmp_path):
    """Pad -> Q -> DQ -> Conv (a TensorFlow-style export quantized by onnxruntime): the Pad goes into the Conv's
    pads, for the int8 convolution and for a depthwise one (the float depthwise driver)."""
    rng = np.random.default_rng(4)
    wq = rng.integers(-127, 128, (8, 8, 3, 3)).astype(np.int8)
    wq[:, 0, 0, 0] = 127
    dw = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    inits = {"s": np.array(0.03, np.float32), "z": np.array(128, np.uint8), "wq": wq,
             "ws": rng.uniform(0.002, 0.01, 8).astype(np.float32), "dw": dw,
             "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    nodes = [oh.make_node("Pad", ["x", "pads"], ["p"]),
             oh.make_node("QuantizeLinear", ["p", "s", "z"], ["q"]),
             oh.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             oh.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=0),
             oh.make_node("Conv", ["d", "w"], ["c"]),
             oh.make_node("Pad", ["c", "pads"], ["p2"]),
             oh.make_node("QuantizeLinear", ["p2", "s", "z"], ["q2"]),
             oh.make_node("DequantizeLinear", ["q2", "s", "z"], ["d2"]),
             oh.make_node("Conv", ["d2", "dw"], ["y"], group=8)]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, 8, 12, 12])], [tensor_info("y", np.float32, None)],
                       initializers=inits)
    ms = _convert(tmp_path, model)
    ops = [n.op for n in load_model(ms).graph.nodes]
    assert "Pad" not in ops and ops.count("QuantizedConv") == 1 and ops.count("Conv") == 1, ops
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(converter_lite.load(ms).run({"x": x})["y"], want, rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_qlinear_conv_runs_on_the_int8_convolution(tmp_path, strides):
    """QLinearConv (uint8 activations, int8 weights per channel, an int32 bias): the int8 convolution reading the
    uint8 input and writing the requantized uint8 output itself (no kernel around it); within one quantization
    step of onnxruntime."""
    rng = np.random.default_rng(11)
    w = rng.integers(-127, 128, (12, 8, 3, 3)).astype(np.int8)
    inits = {"xs": np.array(0.05, np.float32), "xz": np.array(120, np.uint8), "w": w,
             "ws": rng.uniform(0.002, 0.004, 12).astype(np.float32), "ys": np.array(0.1, np.float32),
             "yz": np.array(128, np.uint8), "bias": rng.integers(-300, 300, 12).astype(np.int32),
             "wz": np.zeros(12, np.int8)}
    node = oh.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["y"], pads=[1, 1, 1, 1],
                        strides=list(strides))
    model = make_model([node], [tensor_info("x", np.uint8, [1, 8, 15, 17])], [tensor_info("y", np.uint8, None)],
                       initializers=inits)
    ms = _convert(tmp_path, model)
    (conv,) = load_model(ms).graph.nodes
    assert conv.op == "QuantizedConv" and conv.attrs["uint8_out"] == 1 and str(conv.inputs[0].type.dtype.np) == "uint8"
    x = rng.integers(0, 256, (1, 8, 15, 17)).astype(np.uint8)
    got = converter_lite.load(ms).run({"x": x})["y"].astype(np.int32)
    want = run_ort(model, {"x": x})[0].astype(np.int32)
    assert np.abs(got - want).max() <= 1 and np.mean(got != want) < 0.02


@pytest.mark.parametrize("act", [None, "Relu", "Clip"])
def test_the_next_quantization_goes_into_the_epilogue(tmp_path, act):
    """Conv -> (Relu | Clip) -> QuantizeLinear -> DequantizeLinear: the clamp and the output's quantization round
    trip run in the int8 convolution's epilogue, as onnxruntime computes the graph."""
    model, _ = _qdq_conv_model(8, 12, 3)
    g = model.graph
    relu = next(n for n in g.node if n.op_type == "Relu")
    if act is None:
        relu.op_type = "Identity"
    elif act == "Clip":
        relu.op_type = "Clip"
        relu.input.extend(["lo", "hi"])
        g.initializer.extend([onh_from(np.float32(0.0), "lo"), onh_from(np.float32(6.0), "hi")])
    g.node.extend([oh.make_node("QuantizeLinear", ["r", "s", "z"], ["rq"]),
                   oh.make_node("DequantizeLinear", ["rq", "s", "z"], ["y2"])])
    g.output[0].name = "y2"
    ms = _convert(tmp_path, model)
    q = [n for n in load_model(ms).graph.nodes if n.op == "QuantizedConv"]
    assert len(q) == 1 and len(q[0].inputs) == 8 and ("clamp" in q[0].attrs) == (act is not None)
    x = (np.random.default_rng(5).standard_normal((1, 8, 20, 22)) * 2).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    got = converter_lite.load(ms).run({"x": x})["y2"]
    step = 0.02
    assert np.abs(got - want).max() <= step * 1.001 and np.mean(got != want) < 0.01


def onh_from(value, name):
    import onnx.numpy_helper as onh
    return onh.from_array(np.asarray(value), name)


def test_dynamic_image_size(tmp_path):
    """A QDQ convolution of a model with dynamic height and width: converted once, the int8 convolution bound at
    each shape it runs at."""
    model, out = _qdq_conv_model(8, 8, 3)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "h", "w"
    ms = _convert(tmp_path, model)
    assert any(n.op == "QuantizedConv" for n in load_model(ms).graph.nodes)
    m = converter_lite.load(ms, num_threads=2)
    for h, w in [(20, 22), (9, 31), (33, 5)]:
        x = np.random.default_rng(h * w).standard_normal((1, 8, h, w)).astype(np.float32)
        want = run_ort(model, {"x": x})[0]
        np.testing.assert_allclose(m.run({"x": x})[out], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("sigmoid_qdq", [True, False])
def test_a_qdq_silu_goes_into_the_epilogue(tmp_path, sigmoid_qdq):
    """Conv -> Q/DQ -> Sigmoid (-> Q/DQ) -> Mul -> Q/DQ (a QDQ YOLOv8's activation): one QuantizedConv whose
    epilogue computes the SiLU and the three round trips, within one quantization step of onnxruntime."""
    model, _ = _qdq_conv_model(8, 12, 3)
    g = model.graph
    relu = next(n for n in g.node if n.op_type == "Relu")
    g.node.remove(relu)
    g.initializer.extend([onh_from(np.float32(0.05), "sa"), onh_from(np.uint8(100), "za"),
                          onh_from(np.float32(1 / 255), "sb"), onh_from(np.uint8(0), "zb"),
                          onh_from(np.float32(0.04), "sc"), onh_from(np.uint8(10), "zc")])
    nodes = [oh.make_node("QuantizeLinear", ["c", "sa", "za"], ["cq"]),
             oh.make_node("DequantizeLinear", ["cq", "sa", "za"], ["cd"]),
             oh.make_node("Sigmoid", ["cd"], ["sg"])]
    if sigmoid_qdq:
        nodes += [oh.make_node("QuantizeLinear", ["sg", "sb", "zb"], ["sgq"]),
                  oh.make_node("DequantizeLinear", ["sgq", "sb", "zb"], ["sgd"])]
    nodes += [oh.make_node("Mul", ["cd", "sgd" if sigmoid_qdq else "sg"], ["m"]),
              oh.make_node("QuantizeLinear", ["m", "sc", "zc"], ["mq"]),
              oh.make_node("DequantizeLinear", ["mq", "sc", "zc"], ["y2"])]
    g.node.extend(nodes)
    g.output[0].name = "y2"
    ms = _convert(tmp_path, model)
    ops = [n for n in load_model(ms).graph.nodes]
    q = [n for n in ops if n.op == "QuantizedConv"]
    assert len(q) == 1 and q[0].attrs.get("silu") and len(ops) == 1, [n.op for n in ops]
    x = (np.random.default_rng(6).standard_normal((1, 8, 20, 22)) * 2).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    got = converter_lite.load(ms).run({"x": x})["y2"]
    assert np.abs(got - want).max() <= 0.04 * 1.001 and np.mean(got != want) < 0.02


def _qdq_depthwise_model(c, k, strides, dil, pads, h=19, w=21):
    """x -> Q -> DQ -> depthwise Conv (group = c, dequantized int8 weights, bias) -> Clip(0, 6)."""
    rng = np.random.default_rng(c + k)
    wq = rng.integers(-127, 128, (c, 1, k, k)).astype(np.int8)
    wq[:, 0, 0, 0] = 127                      # symmetric per-channel quantization: each channel reaches 127
    ws = rng.uniform(0.002, 0.01, c).astype(np.float32)
    nodes = [oh.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             oh.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=0),
             oh.make_node("Conv", ["xd", "w", "b"], ["c"], pads=pads, strides=list(strides), dilations=list(dil),
                          group=c),
             oh.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    inits = {"s": np.array(0.03, np.float32), "z": np.array(131, np.uint8), "wq": wq, "ws": ws,
             "b": rng.standard_normal(c).astype(np.float32), "lo": np.array(0, np.float32),
             "hi": np.array(6, np.float32)}
    return make_model(nodes, [tensor_info("x", np.float32, [1, c, h, w])], [tensor_info("y", np.float32, None)],
                      initializers=inits)


@pytest.mark.parametrize("c,k,strides,dil,pads", [(24, 3, (1, 1), (1, 1), [1, 1, 1, 1]),
                                                  (17, 3, (2, 2), (1, 1), [1, 1, 1, 1]),
                                                  (8, 5, (1, 1), (2, 1), [4, 2, 4, 2]),
                                                  (5, 3, (2, 1), (1, 1), [0, 1, 2, 1])])
def test_qdq_depthwise_conv_runs_on_the_int8_depthwise_convolution(tmp_path, c, k, strides, dil, pads):
    from converter_lite.kernels.qconv_depthwise.abi import SYMBOL
    model = _qdq_depthwise_model(c, k, strides, dil, pads)
    ms = _convert(tmp_path, model)
    nodes = load_model(ms).graph.nodes
    q = [n for n in nodes if n.op == "QuantizedConv"]
    assert len(q) == 1 and SYMBOL in q[0].attrs.get("native_drivers", ()) and not any(n.op == "Conv" for n in nodes)
    x = (np.random.default_rng(1).standard_normal((1, c, 19, 21)) * 2).astype(np.float32)
    got = converter_lite.load(ms, num_threads=2).run({"x": x})["y"]
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_depthwise_conv_the_driver_does_not_take_stays_float(tmp_path):
    """A column dilation of 2 (kernels/qconv_depthwise/abi.py) keeps the float Conv."""
    model = _qdq_depthwise_model(8, 3, (1, 1), (1, 2), [1, 2, 1, 2])
    ms = _convert(tmp_path, model)
    assert not any(n.op == "QuantizedConv" for n in load_model(ms).graph.nodes)
    x = np.random.default_rng(2).standard_normal((1, 8, 19, 21)).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(converter_lite.load(ms).run({"x": x})["y"], want, rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())
