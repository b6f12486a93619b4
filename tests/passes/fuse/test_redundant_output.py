"""eliminate_redundant_output: unused kernel outputs are dropped, duplicates merged, dead parts removed."""
import numpy as np

from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.interpret import eval_graph

from .fuse_testing import (
    check_same_results,
    cluster,
    const,
    eliminate,
    kernel_nodes,
    new_graph,
    random_feeds,
)

F32 = TensorType(DType.float32, (2, 3))


def test_unused_output_and_its_inputs_are_dropped():
    g, b, (x, y) = new_graph(("x", (2, 3)), ("y", (2, 3)))
    e = b.op("Exp", x, name="e")
    a = b.op("Mul", e, y, name="a")
    s = b.op("Add", e, const(b, 1.0), name="s")
    g.outputs = [a.v, s.v]
    cluster(g)
    (k,) = kernel_nodes(g)
    assert len(k.outputs) == 2 and len(k.inputs) == 2
    g.outputs = [s.v]                                   # nobody reads "a" any more
    feeds = random_feeds(g)
    before = eval_graph(g, feeds)
    assert eliminate(g)
    assert [o.name for o in k.outputs] == [s.v.name]
    assert [v.name for v in k.inputs] == ["x"]           # y only fed the dropped part
    assert k.attrs["source_nodes"] == ("e", "s")
    assert [n.name for n in k.attrs["graph"].nodes] == ["e", "s"]
    check_same_results(before, g, feeds)
    assert not eliminate(g)


def _kernel_with_duplicate_outputs(graph_outputs: str):
    """GraphKernel(x) -> (o1, o2), both the same inner Exp; o1 -> Neg, o2 -> Abs."""
    x = Value("x", F32)
    xi, yi = Value("xi", F32), Value("yi", F32)
    sub = Graph("k", [xi], [yi, yi], [Node("Exp", [xi], [yi], name="exp")])
    o1, o2 = Value("o1", F32), Value("o2", F32)
    k = Node("GraphKernel", [x], [o1, o2], {"graph": sub, "kernel_name": "k", "source_nodes": ("exp",)}, "k")
    n, a = Value("n", F32), Value("a", F32)
    nodes = [k, Node("Neg", [o1], [n], name="neg"), Node("Abs", [o2], [a], name="abs")]
    outs = {"users": [n, a], "second": [n, a, o2], "both": [o1, o2]}[graph_outputs]
    return Graph("g", [x], outs, nodes), k


def test_duplicate_outputs_are_merged():
    g, k = _kernel_with_duplicate_outputs("users")
    feeds = random_feeds(g)
    before = eval_graph(g, feeds)
    assert eliminate(g)
    assert [o.name for o in k.outputs] == ["o1"]
    assert g.nodes[2].inputs[0] is k.outputs[0]
    check_same_results(before, g, feeds)


def test_duplicate_that_is_a_graph_output_keeps_its_name():
    g, k = _kernel_with_duplicate_outputs("second")
    assert eliminate(g)
    assert [o.name for o in k.outputs] == ["o2"]
    assert g.nodes[1].inputs[0] is k.outputs[0]


def test_duplicates_that_are_both_graph_outputs_stay():
    g, k = _kernel_with_duplicate_outputs("both")
    g.nodes = g.nodes[:1]
    for v in (k.outputs[0], k.outputs[1]):
        v.uses.clear()
    assert not eliminate(g)
    assert len(k.outputs) == 2
    np.testing.assert_array_equal(*eval_graph(g, random_feeds(g)))
