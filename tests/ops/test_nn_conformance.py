"""The NN kernels on ONNX's own operator test cases (``onnx.backend.test.case.node``): a second oracle next to
onnxruntime, with ONNX's expected outputs.  Each case's single node is evaluated by the registry kernel (with
attributes in the importer's form) and by the inference; deviations we keep on purpose are listed with why."""
from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

import converter_lite.ops  # noqa: F401  (registers every op)
from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.ops.registry import evaluate, infer_types

NN_OPS = ("MatMul MatMulInteger Gemm Einsum Conv ConvTranspose Col2Im MaxPool AveragePool LpPool "
          "GlobalAveragePool GlobalMaxPool GlobalLpPool LRN BatchNormalization InstanceNormalization "
          "LayerNormalization GroupNormalization RMSNormalization Resize DepthToSpace SpaceToDepth "
          "AffineGrid GridSample").split()

KNOWN_DEVIATIONS = {
    "test_einsum_batch_matmul_bfloat16": "the IR has no bfloat16",
    "test_einsum_sum_bfloat16": "the IR has no bfloat16",
    "test_einsum_transpose_bfloat16": "the IR has no bfloat16",
    # ONNX's expected values use the unrounded output length (scale * in) in align_corners; onnxruntime (and
    # we) use the integer output length
    "test_resize_downsample_scales_linear_align_corners": "align_corners uses the integer output length",
    "test_resize_downsample_scales_cubic_align_corners": "align_corners uses the integer output length",
}


@pytest.fixture(scope="module")
def onnx_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    by_op: dict[str, list] = {}
    for c in cases:
        nodes = c.model.graph.node
        if len(nodes) == 1 and nodes[0].op_type in NN_OPS and c.name not in KNOWN_DEVIATIONS:
            by_op.setdefault(nodes[0].op_type, []).append(c)
    return by_op


def _attr(a: onnx.AttributeProto):
    v = oh.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, onnx.TensorProto):
        return onh.to_array(v)
    if isinstance(v, list):
        return tuple(x.decode() if isinstance(x, bytes) else x for x in v)
    return v


def _array(x) -> np.ndarray:
    return onh.to_array(x) if isinstance(x, onnx.TensorProto) else np.asarray(x)


def _run_case(case) -> None:
    node = case.model.graph.node[0]
    attrs = {a.name: _attr(a) for a in node.attribute}
    for ins, outs in case.data_sets:
        given = iter(_array(x) for x in ins)
        inputs = [None if name == "" else next(given) for name in node.input]
        got = evaluate(node.op_type, attrs, inputs, len(node.output))
        for i, (g, e) in enumerate(zip(got, (_array(o) for o in outs))):
            what = f"{case.name} output {i}"
            assert g.dtype == e.dtype and g.shape == e.shape, f"{what}: {g.dtype}{g.shape} != {e.dtype}{e.shape}"
            if e.dtype.kind == "f":
                np.testing.assert_allclose(g, e, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5), err_msg=what)
            else:
                np.testing.assert_array_equal(g, e, err_msg=what)
        values = [None if x is None else Value(f"in{i}", const=x) for i, x in enumerate(inputs)]
        ir_node = Node(node.op_type, values, [Value(f"out{i}") for i in range(len(node.output))], attrs)
        assert infer_types(ir_node) == [TensorType.of(g) for g in got], f"{case.name}: inference"


@pytest.mark.parametrize("op", NN_OPS)
def test_onnx_operator_cases(onnx_cases, op):
    cases = onnx_cases.get(op, [])
    if not cases:
        pytest.skip(f"onnx {onnx.__version__} has no single-node cases for {op}")
    failures = []
    for case in cases:
        try:
            _run_case(case)
        except Exception as e:                           # collect them all, report every failing case
            failures.append(f"{case.name}: {type(e).__name__}: {str(e).strip()[:300]}")
    assert not failures, "\n".join(failures)
