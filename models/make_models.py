"""Builds the sample ONNX models in this directory with onnx.helper (run: python models/make_models.py).

* mynet.onnx              seed 000's MyNet: y = x*2 + 1 (x = 0.5 everywhere -> 2.0 everywhere)
* custom_op.onnx          seed 000's custom combination operator: MyOp(a, y) = (a - y) * a as a model-local
                          function, called on (2x)^3 (x = 0.2, y = 0.3 -> -0.015104 everywhere)
* mlp_block.onnx          LayerNorm -> MatMul+bias -> tanh-GELU -> MatMul+bias -> residual add
* attention_block.onnx    a transformer encoder block: QKV projections, softmax(QK^T/sqrt(d))V, output
                          projection, residual + LayerNorm, GELU MLP, residual + LayerNorm
* conv_net.onnx           Conv+BatchNorm+Relu blocks with residual adds, global pooling and a Gemm head
* legacy_opset9.onnx      a small conv/fc net exported at opset 9 (old BatchNorm, Softmax, Upsample forms)
* vad_streaming.onnx      a streaming voice-activity detector shaped like the pretrained ones: an If on the
                          sample-rate input picks one of two branches (conv front end, LSTM step with the state
                          carried between calls, sigmoid head); inputs input[1,512], state[2,1,64], sr (int64)
* bert_dynamic.onnx       a 2-layer BERT-like encoder with dynamic batch and sequence (input_ids, attention_mask),
                          its shapes computed from Shape ops as exporters write them (dynamic_transformer)
* gpt2_dynamic.onnx       a 2-layer GPT-2-like decoder, dynamic batch and sequence, causal mask sliced to seq
* greedy_decoder.onnx     a scripted greedy decoder: a Loop with a data-dependent condition (stop at the end
                          token) carrying the token and hidden state, the tokens as its scan output
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
from onnx import TensorProto as TP

HERE = os.path.dirname(os.path.abspath(__file__))
IR_VERSION = 10        # onnxruntime 1.31 reads up to IR version 13; onnx 1.23 would write 14
F32 = TP.FLOAT


def _model(graph, opset=17, functions=(), ir_version=IR_VERSION, extra_opsets=()):
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset), *extra_opsets], functions=list(functions),
                      ir_version=ir_version, producer_name="converter_lite.models")
    onnx.checker.check_model(m, full_check=True)
    return m


def _init(rng, name, shape, scale=0.1):
    return onh.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def mynet():
    nodes = [oh.make_node("Mul", ["x", "two"], ["a"], name="mul"),
             oh.make_node("Add", ["a", "one"], ["y"], name="add")]
    g = oh.make_graph(nodes, "MyNet", [oh.make_tensor_value_info("x", F32, [4, 4])],
                      [oh.make_tensor_value_info("y", F32, [4, 4])],
                      initializer=[onh.from_array(np.array(2.0, np.float32), "two"),
                                   onh.from_array(np.array(1.0, np.float32), "one")])
    return _model(g)


def custom_op():
    my_op = oh.make_function("custom", "MyOp", ["x", "y"], ["out"],
                             [oh.make_node("Sub", ["x", "y"], ["a"]), oh.make_node("Mul", ["a", "x"], ["out"])],
                             opset_imports=[oh.make_opsetid("", 17)])
    nodes = [oh.make_node("Mul", ["x", "two"], ["a"], name="mul"),
             oh.make_node("Pow", ["a", "three"], ["b"], name="pow"),
             oh.make_node("MyOp", ["b", "y"], ["res"], domain="custom", name="my_op")]
    g = oh.make_graph(nodes, "MyNetCustomOp",
                      [oh.make_tensor_value_info("x", F32, [4, 4]), oh.make_tensor_value_info("y", F32, [4, 4])],
                      [oh.make_tensor_value_info("res", F32, [4, 4])],
                      initializer=[onh.from_array(np.array(2.0, np.float32), "two"),
                                   onh.from_array(np.array(3.0, np.float32), "three")])
    return _model(g, functions=[my_op], extra_opsets=[oh.make_opsetid("custom", 1)])


def _gelu_tanh(x, out, p):
    """0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) as exporters write it."""
    return [oh.make_node("Pow", [x, f"{p}_c3"], [f"{p}_x3"]),
            oh.make_node("Mul", [f"{p}_x3", f"{p}_k"], [f"{p}_kx3"]),
            oh.make_node("Add", [x, f"{p}_kx3"], [f"{p}_inner"]),
            oh.make_node("Mul", [f"{p}_inner", f"{p}_s"], [f"{p}_scaled"]),
            oh.make_node("Tanh", [f"{p}_scaled"], [f"{p}_t"]),
            oh.make_node("Add", [f"{p}_t", f"{p}_one"], [f"{p}_t1"]),
            oh.make_node("Mul", [x, f"{p}_t1"], [f"{p}_xt"]),
            oh.make_node("Mul", [f"{p}_xt", f"{p}_half"], [out])], [
        onh.from_array(np.array(3.0, np.float32), f"{p}_c3"),
        onh.from_array(np.array(0.044715, np.float32), f"{p}_k"),
        onh.from_array(np.array(np.sqrt(2 / np.pi), np.float32), f"{p}_s"),
        onh.from_array(np.array(1.0, np.float32), f"{p}_one"),
        onh.from_array(np.array(0.5, np.float32), f"{p}_half")]


def mlp_block(rng, tokens=64, hidden=128, ffn=512):
    nodes, inits = [], []
    nodes.append(oh.make_node("LayerNormalization", ["x", "ln_g", "ln_b"], ["ln"], axis=-1, epsilon=1e-5,
                              name="ln"))
    inits += [_init(rng, "ln_g", [hidden], 1.0), _init(rng, "ln_b", [hidden])]
    nodes += [oh.make_node("MatMul", ["ln", "w1"], ["h1"], name="fc1"),
              oh.make_node("Add", ["h1", "b1"], ["h1b"], name="fc1_bias")]
    inits += [_init(rng, "w1", [hidden, ffn]), _init(rng, "b1", [ffn])]
    gn, gi = _gelu_tanh("h1b", "g", "gelu")
    nodes += gn
    inits += gi
    nodes += [oh.make_node("MatMul", ["g", "w2"], ["h2"], name="fc2"),
              oh.make_node("Add", ["h2", "b2"], ["h2b"], name="fc2_bias"),
              oh.make_node("Add", ["h2b", "x"], ["y"], name="residual")]
    inits += [_init(rng, "w2", [ffn, hidden]), _init(rng, "b2", [hidden])]
    g = oh.make_graph(nodes, "MlpBlock", [oh.make_tensor_value_info("x", F32, [1, tokens, hidden])],
                      [oh.make_tensor_value_info("y", F32, [1, tokens, hidden])], initializer=inits)
    return _model(g)


def attention_block(rng, batch=1, seq=64, hidden=128, heads=4, ffn=512):
    d = hidden // heads
    nodes, inits = [], []

    def linear(x, out, name, n_in, n_out):
        nodes.extend([oh.make_node("MatMul", [x, f"{name}_w"], [f"{out}_mm"], name=f"{name}"),
                      oh.make_node("Add", [f"{out}_mm", f"{name}_b"], [out], name=f"{name}_bias")])
        inits.extend([_init(rng, f"{name}_w", [n_in, n_out]), _init(rng, f"{name}_b", [n_out])])

    def heads_of(x, out):
        nodes.extend([oh.make_node("Reshape", [x, "heads_shape"], [f"{out}_r"]),
                      oh.make_node("Transpose", [f"{out}_r"], [out], perm=[0, 2, 1, 3])])

    inits.append(onh.from_array(np.array([batch, seq, heads, d], np.int64), "heads_shape"))
    inits.append(onh.from_array(np.array([batch, seq, hidden], np.int64), "merge_shape"))
    inits.append(onh.from_array(np.array(1.0 / np.sqrt(d), np.float32), "scale"))
    for n in ("q", "k", "v"):
        linear("x", n, f"{n}_proj", hidden, hidden)
        heads_of(n, f"{n}h")
    nodes += [oh.make_node("Transpose", ["kh"], ["khT"], perm=[0, 1, 3, 2]),
              oh.make_node("MatMul", ["qh", "khT"], ["scores"], name="qk"),
              oh.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale"),
              oh.make_node("Add", ["scaled", "mask"], ["masked"], name="mask_add"),
              oh.make_node("Softmax", ["masked"], ["probs"], axis=-1, name="softmax"),
              oh.make_node("MatMul", ["probs", "vh"], ["ctx"], name="pv"),
              oh.make_node("Transpose", ["ctx"], ["ctxT"], perm=[0, 2, 1, 3]),
              oh.make_node("Reshape", ["ctxT", "merge_shape"], ["ctxm"])]
    linear("ctxm", "attn", "o_proj", hidden, hidden)
    nodes += [oh.make_node("Add", ["attn", "x"], ["res1"], name="residual1"),
              oh.make_node("LayerNormalization", ["res1", "ln1_g", "ln1_b"], ["ln1"], axis=-1, epsilon=1e-5,
                           name="ln1")]
    inits += [_init(rng, "ln1_g", [hidden], 1.0), _init(rng, "ln1_b", [hidden])]
    linear("ln1", "f1", "ffn1", hidden, ffn)
    nodes += [oh.make_node("Div", ["f1", "sqrt2"], ["f1d"]), oh.make_node("Erf", ["f1d"], ["f1e"]),
              oh.make_node("Add", ["f1e", "one"], ["f1e1"]), oh.make_node("Mul", ["f1", "f1e1"], ["f1m"]),
              oh.make_node("Mul", ["f1m", "half"], ["gelu"], name="gelu_erf")]
    inits += [onh.from_array(np.array(np.sqrt(2.0), np.float32), "sqrt2"),
              onh.from_array(np.array(1.0, np.float32), "one"), onh.from_array(np.array(0.5, np.float32), "half")]
    linear("gelu", "f2", "ffn2", ffn, hidden)
    nodes += [oh.make_node("Add", ["f2", "ln1"], ["res2"], name="residual2"),
              oh.make_node("LayerNormalization", ["res2", "ln2_g", "ln2_b"], ["y"], axis=-1, epsilon=1e-5,
                           name="ln2")]
    inits += [_init(rng, "ln2_g", [hidden], 1.0), _init(rng, "ln2_b", [hidden])]
    g = oh.make_graph(nodes, "AttentionBlock",
                      [oh.make_tensor_value_info("x", F32, [batch, seq, hidden]),
                       oh.make_tensor_value_info("mask", F32, [batch, 1, 1, seq])],
                      [oh.make_tensor_value_info("y", F32, [batch, seq, hidden])], initializer=inits)
    return _model(g)


def conv_net(rng, channels=16, size=32):
    nodes, inits = [], []

    def conv_bn(x, out, name, cin, cout, k=3, relu=True, stride=1):
        nodes.append(oh.make_node("Conv", [x, f"{name}_w"], [f"{name}_c"], kernel_shape=[k, k],
                                  pads=[k // 2] * 4, strides=[stride, stride], name=f"{name}_conv"))
        nodes.append(oh.make_node("BatchNormalization", [f"{name}_c", f"{name}_s", f"{name}_b", f"{name}_m",
                                                         f"{name}_v"], [out if not relu else f"{name}_bn"],
                                  epsilon=1e-5, name=f"{name}_bn"))
        if relu:
            nodes.append(oh.make_node("Relu", [f"{name}_bn"], [out], name=f"{name}_relu"))
        inits.extend([_init(rng, f"{name}_w", [cout, cin, k, k], np.sqrt(2.0 / (cin * k * k))),
                      onh.from_array((1 + 0.1 * rng.standard_normal(cout)).astype(np.float32), f"{name}_s"),
                      _init(rng, f"{name}_b", [cout]), _init(rng, f"{name}_m", [cout]),
                      onh.from_array((1 + 0.1 * rng.random(cout)).astype(np.float32), f"{name}_v")])

    conv_bn("x", "stem", "stem", 3, channels)
    prev = "stem"
    for i in range(2):
        conv_bn(prev, f"b{i}a", f"b{i}a", channels, channels)
        conv_bn(f"b{i}a", f"b{i}b", f"b{i}b", channels, channels, relu=False)
        nodes += [oh.make_node("Add", [f"b{i}b", prev], [f"b{i}sum"], name=f"b{i}_residual"),
                  oh.make_node("Relu", [f"b{i}sum"], [f"b{i}out"], name=f"b{i}_relu")]
        prev = f"b{i}out"
    nodes += [oh.make_node("GlobalAveragePool", [prev], ["gap"], name="gap"),
              oh.make_node("Flatten", ["gap"], ["flat"], axis=1, name="flatten"),
              oh.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["y"], transB=1, name="fc")]
    inits += [_init(rng, "fc_w", [10, channels]), _init(rng, "fc_b", [10])]
    g = oh.make_graph(nodes, "ConvNet", [oh.make_tensor_value_info("x", F32, [1, 3, size, size])],
                      [oh.make_tensor_value_info("y", F32, [1, 10])], initializer=inits)
    return _model(g)


def legacy_opset9(rng):
    """Old operator forms: BatchNormalization-9, Upsample-9, Softmax-1 (2-D coercion), Gemm-9, Flatten."""
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name="conv"),
             oh.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], epsilon=1e-5, name="bn"),
             oh.make_node("Relu", ["bn"], ["r"], name="relu"),
             oh.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             oh.make_node("Upsample", ["p", "scales"], ["u"], mode="nearest", name="upsample"),
             oh.make_node("Add", ["u", "r"], ["sum"], name="add"),
             oh.make_node("Flatten", ["sum"], ["f"], axis=1, name="flatten"),
             oh.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1, name="fc"),
             oh.make_node("Softmax", ["logits"], ["y"], name="softmax")]
    inits = [_init(rng, "w", [4, 3, 3, 3], 0.3),
             onh.from_array((1 + 0.1 * rng.standard_normal(4)).astype(np.float32), "s"),
             _init(rng, "b", [4]), _init(rng, "m", [4]),
             onh.from_array((1 + 0.1 * rng.random(4)).astype(np.float32), "v"),
             onh.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             _init(rng, "fw", [10, 4 * 8 * 8]), _init(rng, "fb", [10])]
    g = oh.make_graph(nodes, "LegacyOpset9", [oh.make_tensor_value_info("x", F32, [1, 3, 8, 8])],
                      [oh.make_tensor_value_info("y", F32, [1, 10])], initializer=inits)
    return _model(g, opset=9, ir_version=4)


def _vad_branch(rng, name: str, kernel: int, stride: int, hidden: int = 64):
    """One sample rate's branch: conv front end -> mean over time -> LSTM step -> sigmoid head."""
    p = name
    inits = [_init(rng, f"{p}_w1", [32, 1, kernel]), _init(rng, f"{p}_b1", [32]),
             _init(rng, f"{p}_w2", [32, 32, 3]), _init(rng, f"{p}_b2", [32]),
             _init(rng, f"{p}_w3", [hidden, 32, 3]), _init(rng, f"{p}_b3", [hidden]),
             _init(rng, f"{p}_W", [1, 4 * hidden, hidden]), _init(rng, f"{p}_R", [1, 4 * hidden, hidden]),
             _init(rng, f"{p}_B", [1, 8 * hidden]), _init(rng, f"{p}_wo", [hidden, 1], 0.5),
             _init(rng, f"{p}_bo", [1]),
             onh.from_array(np.array([1, 1, 512], np.int64), f"{p}_shape"),
             onh.from_array(np.array([1, 1, hidden], np.int64), f"{p}_seq_shape"),
             onh.from_array(np.array([1], np.int64), f"{p}_one"), onh.from_array(np.array([2], np.int64), f"{p}_two"),
             onh.from_array(np.array([0], np.int64), f"{p}_zero")]
    n = [oh.make_node("Reshape", ["input", f"{p}_shape"], [f"{p}_x"]),
         oh.make_node("Conv", [f"{p}_x", f"{p}_w1", f"{p}_b1"], [f"{p}_c1"], strides=[stride]),
         oh.make_node("Relu", [f"{p}_c1"], [f"{p}_r1"]),
         oh.make_node("Conv", [f"{p}_r1", f"{p}_w2", f"{p}_b2"], [f"{p}_c2"], pads=[1, 1]),
         oh.make_node("Relu", [f"{p}_c2"], [f"{p}_r2"]),
         oh.make_node("Conv", [f"{p}_r2", f"{p}_w3", f"{p}_b3"], [f"{p}_c3"], strides=[2], pads=[1, 1]),
         oh.make_node("Relu", [f"{p}_c3"], [f"{p}_r3"]),
         oh.make_node("ReduceMean", [f"{p}_r3"], [f"{p}_m"], axes=[2], keepdims=0),
         oh.make_node("Reshape", [f"{p}_m", f"{p}_seq_shape"], [f"{p}_seq"]),
         oh.make_node("Slice", ["state", f"{p}_zero", f"{p}_one", f"{p}_zero"], [f"{p}_h0"]),
         oh.make_node("Slice", ["state", f"{p}_one", f"{p}_two", f"{p}_zero"], [f"{p}_c0"]),
         oh.make_node("LSTM", [f"{p}_seq", f"{p}_W", f"{p}_R", f"{p}_B", "", f"{p}_h0", f"{p}_c0"],
                      ["", f"{p}_hn", f"{p}_cn"], hidden_size=hidden),
         oh.make_node("Concat", [f"{p}_hn", f"{p}_cn"], [f"{p}_state"], axis=0),
         oh.make_node("Squeeze", [f"{p}_hn", f"{p}_zero"], [f"{p}_h"]),
         oh.make_node("Relu", [f"{p}_h"], [f"{p}_hr"]),
         oh.make_node("MatMul", [f"{p}_hr", f"{p}_wo"], [f"{p}_logit"]),
         oh.make_node("Add", [f"{p}_logit", f"{p}_bo"], [f"{p}_logit_b"]),
         oh.make_node("Sigmoid", [f"{p}_logit_b"], [f"{p}_out"])]
    outs = [oh.make_tensor_value_info(f"{p}_out", F32, [1, 1]),
            oh.make_tensor_value_info(f"{p}_state", F32, [2, 1, hidden])]
    return oh.make_graph(n, f"{name}_branch", [], outs, initializer=inits)


