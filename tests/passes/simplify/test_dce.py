"""remove_dead_nodes: unused nodes go (chains in one sweep, also inside fused kernels); outputs stay."""
from __future__ import annotations

from converter_lite.ir.core import Graph, Node, Value
from converter_lite.ir.dce import remove_dead_nodes

from .simplify_testing import make_graph, ops


def test_removes_dead_chain_and_keeps_outputs():
    def build(b, x, y, *_):
        b.op("Exp", b.op("Neg", x))          # dead chain
        return x + y
    g = make_graph(build)
    assert remove_dead_nodes(g) == 2 and ops(g) == ["Add"]
    assert not g.inputs[0].uses[1:]          # the dead Neg no longer uses x


def test_nothing_dead():
    g = make_graph(lambda b, x, y, *_: x * y)
    assert remove_dead_nodes(g) == 0 and ops(g) == ["Mul"]


def test_cleans_graph_kernel_subgraphs():
    def build_sub(b, x, *_):
        b.op("Neg", x)
        return b.op("Exp", x)
    sub = make_graph(build_sub, shapes=((2,),), name="k")
    g = Graph("main")
    x, y = Value("x", sub.inputs[0].type), Value("y", sub.outputs[0].type)
    g.inputs, g.outputs = [x], [y]
    g.nodes = [Node("GraphKernel", [x], [y], {"graph": sub, "kernel_name": "k", "source_nodes": ()}, "k")]
    assert remove_dead_nodes(g) == 1 and ops(sub) == ["Exp"]
    assert remove_dead_nodes(g, recursive=False) == 0
