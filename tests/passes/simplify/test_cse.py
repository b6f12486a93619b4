"""graph_kernel_cse: identical constants and identical nodes are merged, also inside fused kernels."""
from __future__ import annotations

import numpy as np

from converter_lite.ir.core import Graph, Node, Value

from .simplify_testing import (
    check_numerics,
    clone,
    feeds_for,
    make_graph,
    ops,
    run_pass,
)


def test_merges_identical_nodes_and_constants():
    def build(b, x, y, *_):
        a1 = b.op("Exp", x) * b.const(np.float32(2))
        a2 = b.op("Exp", x) * b.const(np.float32(2))
        return b.op("Add", a1, a2)
    g = make_graph(build)
    before = clone(g)
    changed, _ = run_pass("graph_kernel_cse", g)
    assert changed and ops(g) == ["Add", "Exp", "Mul"]
    add = g.nodes[-1]
    assert add.inputs[0] is add.inputs[1]
    check_numerics(before, g, feeds_for(g))


def test_commutative_inputs_match():
    g = make_graph(lambda b, x, y, *_: b.op("Sub", x + y, y + x))
    run_pass("graph_kernel_cse", g)
    assert ops(g) == ["Add", "Sub"]


def test_different_attrs_or_inputs_are_kept():
    def build(b, x, y, *_):
        s1 = b.op("ReduceSum", x, b.const(np.array([0], np.int64)), keepdims=1)
        s2 = b.op("ReduceSum", x, b.const(np.array([0], np.int64)), keepdims=0)
        return [s1, s2, b.op("Sub", x, y), b.op("Sub", y, x)]
    g = make_graph(build)
    changed, _ = run_pass("graph_kernel_cse", g)
    assert ops(g) == ["ReduceSum", "ReduceSum", "Sub", "Sub"]
    assert g.nodes[0].inputs[1] is g.nodes[1].inputs[1]      # the equal axes constants did merge
    assert changed


def test_graph_outputs_are_not_merged():
    g = make_graph(lambda b, x, *_: [b.op("Exp", x), b.op("Exp", x)])
    changed, _ = run_pass("graph_kernel_cse", g)
    assert not changed and ops(g) == ["Exp", "Exp"]


def test_non_deterministic_nodes_are_not_merged():
    def build(b, x, *_):
        r1 = b.op("RandomUniformLike", x, seed=1.0)
        r2 = b.op("RandomUniformLike", x, seed=1.0)
        return r1 + r2
    g = make_graph(build)
    run_pass("graph_kernel_cse", g)
    assert ops(g).count("RandomUniformLike") == 2


def _kernel(name):
    return make_graph(lambda b, x, *_: b.op("Exp", x) + 1.0, shapes=((2,),), name=name)


def test_inside_and_across_graph_kernels():
    sub = make_graph(lambda b, x, *_: b.op("Neg", x) * b.op("Neg", x), shapes=((2,),), name="k0")
    g = Graph("main")
    x = Value("x", sub.inputs[0].type)
    outs = [Value(f"y{i}", sub.outputs[0].type) for i in range(3)]
    g.inputs = [x]
    g.nodes = [Node("GraphKernel", [x], [outs[0]], {"graph": sub, "kernel_name": "k0", "source_nodes": ()}, "k0"),
               Node("GraphKernel", [x], [outs[1]], {"graph": _kernel("k1"), "kernel_name": "k1",
                                                   "source_nodes": ("a",)}, "k1"),
               Node("GraphKernel", [x], [outs[2]], {"graph": _kernel("k2"), "kernel_name": "k2",
                                                   "source_nodes": ("b",)}, "k2")]
    from converter_lite.ops.builder import GraphBuilder
    b = GraphBuilder(g)
    g.outputs = [b.op("Add", b.op("Add", outs[0], outs[1]), outs[2]).v]
    before = clone(g)
    assert run_pass("graph_kernel_cse", g)[0]
    assert ops(sub) == ["Mul", "Neg"]
    assert ops(g) == ["Add", "Add", "GraphKernel", "GraphKernel"]   # k1 and k2 compute the same thing
    check_numerics(before, g, feeds_for(g))
