"""Window Pads (fuse/window.py): the Pad of the depthwise expansion joins the tap kernel, while the producer
it pads stays outside (not pushed by elemwise_broadcast_bwd, not recomputed): a Conv's Clip stays its
epilogue instead of being recomputed for every tap.  disable_cluster_ops=Pad, or a window with a small
interior, keeps the Pad a basic op."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.ops.builder import GraphBuilder
from converter_lite.ir.core import Graph, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.passes.fuse.window import window_pad
from converter_lite.pipeline import build_config, convert_model


def _model(rng, c=8, hw=10, k=3):
    inits = {"w1": rng.standard_normal((c, c, 1, 1)).astype(np.float32),
             "w2": rng.standard_normal((c, 1, k, k)).astype(np.float32),
             "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [oh.make_node("Conv", ["x", "w1"], ["y"], kernel_shape=[1, 1]),
             oh.make_node("Clip", ["y", "lo", "hi"], ["z"]),
             oh.make_node("Conv", ["z", "w2"], ["o"], group=c, kernel_shape=[k, k], pads=[k // 2] * 4)]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, hw, hw])],
                       [tensor_info("o", np.float32, [1, c, hw, hw])], inits)
    return model, {"x": rng.standard_normal((1, c, hw, hw)).astype(np.float32)}


@pytest.mark.needs_cc
@pytest.mark.parametrize("flags, k, pad_inside", [("--opt_level=2", 3, True),
                                                  ("--opt_level=2 --disable_cluster_ops=Pad", 3, False),
                                                  ("--opt_level=2", 7, False)])     # 7x7 over 10x10: 16% interior
def test_window_pad_joins_the_tap_kernel_not_its_producer(rng, tmp_path, tap_depthwise, flags, k, pad_inside):
    model, feeds = _model(rng, k=k)
    config = build_config(None, graph_kernel_flags=flags, env={}, dump_dir=str(tmp_path))
    res = convert_model(model, str(tmp_path / "m"), config=config)
    taps = [n for n in res.graph.nodes if n.op == "GraphKernel" and "Slice" in n.attrs["graph"].op_counts()]
    assert len(taps) == 1
    inner = taps[0].attrs["graph"].op_counts()
    assert ("Pad" in inner) == pad_inside and ("Pad" in res.graph.op_counts()) != pad_inside
    assert "Max" not in inner and "Min" not in inner        # the Clip is not recomputed per tap
    got = converter_lite.load(res.output_path).run(feeds)["o"]
    assert_close(got, run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


def _pad_graph(consumer: str, producer: str | None = None, pads=(0, 0, 1, 1, 0, 0, 1, 1)):
    g = Graph("g")
    g.inputs = [Value("x", TensorType(DType.float32, (1, 2, 4, 4)))]
    b = GraphBuilder(g)
    x = b.wrap(g.inputs[0])
    if producer:
        x = b.op(producer, x, perm=(0, 1, 3, 2))
    xp = b.op("Pad", x, b.const(np.asarray(pads, np.int64)))
    if consumer == "Slice":
        y = b.op("Slice", xp, b.const(np.asarray((1,), np.int64)), b.const(np.asarray((5,), np.int64)),
                 b.const(np.asarray((3,), np.int64)))
    else:
        y = b.op(consumer, xp)
    g.outputs = [y.v]
    return next(n for n in g.nodes if n.op == "Pad")


def test_window_pad_rule():
    assert window_pad(_pad_graph("Slice"))
    assert not window_pad(_pad_graph("Relu"))                           # not a window
    assert window_pad(_pad_graph("Slice", producer="Transpose"))        # the transpose stays outside
    assert not window_pad(_pad_graph("Slice", pads=(0, 0, -1, 1, 0, 0, 1, 1)))   # a crop
    assert not window_pad(_pad_graph("Slice", pads=(0, 0, 3, 3, 0, 0, 3, 3)))    # rows: 4 of 10 inside