def vad_streaming(rng, hidden: int = 64):
    then_g = _vad_branch(rng, "sr16k", kernel=16, stride=8, hidden=hidden)
    else_g = _vad_branch(rng, "sr8k", kernel=8, stride=4, hidden=hidden)
    nodes = [oh.make_node("Equal", ["sr", "sr_16k"], ["is_16k"]),
             oh.make_node("If", ["is_16k"], ["output", "stateN"], then_branch=then_g, else_branch=else_g)]
    g = oh.make_graph(nodes, "vad_streaming",
                      [oh.make_tensor_value_info("input", F32, [1, 512]),
                       oh.make_tensor_value_info("state", F32, [2, 1, hidden]),
                       oh.make_tensor_value_info("sr", TP.INT64, [])],
                      [oh.make_tensor_value_info("output", F32, [1, 1]),
                       oh.make_tensor_value_info("stateN", F32, [2, 1, hidden])],
                      initializer=[onh.from_array(np.array(16000, np.int64), "sr_16k")])
    return _model(g, opset=17)


def greedy_decoder(rng, vocab: int = 50, hidden: int = 64, eos: int = 0):
    """tokens = greedy decoding from ``start`` for at most ``max_len`` steps, stopping after ``eos``."""
    inits = [_init(rng, "emb", [vocab, hidden], 1.0), _init(rng, "wx", [hidden, hidden], 0.3),
             _init(rng, "wh", [hidden, hidden], 0.3), _init(rng, "bh", [hidden]),
             _init(rng, "wo", [hidden, vocab], 1.0), _init(rng, "bo", [vocab]),
             onh.from_array(np.array([eos], np.int64), "eos"), onh.from_array(np.array(True), "true")]
    body_nodes = [oh.make_node("Gather", ["emb", "tok_in"], ["e"], axis=0),
                  oh.make_node("MatMul", ["e", "wx"], ["ex"]),
                  oh.make_node("MatMul", ["h_in", "wh"], ["hh"]),
                  oh.make_node("Add", ["ex", "hh"], ["s1"]),
                  oh.make_node("Add", ["s1", "bh"], ["s2"]),
                  oh.make_node("Tanh", ["s2"], ["h_out"]),
                  oh.make_node("MatMul", ["h_out", "wo"], ["lo"]),
                  oh.make_node("Add", ["lo", "bo"], ["logits"]),
                  oh.make_node("ArgMax", ["logits"], ["tok_out"], axis=1, keepdims=0),
                  oh.make_node("Equal", ["tok_out", "eos"], ["is_eos"]),
                  oh.make_node("Not", ["is_eos"], ["go"]),
                  oh.make_node("Squeeze", ["go"], ["cond_out"]),
                  oh.make_node("Identity", ["tok_out"], ["tok_scan"])]
    body = oh.make_graph(body_nodes, "decode_step",
                         [oh.make_tensor_value_info("i", TP.INT64, []), oh.make_tensor_value_info("cond", TP.BOOL, []),
                          oh.make_tensor_value_info("tok_in", TP.INT64, [1]),
                          oh.make_tensor_value_info("h_in", F32, [1, hidden])],
                         [oh.make_tensor_value_info("cond_out", TP.BOOL, []),
                          oh.make_tensor_value_info("tok_out", TP.INT64, [1]),
                          oh.make_tensor_value_info("h_out", F32, [1, hidden]),
                          oh.make_tensor_value_info("tok_scan", TP.INT64, [1])])
    nodes = [oh.make_node("Loop", ["max_len", "true", "start", "h0"], ["last", "h_last", "tokens"], body=body)]
    g = oh.make_graph(nodes, "greedy_decoder",
                      [oh.make_tensor_value_info("start", TP.INT64, [1]), oh.make_tensor_value_info("h0", F32, [1, hidden]),
                       oh.make_tensor_value_info("max_len", TP.INT64, [])],
                      [oh.make_tensor_value_info("last", TP.INT64, [1]),
                       oh.make_tensor_value_info("h_last", F32, [1, hidden]),
                       oh.make_tensor_value_info("tokens", TP.INT64, ["steps", 1])],
                      initializer=inits)
    return _model(g, opset=17)


