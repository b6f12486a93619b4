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


def _ort_quantized(path, rng, fmt, **kw):
    """conv_net quantized by onnxruntime's quantize_static in format ``fmt`` (4 seeded calibration inputs):
    (the file written, the input shape)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize_static

    src = os.path.join(ROOT, "models", "conv_net.onnx")
    shape = [d.dim_value for d in onnx.load(src).graph.input[0].type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    quantize_static(src, str(path), Reader(), quant_format=fmt, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, **kw)
    return path, shape


def test_a_qdq_model_from_onnxruntime_runs_fused(tmp_path, rng):
    from onnxruntime.quantization import QuantFormat

    qdq, shape = _ort_quantized(tmp_path / "qdq.onnx", rng, QuantFormat.QDQ)
    ms = converter_lite.convert(str(qdq), str(tmp_path / "q"), graph_kernel_flags="--opt_level=2")
    ops = [n.op for n in load_model(ms).graph.nodes]
    assert "QuantizeLinear" not in ops and "DequantizeLinear" not in ops, ops
    x = rng.standard_normal(shape).astype(np.float32)
    got = np.asarray(list(converter_lite.load(ms).run({"x": x}).values())[0], np.float64).reshape(-1)
    want = np.asarray(run_ort(onnx.load(qdq), {"x": x})[0], np.float64).reshape(-1)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) >= 0.999


def test_qoperator_model_from_onnxruntime_runs_on_the_int8_convolution(tmp_path, rng):
    from onnxruntime.quantization import QuantFormat

    # Conv only: the com.microsoft QLinearAdd/QLinearGlobalAveragePool/QGemm it writes otherwise are not supported
    qop, shape = _ort_quantized(tmp_path / "qop.onnx", rng, QuantFormat.QOperator, op_types_to_quantize=["Conv"])
    kinds = {n.op_type for n in onnx.load(qop).graph.node}
    assert "QLinearConv" in kinds
    ms = converter_lite.convert(str(qop), str(tmp_path / "q"), graph_kernel_flags="--opt_level=2")
    ops = {n.op for n in load_model(ms).graph.nodes}
    assert "QuantizedConv" in ops and not ops & {"QLinearConv", "QLinearMatMul", "QuantizeLinear"}, ops
    x = rng.standard_normal(shape).astype(np.float32)
    got = np.asarray(list(converter_lite.load(ms).run({"x": x}).values())[0], np.float64).reshape(-1)
    want = np.asarray(run_ort(onnx.load(qop), {"x": x})[0], np.float64).reshape(-1)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) >= 0.999


@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul"])
def test_qlinear_ops_match_the_reference_within_one_step(tmp_path, rng, op):
    if op == "QLinearConv":
        x = rng.integers(0, 256, (1, 8, 9, 10)).astype(np.uint8)
        w = rng.integers(-127, 128, (12, 8, 3, 3)).astype(np.int8)
        inits = {"xs": np.float32(0.02), "xz": np.uint8(120), "w": w,
                 "ws": np.linspace(0.001, 0.01, 12).astype(np.float32), "wz": np.zeros(12, np.int8),
                 "ys": np.float32(0.05), "yz": np.uint8(128), "bias": rng.integers(-500, 500, 12).astype(np.int32)}
        node = oh.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["y"],
                            pads=[1, 1, 1, 1], strides=[1, 2])
        xshape = list(x.shape)
    else:
        x = rng.integers(0, 256, (2, 7, 24)).astype(np.uint8)
        w = rng.integers(-127, 128, (24, 16)).astype(np.int8)
        inits = {"xs": np.float32(0.02), "xz": np.uint8(100), "w": w,
                 "ws": np.linspace(0.001, 0.01, 16).astype(np.float32), "wz": np.zeros(16, np.int8),
                 "ys": np.float32(0.1), "yz": np.uint8(128)}
        node = oh.make_node("QLinearMatMul", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
        xshape = list(x.shape)
    model = make_model([node], [tensor_info("x", np.uint8, xshape)], [tensor_info("y", np.uint8, None)],
                       initializers=inits)
    onnx.save(model, tmp_path / "m.onnx")
    ref = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "r"), graph_kernel_flags="--opt_level=0")
    ms = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    assert op not in {n.op for n in load_model(ms).graph.nodes}
    assert op in {n.op for n in load_model(ref).graph.nodes}
    want = converter_lite.load(ref).run({"x": x})["y"].astype(np.int32)
    got = converter_lite.load(ms).run({"x": x})["y"].astype(np.int32)
    assert np.abs(got - want).max() <= 1 and np.mean(got != want) < 0.01
    np.testing.assert_array_equal(want, run_ort(model, {"x": x})[0].astype(np.int32))


@pytest.mark.parametrize("fill", ["random", "zeros", "positive", "negative", "ties"])
def test_dynamic_quantize_linear_is_the_reference_at_opt_level_1(tmp_path, rng, fill):
    """DynamicQuantizeLinear expands into reductions and elementwise ops with the reference kernel's arithmetic
    (scale in float64 rounded to float32, 1 for an all-zero input): the same bytes, scale and zero point."""
    from converter_lite.ops.quantize import dynamic_quantize_linear
    x = {"random": rng.standard_normal((3, 17)).astype(np.float32) * 4,
         "zeros": np.zeros((3, 17), np.float32),
         "positive": rng.random((3, 17)).astype(np.float32) + 0.5,
         "negative": -rng.random((3, 17)).astype(np.float32) - 2,
         "ties": (np.arange(51, dtype=np.float32).reshape(3, 17) - 20) * np.float32(0.5)}[fill]
    model = make_model([oh.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
                       [tensor_info("x", np.float32, [3, 17])],
                       [tensor_info("y", np.uint8, [3, 17]), tensor_info("s", np.float32, []),
                        tensor_info("z", np.uint8, [])])
    onnx.save(model, tmp_path / "d.onnx")
    ms = converter_lite.convert(str(tmp_path / "d.onnx"), str(tmp_path / "d"), graph_kernel_flags="--opt_level=1")
    assert "DynamicQuantizeLinear" not in {n.op for n in load_model(ms).graph.nodes}
    got = converter_lite.load(ms).run({"x": x})
    for name, want in zip("ysz", dynamic_quantize_linear({}, x)):
        np.testing.assert_array_equal(got[name], want)
    for name, want in zip("ysz", run_ort(model, {"x": x})):
        np.testing.assert_array_equal(got[name], want)


def _ort_dynamic(src, path, **kw):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(src, str(path), weight_type=QuantType.QInt8, **kw)
    return path


@pytest.mark.parametrize("name,ops", [("mlp_block", None), ("conv_net", ["Conv"])])
def test_a_dynamically_quantized_model_from_onnxruntime_runs_fused(tmp_path, rng, name, ops):
    """onnxruntime's quantize_dynamic form (DynamicQuantizeLinear -> MatMulInteger/ConvInteger -> Cast -> scale):
    the MatMuls run on the native int8 GEMM (MatMulIntegerToFloat, passes/rewrite/matmul_integer.py), the Convs
    as float Convs on the native drivers, within float32 rounding of onnxruntime's integer result."""
    src = os.path.join(ROOT, "models", name + ".onnx")
    path = _ort_dynamic(src, tmp_path / "dyn.onnx", op_types_to_quantize=ops)
    kinds = {n.op_type for n in onnx.load(path).graph.node}
    assert "DynamicQuantizeLinear" in kinds and kinds & {"MatMulInteger", "ConvInteger"}, kinds
    ms = converter_lite.convert(str(path), str(tmp_path / "q"), graph_kernel_flags="--opt_level=2")
    nodes = load_model(ms).graph.nodes
    left = {n.op for n in nodes}
    assert not left & {"DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"}, left
    int8 = [n for n in nodes if n.op == "MatMulIntegerToFloat"]
    assert int8 if "MatMulInteger" in kinds else not int8
    assert all("cl_qgemm_v1" in n.attrs.get("native_drivers", ()) for n in int8)
    model = converter_lite.load(ms)
    feeds = {n: rng.standard_normal(t.shape).astype(np.float32) for n, t in zip(model.input_names, model.input_types)}
    got = np.asarray(list(model.run(feeds).values())[0], np.float64).reshape(-1)
    want = np.asarray(run_ort(onnx.load(path), feeds)[0], np.float64).reshape(-1)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) >= 0.9999
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


