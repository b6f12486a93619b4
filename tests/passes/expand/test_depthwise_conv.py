"""DepthwiseConv expander (expand-list entry "Conv"): Pad + one strided Slice per tap * per-channel weight,
summed (+ bias); numerics against onnxruntime, the declines, and the fused native kernel it becomes."""
from __future__ import annotations

import logging
import re

import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.config import GraphKernelConfig
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.base import PassContext
from converter_lite.passes.expand import DEFAULT_EXPAND, ExpandOpsPass
from converter_lite.passes.fuse import DEFAULT_CLUSTER
from converter_lite.pipeline import build_config, convert_model


def _out_len(n, k, s, d, p0, p1):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def conv_model(rng, c, hw, k, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), bias=True, group=None, m=None,
               epilogue=()):
    """x[1, c, h, w] -> Conv(group=c by default, m output channels) -> optional epilogue ops on the result."""
    group = c if group is None else group
    m = c if m is None else m
    (h, w), (kh, kw) = hw, k
    oh_ = _out_len(h, kh, strides[0], dil[0], pads[0], pads[2])
    ow_ = _out_len(w, kw, strides[1], dil[1], pads[1], pads[3])
    inits = {"w": rng.standard_normal((m, c // group, kh, kw)).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(m).astype(np.float32)
        ins.append("b")
    nodes = [oh.make_node("Conv", ins, ["y0"], group=group, kernel_shape=[kh, kw], strides=list(strides),
                          pads=list(pads), dilations=list(dil))]
    last = "y0"
    for i, op in enumerate(epilogue):
        nodes.append(oh.make_node(op, [last], [f"y{i + 1}"]))
        last = f"y{i + 1}"
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, h, w])],
                       [tensor_info(last, np.float32, [1, m, oh_, ow_])], inits)
    return model, {"x": rng.standard_normal((1, c, h, w)).astype(np.float32)}


@pytest.fixture(autouse=True)
def _taps(tap_depthwise):
    """These tests are about the expansion: it runs for every geometry here (see test_native_driver_policy)."""


def expand(model, config=None):
    graph = import_model(model)
    ctx = PassContext(config or GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    changed = ExpandOpsPass().run(graph, ctx)
    return graph, changed


CASES = [
    {"c": 4, "hw": (9, 9), "k": (3, 3), "pads": (1, 1, 1, 1)},
    {"c": 4, "hw": (9, 8), "k": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1), "bias": False},
    {"c": 3, "hw": (12, 11), "k": (7, 7), "pads": (3, 3, 3, 3)},
    {"c": 5, "hw": (10, 10), "k": (5, 5), "strides": (2, 1), "pads": (2, 0, 1, 2)},
    {"c": 2, "hw": (11, 13), "k": (3, 3), "dil": (2, 3), "pads": (2, 3, 2, 3)},
    {"c": 3, "hw": (8, 8), "k": (3, 5), "strides": (2, 2), "dil": (2, 1), "pads": (0, 1, 2, 0), "bias": False},
    {"c": 6, "hw": (7, 7), "k": (1, 1)},
    {"c": 2, "hw": (6, 9), "k": (4, 2), "strides": (1, 2)},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_depthwise_conv_matches_onnxruntime(rng, case):
    model, feeds = conv_model(rng, **case)
    graph, changed = expand(model)
    assert changed and "Conv" not in graph.op_counts()
    emitted = set(graph.op_counts())
    assert emitted <= DEFAULT_CLUSTER | {"Pad"}, emitted
    kh, kw = case["k"]
    assert graph.op_counts()["Slice"] == kh * kw
    assert_close(eval_graph(graph, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs, reason", [
    ({"c": 4, "hw": (6, 6), "k": (3, 3), "group": 1}, "dense conv"),
    ({"c": 4, "hw": (6, 6), "k": (3, 3), "group": 2}, "grouped conv"),
    ({"c": 4, "hw": (6, 6), "k": (3, 3), "m": 8}, "channel multiplier 2"),
    ({"c": 2, "hw": (12, 12), "k": (9, 9)}, "kernel larger than 7x7"),
])
def test_non_depthwise_convs_are_declined(rng, kwargs, reason):
    model, _ = conv_model(rng, **kwargs)
    graph, changed = expand(model)
    assert not changed and graph.op_counts().get("Conv") == 1, reason


def test_computed_weight_is_declined(rng):
    nodes = [oh.make_node("Conv", ["x", "w"], ["y"], group=2, kernel_shape=[3, 3])]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, 2, 5, 5]), tensor_info("w", np.float32, [2, 1, 3, 3])],
                       [tensor_info("y", np.float32, [1, 2, 3, 3])])
    _graph, changed = expand(model)
    assert not changed


