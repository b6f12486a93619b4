"""passes/rewrite/matmul_integer.py + kernels/qgemm: onnxruntime's dynamic-quantization chain
(DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add) becomes MatMulIntegerToFloat on the native int8
GEMM, against onnxruntime on the same ONNX graph; where the driver cannot take it, the float expansion."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.kernels.qgemm.abi import QGEMM_SYMBOL
from converter_lite.model.format import load_model


def _chain(k, n, scale="product", bias=True, batch=(2, 5)):
    """x [*batch, K] float -> DQL -> MatMulInteger(int8 W) -> Cast -> Mul(scale) (-> Add(bias))."""
    rng = np.random.default_rng(k * 100 + n)
    inits = {"w": rng.integers(-127, 128, (k, n)).astype(np.int8)}
    nodes = [oh.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
             oh.make_node("MatMulInteger", ["q", "w", "z"], ["acc"]),
             oh.make_node("Cast", ["acc"], ["accf"], to=1)]
    if scale == "product":
        inits["ws"] = rng.uniform(0.001, 0.02, n).astype(np.float32)
        nodes.append(oh.make_node("Mul", ["s", "ws"], ["sc"]))
        nodes.append(oh.make_node("Mul", ["sc", "accf"], ["y0"]))        # (the scale first: commuted)
    elif scale == "column":
        inits["ws"] = rng.uniform(0.001, 0.02, n).astype(np.float32)
        nodes.append(oh.make_node("Mul", ["accf", "ws"], ["y0"]))
    else:
        nodes.append(oh.make_node("Mul", ["accf", "s"], ["y0"]))
    if bias:
        inits["b"] = rng.standard_normal(n).astype(np.float32)
        nodes.append(oh.make_node("Add", ["y0", "b"], ["y"]))
    else:
        nodes.append(oh.make_node("Identity", ["y0"], ["y"]))
    return make_model(nodes, [tensor_info("x", np.float32, [*batch, k])],
                      [tensor_info("y", np.float32, [*batch, n])], initializers=inits)


def _convert(tmp_path, model, level=2):
    import onnx
    onnx.save(model, tmp_path / "m.onnx")
    return converter_lite.convert(str(tmp_path / "m.onnx"), str(tmp_path / "m"),
                                  graph_kernel_flags=f"--opt_level={level}")


def _native(ms, op):
    return [n for n in load_model(ms).graph.nodes if n.op == op and QGEMM_SYMBOL in n.attrs.get("native_drivers", ())]


@pytest.mark.parametrize("k,n", [(24, 16), (128, 37), (64, 96), (4, 1)])
@pytest.mark.parametrize("scale", ["product", "column", "scalar"])
@pytest.mark.parametrize("bias", [True, False])
def test_chain_runs_on_the_int8_gemm(tmp_path, k, n, scale, bias):
    model = _chain(k, n, scale, bias)
    ms = _convert(tmp_path, model)
    fused = _native(ms, "MatMulIntegerToFloat")
    assert len(fused) == 1
    assert (len(fused[0].inputs) > 6 and fused[0].inputs[6] is not None) == bias     # the bias in the epilogue
    assert not {n.op for n in load_model(ms).graph.nodes} & {"MatMulInteger", "Cast"}
    x = np.random.default_rng(k + n).standard_normal((2, 5, k)).astype(np.float32)
    x[0, 0, 0] = 4.0                                                     # a skewed range: a non-zero zero point
    got = converter_lite.load(ms, num_threads=2).run({"x": x})["y"]
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_k_not_a_multiple_of_4_takes_the_float_expansion(tmp_path):
    model = _chain(30, 20)
    ms = _convert(tmp_path, model)
    assert not _native(ms, "MatMulIntegerToFloat")
    assert not {n.op for n in load_model(ms).graph.nodes} & {"MatMulIntegerToFloat", "MatMulInteger"}
    x = np.random.default_rng(1).standard_normal((2, 5, 30)).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(converter_lite.load(ms).run({"x": x})["y"], want, rtol=1e-6,
                               atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("zp", [None, 0, 131])
def test_matmul_integer_alone_is_exact(tmp_path, zp):
    """A MatMulInteger whose result stays int32 runs on the driver's integer epilogue, equal to onnxruntime."""
    rng = np.random.default_rng(3)
    inits = {"w": rng.integers(-128, 128, (68, 40)).astype(np.int8)}
    ins = ["q", "w"]
    if zp is not None:
        inits["z"] = np.array(zp, np.uint8)
        ins.append("z")
    model = make_model([oh.make_node("MatMulInteger", ins, ["y"])], [tensor_info("q", np.uint8, [33, 68])],
                       [tensor_info("y", np.int32, [33, 40])], initializers=inits)
    ms = _convert(tmp_path, model)
    assert len(_native(ms, "MatMulInteger")) == 1
    q = rng.integers(0, 256, (33, 68)).astype(np.uint8)
    np.testing.assert_array_equal(converter_lite.load(ms).run({"q": q})["y"], run_ort(model, {"q": q})[0])


def test_int8_activations_keep_the_float_path(tmp_path):
    rng = np.random.default_rng(4)
    model = make_model([oh.make_node("MatMulInteger", ["q", "w"], ["y"])], [tensor_info("q", np.int8, [6, 8])],
                       [tensor_info("y", np.int32, [6, 4])],
                       initializers={"w": rng.integers(-128, 128, (8, 4)).astype(np.int8)})
    ms = _convert(tmp_path, model)
    assert not _native(ms, "MatMulInteger")
    q = rng.integers(-128, 128, (6, 8)).astype(np.int8)
    np.testing.assert_array_equal(converter_lite.load(ms).run({"q": q})["y"], run_ort(model, {"q": q})[0])


