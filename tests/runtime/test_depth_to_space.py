"""DepthToSpace / SpaceToDepth on the native block-rearrangement driver (kernels/depth_to_space/,
runtime/fast/space.py): DCR and CRD, blocksizes 2, 3 and 4, odd heights and widths, batch 2, float32 and int32
(NaN payloads moved bit for bit), against onnxruntime on 1 and 2 threads; and the ConvTranspose whose kernel
equals its stride in a model with dynamic dims (runtime/fast/patch.py ``conv_transpose_patches``), whose GEMM
the driver scatters with the bias added, at several sizes."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, single_op_model, tensor_info

import converter_lite
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.kernels import registry
from converter_lite.kernels.depth_to_space import abi
from converter_lite.ops.interpret import eval_graph

FLAGS = "--opt_level=2"


def _converted(tmp_path, model, nt):
    path = tmp_path / "d2s.onnx"
    path.write_bytes(model.SerializeToString())
    return converter_lite.load(converter_lite.convert(str(path), str(tmp_path / "d2s"), graph_kernel_flags=FLAGS),
                               num_threads=nt, adaptive_threads=False)


def _on_driver(m, nt, feeds=None) -> int:
    """How many of the plan's steps run the driver."""
    plan = m.plan if feeds is None else m._plan_for(m.check_feeds(feeds))
    descs = [getattr(c, "conv_desc", None) for c in plan.acquire().calls(nt)]
    return sum(d is not None and len(d) == len(abi.FIELDS) + abi.EXTRA for d in descs)


def _data(rng, shape, dtype):
    if dtype == np.int32:
        return rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
    return rng.standard_normal(shape).astype(dtype)


CASES = [  # op, input shape, blocksize, mode
    ("DepthToSpace", (1, 8, 5, 7), 2, "DCR"),
    ("DepthToSpace", (2, 12, 3, 9), 2, "CRD"),
    ("DepthToSpace", (2, 18, 5, 3), 3, "DCR"),
    ("DepthToSpace", (1, 27, 7, 5), 3, "CRD"),
    ("DepthToSpace", (2, 32, 3, 5), 4, "DCR"),
    ("DepthToSpace", (1, 50, 3, 3), 5, "CRD"),                  # a width without an unrolled loop
    ("DepthToSpace", (1, 64, 40, 41), 2, "CRD"),                # several chunks per thread
    ("SpaceToDepth", (1, 3, 10, 14), 2, "DCR"),
    ("SpaceToDepth", (2, 5, 6, 18), 2, "CRD"),
    ("SpaceToDepth", (2, 2, 9, 15), 3, "DCR"),
    ("SpaceToDepth", (1, 3, 15, 21), 3, "CRD"),
    ("SpaceToDepth", (2, 1, 10, 5), 5, "DCR"),
    ("SpaceToDepth", (1, 16, 82, 38), 2, "DCR"),
]


def _model(op, x, bs, mode):
    attrs = {"blocksize": bs}
    if op == "DepthToSpace" or mode != "DCR":
        attrs["mode"] = mode
    return single_op_model(op, {"x": x}, opset=13, **attrs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{'x'.join(map(str, c[1]))}-b{c[2]}-{c[3]}")
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("nt", [1, 2])
def test_matches_onnxruntime(tmp_path, rng, case, dtype, nt):
    op, shape, bs, mode = case
    if op == "SpaceToDepth" and mode == "CRD":
        pytest.skip("onnxruntime's SpaceToDepth has no mode (opset 28); see test_space_to_depth_crd")
    x = _data(rng, shape, dtype)
    model = _model(op, x, bs, mode)
    m = _converted(tmp_path, model, nt)
    assert _on_driver(m, nt) == 1
    if dtype == np.int32:           # onnxruntime has no int32 kernels: values exact in float32, and the reference
        xf = (x >> 8).astype(np.float32)
        want = run_ort(_model(op, xf, bs, mode), {"x": xf})[0].astype(np.int32)
        np.testing.assert_array_equal(m.run({"x": x >> 8})["out0"], want)
        want = eval_graph(import_model(model), {"x": x})[0]
    else:
        want = run_ort(model, {"x": x})[0]
    for _ in range(2):
        np.testing.assert_array_equal(m.run({"x": x})["out0"], want)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] == "SpaceToDepth" and c[3] == "CRD"],
                         ids=lambda c: f"{'x'.join(map(str, c[1]))}-b{c[2]}")
@pytest.mark.parametrize("nt", [1, 2])
def test_space_to_depth_crd(tmp_path, rng, case, nt):
    """SpaceToDepth's CRD mode (opset 28, which onnxruntime lacks) against the reference kernel, and as the
    inverse of DepthToSpace CRD (onnxruntime)."""
    _, shape, bs, _ = case
    x = rng.standard_normal(shape).astype(np.float32)
    model = single_op_model("SpaceToDepth", {"x": x}, opset=13, blocksize=bs)
    model.graph.node[0].attribute.append(oh.make_attribute("mode", "CRD"))
    m = _converted(tmp_path, model, nt)
    assert _on_driver(m, nt) == 1
    got = m.run({"x": x})["out0"]
    np.testing.assert_array_equal(got, eval_graph(import_model(model), {"x": x})[0])
    back = single_op_model("DepthToSpace", {"x": got}, opset=13, blocksize=bs, mode="CRD")
    np.testing.assert_array_equal(run_ort(back, {"x": got})[0], x)


