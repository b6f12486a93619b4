"""passes/rewrite/quantized_moves.py: a QDQ model's data-movement ops (Reshape, Transpose, Split, Concat, a nearest
Resize, MaxPool) run on the quantized bytes and the round trips between equal pairs go.  On hand-made graphs the
values are the reference kernels' before the rewrite, bit for bit (NaN, saturation and ties included); end to
end, onnxruntime's QDQ model of a network with all of them converts to the same outputs with and without the pass
(natively and on the reference kernels), close to onnxruntime's."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info
from quant_models import ort_qdq

import converter_lite
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.model.format import load_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.base import PassContext
from converter_lite.passes.rewrite.quantized_moves import (
    QuantizedMovesPass,
    move_quantization,
)

F32 = np.float32
U8 = DType.uint8


class G:
    """A tiny graph builder: values by name, nodes in order."""

    def __init__(self):
        self.nodes, self.n = [], 0

    def const(self, a):
        self.n += 1
        return Value(f"c{self.n}", const=np.asarray(a))

    def op(self, op, ins, dtype, shape, **attrs):
        self.n += 1
        out = Value(f"{op}{self.n}", TensorType(dtype, tuple(shape)))
        self.nodes.append(Node(op, ins, [out], attrs, name=f"{op}{self.n}"))
        return out

    def q(self, x, pair):
        return self.op("QuantizeLinear", [x, self.const(F32(pair[0])), self.const(np.uint8(pair[1]))], U8, x.shape)

    def dq(self, x, pair):
        return self.op("DequantizeLinear", [x, self.const(F32(pair[0])), self.const(np.uint8(pair[1]))],
                       DType.float32, x.shape)

    def graph(self, inputs, outputs):
        return Graph("g", inputs, outputs, self.nodes)


P, P2 = (0.05, 7), (0.0731, 130)


def _qconv(g, x, pair, m=4):
    """A QuantizedConv (float output) ending in the round trip ``pair``."""
    c = x.shape[1]
    ins = [x, g.const(F32(0.1)), g.const(np.uint8(3)), g.const(np.ones((m, c, 1, 1), np.int8)),
           g.const(np.linspace(0.5, 2.0, m).astype(F32)), g.const(np.linspace(-3, 3, m).astype(F32)),
           g.const(F32(pair[0])), g.const(np.uint8(pair[1]))]
    return g.op("QuantizedConv", ins, DType.float32, (x.shape[0], m) + tuple(x.shape[2:]))


def _check(make, inputs, *, changed=True):
    """The rewrite of ``make()``'s graph computes what the original does; returns the rewritten graph."""
    before, after = make(), make()
    assert bool(move_quantization(after)) is changed
    for feeds in inputs:
        want, got = eval_graph(before, feeds), eval_graph(after, feeds)
        for w, a in zip(want, got):
            assert w.dtype == a.dtype
            np.testing.assert_array_equal(a, w)
    return after


def _ops(graph):
    return [n.op for n in graph.nodes]


def _u8(rng, shape):
    return rng.integers(0, 256, shape).astype(np.uint8)


def test_reshape_transpose_chain_moves_bytes_and_its_round_trips_go(rng):
    """DQ -> Reshape -> Q -> DQ -> Transpose -> Q -> DQ (YOLOv8's head, one pair) -> bytes, one DequantizeLinear."""
    def make():
        g = G()
        x = Value("x", TensorType(U8, (1, 8, 6)))
        r = g.op("Reshape", [g.dq(x, P), g.const(np.asarray([1, 2, 4, 6], np.int64))], DType.float32, (1, 2, 4, 6))
        t = g.op("Transpose", [g.dq(g.q(r, P), P)], DType.float32, (1, 4, 2, 6), perm=(0, 2, 1, 3))
        return g.graph([x], [g.dq(g.q(t, P), P)])
    after = _check(make, [{"x": _u8(rng, (1, 8, 6))}])
    assert _ops(after) == ["Reshape", "Transpose", "DequantizeLinear"]
    assert after.nodes[0].inputs[0] is after.inputs[0] and after.nodes[1].outputs[0].dtype is U8


def test_another_pair_keeps_its_requantization(rng):
    def make():
        g = G()
        x = Value("x", TensorType(U8, (2, 3, 4)))
        s = g.op("Reshape", [g.dq(x, P), g.const(np.asarray([6, 4], np.int64))], DType.float32, (6, 4))
        return g.graph([x], [g.dq(g.q(s, P2), P2)])
    after = _check(make, [{"x": _u8(rng, (2, 3, 4))}, {"x": np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 10}])
    assert _ops(after) == ["Reshape", "DequantizeLinear", "QuantizeLinear", "DequantizeLinear"]