def test_op_list_semantics(rng):
    assert "Conv" in DEFAULT_EXPAND
    model, _ = conv_model(rng, c=4, hw=(6, 6), k=(3, 3), pads=(1, 1, 1, 1))
    graph, changed = expand(model, GraphKernelConfig(opt_level=1, disable_expand_ops=("Conv",)))
    assert not changed
    graph, changed = expand(model, GraphKernelConfig(opt_level=1, enable_expand_ops_only=("Conv",)))
    assert changed and "Conv" not in graph.op_counts()


def test_one_fused_native_kernel_with_epilogue(rng, tmp_path):
    """Conv + BatchNorm + Relu at opt_level 2: Pad then ONE kernel holding the taps, the BN scale/shift and
    the Relu; its code is a vectorized loop nest; the model matches onnxruntime."""
    c, hw = 16, (12, 12)
    sc = {k: (rng.random(c) + 0.5).astype(np.float32) for k in ("sc", "va")}
    sc.update({k: rng.standard_normal(c).astype(np.float32) for k in ("bi", "mu")})
    sc["w"] = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    nodes = [oh.make_node("Conv", ["x", "w"], ["y"], group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             oh.make_node("BatchNormalization", ["y", "sc", "bi", "mu", "va"], ["z"]),
             oh.make_node("Relu", ["z"], ["o"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, *hw])],
                       [tensor_info("o", np.float32, [1, c, *hw])], sc)
    config = build_config(None, graph_kernel_flags="--opt_level=2", env={}, dump_dir=str(tmp_path))
    res = convert_model(model, str(tmp_path / "m"), config=config)
    kernels = [n for n in res.graph.nodes if n.op == "GraphKernel"]
    assert len(kernels) == 1 and "Conv" not in res.graph.op_counts()
    inner = kernels[0].attrs["graph"].op_counts()
    assert inner["Slice"] == 9 and inner.get("Max", 0) + inner.get("Relu", 0) >= 1
    from converter_lite.codegen import kernel_assembly
    _, asm = kernel_assembly(kernels[0].attrs["graph"], num_threads_hint=1)
    assert re.search(r"%[xyz]mm\d+", asm) and re.search(r"v\w+ps\s", asm)        # packed single precision
    feeds = {"x": rng.standard_normal((1, c, *hw)).astype(np.float32)}
    got = converter_lite.load(res.output_path).run(feeds)["o"]
    assert_close(got, run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_nhwc_variant_before_a_transpose(rng, tmp_path, strides):
    """Conv -> Transpose to NHWC (ConvNeXt): the taps are taken in [N, H, W, C]; after simplification the
    kernel holds no Transpose (its loop runs over C innermost)."""
    c, hw, k = 8, (9, 9), 7
    oh_ = _out_len(9, k, strides[0], 1, 3, 3)
    inits = {"w": rng.standard_normal((c, 1, k, k)).astype(np.float32),
             "b": rng.standard_normal(c).astype(np.float32)}
    nodes = [oh.make_node("Conv", ["x", "w", "b"], ["y"], group=c, kernel_shape=[k, k], pads=[3] * 4,
                          strides=list(strides)),
             oh.make_node("Transpose", ["y"], ["t"], perm=[0, 2, 3, 1]),
             oh.make_node("Relu", ["t"], ["o"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, *hw])],
                       [tensor_info("o", np.float32, [1, oh_, oh_, c])], inits)
    feeds = {"x": rng.standard_normal((1, c, *hw)).astype(np.float32)}
    graph, changed = expand(model)
    assert changed and graph.op_counts()["Transpose"] == 3        # x to NHWC, back to NCHW, the model's own
    assert_close(eval_graph(graph, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
    config = build_config(None, graph_kernel_flags="--opt_level=2", env={}, dump_dir=str(tmp_path))
    res = convert_model(model, str(tmp_path / "m"), config=config)
    taps = [n for n in res.graph.nodes if n.op == "GraphKernel" and "Slice" in n.attrs["graph"].op_counts()]
    assert len(taps) == 1 and "Transpose" not in taps[0].attrs["graph"].op_counts()
    got = converter_lite.load(res.output_path).run(feeds)["o"]
    assert_close(got, run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case, declined", [
    ({"c": 4, "hw": (9, 9), "k": (3, 3), "pads": (1, 1, 1, 1)}, True),
    ({"c": 3, "hw": (12, 11), "k": (7, 7), "pads": (3, 3, 3, 3)}, True),
    ({"c": 2, "hw": (11, 13), "k": (3, 3), "dil": (2, 3), "pads": (2, 3, 2, 3)}, True),
    ({"c": 4, "hw": (9, 8), "k": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}, True),      # stride 2, narrow
    ({"c": 2, "hw": (9, 60), "k": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)}, False),    # stride 2, wide
    ({"c": 4, "hw": (9, 9), "k": (3, 3)}, False),                                              # narrower output
    ({"c": 2, "hw": (6, 9), "k": (3, 1), "pads": (1, 0, 1, 0)}, False),                       # not square
])
def test_native_driver_policy(rng, monkeypatch, case, declined):
    """Without the fixture: float32 stride-1 square "same" depthwise Convs, and stride-2 ones on inputs at most
    STRIDE2_MAX_WIDTH wide, stay Conv for the native driver."""
    from converter_lite.passes.expand import depthwise_conv
    monkeypatch.undo()
    assert depthwise_conv.native_driver_runs.__name__ == "native_driver_runs"
    model, _ = conv_model(rng, **case)
    graph, changed = expand(model)
    assert changed != declined and ("Conv" in graph.op_counts()) == declined