@pytest.mark.parametrize("level", [0, 2])
def test_com_microsoft_matmul_integer_to_float(tmp_path, level):
    """onnxruntime's own contrib op, imported: the reference at opt_level 0, the driver at 2."""
    rng = np.random.default_rng(5)
    inits = {"w": rng.integers(-127, 128, (32, 24)).astype(np.int8),
             "ws": rng.uniform(0.01, 0.02, 24).astype(np.float32), "b": rng.standard_normal(24).astype(np.float32),
             "sa": np.array(0.05, np.float32), "za": np.array(7, np.uint8)}
    node = oh.make_node("MatMulIntegerToFloat", ["q", "w", "sa", "ws", "za", "", "b"], ["y"], domain="com.microsoft")
    model = make_model([node], [tensor_info("q", np.uint8, [3, 32])], [tensor_info("y", np.float32, [3, 24])],
                       initializers=inits)
    model.opset_import.append(oh.make_opsetid("com.microsoft", 1))
    ms = _convert(tmp_path, model, level)
    assert len(_native(ms, "MatMulIntegerToFloat")) == (level > 0)
    q = rng.integers(0, 256, (3, 32)).astype(np.uint8)
    want = run_ort(model, {"q": q})[0]
    np.testing.assert_allclose(converter_lite.load(ms).run({"q": q})["y"], want, rtol=1e-6, atol=1e-6)


def test_dynamic_batch_and_sequence(tmp_path):
    """A model with dynamic dims: the driver is bound per shape."""
    model = _chain(64, 48, batch=("b", "t"))
    ms = _convert(tmp_path, model)
    m = converter_lite.load(ms, num_threads=2)
    for shape in [(1, 3), (2, 17), (4, 64)]:
        x = np.random.default_rng(shape[1]).standard_normal((*shape, 64)).astype(np.float32)
        want = run_ort(model, {"x": x})[0]
        np.testing.assert_allclose(m.run({"x": x})["y"], want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("op", ["QLinearMatMul", "QGemm"])
def test_qoperator_products_run_on_the_int8_gemm(tmp_path, op):
    """QLinearMatMul and com.microsoft QGemm (with its int32 bias) with constant int8 weights: the int8 GEMM,
    then the requantization; within one quantization step of onnxruntime."""
    rng = np.random.default_rng(8)
    k, n = 48, 20
    inits = {"w": rng.integers(-127, 128, (k, n)).astype(np.int8), "sa": np.array(0.03, np.float32),
             "za": np.array(120, np.uint8), "sb": rng.uniform(0.002, 0.004, n).astype(np.float32),
             "zb": np.zeros(n, np.int8), "sy": np.array(0.05, np.float32), "zy": np.array(128, np.uint8),
             "c": rng.integers(-500, 500, n).astype(np.int32)}
    if op == "QLinearMatMul":
        node = oh.make_node(op, ["q", "sa", "za", "w", "sb", "zb", "sy", "zy"], ["y"])
    else:
        node = oh.make_node(op, ["q", "sa", "za", "w", "sb", "zb", "c", "sy", "zy"], ["y"], domain="com.microsoft")
    model = make_model([node], [tensor_info("q", np.uint8, [7, k])], [tensor_info("y", np.uint8, [7, n])],
                       initializers=inits)
    if op == "QGemm":
        model.opset_import.append(oh.make_opsetid("com.microsoft", 1))
    ms = _convert(tmp_path, model)
    assert len(_native(ms, "MatMulIntegerToFloat")) == 1
    q = rng.integers(0, 256, (7, k)).astype(np.uint8)
    got = converter_lite.load(ms).run({"q": q})["y"].astype(np.int32)
    want = run_ort(model, {"q": q})[0].astype(np.int32)
    assert np.abs(got - want).max() <= 1 and np.mean(got != want) < 0.05


@pytest.mark.parametrize("k", [64, 30])
def test_a_qdq_matmul_runs_on_the_int8_gemm(tmp_path, k):
    """Q -> DQ -> MatMul(dequantized int8 weights) + bias: MatMulIntegerToFloat on the uint8 activations (the
    weights' int8 values found back from the folded DequantizeLinear), the bias in the epilogue; with K not a
    multiple of 4 the product stays float."""
    rng = np.random.default_rng(9)
    wq = rng.integers(-127, 128, (k, 24)).astype(np.int8)
    wq[0] = 127                                                     # symmetric per column: each reaches 127
    inits = {"s": np.array(0.04, np.float32), "z": np.array(125, np.uint8), "wq": wq,
             "ws": rng.uniform(0.002, 0.01, 24).astype(np.float32), "b": rng.standard_normal(24).astype(np.float32)}
    model = make_model([oh.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                        oh.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
                        oh.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=1),
                        oh.make_node("MatMul", ["d", "w"], ["mm"]),
                        oh.make_node("Add", ["mm", "b"], ["y"])],
                       [tensor_info("x", np.float32, [2, 7, k])], [tensor_info("y", np.float32, [2, 7, 24])],
                       initializers=inits)
    ms = _convert(tmp_path, model)
    fused = _native(ms, "MatMulIntegerToFloat")
    assert len(fused) == (k % 4 == 0)
    if fused:
        assert fused[0].inputs[6] is not None                          # the bias went into the epilogue
    x = rng.standard_normal((2, 7, k)).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    np.testing.assert_allclose(converter_lite.load(ms).run({"x": x})["y"], want, rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())