def test_matmul_integer_with_a_computed_zero_point_matches_the_reference(tmp_path, rng):
    """MatMulInteger with per-column b zero points and a computed a zero point (from DynamicQuantizeLinear),
    exact against the integer reference (the sums stay far below 2**24)."""
    from converter_lite.ops.nn import matmul_integer
    w = rng.integers(-128, 128, (24, 16)).astype(np.int8)
    wz = rng.integers(-3, 4, 16).astype(np.int8)
    model = make_model([oh.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
                        oh.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["y"])],
                       [tensor_info("x", np.float32, [2, 5, 24])], [tensor_info("y", np.int32, [2, 5, 16])],
                       initializers={"w": w, "wz": wz})
    onnx.save(model, tmp_path / "m.onnx")
    ms = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    assert not {n.op for n in load_model(ms).graph.nodes} & {"MatMulInteger", "DynamicQuantizeLinear"}
    x = rng.standard_normal((2, 5, 24)).astype(np.float32)
    got = converter_lite.load(ms).run({"x": x})["y"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])


def _ms_case(op, rng):
    """(nodes, inputs, initializers, feeds, output type) of one onnxruntime contrib quantized op (com.microsoft)."""
    u8 = np.uint8
    x = rng.integers(0, 256, (2, 8, 5, 7)).astype(u8)
    xin = [tensor_info("x", u8, list(x.shape))]
    sc, zp = np.float32, u8
    if op in ("QLinearAdd", "QLinearMul"):
        inits = {"xs": sc(0.02), "xz": zp(128), "y": rng.integers(0, 256, (1, 8, 1, 7)).astype(u8), "ys": sc(0.03),
                 "yz": zp(100), "os": sc(0.05 if op == "QLinearAdd" else 0.2), "oz": zp(120)}
        return [oh.make_node(op, ["x", "xs", "xz", "y", "ys", "yz", "os", "oz"], ["o"], domain="com.microsoft")], \
            xin, inits, {"x": x}, u8
    if op == "QLinearConcat":
        inits = {"os": sc(0.05), "oz": zp(128), "xs": sc(0.04), "xz": zp(120),
                 "x2": rng.integers(0, 256, (2, 3, 5, 7)).astype(u8), "x2s": sc(0.06), "x2z": zp(130)}
        return [oh.make_node(op, ["os", "oz", "x", "xs", "xz", "x2", "x2s", "x2z"], ["o"], domain="com.microsoft",
                             axis=1)], xin, inits, {"x": x}, u8
    if op == "QGemm":
        a = rng.integers(0, 256, (6, 24)).astype(u8)
        inits = {"as": sc(0.02), "az": zp(128), "w": rng.integers(-127, 128, (10, 24)).astype(np.int8),
                 "ws": np.linspace(0.001, 0.01, 10).astype(np.float32), "wz": np.zeros(10, np.int8),
                 "c": rng.integers(-500, 500, 10).astype(np.int32), "os": sc(0.1), "oz": zp(128)}
        return [oh.make_node(op, ["a", "as", "az", "w", "ws", "wz", "c", "os", "oz"], ["o"], domain="com.microsoft",
                             transB=1, alpha=0.5)], [tensor_info("a", u8, [6, 24])], inits, {"a": a}, u8
    attrs = {"QLinearLeakyRelu": {"alpha": 0.1}, "QLinearSoftmax": {"axis": -1, "opset": 13},
             "QLinearAveragePool": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}}.get(op, {})
    unit = op in ("QLinearSigmoid", "QLinearSoftmax")
    inits = {"xs": sc(0.05), "xz": zp(128), "os": sc(1 / 256 if unit else 0.04), "oz": zp(0 if unit else 128)}
    return [oh.make_node(op, ["x", "xs", "xz", "os", "oz"], ["o"], domain="com.microsoft", **attrs)], xin, inits, \
        {"x": x}, u8


