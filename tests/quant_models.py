"""Small CNNs for the int8 tests (tests/passes/test_quantized_handoff.py, tests/runtime/test_many_threads.py):
float chains with odd sizes, a residual block, MobileNetV2-style blocks, and onnxruntime's QDQ model of each."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
from helpers import make_model, tensor_info

F32 = np.float32


LAYERS = {  # (out channels, kernel, strides, pads, dilations, activation) after an input of (channels, h, w)
    "odd": ((3, 17, 23), [(8, 3, (1, 1), (1, 1, 1, 1), (1, 1), "relu"), (12, 3, (2, 2), (1, 1, 1, 1), (1, 1), "relu"),
                          (12, 1, (1, 1), (0, 0, 0, 0), (1, 1), None), (20, 3, (1, 1), (2, 2, 2, 2), (2, 2), "relu"),
                          (7, 5, (2, 1), (2, 1, 1, 2), (1, 1), None), (9, 3, (1, 2), (0, 1, 1, 0), (1, 1), "relu")]),
    "silu": ((4, 24, 20), [(16, 3, (2, 2), (1, 1, 1, 1), (1, 1), "silu"), (16, 1, (1, 1), (0, 0, 0, 0), (1, 1), "silu"),
                           (24, 3, (1, 1), (1, 1, 1, 1), (1, 1), "silu"), (32, 3, (2, 2), (1, 1, 1, 1), (1, 1), "silu"),
                           (8, 1, (1, 1), (0, 0, 0, 0), (1, 1), None)]),
    "small": ((8, 10, 10), [(64, 3, (2, 2), (1, 1, 1, 1), (1, 1), "relu"),
                            (80, 1, (1, 1), (0, 0, 0, 0), (1, 1), "relu"),
                            (40, 3, (1, 1), (1, 1, 1, 1), (1, 1), "silu"),
                            (33, 3, (1, 1), (1, 1, 1, 1), (1, 1), None)]),
}


def float_cnn(name: str, seed: int = 0) -> onnx.ModelProto:
    """A chain of Convs (He-initialized, with biases) and activations; the third layer's input is also read by a
    1x1 branch added back after the chain's next layer when the shapes allow (two readers of one value)."""
    (c, _, _), layers = LAYERS[name]
    rng = np.random.default_rng(seed)
    nodes, inits, cur = [], {}, "x"
    for i, (m, k, strides, pads, dil, act) in enumerate(layers):
        inits[f"w{i}"] = (rng.standard_normal((m, c, k, k)) * np.sqrt(2.0 / (c * k * k))).astype(F32)
        inits[f"b{i}"] = (rng.standard_normal(m) * 0.1).astype(F32)
        nodes.append(oh.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], strides=list(strides), pads=list(pads),
                                  dilations=list(dil)))
        cur = f"c{i}"
        if act == "relu":
            nodes.append(oh.make_node("Relu", [cur], [f"a{i}"]))
            cur = f"a{i}"
        elif act == "silu":
            nodes += [oh.make_node("Sigmoid", [cur], [f"s{i}"]), oh.make_node("Mul", [cur, f"s{i}"], [f"a{i}"])]
            cur = f"a{i}"
        c = m
    return make_model(nodes, [tensor_info("x", F32, [1] + list(LAYERS[name][0]))], [tensor_info(cur, F32, None)],
                      inits)