def test_nan_bits_move_unchanged(tmp_path, rng):
    bits = rng.integers(0, 2**32, (1, 8, 3, 5), dtype=np.uint64).astype(np.uint32)
    bits[0, :7, 0, 0] = [0x7FC01234, 0xFF800000, 0x80000000, 0x7F800001, 0x7F800000, 0xFFC00000, 0]
    x = bits.view(np.float32)
    model = _model("DepthToSpace", x, 2, "DCR")
    m = _converted(tmp_path, model, 2)
    assert _on_driver(m, 2) == 1
    got, want = m.run({"x": x})["out0"], eval_graph(import_model(model), {"x": x})[0]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_dynamic_sizes_run_on_the_driver(tmp_path, rng):
    """A pixel-shuffle tail with dynamic batch, height and width: every size runs on the driver."""
    nodes = [oh.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD"),
             oh.make_node("SpaceToDepth", ["y"], ["z"], blocksize=2),
             oh.make_node("Relu", ["z"], ["r"])]
    model = make_model(nodes, [tensor_info("x", np.float32, ["N", 12, "H", "W"])],
                       [tensor_info("y", np.float32, None), tensor_info("r", np.float32, None)])
    m = _converted(tmp_path, model, 2)
    for shape in ((1, 12, 5, 7), (2, 12, 16, 9), (1, 12, 1, 1), (1, 12, 5, 7)):
        x = rng.standard_normal(shape).astype(np.float32)
        assert _on_driver(m, 2, {"x": x}) >= 1
        got, want = m.run({"x": x}), run_ort(model, {"x": x})
        np.testing.assert_array_equal(got["y"], want[0])
        np.testing.assert_array_equal(got["r"], want[1])


def _node(op, x_shape, w_shape=None, dtype=DType.float32, **attrs):
    x = Value("x", TensorType(dtype, x_shape))
    ins = [x] if w_shape is None else [x, Value("w", const=np.zeros(w_shape, dtype.np))]
    return Node(op, ins, [Value("y", TensorType(dtype, None))], attrs)


@pytest.mark.parametrize("node,want", [
    (_node("DepthToSpace", (1, 8, 4, 4), blocksize=2), True),
    (_node("SpaceToDepth", (1, 8, 4, 4), dtype=DType.int32, blocksize=2), True),
    (_node("DepthToSpace", (1, 8, 4, 4), dtype=DType.float64, blocksize=2), False),
    (_node("DepthToSpace", (1, 8, 4, 4), dtype=DType.int64, blocksize=2), False),
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 2, 2), strides=[2, 2]), True),
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 3, 2), kernel_shape=[3, 2], strides=[3, 2]), True),
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 2, 2)), False),                       # stride 1
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 3, 3), strides=[2, 2]), False),       # overlapping
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 2, 2), strides=[2, 2], pads=[1, 1, 0, 0]), False),
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 2, 2), strides=[2, 2], output_padding=[1, 1]), False),
    (_node("ConvTranspose", (1, 8, 4, 4), (4, 3, 2, 2), strides=[2, 2], group=2), False),
    (_node("ConvTranspose", (1, 8, 4, 4), (8, 3, 2, 2), dtype=DType.float64, strides=[2, 2]), False),
])
def test_select(node, want):
    assert (abi.SYMBOL in registry.select(node)) == want
    assert abi.SYMBOL in registry.candidates(node)
    if node.op == "ConvTranspose":                       # its GEMM runs on the gemm drivers
        from converter_lite.kernels.gemm.abi import GEMM_TILES_SYMBOL
        assert (GEMM_TILES_SYMBOL in registry.select(node)) == want


@pytest.mark.parametrize("k,bias", [((2, 2), True), ((2, 2), False), ((3, 3), True), ((3, 3), False),
                                    ((2, 3), True)])
def test_dynamic_conv_transpose_kernel_equal_to_stride(tmp_path, rng, k, bias):
    """ConvTranspose kernel == stride (the FPN / DB-head upsampling) in a model converted without input
    shapes: the GEMM's blocks are scattered by the driver, the bias added once, at every size and batch."""
    c, m_ = 8, 5
    w = (rng.standard_normal((c, m_, *k)) * 0.3).astype(np.float32)
    inits = {"w": w}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(m_).astype(np.float32)
        ins.append("b")
    nodes = [oh.make_node("ConvTranspose", ins, ["t"], kernel_shape=list(k), strides=list(k)),
             oh.make_node("Relu", ["t"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, ["N", c, "H", "W"])],
                       [tensor_info("y", np.float32, None)], inits)
    m = _converted(tmp_path, model, 2)
    for shape in ((1, c, 6, 7), (2, c, 9, 4), (1, c, 1, 1), (2, c, 20, 33), (1, c, 6, 7)):
        x = rng.standard_normal(shape).astype(np.float32)
        assert _on_driver(m, 2, {"x": x}) == 1
        plan = m._plan_for(m.check_feeds({"x": x}))          # the GEMM on the native tile driver too
        assert any(getattr(c_, "tiles", None) is not None for c_ in plan.acquire().calls(2))
        np.testing.assert_allclose(m.run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