MS_OPS = ["QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool",
          "QLinearAveragePool", "QLinearConcat", "QLinearSoftmax", "QGemm"]


@pytest.mark.parametrize("op", MS_OPS)
def test_onnxruntime_contrib_quantized_ops(tmp_path, rng, op):
    """com.microsoft QLinear*/QGemm (what onnxruntime's quantizer writes in QOperator models) import; the reference
    kernel (opt_level 0) gives onnxruntime's bytes (AveragePool: within one step), the expansion into float ops
    (opt_level 1) the same, and at opt_level 2 (x / c -> x * (1 / c)) within one step."""
    nodes, inputs, inits, feeds, out = _ms_case(op, rng)
    model = make_model(nodes, inputs, [tensor_info("o", out, None)], initializers=inits)
    model.opset_import.append(oh.make_opsetid("com.microsoft", 1))
    onnx.save(model, tmp_path / "m.onnx")
    want = run_ort(model, feeds)[0].astype(np.int32)
    for level, steps in ((0, 1 if op == "QLinearAveragePool" else 0), (1, 1 if op == "QLinearAveragePool" else 0),
                         (2, 1)):
        ms = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / f"m{level}"),
                                    graph_kernel_flags=f"--opt_level={level}")
        assert (op in {n.op for n in load_model(ms).graph.nodes}) == (level == 0), level
        got = converter_lite.load(ms).run(feeds)["o"].astype(np.int32)
        assert np.abs(got - want).max() <= steps and np.mean(got != want) < 0.05, (level, np.abs(got - want).max())