def _shape_dims(prefix: str, x: str, axes: list[int]) -> tuple[list, list[str]]:
    """Exporter-style shape arithmetic: Shape(x) -> Gather(axis) -> Unsqueeze, one [1] int64 per axis."""
    nodes = [oh.make_node("Shape", [x], [f"{prefix}_shape"])]
    outs = []
    for a in axes:
        nodes += [oh.make_node("Gather", [f"{prefix}_shape", f"ax{a}"], [f"{prefix}_d{a}"], axis=0),
                  oh.make_node("Unsqueeze", [f"{prefix}_d{a}", "zero1"], [f"{prefix}_u{a}"])]
        outs.append(f"{prefix}_u{a}")
    return nodes, outs


def _transformer_layer(rng, k: int, x: str, hidden: int, heads: int, ffn: int, causal: bool, inits: list):
    """One encoder (BERT: post-LN, Erf GELU, padding mask) or decoder (GPT-2: pre-LN, tanh GELU, causal mask)
    layer over x[batch, seq, hidden], with the head reshapes computed from Shape ops as exporters write them."""
    dh, p = hidden // heads, f"l{k}"
    for name, shape in ((f"{p}_wq", (hidden, hidden)), (f"{p}_wk", (hidden, hidden)), (f"{p}_wv", (hidden, hidden)),
                        (f"{p}_wo", (hidden, hidden)), (f"{p}_w1", (hidden, ffn)), (f"{p}_w2", (ffn, hidden))):
        inits.append(_init(rng, name, shape))
    for name, n in ((f"{p}_bq", hidden), (f"{p}_bk", hidden), (f"{p}_bv", hidden), (f"{p}_bo", hidden),
                    (f"{p}_b1", ffn), (f"{p}_b2", hidden)):
        inits.append(_init(rng, name, (n,), 0.02))
    for name in (f"{p}_g1", f"{p}_g2"):
        inits.append(onh.from_array(np.ones(hidden, np.float32), name))
    for name in (f"{p}_be1", f"{p}_be2"):
        inits.append(onh.from_array(np.zeros(hidden, np.float32), name))
    nodes, (db, ds) = _shape_dims(p, x, [0, 1])
    nodes.append(oh.make_node("Concat", [db, ds, "heads", "dhead"], [f"{p}_split"], axis=0))
    nodes.append(oh.make_node("Concat", [db, ds, "hid"], [f"{p}_merge"], axis=0))
    src = x
    if causal:
        nodes.append(oh.make_node("LayerNormalization", [x, f"{p}_g1", f"{p}_be1"], [f"{p}_ln1"], axis=-1))
        src = f"{p}_ln1"
    for t in "qkv":
        nodes += [oh.make_node("MatMul", [src, f"{p}_w{t}"], [f"{p}_{t}m"]),
                  oh.make_node("Add", [f"{p}_{t}m", f"{p}_b{t}"], [f"{p}_{t}a"]),
                  oh.make_node("Reshape", [f"{p}_{t}a", f"{p}_split"], [f"{p}_{t}r"]),
                  oh.make_node("Transpose", [f"{p}_{t}r"], [f"{p}_{t}"], perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3])]
    nodes += [oh.make_node("MatMul", [f"{p}_q", f"{p}_k"], [f"{p}_s"]),
              oh.make_node("Div", [f"{p}_s", "sqrt_dh"], [f"{p}_ss"])]
    if causal:      # GPT-2: the [max, max] lower-triangular buffer sliced to [seq, seq]
        nodes += [oh.make_node("Slice", ["causal", "zero1", ds, "ax2", "one1"], [f"{p}_c1"]),
                  oh.make_node("Slice", [f"{p}_c1", "zero1", ds, "ax3", "one1"], [f"{p}_c2"]),
                  oh.make_node("Where", [f"{p}_c2", f"{p}_ss", "neg_big"], [f"{p}_sm"])]
    else:
        nodes.append(oh.make_node("Add", [f"{p}_ss", "mask_bias"], [f"{p}_sm"]))
    nodes += [oh.make_node("Softmax", [f"{p}_sm"], [f"{p}_pr"], axis=-1),
              oh.make_node("MatMul", [f"{p}_pr", f"{p}_v"], [f"{p}_ctx"]),
              oh.make_node("Transpose", [f"{p}_ctx"], [f"{p}_ct"], perm=[0, 2, 1, 3]),
              oh.make_node("Reshape", [f"{p}_ct", f"{p}_merge"], [f"{p}_cm"]),
              oh.make_node("MatMul", [f"{p}_cm", f"{p}_wo"], [f"{p}_o"]),
              oh.make_node("Add", [f"{p}_o", f"{p}_bo"], [f"{p}_ob"]),
              oh.make_node("Add", [f"{p}_ob", x], [f"{p}_r1"])]
    if causal:
        h = f"{p}_r1"
        nodes.append(oh.make_node("LayerNormalization", [h, f"{p}_g2", f"{p}_be2"], [f"{p}_ln2"], axis=-1))
        ff_in = f"{p}_ln2"
    else:
        nodes.append(oh.make_node("LayerNormalization", [f"{p}_r1", f"{p}_g1", f"{p}_be1"], [f"{p}_h"], axis=-1))
        h = ff_in = f"{p}_h"
    nodes += [oh.make_node("MatMul", [ff_in, f"{p}_w1"], [f"{p}_f1"]),
              oh.make_node("Add", [f"{p}_f1", f"{p}_b1"], [f"{p}_f1b"])]
    if causal:
        gelu, gelu_inits = _gelu_tanh(f"{p}_f1b", f"{p}_g", f"{p}_gelu")
        nodes += gelu
        inits += gelu_inits
    else:
        nodes += [oh.make_node("Div", [f"{p}_f1b", "sqrt2"], [f"{p}_e0"]), oh.make_node("Erf", [f"{p}_e0"], [f"{p}_e1"]),
                  oh.make_node("Add", [f"{p}_e1", "one"], [f"{p}_e2"]), oh.make_node("Mul", [f"{p}_f1b", f"{p}_e2"], [f"{p}_e3"]),
                  oh.make_node("Mul", [f"{p}_e3", "half"], [f"{p}_g"])]
    nodes += [oh.make_node("MatMul", [f"{p}_g", f"{p}_w2"], [f"{p}_f2"]),
              oh.make_node("Add", [f"{p}_f2", f"{p}_b2"], [f"{p}_f2b"]),
              oh.make_node("Add", [f"{p}_f2b", h], [f"{p}_out"] if causal else [f"{p}_r2"])]
    if not causal:
        nodes.append(oh.make_node("LayerNormalization", [f"{p}_r2", f"{p}_g2", f"{p}_be2"], [f"{p}_out"], axis=-1))
    return nodes, f"{p}_out"


