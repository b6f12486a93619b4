"""The default cluster list: every op can be compiled, and every op an expander emits can be clustered."""
import pytest

from converter_lite.ops.registry import OPS, OpKind
from converter_lite.passes.fuse import DEFAULT_CLUSTER


def test_default_cluster_ops_are_registered_and_not_opaque():
    for op in DEFAULT_CLUSTER:
        assert op in OPS, op
        assert OPS[op].kind < OpKind.OPAQUE, op


def test_default_cluster_ops_have_a_native_lowering():
    pytest.importorskip("llvmlite")
    from converter_lite.codegen.index import INDEX_MAPS
    from converter_lite.codegen.reduce import REDUCE_OPS
    from converter_lite.codegen.scalar import SCALAR_EMITTERS
    lowered = set(SCALAR_EMITTERS) | set(INDEX_MAPS) | set(REDUCE_OPS)
    assert DEFAULT_CLUSTER <= lowered, sorted(DEFAULT_CLUSTER - lowered)


def test_appendix_2_cpu_column_is_covered():
    # seed 003 appendix 2, CPU column, in ONNX spelling (Rsqrt has no ONNX op; it is Reciprocal(Sqrt))
    cpu = {"Abs", "Add", "Cast", "Exp", "Log", "Max", "Min", "Mul", "Neg", "Pow", "Div", "Reciprocal", "Sqrt",
           "Sub", "Equal", "Less", "LessOrEqual", "Not", "Where", "ReduceSum", "Reshape", "Transpose", "Round",
           "Tanh", "Mod", "ReduceMax"}
    assert cpu <= DEFAULT_CLUSTER
