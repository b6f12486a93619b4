"""ir/printer.py: deterministic jaxpr-like text with a MindSpore-like header."""
import numpy as np
from graphkernel_testing import F32, fuse_all, inputs, mul_add_relu

from converter_lite.ops.builder import GraphBuilder
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.printer import count_subgraphs, dump_ir, format_array, print_graph

EXPECTED = """\
#IR entry      : @mul_add_relu
#Total params  : 3

%0 : f32[2,3]  # x
%c0 : f32[2,3] = [0.0 1.0 2.0 3.0 ...]  # {w}
%c1 : f32[] = 1.0  # {one}
#Total subgraph : 1

subgraph @mul_add_relu(%0:f32[2,3]) {{
  %1:f32[2,3] = TestMul(%0, %c0)  # mul
  %2:f32[2,3] = TestAdd(%1, %c1)  # add
  %3:f32[2,3] = TestRelu(%2)  # relu
  return (%3)
}}
"""


def test_dump_ir_exact_text():
    g = mul_add_relu()
    w, one = (c.name for c in g.constants())
    assert dump_ir(g) == EXPECTED.format(w=w, one=one)


def test_text_does_not_depend_on_generated_value_names():
    body = [print_graph(mul_add_relu()) for _ in range(2)]
    assert body[0] == body[1]


def test_fused_kernel_is_printed_nested_and_counted():
    g = mul_add_relu()
    fuse_all(g, "fused_mul_add_relu")
    text = dump_ir(g)
    assert "#Total params  : 1" in text and "#Total subgraph : 2" in text
    assert "  %1:f32[2,3] = GraphKernel(%0) {kernel_name='fused_mul_add_relu', " \
           "source_nodes=('mul', 'add', 'relu')}  # fused_mul_add_relu" in text
    assert "    @fused_mul_add_relu(%0:f32[2,3]) {\n      %c0:f32[2,3] = const [0.0 1.0 2.0 3.0 ...]" in text
    assert "      %3:f32[2,3] = TestRelu(%2)  # relu\n      return (%3)\n    }\n  return (%1)\n}" in text
    assert count_subgraphs(g) == 2


def test_multi_output_none_input_and_attrs():
    g = Graph("m")
    (x,) = inputs(g, ("x", (4,)))
    a, b2 = Value("a", TensorType(F32, (2,))), Value("b", TensorType(F32, (2,)))
    g.nodes.append(Node("Split", [x, None], [a, b2],
                        {"axis": 0, "num_outputs": 2, "scales": (0.5,), "mode": "x", "w": np.ones(6)}, "split"))
    g.outputs = [a, b2]
    line = print_graph(g).splitlines()[1]
    assert line == ("  (%1:f32[2], %2:f32[2]) = Split(%0, _) {axis=0, mode='x', num_outputs=2, scales=(0.5,), "
                    "w=float64[6] [1.0 1.0 1.0 1.0 ...]}  # split")


def test_format_array_preview():
    assert format_array(np.float32(0.1)) == "0.1"
    assert format_array(np.array([1, 2], np.int64)) == "[1 2]"
    assert format_array(np.arange(10)) == "[0 1 2 3 ...]"
    assert format_array(np.array([True, False])) == "[True False]"


def test_graph_metadata_in_header():
    g = mul_add_relu()
    g.metadata["producer"] = "onnx"
    assert "#attrs         :\nproducer : onnx\n" in dump_ir(g)


def test_undefined_operand_does_not_crash():
    g = Graph("bad")
    stray = Value("stray", TensorType(F32, (1,)))
    b = GraphBuilder(g)
    r = b.op("TestRelu", stray)
    g.outputs = [r.v]
    assert "%<undefined stray>" in print_graph(g)
