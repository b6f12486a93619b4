"""The low-precision element types (bfloat16, float8 x4, float4e2m1, int4/uint4; ml_dtypes arrays): Cast and its
``saturate`` edge values, QuantizeLinear/DequantizeLinear over them (expected values from the ONNX spec), and a
model holding them converted, stored and loaded bit for bit, its low-precision nodes left unfused."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import make_model, tensor_info

import converter_lite
from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import OPS

INF, NAN = np.inf, np.nan
EDGES = np.array([INF, -INF, NAN, 1e6, -1e6, 0.0, -0.0, 100.0, 0.4789], np.float32)
# target -> (saturate=1, saturate=0) results of EDGES: beyond the largest finite value, inf included, saturation
# gives +-that value; without it the type overflows to inf (float8e5m2) or NaN (no inf); 100 is a tie between
# 96 and 104 (e4m3) and goes to the even 96; the fnuz types have no -0
CAST_EDGES = {
    DType.float8e4m3fn: ([448, -448, NAN, 448, -448, 0, -0.0, 96, 0.46875],
                         [NAN, NAN, NAN, NAN, NAN, 0, -0.0, 96, 0.46875]),
    DType.float8e4m3fnuz: ([240, -240, NAN, 240, -240, 0, 0, 96, 0.46875],
                           [NAN, NAN, NAN, NAN, NAN, 0, 0, 96, 0.46875]),
    DType.float8e5m2: ([57344, -57344, NAN, 57344, -57344, 0, -0.0, 96, 0.5],
                       [INF, -INF, NAN, INF, -INF, 0, -0.0, 96, 0.5]),
    DType.float8e5m2fnuz: ([57344, -57344, NAN, 57344, -57344, 0, 0, 96, 0.5],
                           [NAN, NAN, NAN, NAN, NAN, 0, 0, 96, 0.5]),
}


def kernel(op, *inputs, **attrs):
    return OPS[op].compute(attrs, *inputs)


def same(got: np.ndarray, want, dtype: DType) -> None:
    """``got`` is of ``dtype`` and equals ``want`` value for value, NaN and the sign of zero included."""
    assert got.dtype == dtype.np
    g, w = got.astype(np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(np.signbit(g) & ~np.isnan(g), np.signbit(w) & ~np.isnan(w))


@pytest.mark.parametrize("to", list(CAST_EDGES), ids=lambda d: d.name)
@pytest.mark.parametrize("src", [np.float32, np.float16, ml_dtypes.bfloat16], ids=lambda t: np.dtype(t).name)
def test_cast_to_float8_saturates_or_overflows(to, src):
    with np.errstate(over="ignore"):
        x = EDGES.astype(src)                    # float16: 1e6 is inf already
    saturated, overflowed = CAST_EDGES[to]
    same(kernel("Cast", x, to=int(to)), saturated, to)                   # saturate defaults to 1
    same(kernel("Cast", x, to=int(to), saturate=0), overflowed, to)
    same(kernel("CastLike", x, np.zeros(1, to.np), saturate=0), overflowed, to)


def test_cast_to_float4_and_int4():
    x = np.array([INF, -INF, 2.4, 2.5, -7.0, 0.3, 1e6], np.float32)
    # float4e2m1 (0, 0.5, 1, 1.5, 2, 3, 4, 6) always saturates; 2.5 is a tie between 2 and 3
    same(kernel("Cast", x, to=int(DType.float4e2m1), saturate=0), [6, -6, 2, 2, -6, 0.5, 6], DType.float4e2m1)
    # float -> int4/uint4 truncates and wraps like the other narrow integer types
    y = np.array([-9.0, 8.5, 7.9, -8.0, 15.5, 16.0], np.float32)
    assert kernel("Cast", y, to=int(DType.int4)).astype(int).tolist() == [7, -8, 7, -8, -1, 0]
    assert kernel("Cast", y, to=int(DType.uint4)).astype(int).tolist() == [7, 8, 7, 8, 15, 0]
    i4 = np.array([-8, -1, 0, 7], ml_dtypes.int4)
    assert kernel("Cast", i4, to=int(DType.int8)).tolist() == [-8, -1, 0, 7]
    assert kernel("Cast", i4, to=int(DType.uint8)).tolist() == [248, 255, 0, 7]
    assert kernel("Cast", i4, to=int(DType.float32)).tolist() == [-8.0, -1.0, 0.0, 7.0]


def test_cast_from_bfloat16_follows_the_float32_rules():
    x = np.array([300.0, -3.75, NAN, 1.5], ml_dtypes.bfloat16)
    assert kernel("Cast", x, to=int(DType.uint8)).tolist() == [44, 253, 0, 1]        # through int32, as float32
    assert kernel("Cast", x, to=int(DType.bool)).tolist() == [True, True, True, True]
    y = kernel("Cast", np.array([1.00390625, 1.01171875, INF], np.float32), to=int(DType.bfloat16))
    same(y, [1.0, 1.015625, INF], DType.bfloat16)                                      # ties to even, inf stays


def test_bfloat16_math_and_float_tests():
    x = np.array([1.0, INF, -INF, NAN, 2.5], ml_dtypes.bfloat16)
    assert kernel("IsNaN", x).tolist() == [False, False, False, True, False]
    assert kernel("IsInf", x).tolist() == [False, True, True, False, False]
    assert kernel("IsInf", x.astype(ml_dtypes.float8_e5m2), detect_negative=0).tolist() == [0, 1, 0, 0, 0]
    # computed in float32 and rounded once: 1 + 3 * 2^-10 + 3 * 2^-10 rounds up to 1 + 2^-7 (the next bfloat16),
    # where rounding every step would leave 1
    one, z = np.array([1.0], ml_dtypes.bfloat16), np.array([3 * 2 ** -10], ml_dtypes.bfloat16)
    same(kernel("Sum", one, z, z), [1.0078125], DType.bfloat16)
    y = np.array([1.0, 1.0078125], ml_dtypes.bfloat16)
    same(kernel("Pow", y, np.array(2, np.int64)), [1.0, 1.015625], DType.bfloat16)


def test_quantize_linear_int4_saturates():
    x = np.array([-100.0, -8.4, 0.4, 7.6, 100.0], np.float32)
    s = np.float32(1.0)
    q = kernel("QuantizeLinear", x, s, np.array(1, ml_dtypes.int4))
    assert q.dtype == DType.int4.np and q.astype(int).tolist() == [-8, -7, 1, 7, 7]
    q = kernel("QuantizeLinear", x, s, np.array(1, ml_dtypes.uint4))
    assert q.dtype == DType.uint4.np and q.astype(int).tolist() == [0, 0, 1, 9, 15]
    q = kernel("QuantizeLinear", x, s, output_dtype=int(DType.int4))                   # no zero point
    assert q.astype(int).tolist() == [-8, -8, 0, 7, 7]
    d = kernel("DequantizeLinear", np.array([-8, 0, 7], ml_dtypes.int4), np.float32(0.5),
               np.array(-1, ml_dtypes.int4))
    assert d.dtype == np.float32 and d.tolist() == [-3.5, 0.5, 4.0]


@pytest.mark.parametrize("to,saturated,overflowed", [
    (DType.float8e4m3fn, [448, -448, 96, NAN, 0.5], [NAN, NAN, 96, NAN, 0.5]),
    (DType.float8e5m2, [57344, -57344, 96, NAN, 0.5], [INF, -INF, 96, NAN, 0.5]),
    (DType.float8e4m3fnuz, [240, -240, 96, NAN, 0.5], [NAN, NAN, 96, NAN, 0.5]),
], ids=lambda v: v.name if isinstance(v, DType) else "")
def test_quantize_linear_float8(to, saturated, overflowed):
    x = np.array([1e6, -1e6, 200.0, NAN, 1.0], np.float32)        # / 2: 100 rounds to the even 96
    s, zp = np.float32(2.0), np.zeros((), to.np)
    same(kernel("QuantizeLinear", x, s, zp), saturated, to)
    same(kernel("QuantizeLinear", x, s, zp, saturate=0), overflowed, to)
    d = kernel("DequantizeLinear", np.array([448, -0.5], to.np) if to is not DType.float8e4m3fnuz
               else np.array([240, -0.5], to.np), np.float32(2.0), zp)
    assert d.dtype == np.float32 and d[1] == -1.0


def test_quantize_linear_rejects_non_quantized_types():
    with pytest.raises(Exception, match="bfloat16"):
        kernel("QuantizeLinear", np.ones(2, np.float32), np.float32(1), output_dtype=int(DType.bfloat16))
    with pytest.raises(Exception, match="bfloat16"):
        kernel("DequantizeLinear", np.ones(2, ml_dtypes.bfloat16), np.float32(1))


def _bf16_model() -> onnx.ModelProto:
    """y = Cast(Cast(x, float8e4m3fn, saturate=0) * w, float32) with a bfloat16 weight w: a float32 chain
    around low-precision nodes."""
    w = np.array([[1.5, -2.25, 3e38, NAN], [0.0078125, -0.0, 65280.0, 1.0]], ml_dtypes.bfloat16)
    nodes = [
        oh.make_node("Relu", ["x"], ["r"]),
        oh.make_node("Cast", ["r"], ["r8"], to=onnx.TensorProto.FLOAT8E4M3FN, saturate=0),
        oh.make_node("Cast", ["r8"], ["rb"], to=onnx.TensorProto.BFLOAT16),
        oh.make_node("Mul", ["rb", "w"], ["m"]),
        oh.make_node("Cast", ["m"], ["mf"], to=onnx.TensorProto.FLOAT),
        oh.make_node("Add", ["mf", "x"], ["y"]),
    ]
    return make_model(nodes, [tensor_info("x", np.float32, [2, 4])], [tensor_info("y", np.float32, [2, 4])],
                      {"w": w}, opset=21)


@pytest.mark.parametrize("level", [0, 2])
def test_model_round_trips_and_stays_unfused(tmp_path, level):
    model = _bf16_model()
    w = onnx.numpy_helper.to_array(model.graph.initializer[0])
    ms = converter_lite.convert(model, str(tmp_path / "m"), graph_kernel_flags=f"--opt_level={level}")
    m = converter_lite.load(ms)
    stored = [v.const for n in m.graph.nodes for v in n.inputs if v is not None and v.const is not None
              and v.const.dtype == DType.bfloat16.np]
    assert len(stored) == 1 and stored[0].shape == w.shape and stored[0].tobytes() == w.tobytes()
    kernels = [n.attrs["graph"] for n in m.graph.nodes if n.op == "GraphKernel"]
    assert not any(v.dtype.is_low_precision for sub in kernels for k in sub.nodes for v in (*k.inputs, *k.outputs)
                   if v is not None)            # a low-precision value never enters a fused kernel
    assert sum(n.op == "Cast" for n in m.graph.nodes) == 3
    x = np.array([[1.0, 500.0, 1.0, 2.0], [-3.0, 0.3, 1.0, 100.0]], np.float32)
    r8 = np.maximum(x, 0).astype(ml_dtypes.float8_e4m3fn)            # 500 overflows to NaN without saturation
    want = (r8.astype(ml_dtypes.bfloat16).astype(np.float32) * w.astype(np.float32))
    want = want.astype(ml_dtypes.bfloat16).astype(np.float32) + x
    got = m.run({"x": x})["y"]
    np.testing.assert_array_equal(got, want)


def test_int4_initializer_is_unpacked_and_quantizes(tmp_path):
    """An odd count of int4 values (packed two a byte in the ONNX file) imports one element per numpy element."""
    zp = np.array([1, -8, 7], ml_dtypes.int4)
    s = np.array([0.5, 1.0, 2.0], np.float32)
    nodes = [oh.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], axis=0),
             oh.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], axis=0)]
    model = make_model(nodes, [tensor_info("x", np.float32, [3, 2])], [tensor_info("y", np.float32, [3, 2])],
                       {"s": s, "zp": zp}, opset=21)
    assert len(model.graph.initializer[1].raw_data) == 2                     # packed in the file
    m = converter_lite.load(converter_lite.convert(model, str(tmp_path / "q"), graph_kernel_flags="--opt_level=2"))
    stored = [v.const for n in m.graph.nodes for v in n.inputs if v is not None and v.const is not None
              and v.const.dtype == DType.int4.np]
    assert stored and all(c.shape == (3,) and c.tolist() == [1, -8, 7] for c in stored)
    x = np.array([[3.0, -9.0], [-5.5, 20.0], [-30.0, 9.9]], np.float32)
    # rows: q = clip(rint(x / s) + zp, -8, 7), y = (q - zp) * s
    want = [[3.0, -4.5], [0.0, 15.0], [-30.0, 0.0]]
    np.testing.assert_array_equal(m.run({"x": x})["y"], want)