def residual_cnn(act: str, seed: int = 0) -> onnx.ModelProto:
    """A ResNet-style block (conv, conv + the block's input, the sum read by a 3x3/2 and a 1x1/2 convolution) and
    a YOLOv8-style Concat of two convolutions read by a 1x1 one: elementwise ops and a Concat between the int8
    convolutions."""
    rng = np.random.default_rng(seed)
    inits, nodes = {}, []

    def conv(x, c, m, k, name, strides=1, activate=True):
        inits[f"{name}_w"] = (rng.standard_normal((m, c, k, k)) * np.sqrt(2.0 / (c * k * k))).astype(F32)
        inits[f"{name}_b"] = (rng.standard_normal(m) * 0.1).astype(F32)
        nodes.append(oh.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], pads=[k // 2] * 4,
                                  strides=[strides, strides]))
        if not activate:
            return f"{name}_c"
        if act == "relu":
            nodes.append(oh.make_node("Relu", [f"{name}_c"], [name]))
        else:
            nodes.extend([oh.make_node("Sigmoid", [f"{name}_c"], [f"{name}_s"]),
                          oh.make_node("Mul", [f"{name}_c", f"{name}_s"], [name])])
        return name

    a = conv("x", 3, 16, 3, "a")
    b = conv(conv(a, 16, 16, 3, "b1"), 16, 16, 3, "b2", activate=False)
    nodes += [oh.make_node("Add", [b, a], ["s"]), oh.make_node("Relu", ["s"], ["r"])]
    d = conv("r", 16, 24, 3, "d", strides=2)
    e = conv("r", 16, 24, 1, "e", strides=2, activate=False)
    nodes.append(oh.make_node("Add", [d, e], ["t"]))
    f = conv(conv("t", 24, 16, 1, "f1"), 16, 16, 3, "f2")
    nodes.append(oh.make_node("Concat", ["t", f], ["u"], axis=1))
    y = conv("u", 40, 12, 1, "g", activate=False)
    return make_model(nodes, [tensor_info("x", F32, [1, 3, 20, 18])], [tensor_info(y, F32, None)], inits)


def _feeds(model, seed):
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(F32)}


def ort_qdq(model: onnx.ModelProto, path: str, feeds=None) -> onnx.ModelProto:
    """onnxruntime's quantize_static of ``model`` (QDQ, per-channel int8 weights, uint8 activations), calibrated
    on ``feeds(seed)`` for seeds 10-13 (default: ``_feeds(model, seed)``, a model of one input ``x``)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    onnx.save(model, path + ".float.onnx")
    feeds = feeds or (lambda seed: _feeds(model, seed))
    data = iter([feeds(10 + k) for k in range(4)])

    class Reader(CalibrationDataReader):
        def get_next(self):
            return next(data, None)
    quantize_static(path + ".float.onnx", path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return onnx.load(path)


def mobile_cnn(seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2-style blocks: a 3x3/2 stem, expand 1x1 -> depthwise 3x3 (stride 1 and 2) or 5x5 -> project 1x1,
    ReLU6 (Clip) after the expand and depthwise convolutions, a residual Add around the last block; odd sizes and
    channel counts that are not multiples of 16."""
    rng = np.random.default_rng(seed)
    inits = {"lo": np.array(0, F32), "hi": np.array(6, F32)}
    nodes = []

    def conv(x, c, m, k, name, strides=1, group=1, relu6=True):
        inits[f"{name}_w"] = (rng.standard_normal((m, c // group, k, k)) * np.sqrt(2.0 / (c // group * k * k))
                              ).astype(F32)
        inits[f"{name}_b"] = (rng.standard_normal(m) * 0.1).astype(F32)
        nodes.append(oh.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], pads=[k // 2] * 4,
                                  strides=[strides, strides], group=group))
        if not relu6:
            return f"{name}_c"
        nodes.append(oh.make_node("Clip", [f"{name}_c", "lo", "hi"], [name]))
        return name

    x = conv("x", 3, 16, 3, "stem", strides=2)
    x = conv(conv(x, 16, 16, 3, "dw0", group=16), 16, 8, 1, "pj0", relu6=False)
    x = conv(conv(conv(x, 8, 24, 1, "ex1"), 24, 24, 3, "dw1", strides=2, group=24), 24, 12, 1, "pj1", relu6=False)
    y = conv(conv(conv(x, 12, 40, 1, "ex2"), 40, 40, 5, "dw2", group=40), 40, 12, 1, "pj2", relu6=False)
    nodes.append(oh.make_node("Add", [x, y], ["out"]))
    return make_model(nodes, [tensor_info("x", F32, [1, 3, 23, 21])], [tensor_info("out", F32, None)], inits)