def test_native_driver_policy_after_pad_conv_fusion(rng, monkeypatch):
    """A zero Pad of H and W before a pads=0 Conv (mobilenet's export) becomes the Conv's own padding
    (pad_conv_fusion, which runs before the expander), so the Conv is "same" and left to the native driver."""
    from converter_lite.passes.registry import PASSES
    from converter_lite.passes.expand import depthwise_conv
    monkeypatch.undo()
    c = 4
    inits = {"w": rng.standard_normal((c, 1, 3, 3)).astype(np.float32),
             "p": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    nodes = [oh.make_node("Pad", ["x", "p"], ["xp"]),
             oh.make_node("Conv", ["xp", "w"], ["y"], group=c, kernel_shape=[3, 3])]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, 8, 8])],
                       [tensor_info("y", np.float32, [1, c, 8, 8])], inits)
    assert depthwise_conv.native_driver_runs.__name__ == "native_driver_runs"
    graph = import_model(model)
    ctx = PassContext(GraphKernelConfig(opt_level=1), log=logging.getLogger("converter_lite"))
    assert PASSES["pad_conv_fusion"]().run(graph, ctx)
    assert not ExpandOpsPass().run(graph, ctx) and graph.op_counts() == {"Conv": 1}


def test_native_driver_policy_before_nhwc_transposes(rng, monkeypatch):
    """Conv -> Transpose to NHWC (ConvNeXt) stays Conv for the native driver too when it runs the geometry
    (faster than the NHWC taps: convnext_mini 0.738 -> 0.656 ms on 2 threads); a strided one is expanded."""
    from converter_lite.passes.expand import depthwise_conv
    monkeypatch.undo()
    c, k = 8, 7
    for strides, kept in (((1, 1), True), ((2, 2), False)):
        o = _out_len(9, k, strides[0], 1, 3, 3)
        inits = {"w": rng.standard_normal((c, 1, k, k)).astype(np.float32)}
        nodes = [oh.make_node("Conv", ["x", "w"], ["y"], group=c, kernel_shape=[k, k], pads=[3] * 4,
                              strides=list(strides)),
                 oh.make_node("Transpose", ["y"], ["t"], perm=[0, 2, 3, 1])]
        model = make_model(nodes, [tensor_info("x", np.float32, [1, c, 9, 9])],
                           [tensor_info("t", np.float32, [1, o, o, c])], inits)
        assert depthwise_conv.native_driver_runs.__name__ == "native_driver_runs"
        graph, changed = expand(model)
        assert changed != kept and ("Conv" in graph.op_counts()) == kept
