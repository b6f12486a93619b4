"""ir/verify.py: every invariant violation is reported with the node at fault."""
import numpy as np
import pytest
from graphkernel_testing import F32, fuse_all, inputs, mul_add_relu

from converter_lite.ops.builder import GraphBuilder
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ops.verify import VerifyError, verify


def problems(g):
    with pytest.raises(VerifyError) as e:
        verify(g)
    return "\n".join(e.value.problems)


def test_valid_graphs_pass():
    g = mul_add_relu()
    verify(g)
    fuse_all(g)
    verify(g)


def test_value_defined_twice_is_not_ssa():
    g = mul_add_relu()
    dup = g.nodes[1]
    g.nodes.append(Node("TestRelu", [g.nodes[0].output], [dup.output], name="again"))
    assert "not SSA" in problems(g)


def test_non_topological_order():
    g = mul_add_relu()
    g.nodes.reverse()
    text = problems(g)
    assert "before it is defined" in text and "'relu'" in text


def test_dangling_input():
    g = mul_add_relu()
    stray = Value("stray", TensorType(F32, (2, 3)))
    g.nodes[2].set_input(0, stray)
    assert "dangling" in problems(g)


def test_uses_must_match_inputs():
    g = mul_add_relu()
    g.nodes[2].inputs[0] = g.nodes[0].output          # bypasses set_input: uses not updated
    text = problems(g)
    assert "misses the use by TestRelu node 'relu'" in text
    assert "stale use (TestRelu node 'relu'" in text


def test_removed_node_left_as_stale_use():
    g = mul_add_relu()
    relu = g.nodes[2]
    g.nodes.remove(relu)                               # not detached
    g.outputs = [g.nodes[1].output]
    assert "stale use" in problems(g)


def test_unregistered_op():
    g = mul_add_relu()
    g.nodes[2].op = "NoSuchOp"
    assert "op type 'NoSuchOp' is not registered" in problems(g)


def test_stored_type_must_match_inference():
    g = mul_add_relu()
    g.nodes[1].output.type = TensorType(F32, (3, 2))
    text = problems(g)
    assert "'add'" in text and "stored as f32[3,2] but infers as f32[2,3]" in text


def test_inference_failure_is_reported():
    g = Graph("g")
    x, y = inputs(g, ("x", (2, 3)), ("y", (4,)))
    out = Value("o", TensorType(F32, (2, 3)))
    g.nodes.append(Node("TestAdd", [x, y], [out], name="bad_add"))
    g.outputs = [out]
    assert "type inference failed" in problems(g)


def test_graph_output_must_be_defined():
    g = mul_add_relu()
    g.outputs.append(Value("ghost", TensorType(F32, (1,))))
    assert "graph output 'ghost' is not defined" in problems(g)


def test_graph_input_rules():
    g = mul_add_relu()
    g.inputs.append(g.inputs[0])
    g.inputs.append(Value("c", const=np.zeros(2, np.float32)))
    text = problems(g)
    assert "listed twice" in text and "is a constant" in text


def test_errors_inside_fused_subgraph_name_the_path():
    g = mul_add_relu()
    node = fuse_all(g, "fk")
    sub = node.attrs["graph"]
    sub.nodes[1].output.type = TensorType(F32, (6,))
    text = problems(g)
    assert "@mul_add_relu/fk: TestAdd node 'add'" in text


def test_kernel_signature_must_match_subgraph():
    g = mul_add_relu()
    node = fuse_all(g, "fk")
    node.attrs["graph"].inputs.append(Value("extra", TensorType(F32, (1,))))
    assert "has 1 inputs but its sub-graph @fk has 2" in problems(g)


def test_message_lists_problems():
    g = mul_add_relu()
    g.nodes[0].op = "Nope1"
    g.nodes[1].op = "Nope2"
    with pytest.raises(VerifyError) as e:
        verify(g)
    assert "2 problem(s)" in str(e.value) and "Nope1" in str(e.value) and "Nope2" in str(e.value)


def test_builder_made_graph_with_shared_constant_is_valid():
    g = Graph("g")
    (x,) = inputs(g, ("x", (3,)))
    b = GraphBuilder(g)
    c = b.const(np.ones(3, np.float32))
    y = b.op("TestAdd", x, c)
    z = b.op("TestMul", y, c)
    g.outputs = [z.v]
    verify(g)