def dynamic_transformer(rng, causal: bool, layers: int = 2, vocab: int = 1000, hidden: int = 128, heads: int = 4,
                        ffn: int = 512, max_pos: int = 512):
    """A BERT-like encoder (``causal=False``: input_ids and attention_mask [batch, seq]) or GPT-2-like decoder
    (``causal=True``: input_ids [batch, seq]) with dynamic batch and sequence, written as exporters write them:
    positions from Range(Shape), head reshapes from Shape -> Gather -> Concat, the causal mask sliced to seq."""
    inits = [_init(rng, "wte", (vocab, hidden), 0.5), _init(rng, "wpe", (max_pos, hidden), 0.1)]
    consts = {"ax0": np.array(0, np.int64), "ax1": np.array(1, np.int64), "zero1": np.array([0], np.int64),
              "heads": np.array([heads], np.int64), "dhead": np.array([hidden // heads], np.int64),
              "hid": np.array([hidden], np.int64), "sqrt_dh": np.array(np.sqrt(hidden // heads), np.float32),
              "neg_big": np.array(-1e4, np.float32),
              "zero_i": np.array(0, np.int64), "one_i": np.array(1, np.int64)}
    if causal:
        consts.update(causal=np.tril(np.ones((max_pos, max_pos), bool))[None, None], one1=np.array([1], np.int64),
                      ax2=np.array([2], np.int64), ax3=np.array([3], np.int64))
    else:
        consts.update(axes12=np.array([1, 2], np.int64), sqrt2=np.array(np.sqrt(2.0), np.float32),
                      half=np.array(0.5, np.float32), one=np.array(1.0, np.float32))
    inits += [onh.from_array(v, k) for k, v in consts.items()]
    nodes = [oh.make_node("Shape", ["input_ids"], ["ids_shape"]),
             oh.make_node("Gather", ["ids_shape", "ax1"], ["seq"], axis=0),
             oh.make_node("Range", ["zero_i", "seq", "one_i"], ["pos"]),
             oh.make_node("Gather", ["wte", "input_ids"], ["tok_e"], axis=0),
             oh.make_node("Gather", ["wpe", "pos"], ["pos_e"], axis=0),
             oh.make_node("Add", ["tok_e", "pos_e"], ["h0"])]
    inputs = [oh.make_tensor_value_info("input_ids", TP.INT64, ["batch", "sequence"])]
    if not causal:
        inputs.append(oh.make_tensor_value_info("attention_mask", TP.INT64, ["batch", "sequence"]))
        nodes += [oh.make_node("Unsqueeze", ["attention_mask", "axes12"], ["m4"]),
                  oh.make_node("Cast", ["m4"], ["m4f"], to=F32),
                  oh.make_node("Sub", ["one", "m4f"], ["m_inv"]),
                  oh.make_node("Mul", ["m_inv", "neg_big"], ["mask_bias"])]
    x = "h0"
    for k in range(layers):
        ns, x = _transformer_layer(rng, k, x, hidden, heads, ffn, causal, inits)
        nodes += ns
    if causal:
        inits += [onh.from_array(np.ones(hidden, np.float32), "lnf_g"), onh.from_array(np.zeros(hidden, np.float32), "lnf_b")]
        nodes.append(oh.make_node("LayerNormalization", [x, "lnf_g", "lnf_b"], ["y"], axis=-1))
    else:
        nodes.append(oh.make_node("Identity", [x], ["y"]))
    g = oh.make_graph(nodes, "gpt2_dynamic" if causal else "bert_dynamic", inputs,
                      [oh.make_tensor_value_info("y", F32, ["batch", "sequence", hidden])], initializer=inits)
    return _model(g, opset=17)


def build_all(out_dir: str = HERE) -> list[str]:
    rng = np.random.default_rng(2024)
    models = {"mynet": mynet(), "custom_op": custom_op(), "mlp_block": mlp_block(rng),
              "attention_block": attention_block(rng), "conv_net": conv_net(rng), "legacy_opset9": legacy_opset9(rng),
              "vad_streaming": vad_streaming(rng), "greedy_decoder": greedy_decoder(rng),
              "bert_dynamic": dynamic_transformer(rng, causal=False),
              "gpt2_dynamic": dynamic_transformer(rng, causal=True)}
    paths = []
    for name, m in models.items():
        path = os.path.join(out_dir, f"{name}.onnx")
        onnx.save(m, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in build_all():
        print(p)