def test_split_and_concat(rng):
    """A Split of a DequantizeLinear splits the bytes; a Concat of DequantizeLinears of one pair concatenates
    them; of several pairs, its QuantizeLinear goes in front of each input: the one of its pair loses the round
    trip, the other is requantized byte to byte."""
    def make(pairs):
        g = G()
        x, y = Value("x", TensorType(U8, (1, 6, 5))), Value("y", TensorType(U8, (1, 3, 5)))
        a = g.op("Split", [g.dq(x, P), g.const(np.asarray([2, 4], np.int64))], DType.float32, (1, 2, 5), axis=1)
        c = g.op("Concat", [a, g.dq(y, pairs[1])], DType.float32, (1, 5, 5), axis=1)
        return g.graph([x, y], [g.dq(g.q(c, pairs[0]), pairs[0])])

    def fix_split(graph):                   # G.op makes one output: give the Split its second one
        split = graph.nodes[1]
        rest = Value("rest", TensorType(DType.float32, (1, 4, 5)))
        split.outputs.append(rest)
        rest.producer, rest.index = split, 1
        graph.outputs.append(rest)
        return graph
    feeds = [{"x": _u8(rng, (1, 6, 5)), "y": _u8(rng, (1, 3, 5))}]
    after = _check(lambda: fix_split(make((P, P))), feeds)
    assert "QuantizeLinear" not in _ops(after)
    concat = next(n for n in after.nodes if n.op == "Concat")
    assert concat.outputs[0].dtype is U8 and all(v.dtype is U8 for v in concat.inputs)
    after = _check(lambda: fix_split(make((P, P2))), feeds)
    concat = next(n for n in after.nodes if n.op == "Concat")
    assert concat.outputs[0].dtype is U8 and concat.inputs[0].producer.op == "Split"
    assert concat.inputs[1].producer.op == "QuantizeLinear"


