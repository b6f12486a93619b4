"""Shared oracle harness for the tensor/misc op tests: registry kernel vs onnxruntime, and inference vs kernel.

``check(op, inputs, const=..., **attrs)`` builds a one-node ONNX model (inputs named in ``const`` become
initializers), runs it with onnxruntime, runs the registry kernel with the same inputs and attributes (ONNX
attribute forms converted the way the importer converts them), compares outputs, then builds an IR ``Node``
whose ``const`` inputs are constant Values and checks ``infer_types`` against the kernel's outputs.
``data``/``i64``/``DTYPES`` are the shared input makers.
"""
from __future__ import annotations

import numpy as np
import onnx.numpy_helper as onh
import pytest
from helpers import OPSET, assert_close, run_ort, single_op_model

import converter_lite.ops  # noqa: F401  (registers every op)
from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ops.registry import OPS, KernelError, evaluate, infer_types

DTYPES = [np.float32, np.int64, np.bool_, np.float16]
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def data(shape, dtype=np.float32, seed=0):
    """Seeded random array (values ~ N(0, 10), cast; bool: fair coin flips)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return np.asarray(rng.random(shape) > 0.5)
    return np.asarray(rng.standard_normal(shape) * 10).astype(dtype)


def i64(*v):
    return np.array(v, dtype=np.int64)


def ir_attr(v):
    """An onnx.helper attribute value as the importer hands it to kernels."""
    if isinstance(v, list):
        return tuple(v)
    return v


def onnx_attr(v):
    return onh.from_array(v) if isinstance(v, np.ndarray) else v


def ir_node(op, inputs: dict, n_outputs: int, const, attrs) -> Node:
    ins = [None if v is None else Value(k, const=v) if k in const else Value(k, TensorType.of(v))
           for k, v in inputs.items()]
    return Node(op, ins, [Value(f"out{i}") for i in range(n_outputs)], attrs, name=f"test_{op}")


def ours(op, inputs: dict, n_outputs: int = 1, **attrs) -> list[np.ndarray]:
    return evaluate(op, {k: ir_attr(v) for k, v in attrs.items()}, list(inputs.values()), n_outputs)


def check_infer(op, inputs: dict, outs, const=(), **attrs) -> None:
    node = ir_node(op, inputs, len(outs), const, {k: ir_attr(v) for k, v in attrs.items()})
    got = infer_types(node)
    assert got == [TensorType.of(o) for o in outs], f"{op} inference {got} != kernel {[o.shape for o in outs]}"


def _strip_trailing_none(inputs: dict) -> dict:
    """Inputs as arrays; omitted trailing optional inputs are left out of the node (onnxruntime rejects a
    trailing '')."""
    items = [(k, None if v is None else np.asarray(v)) for k, v in inputs.items()]
    while items and items[-1][1] is None:
        items.pop()
    return dict(items)


def check(op, inputs: dict, n_outputs: int = 1, const=(), opset: int = OPSET, rtol=1e-5, atol=1e-6,
          infer: bool = True, **attrs) -> list[np.ndarray]:
    inputs = _strip_trailing_none(inputs)
    model = single_op_model(op, inputs, n_outputs, opset=opset, const_inputs=const,
                            **{k: onnx_attr(v) for k, v in attrs.items()})
    expected = run_ort(model, {k: v for k, v in inputs.items() if v is not None})
    got = ours(op, inputs, n_outputs, **attrs)
    assert len(got) == n_outputs
    for i, (g, e) in enumerate(zip(got, expected)):
        assert_close(g, e, rtol=rtol, atol=atol, what=f"{op} output {i}")
    if infer:
        check_infer(op, inputs, got, const, **attrs)
    return got


def check_rejects(op, inputs: dict, n_outputs: int = 1, const=(), infer: bool = True, **attrs) -> None:
    """The kernel raises KernelError, and so does the inference (unless ``infer`` is False: errors in data
    the inference does not see)."""
    with pytest.raises(KernelError):
        ours(op, inputs, n_outputs, **attrs)
    if not infer:
        return
    with pytest.raises(KernelError):
        infer_types(ir_node(op, inputs, n_outputs, const, {k: ir_attr(v) for k, v in attrs.items()}))


# -- self-tests of the harness ---------------------------------------------------------------------------------
def test_check_catches_a_wrong_kernel_result(monkeypatch):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check("Transpose", {"x": x}, perm=[1, 0])
    monkeypatch.setattr(OPS["Transpose"], "compute", lambda attrs, x: x.reshape(3, 2))
    with pytest.raises(AssertionError):
        check("Transpose", {"x": x}, perm=[1, 0])


def test_check_catches_a_wrong_inference(monkeypatch):
    x = np.zeros((2, 3), np.float32)
    monkeypatch.setattr(OPS["Transpose"], "infer", lambda node: [node.inputs[0].type])
    with pytest.raises(AssertionError, match="inference"):
        check("Transpose", {"x": x})


def test_ir_attr_converts_lists_to_tuples():
    assert ir_attr([1, 2]) == (1, 2)
    assert ir_attr(3) == 3
