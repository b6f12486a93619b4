"""Oracle harness for the NN op tests: registry kernel vs onnxruntime, and shape inference vs kernel.

``check(op, inputs, **attrs)`` builds a one-node ONNX model (inputs named in ``const`` become initializers),
runs it with onnxruntime, runs the registry kernel on the same inputs with the attributes in the importer's
form (lists -> tuples), compares every output (same dtype and shape, values within the dtype's tolerance)
and checks that ``infer_types`` on an IR node (constant inputs as constant Values) gives exactly the kernel's
output types.  ``check_via_f32`` is for dtypes onnxruntime has no kernel for (float64 Conv, ...): the oracle
runs on float32 copies of the inputs and the comparison tolerance is float32's.
"""
from __future__ import annotations

import numpy as np
import pytest

import converter_lite.ops  # noqa: F401  (registers every op)
from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ops.registry import OPS, KernelError, evaluate, infer_types
from helpers import OPSET, assert_close, run_ort, single_op_model

# (rtol, atol) per dtype: float16 results are rounded once from float32 accumulations on both sides
TOLERANCE = {np.dtype(np.float16): (1e-2, 1e-2), np.dtype(np.float32): (1e-5, 1e-5),
             np.dtype(np.float64): (1e-10, 1e-10)}


def _ir_attr(v):
    """An attribute as the importer hands it over: ONNX stores FLOAT(S) as float32, INTS as tuples."""
    if isinstance(v, float):
        return float(np.float32(v))
    if isinstance(v, list):
        return tuple(_ir_attr(e) for e in v)
    return v


def ir_attrs(attrs: dict) -> dict:
    return {k: _ir_attr(v) for k, v in attrs.items()}


def ours(op: str, inputs: dict, n_outputs: int = 1, **attrs) -> list[np.ndarray]:
    return evaluate(op, ir_attrs(attrs), list(inputs.values()), n_outputs)


def check_infer(op: str, inputs: dict, outs, const=(), **attrs) -> None:
    ins = [None if v is None else Value(k, const=v) if k in const else Value(k, TensorType.of(v))
           for k, v in inputs.items()]
    node = Node(op, ins, [Value(f"out{i}") for i in range(len(outs))], ir_attrs(attrs), name=f"test_{op}")
    got = infer_types(node)
    want = [TensorType.of(o) for o in outs]
    assert list(got) == want, f"{op} inference {[str(t) for t in got]} != kernel {[str(t) for t in want]}"


def _tolerance(dtype, rtol, atol):
    r, a = TOLERANCE.get(np.dtype(dtype), (0, 0))
    return (r if rtol is None else rtol), (a if atol is None else atol)


def _trim(inputs: dict) -> dict:
    """Trailing omitted inputs are dropped (onnxruntime rejects a trailing empty input name)."""
    items = list(inputs.items())
    while items and items[-1][1] is None:
        items.pop()
    return dict(items)


def oracle(op: str, inputs: dict, n_outputs: int = 1, const=(), opset: int = OPSET, **attrs):
    model = single_op_model(op, inputs, n_outputs, opset=opset, const_inputs=const, **attrs)
    return run_ort(model, {k: v for k, v in inputs.items() if v is not None and k not in const})


def check(op: str, inputs: dict, n_outputs: int = 1, const=(), opset: int = OPSET, rtol=None, atol=None,
          **attrs) -> list[np.ndarray]:
    inputs = _trim(inputs)
    expected = oracle(op, inputs, n_outputs, const, opset, **attrs)
    got = ours(op, inputs, n_outputs, **attrs)
    assert len(got) == n_outputs
    for i, (g, e) in enumerate(zip(got, expected)):
        r, a = _tolerance(e.dtype, rtol, atol)
        assert_close(g, e, rtol=r, atol=a, what=f"{op} output {i}")
    check_infer(op, inputs, got, const, **attrs)
    return got


def check_via_f32(op: str, inputs: dict, n_outputs: int = 1, const=(), opset: int = OPSET, rtol=1e-5,
                  atol=1e-5, **attrs) -> list[np.ndarray]:
    inputs = _trim(inputs)
    as32 = {k: v.astype(np.float32) if v is not None and v.dtype.kind == "f" else v for k, v in inputs.items()}
    expected = oracle(op, as32, n_outputs, const, opset, **attrs)
    got = ours(op, inputs, n_outputs, **attrs)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype.kind == e.dtype.kind, f"{op} output {i}: dtype {g.dtype} vs oracle {e.dtype}"
        assert_close(g.astype(e.dtype), e, rtol=rtol, atol=atol, what=f"{op} output {i} (float32 oracle)")
    check_infer(op, inputs, got, const, **attrs)
    return got


def check_rejects(op: str, inputs: dict, n_outputs: int = 1, const=(), **attrs) -> None:
    """Both the kernel and the inference raise KernelError."""
    with pytest.raises(KernelError):
        ours(op, inputs, n_outputs, **attrs)
    with pytest.raises(KernelError):
        check_infer(op, inputs, [np.zeros(0)] * n_outputs, const, **attrs)


def randn(rng, *shape, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


# -- self-tests of the harness ---------------------------------------------------------------------------------
def test_check_catches_a_wrong_kernel(monkeypatch, rng):
    x = randn(rng, 1, 2, 5, 5)
    check("MaxPool", {"x": x}, kernel_shape=[2, 2])
    monkeypatch.setattr(OPS["MaxPool"], "compute", lambda attrs, x: x[:, :, 1:, 1:] * 1.001)
    with pytest.raises(AssertionError):
        check("MaxPool", {"x": x}, kernel_shape=[2, 2])


def test_check_catches_a_wrong_inference(monkeypatch, rng):
    monkeypatch.setattr(OPS["MaxPool"], "infer", lambda node: [node.inputs[0].type])
    with pytest.raises(AssertionError, match="inference"):
        check("MaxPool", {"x": randn(rng, 1, 2, 5, 5)}, kernel_shape=[2, 2])


def test_every_nn_op_has_a_cheap_inference():
    nn_ops = ("MatMul MatMulInteger Gemm Einsum Conv ConvTranspose Col2Im MaxPool AveragePool LpPool "
              "GlobalAveragePool GlobalMaxPool GlobalLpPool LRN BatchNormalization InstanceNormalization "
              "LayerNormalization GroupNormalization RMSNormalization Resize DepthToSpace SpaceToDepth "
              "AffineGrid GridSample").split()
    missing = [op for op in nn_ops if OPS[op].infer is None]
    assert not missing, f"ops without an inference function: {missing}"