def test_a_full_qoperator_model_from_onnxruntime_runs(tmp_path, rng):
    """conv_net quantized by onnxruntime in QOperator form with every op it quantizes (QLinearConv, and the
    com.microsoft QLinearAdd, QLinearGlobalAveragePool and QGemm) converts (it was -300) and matches."""
    from onnxruntime.quantization import QuantFormat
    qop, shape = _ort_quantized(tmp_path / "qop.onnx", rng, QuantFormat.QOperator)
    kinds = {n.op_type for n in onnx.load(qop).graph.node if n.domain == "com.microsoft"}
    assert kinds >= {"QLinearAdd", "QGemm"}, kinds
    ms = converter_lite.convert(str(qop), str(tmp_path / "q"), graph_kernel_flags="--opt_level=2")
    ops = {n.op for n in load_model(ms).graph.nodes}
    assert not ops & set(MS_OPS), ops
    x = rng.standard_normal(shape).astype(np.float32)
    got = np.asarray(list(converter_lite.load(ms).run({"x": x}).values())[0], np.float64).reshape(-1)
    want = np.asarray(run_ort(onnx.load(qop), {"x": x})[0], np.float64).reshape(-1)
    assert got @ want / np.linalg.norm(got) / np.linalg.norm(want) >= 0.999


@pytest.mark.parametrize("k,n,bits,block,zp,bias", [
    (64, 48, 4, 32, None, False), (70, 20, 4, 16, "packed", True), (64, 32, 4, 32, "float", False),
    (128, 16, 8, 32, "packed", False), (96, 24, 2, 32, None, True)],
    ids=["int4-default-zp", "int4-k-tail-packed-zp-bias", "int4-float-zp", "int8-packed-zp", "int2-bias"])
def test_matmul_nbits_matches_onnxruntime(tmp_path, rng, k, n, bits, block, zp, bias):
    """com.microsoft MatMulNBits (4-bit weight-only LLM exports, also 2 and 8 bits): the reference kernel
    (opt_level 0) and the expansion into a float MatMul on the weight dequantized at conversion (opt_level 2)
    give onnxruntime's output; K need not be a multiple of the block."""
    blocks = -(-k // block)
    inits = {"B": rng.integers(0, 256, (n, blocks, block * bits // 8)).astype(np.uint8),
             "s": (rng.random(n * blocks) * 0.1 + 0.01).astype(np.float32)}
    ins = ["a", "B", "s"]
    if zp == "packed":
        inits["z"] = rng.integers(0, 256, n * -(-blocks * bits // 8)).astype(np.uint8)
    elif zp == "float":
        inits["z"] = (rng.random(n * blocks) * 8).astype(np.float32)
    ins.append("z" if zp else "")
    if bias:
        ins += ["", "bias"]
        inits["bias"] = rng.standard_normal(n).astype(np.float32)
    while ins[-1] == "":
        ins.pop()
    model = make_model([oh.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=k, N=n, bits=bits,
                                     block_size=block)],
                       [tensor_info("a", np.float32, [3, k])], [tensor_info("y", np.float32, None)],
                       initializers=inits)
    model.opset_import.append(oh.make_opsetid("com.microsoft", 1))
    onnx.save(model, tmp_path / "m.onnx")
    a = rng.standard_normal((3, k)).astype(np.float32)
    want = run_ort(model, {"a": a})[0]
    for level in (0, 2):
        ms = converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / f"m{level}"),
                                    graph_kernel_flags=f"--opt_level={level}")
        assert ("MatMulNBits" in {nd.op for nd in load_model(ms).graph.nodes}) == (level == 0)
        np.testing.assert_allclose(converter_lite.load(ms).run({"a": a})["y"], want, rtol=1e-5,
                                   atol=1e-5 * np.abs(want).max())
