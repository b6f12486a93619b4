"""Pool expander (expand list "AveragePool", "MaxPool"): Pad + one strided Slice per tap, summed and divided
by the reference's counts, or max-combined; numerics against the reference and onnxruntime at opt_level 0
(reference) vs 2 (one fused native kernel), the declines."""
from __future__ import annotations

import logging

import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.config import GraphKernelConfig
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.base import PassContext
from converter_lite.passes.expand import ExpandOpsPass
from converter_lite.pipeline import build_config, convert_model

CASES = [
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1]}, (3, 9, 10)),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, (2, 7, 7)),
    ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}, (4, 8, 6)),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [0, 1, 1, 0], "ceil_mode": 1}, (2, 9, 8)),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, (3, 11, 12)),
    ("MaxPool", {"kernel_shape": [2, 3], "dilations": [2, 1], "ceil_mode": 1, "strides": [2, 2]}, (2, 9, 9)),
]


def _model(op, attrs, chw, epilogue=True):
    c, h, w = chw
    nodes = [oh.make_node(op, ["x"], ["p"], **attrs)]
    out = "p"
    if epilogue:                       # PoolFormer: pool(x) - x needs equal shapes; a Relu works everywhere
        nodes.append(oh.make_node("Relu", ["p"], ["y"]))
        out = "y"
    return make_model(nodes, [tensor_info("x", np.float32, [1, c, h, w])], [tensor_info(out, np.float32, None)])


def _feeds(rng, chw, nan=False):
    x = rng.standard_normal((1, *chw)).astype(np.float32)
    if nan:
        x.flat[::7] = np.nan
    return {"x": x}


@pytest.mark.parametrize("op, attrs, chw", CASES, ids=lambda v: str(v))
def test_expansion_matches_the_reference(rng, op, attrs, chw):
    model = _model(op, attrs, chw, epilogue=False)
    graph = import_model(model)
    ref_graph = import_model(model)
    ctx = PassContext(GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    assert ExpandOpsPass().run(graph, ctx)
    assert op not in graph.op_counts()
    for nan in (False, True):
        feeds = _feeds(rng, chw, nan)
        np.testing.assert_array_equal(eval_graph(graph, feeds)[0], eval_graph(ref_graph, feeds)[0])


@pytest.mark.needs_cc
@pytest.mark.parametrize("op, attrs, chw", CASES[:1] + CASES[3:5], ids=lambda v: str(v))
def test_one_native_kernel_matches_onnxruntime(rng, tmp_path, op, attrs, chw):
    model = _model(op, attrs, chw)
    config = build_config(None, graph_kernel_flags="--opt_level=2", env={}, dump_dir=str(tmp_path))
    res = convert_model(model, str(tmp_path / "m"), config=config)
    counts = res.graph.op_counts()
    assert op not in counts and counts.get("GraphKernel") == 1, counts
    feeds = _feeds(rng, chw)
    got = converter_lite.load(res.output_path).run(feeds)["y"]
    assert_close(got, run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_declines(rng):
    ctx = PassContext(GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    indices = make_model([oh.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])],
                         [tensor_info("x", np.float32, [1, 2, 4, 4])],
                         [tensor_info("y", np.float32, None), tensor_info("i", np.int64, None)])
    one_d = make_model([oh.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2])],
                       [tensor_info("x", np.float32, [1, 2, 8])], [tensor_info("y", np.float32, None)])
    for model in (indices, one_d):
        graph = import_model(model)
        assert not ExpandOpsPass().run(graph, ctx)


@pytest.mark.needs_cc
@pytest.mark.parametrize("shape", [(1, 16, 7, 7), (2, 5, 9), (1, 3, 4, 5, 6), (2, 8, 1, 1)], ids=str)
def test_global_average_pool_matches_onnxruntime(rng, tmp_path, shape):
    """GlobalAveragePool -> ReduceSum over the spatial axes * 1/count: one native kernel, with the Relu before
    it fused in; NaN and infinities in a plane reach only that plane's mean."""
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("GlobalAveragePool", ["r"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, list(shape))], [tensor_info("y", np.float32, None)])
    config = build_config(None, graph_kernel_flags="--opt_level=2", env={}, dump_dir=str(tmp_path))
    res = convert_model(model, str(tmp_path / "m"), config=config)
    counts = res.graph.op_counts()
    assert "GlobalAveragePool" not in counts and counts.get("GraphKernel", 0) >= 1, counts
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[0] = np.nan
    if x.shape[1] > 1:
        x[0, 1].reshape(-1)[-1] = np.inf
    got = converter_lite.load(res.output_path).run({"x": x})["y"]
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_global_average_pool_declines_float16():
    ctx = PassContext(GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    model = make_model([oh.make_node("GlobalAveragePool", ["x"], ["y"])],
                       [tensor_info("x", np.float16, [1, 2, 4, 4])], [tensor_info("y", np.float16, None)])
    assert not ExpandOpsPass().run(import_model(model), ctx)


@pytest.mark.needs_cc
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=str)
def test_integer_max_pool_is_one_native_kernel(rng, tmp_path, dtype):
    """An int8/uint8 MaxPool (a QDQ model's on its bytes, passes/rewrite/quantized_moves.py) pads with the type's
    lowest value: the border windows equal onnxruntime's; AveragePool stays float only."""
    attrs = {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2], "strides": [1, 1]}
    model = make_model([oh.make_node("MaxPool", ["x"], ["y"], **attrs)], [tensor_info("x", dtype, [1, 3, 6, 7])],
                       [tensor_info("y", dtype, None)])
    config = build_config(None, graph_kernel_flags="--opt_level=2", env={}, dump_dir=str(tmp_path))
    res = convert_model(model, str(tmp_path / "m"), config=config)
    counts = res.graph.op_counts()
    assert "MaxPool" not in counts and counts.get("GraphKernel") == 1, counts
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (1, 3, 6, 7)).astype(dtype)
    x.flat[::5] = info.min                          # windows whose maximum is the lowest value
    got = converter_lite.load(res.output_path).run({"x": x})["y"]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])
    avg = make_model([oh.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2])],
                     [tensor_info("x", dtype, [1, 2, 4, 4])], [tensor_info("y", dtype, None)])
    ctx = PassContext(GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    assert not ExpandOpsPass().run(import_model(avg), ctx)
