"""constant_folding / fold_constants: cases 1-5 of the module docstring."""
from __future__ import annotations

import numpy as np

from converter_lite.ir.core import Graph, Node, Value
from converter_lite.passes.simplify.constant_fold import fold_constants

from .simplify_testing import (
    check_numerics,
    clone,
    feeds_for,
    make_graph,
    ops,
    run_pass,
)


def test_folds_constant_subexpressions():
    def build(b, x, *_):
        c = b.op("Add", b.const(np.float32([1, 2, 3])), b.const(np.float32(1)))
        return x * b.op("Sqrt", c)
    g = make_graph(build, shapes=((2, 3),))
    before = clone(g)
    assert fold_constants(g) == 2
    assert ops(g) == ["Mul"]
    folded = g.nodes[0].inputs[1]
    assert folded.is_const and folded.const.dtype == np.float32
    np.testing.assert_allclose(folded.const, np.sqrt([2, 3, 4]), rtol=1e-6)
    check_numerics(before, g, feeds_for(g))


def test_pass_counts_and_reports_change():
    g = make_graph(lambda b, x, *_: x + b.op("Neg", b.const(np.float32(2))), shapes=((2,),))
    changed, ctx = run_pass("constant_folding", g)
    assert changed and ctx.stats["constant_folding"] == 1 and ops(g) == ["Add"]
    assert not run_pass("constant_folding", g)[0]


def test_nothing_to_fold_leaves_graph():
    g = make_graph(lambda b, x, y, *_: x + y)
    assert fold_constants(g) == 0 and ops(g) == ["Add"]


def test_non_deterministic_op_is_kept():
    def build(b, x, *_):
        r = b.op("RandomUniform", dtype=1, shape=(2,), seed=1.0)
        return x + r
    g = make_graph(build, shapes=((2,),))
    assert fold_constants(g) == 0 and ops(g) == ["Add", "RandomUniform"]


def test_growth_limit_blocks_big_outputs():
    def build(b, x, *_):
        big = b.op("ConstantOfShape", b.const(np.array([256, 256], np.int64)), value=np.array([1.0], np.float32))
        return x + big
    g = make_graph(build, shapes=((256, 256),))
    assert fold_constants(g) == 0 and "ConstantOfShape" in ops(g)


def test_graph_output_keeps_its_producer():
    g = make_graph(lambda b, *_: b.op("Neg", b.const(np.float32([1, 2]))), shapes=((1,),))
    assert fold_constants(g) == 0 and ops(g) == ["Neg"]


def test_shapes_option_folds_shape_of_static_values():
    def build(b, x, *_):
        return x * b.op("Cast", b.op("Shape", x, start=1), to=1)
    g = make_graph(build, shapes=((1, 6),))
    before = clone(g)
    assert fold_constants(g) == 0
    assert fold_constants(g, shapes=True) == 2 and ops(g) == ["Mul"]
    assert g.nodes[0].inputs[1].const.tolist() == [6.0]
    check_numerics(before, g, feeds_for(g))


def test_pass_folds_inside_graph_kernels():
    sub = make_graph(lambda b, x, *_: x * b.op("Exp", b.const(np.float32(0))), shapes=((2,),), name="k")
    g = Graph("main")
    x, y = Value("x", sub.inputs[0].type), Value("y", sub.outputs[0].type)
    g.inputs, g.outputs = [x], [y]
    g.nodes = [Node("GraphKernel", [x], [y], {"graph": sub, "kernel_name": "k", "source_nodes": ()}, "k")]
    before = clone(g)
    assert run_pass("constant_folding", g)[0] and ops(sub) == ["Mul"]
    check_numerics(before, g, feeds_for(g))
