"""expand_ops/cluster_ops: MindSpore GetValidOps semantics with MindSpore/ONNX op-name aliases."""
import pytest

from converter_lite.config import OP_ALIASES, GraphKernelConfig, onnx_op_name, parse_flags

DEFAULT = ("Add", "Mul", "GeLU", "ReduceSum")


def cfg(text):
    return parse_flags(text, lambda m: None)


def test_default_list_is_returned_in_onnx_spelling():
    assert GraphKernelConfig().expand_ops(DEFAULT) == {"Add", "Mul", "Gelu", "ReduceSum"}


def test_enable_adds_and_disable_removes():
    c = cfg("--enable_expand_ops=Square,Maximum --disable_expand_ops=Mul")
    assert c.expand_ops(DEFAULT) == {"Add", "Gelu", "ReduceSum", "Square", "Max"}


def test_disable_accepts_either_spelling():
    assert "Gelu" not in cfg("--disable_expand_ops=GeLU").expand_ops(DEFAULT)
    assert "Gelu" not in cfg("--disable_expand_ops=Gelu").expand_ops(DEFAULT)
    assert "Max" not in cfg("--disable_cluster_ops=Maximum").cluster_ops(["Max", "Add"])
    assert "Max" not in cfg("--disable_cluster_ops=Max").cluster_ops(["Maximum", "Add"])


def test_only_list_wins_over_enable_and_disable():
    c = cfg("--enable_cluster_ops_only=RealDiv,LogicalNot --enable_cluster_ops=Exp --disable_cluster_ops=Div")
    assert c.cluster_ops(["Add", "Mul"]) == {"Div", "Not"}


def test_expand_and_cluster_lists_are_independent():
    c = cfg("--enable_expand_ops=Softmax --disable_cluster_ops=Add")
    assert c.expand_ops([]) == {"Softmax"}
    assert c.cluster_ops(["Add", "Mul"]) == {"Mul"}
    assert c.cluster_ops([]) == frozenset()


@pytest.mark.parametrize("ms,onnx", [
    ("GeLU", "Gelu"), ("Gelu", "Gelu"), ("Maximum", "Max"), ("Minimum", "Min"), ("RealDiv", "Div"),
    ("LayerNorm", "LayerNormalization"), ("FusedBatchNorm", "BatchNormalization"),
    ("BatchNorm", "BatchNormalization"), ("ReLU", "Relu"), ("Select", "Where"), ("LogicalAnd", "And"),
    ("LogicalOr", "Or"), ("LogicalNot", "Not"), ("ExpandDims", "Unsqueeze"), ("BroadcastTo", "Expand"),
    ("StridedSlice", "Slice"), ("ReduceSum", "ReduceSum"), ("MatMul", "MatMul"), ("Square", "Square"),
    ("Rsqrt", "Rsqrt"), ("BiasAdd", "BiasAdd"), ("Sigmoid", "Sigmoid"), ("Softmax", "Softmax"),
    ("LogSoftmax", "LogSoftmax"), ("Tanh", "Tanh"), ("Cast", "Cast"), ("Transpose", "Transpose"),
    ("Reshape", "Reshape")])
def test_alias_table(ms, onnx):
    assert onnx_op_name(ms) == onnx


def test_aliases_map_to_onnx_names_not_to_other_aliases():
    assert not set(OP_ALIASES.values()) & set(OP_ALIASES)
