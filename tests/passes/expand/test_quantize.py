"""QuantizeLinear/DequantizeLinear expanders: elementwise ops that fuse into kernels.  Exactly the reference
kernels at opt_level 1 (per-tensor and per-axis, int8/uint8/int16, zero points, saturation, infinities, NaN,
exact ties); at opt_level 2 the simplifier turns ``x / scale`` into ``x * (1/scale)``, which may move an exact
tie by one step; a QDQ model made by onnxruntime's quantizer runs fused and matches onnxruntime's output."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.model.format import load_model
from converter_lite.ops.quantize import dequantize_linear, quantize_linear

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _qdq_model(shape, qtype, axis, scale, zp, op_chain=("Q", "DQ")):
    inits = {"s": scale}
    qin = ["x", "s"]
    if zp is not None:
        inits["z"] = zp
        qin.append("z")
    nodes = [oh.make_node("QuantizeLinear", qin, ["q"], axis=axis),
             oh.make_node("DequantizeLinear", ["q"] + qin[1:], ["y"], axis=axis)]
    outs = [tensor_info("q", qtype, shape), tensor_info("y", np.float32, shape)]
    return make_model(nodes, [tensor_info("x", np.float32, shape)], outs, initializers=inits)


def _x(rng, shape, scale, axis):
    x = rng.standard_normal(shape).astype(np.float32) * 200 * np.max(scale)
    flat = x.reshape(-1)
    flat[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30]
    s = np.asarray(scale).reshape(-1)
    k = np.arange(6, 26)                       # exact ties: (n + 0.5) * scale of the element's channel
    ch = (k // int(np.prod(shape[axis + 1:]))) % shape[axis] if s.size > 1 else np.zeros_like(k)
    flat[6:26] = ((k % 7) - 3 + 0.5) * s[ch]
    return x


CASES = [
    ((2, 5, 6), np.int8, 1, np.float32(0.05), np.int8(3)),                         # per-tensor
    ((2, 5, 6), np.uint8, 1, np.linspace(0.01, 0.2, 5).astype(np.float32), np.arange(5).astype(np.uint8) * 30),
    ((3, 4, 7), np.int16, -1, np.linspace(0.001, 0.01, 7).astype(np.float32), np.zeros(7, np.int16)),
    ((4, 8), np.int8, 0, np.full(4, 0.25, np.float32), np.array([0, -1, 2, -3], np.int8)),
]


@pytest.mark.parametrize("case", CASES, ids=["tensor-int8", "axis1-uint8", "axis-1-int16", "axis0-int8"])
def test_exact_at_opt_level_1(tmp_path, rng, case):
    shape, qtype, axis, scale, zp = case
    model = _qdq_model(shape, qtype, axis, scale, zp)
    onnx.save(model, tmp_path / "m.onnx")
    ms = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"), graph_kernel_flags="--opt_level=1")
    ops = {n.op for n in load_model(ms).graph.nodes}
    assert not ops & {"QuantizeLinear", "DequantizeLinear"}, ops
    x = _x(rng, shape, scale, axis % len(shape))
    got = converter_lite.load(ms).run({"x": x})
    attrs = {"axis": axis}
    q = quantize_linear(attrs, x, np.asarray(scale), None if zp is None else np.asarray(zp))
    np.testing.assert_array_equal(got["q"], q)
    np.testing.assert_array_equal(got["y"], dequantize_linear(attrs, q, np.asarray(scale),
                                                              None if zp is None else np.asarray(zp)))


def test_within_one_step_at_opt_level_2(tmp_path, rng):
    shape, qtype, axis, scale, zp = CASES[1]
    model = _qdq_model(shape, qtype, axis, scale, zp)
    onnx.save(model, tmp_path / "m.onnx")
    ms = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    x = _x(rng, shape, scale, axis)
    got = converter_lite.load(ms).run({"x": x})["q"].astype(np.int32)
    want = quantize_linear({"axis": axis}, x, scale, zp).astype(np.int32)
    assert np.abs(got - want).max() <= 1 and np.mean(got != want) < 0.05


def test_blocked_quantization_keeps_the_reference_kernel(tmp_path, rng):
    s = np.full((2, 2), 0.1, np.float32)
    model = make_model([oh.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, block_size=2)],
                       [tensor_info("x", np.float32, [2, 4])], [tensor_info("y", np.uint8, [2, 4])],
                       initializers={"s": s}, opset=21)
    onnx.save(model, tmp_path / "b.onnx")
    ms = converter_lite.convert(str(tmp_path / "b.onnx"), str(tmp_path / "b"), graph_kernel_flags="--opt_level=2")
    assert "QuantizeLinear" in {n.op for n in load_model(ms).graph.nodes}
    x = rng.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(converter_lite.load(ms).run({"x": x})["y"], run_ort(model, {"x": x})[0])


def test_a_qdq_model_from_onnxruntime_runs_fused(tmp_path, rng):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    src = os.path.join(ROOT, "models", "conv_net.onnx")
    shape = [d.dim_value for d in onnx.load(src).graph.input[0].type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    qdq = tmp_path / "qdq.onnx"
    quantize_static(src, str(qdq), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    ms = converter_lite.convert(str(qdq), str(tmp_path / "q"), graph_kernel_flags="--opt_level=2")
    ops = [n.op for n in load_model(ms).graph.nodes]
    assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops, ops
    x = rng.standard_normal(shape).astype(np.float32)
    got = np.asarray(list(converter_lite.load(ms).run({"x": x}).values())[0], np.float64).reshape(-1)
    want = np.asarray(run_ort(onnx.load(qdq), {"x": x})[0], np.float64).reshape(-1)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) >= 0.999
