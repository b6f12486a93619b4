"""transform_op_optimizer: cases 1-6 of the module docstring."""
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


def T(b, v, perm):
    return b.op("Transpose", v, perm=perm)


def R(b, v, shape):
    return b.op("Reshape", v, b.const(np.array(shape, np.int64)))


def optimize(g):
    before = clone(g)
    changed, _ = run_pass("transform_op_optimizer", g)
    check_numerics(before, g, feeds_for(g))
    return changed


def test_transpose_pair_cancels():
    g = make_graph(lambda b, x, *_: b.op("Identity", T(b, T(b, x, (0, 2, 1)), (0, 2, 1))), shapes=((2, 3, 4),))
    assert optimize(g) and ops(g) == ["Identity"]


def test_transpose_pair_composes():
    g = make_graph(lambda b, x, *_: b.op("Identity", T(b, T(b, x, (1, 2, 0)), (1, 2, 0))), shapes=((2, 3, 4),))
    assert optimize(g) and ops(g) == ["Identity", "Transpose"]
    assert g.nodes[0].attrs["perm"] == (2, 0, 1)


def test_identity_transpose_and_default_perm():
    g = make_graph(lambda b, x, *_: b.op("Identity", T(b, x, (0, 1))), shapes=((2, 3),))
    assert optimize(g) and ops(g) == ["Identity"]
    g = make_graph(lambda b, x, *_: b.op("Identity", b.op("Transpose", b.op("Transpose", x))), shapes=((2, 3),))
    assert optimize(g) and ops(g) == ["Identity"]


def test_transpose_of_unit_dims_becomes_reshape():
    g = make_graph(lambda b, x, *_: b.op("Identity", T(b, x, (1, 0, 2))), shapes=((1, 3, 4),))
    assert optimize(g) and ops(g) == ["Identity", "Reshape"]


def test_real_transpose_is_kept():
    g = make_graph(lambda b, x, *_: b.op("Identity", T(b, x, (1, 0))), shapes=((2, 3),))
    assert not optimize(g) and ops(g) == ["Identity", "Transpose"]


def test_reshape_chain_becomes_one_reshape():
    def build(b, x, *_):
        return b.op("Identity", b.op("Unsqueeze", R(b, b.op("Flatten", x), (6, 4)),
                                     b.const(np.array([0], np.int64))))
    g = make_graph(build, shapes=((2, 3, 4),))
    assert optimize(g) and ops(g) == ["Identity", "Reshape"]
    assert g.nodes[0].inputs[1].const.tolist() == [1, 6, 4]


def test_reshape_to_same_shape_vanishes():
    g = make_graph(lambda b, x, *_: b.op("Identity", R(b, R(b, x, (6,)), (2, 3))), shapes=((2, 3),))
    assert optimize(g) and ops(g) == ["Identity"]


def test_transposes_sink_through_elementwise_and_cancel():
    def build(b, x, y, *_):
        s = T(b, x, (1, 0)) + T(b, y, (1, 0)) * b.const(np.float32([1, 2]))
        return b.op("Identity", T(b, b.op("Relu", s), (1, 0)))
    g = make_graph(build, shapes=((2, 3), (2, 3)))
    assert optimize(g)
    assert ops(g) == ["Add", "Identity", "Mul", "Relu"]


def test_sinking_two_transposes_into_one():
    g = make_graph(lambda b, x, y, *_: b.op("Identity", T(b, x, (1, 0)) - T(b, y, (1, 0))), shapes=((2, 3),) * 2)
    assert optimize(g) and ops(g) == ["Identity", "Sub", "Transpose"]


def test_no_sinking_when_it_removes_nothing():
    def build(b, x, y, *_):
        return b.op("MatMul", b.op("Relu", T(b, x, (1, 0))), y)
    g = make_graph(build, shapes=((2, 3), (2, 4)))
    assert not optimize(g) and ops(g) == ["MatMul", "Relu", "Transpose"]


def test_sinking_stops_before_an_untransposed_operand():
    def build(b, x, y, *_):
        return b.op("Identity", b.op("Relu", T(b, x, (1, 0))) + y)
    g = make_graph(build, shapes=((2, 3), (3, 2)))
    optimize(g)
    assert ops(g) == ["Add", "Identity", "Relu", "Transpose"]


def test_different_perms_do_not_sink():
    g = make_graph(lambda b, x, y, *_: b.op("Identity", T(b, x, (1, 0, 2)) + T(b, y, (0, 2, 1))),
                   shapes=((3, 3, 3),) * 2)
    assert not optimize(g)


def test_inside_graph_kernel():
    sub = make_graph(lambda b, x, *_: b.op("Relu", T(b, T(b, x, (1, 0)), (1, 0))), shapes=((2, 3),), name="k")
    g = Graph("main")
    x, y = Value("x", sub.inputs[0].type), Value("y", sub.outputs[0].type)
    g.inputs, g.outputs = [x], [y]
    g.nodes = [Node("GraphKernel", [x], [y], {"graph": sub, "kernel_name": "k", "source_nodes": ()}, "k")]
    assert optimize(g) and ops(sub) == ["Relu"]