def test_pools_and_upsampling_of_a_convolution_run_on_its_bytes(rng):
    """conv -> MaxPool -> Q/DQ -> MaxPool -> Q/DQ and conv -> nearest Resize -> Q (the conv's pair): after the
    pass (and quantized_handoff, which it runs again) the convolution writes uint8 and both read it."""
    def make():
        g = G()
        x = Value("x", TensorType(DType.float32, (1, 3, 6, 7)))
        y = _qconv(g, x, P)
        pool = {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)}
        m1 = g.op("MaxPool", [y], DType.float32, (1, 4, 6, 7), **pool)
        m2 = g.op("MaxPool", [g.dq(g.q(m1, P), P)], DType.float32, (1, 4, 6, 7), **pool)
        up = g.op("Resize", [y, None, g.const(np.asarray([1, 1, 2, 2], F32))], DType.float32, (1, 4, 12, 14),
                  mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        return g.graph([x], [g.dq(g.q(m2, P), P), g.dq(g.q(up, P), P)])
    feeds = [{"x": (rng.standard_normal((1, 3, 6, 7)) * 4).astype(F32)}]
    before = make()
    _check(make, feeds)
    after = make()
    assert QuantizedMovesPass().run(after, PassContext(config=None))
    for w, a in zip(eval_graph(before, feeds[0]), eval_graph(after, feeds[0])):
        np.testing.assert_array_equal(a, w)
    conv = after.nodes[0]
    assert conv.attrs.get("uint8_out") == 1 and conv.outputs[0].dtype is U8
    assert "QuantizeLinear" not in _ops(after)
    assert all(n.inputs[0].dtype is U8 for n in after.nodes if n.op in ("MaxPool", "Resize"))


def test_declines(rng):
    """A MaxPool of a value that may be NaN (a Relu's: the float max's NaN rule is not QuantizeLinear's), a linear
    Resize, a per-axis pair, a QuantizeLinear whose output is a graph output: nothing moves."""
    def pool_of_relu():
        g = G()
        x = Value("x", TensorType(DType.float32, (1, 2, 5, 5)))
        r = g.op("Relu", [x], DType.float32, (1, 2, 5, 5))
        m = g.op("MaxPool", [r], DType.float32, (1, 2, 5, 5), kernel_shape=(3, 3), pads=(1, 1, 1, 1))
        return g.graph([x], [g.dq(g.q(m, P), P)])

    def linear_resize():
        g = G()
        x = Value("x", TensorType(U8, (1, 2, 3, 3)))
        up = g.op("Resize", [g.dq(x, P), None, g.const(np.asarray([1, 1, 2, 2], F32))], DType.float32,
                  (1, 2, 6, 6), mode="linear")
        return g.graph([x], [g.dq(g.q(up, P), P)])

    def per_axis():
        g = G()
        x = Value("x", TensorType(U8, (1, 2, 3)))
        s, z = g.const(np.asarray([0.1, 0.2], F32)), g.const(np.asarray([3, 4], np.uint8))
        d = g.op("DequantizeLinear", [x, s, z], DType.float32, (1, 2, 3), axis=1)
        t = g.op("Transpose", [d], DType.float32, (1, 3, 2), perm=(0, 2, 1))
        return g.graph([x], [t])

    def output_q():
        g = G()
        x = Value("x", TensorType(U8, (2, 3)))
        return g.graph([x], [g.q(g.dq(x, P), P)])
    nan = np.full((1, 2, 5, 5), np.nan, F32)
    nan[0, 0, 2, 2] = 1.0
    _check(pool_of_relu, [{"x": nan}], changed=False)
    _check(linear_resize, [{"x": _u8(rng, (1, 2, 3, 3))}], changed=False)
    _check(per_axis, [{"x": _u8(rng, (1, 2, 3))}], changed=False)
    _check(output_q, [{"x": _u8(rng, (2, 3))}], changed=False)


# -- end to end: onnxruntime's QDQ model -----------------------------------------------------------------------------
def float_net(seed: int = 0) -> onnx.ModelProto:
    """conv -> SiLU -> MaxPool 5x5 (x2, SPPF) -> Concat -> conv -> nearest 2x Resize -> Concat with the first
    conv -> conv -> Reshape -> Split -> Transpose (YOLOv8's neck and head, small)."""
    rng = np.random.default_rng(seed)
    inits, nodes = {}, []

    def conv(x, c, m, k, name, silu=True):
        inits[f"{name}_w"] = (rng.standard_normal((m, c, k, k)) * np.sqrt(2.0 / (c * k * k))).astype(F32)
        inits[f"{name}_b"] = (rng.standard_normal(m) * 0.1).astype(F32)
        nodes.append(oh.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"], pads=[k // 2] * 4))
        if not silu:
            return f"{name}_c"
        nodes.extend([oh.make_node("Sigmoid", [f"{name}_c"], [f"{name}_s"]),
                      oh.make_node("Mul", [f"{name}_c", f"{name}_s"], [name])])
        return name
    a = conv("x", 3, 8, 3, "a")
    nodes.append(oh.make_node("MaxPool", [a], ["p1"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
    nodes.append(oh.make_node("MaxPool", ["p1"], ["p2"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
    nodes.append(oh.make_node("Concat", [a, "p1", "p2"], ["cat"], axis=1))
    b = conv("cat", 24, 8, 1, "b")
    inits["scales"] = np.asarray([1, 1, 2, 2], F32)
    nodes.append(oh.make_node("Resize", [b, "", "scales"], ["up"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    c = conv("x2", 4, 8, 1, "c")
    nodes.append(oh.make_node("Concat", ["up", c], ["cat2"], axis=1))
    d = conv("cat2", 16, 12, 3, "d", silu=False)
    inits["shape"] = np.asarray([1, 12, -1], np.int64)
    inits["split"] = np.asarray([8, 4], np.int64)
    nodes += [oh.make_node("Reshape", [d, "shape"], ["r"]),
              oh.make_node("Split", ["r", "split"], ["s0", "s1"], axis=1),
              oh.make_node("Transpose", ["s0"], ["t"], perm=[0, 2, 1]),
              oh.make_node("Sigmoid", ["s1"], ["y1"])]
    return make_model(nodes, [tensor_info("x", F32, [1, 3, 8, 10]), tensor_info("x2", F32, [1, 4, 16, 20])],
                      [tensor_info("t", F32, None), tensor_info("y1", F32, None)], inits)


def _feeds(seed):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((1, 3, 8, 10)).astype(F32), "x2": rng.standard_normal((1, 4, 16, 20)).astype(F32)}


def _outputs(ms, feeds, **kw):
    out = converter_lite.load(ms, num_threads=2, **kw).run(feeds)
    return [out[k] for k in sorted(out)]


@pytest.mark.needs_cc
def test_onnxruntime_qdq_model(tmp_path):
    path = str(tmp_path / "q.onnx")
    qdq = ort_qdq(float_net(), path, _feeds)
    on = converter_lite.convert(path, str(tmp_path / "on"), graph_kernel_flags="--opt_level=2")
    off = converter_lite.convert(path, str(tmp_path / "off"),
                                 graph_kernel_flags="--opt_level=2 --disable_pass=quantized_moves")

    def uint8_convs(ms):
        return sum(1 for n in load_model(ms).graph.nodes if n.op == "QuantizedConv" and n.attrs.get("uint8_out"))
    assert uint8_convs(on) > uint8_convs(off)
    feeds = _feeds(1)
    got = _outputs(on, feeds)
    for a, b in zip(got, _outputs(off, feeds)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_outputs(on, feeds, native=False), _outputs(off, feeds, native=False)):
        np.testing.assert_array_equal(a, b)
    want = dict(zip([o.name for o in qdq.graph.output], run_ort(qdq, feeds)))
    for a, name in zip(got, sorted(want)):
        w = want[name]
        assert np.abs(a - w).max() <= 0.05 * np.abs(w).max() + 1e-6, name
