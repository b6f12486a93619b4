"""arithmetic_simplify: one case per MindSpore rule id (the rewrite happens, numerics are unchanged, and
disabling the id through the config leaves the graph exactly as it was), plus driver behaviour."""
from __future__ import annotations

import numpy as np
import pytest

from converter_lite.ir.core import Graph, Node, Value
from converter_lite.ir.dtype import DType
from converter_lite.passes.simplify.arith_rules import RULES

from .simplify_testing import (
    check_numerics,
    clone,
    feeds_for,
    make_graph,
    ops,
    run_pass,
    structure,
)


def c(b, v):
    return b.const(np.float32(v))


def rsqrt(b, v):
    return b.op("Reciprocal", b.op("Sqrt", v))


def reduce(b, op, v, axes, keepdims=1):
    return b.op(op, v, b.const(np.array(axes, dtype=np.int64)), keepdims=keepdims)


# id -> (expression, ops left after the rewrite (besides the final Identity), other ids that rewrite the
# same expression and are disabled together with it)
CASES = {
    1: (lambda b, x, y, z, w: x + 0.0, [], ()),
    2: (lambda b, x, y, z, w: x * z + x * y, ["Add", "Mul"], ()),
    3: (lambda b, x, y, z, w: (x + 1.0) + 2.0, ["Add"], ()),
    4: (lambda b, x, y, z, w: x + (-x), [], ()),
    5: (lambda b, x, y, z, w: (x + y) + (-x), [], ()),
    6: (lambda b, x, y, z, w: (x + y) + ((-x) + z), ["Add"], ()),
    7: (lambda b, x, y, z, w: x - 0.0, [], (8,)),
    8: (lambda b, x, y, z, w: x - 3.0, ["Add"], ()),
    9: (lambda b, x, y, z, w: x * z - x * y, ["Mul", "Sub"], (10,)),
    10: (lambda b, x, y, z, w: x * z - y * z, ["Mul", "Sub"], (9,)),
    11: (lambda b, x, y, z, w: b.op("Log", b.op("Exp", x)), [], ()),
    12: (lambda b, x, y, z, w: b.op("Log", x ** y), ["Abs", "Log", "Mul"], ()),
    13: (lambda b, x, y, z, w: b.op("Log", b.op("Sqrt", x)), ["Log", "Mul"], ()),
    14: (lambda b, x, y, z, w: b.op("Log", rsqrt(b, x)), ["Log", "Mul"], ()),
    15: (lambda b, x, y, z, w: x ** 1.0, [], ()),
    16: (lambda b, x, y, z, w: b.op("Exp", x) ** y, ["Exp", "Mul"], ()),
    17: (lambda b, x, y, z, w: x ** 2.0, ["Mul"], ()),
    18: (lambda b, x, y, z, w: x ** -1.0, ["Reciprocal"], ()),
    19: (lambda b, x, y, z, w: b.op("Sqrt", x * x), ["Abs"], ()),
    20: (lambda b, x, y, z, w: rsqrt(b, x ** -2.0), ["Abs"], ()),
    21: (lambda b, x, y, z, w: rsqrt(b, 1.0 / x), ["Sqrt"], ()),
    22: (lambda b, x, y, z, w: rsqrt(b, b.op("Reciprocal", x)), ["Sqrt"], ()),
    23: (lambda b, x, y, z, w: b.op("Where", b.op("Greater", x, z), y, y), [], ()),
    24: (lambda b, x, y, z, w: b.op("Neg", b.op("Neg", x)), [], ()),
    25: (lambda b, x, y, z, w: (x * 2.0) * (y * 3.0), ["Mul", "Mul"], ()),
    26: (lambda b, x, y, z, w: (x * 2.0) * 3.0, ["Mul"], ()),
    27: (lambda b, x, y, z, w: b.op("Exp", x) * b.op("Exp", y), ["Add", "Exp"], ()),
    28: (lambda b, x, y, z, w: (b.op("Exp", x) * z) * b.op("Exp", y), ["Add", "Exp", "Mul"], ()),
    29: (lambda b, x, y, z, w: (b.op("Exp", x) * z) * (b.op("Exp", y) * w), ["Add", "Exp", "Mul", "Mul"], ()),
    30: (lambda b, x, y, z, w: b.op("Sqrt", x) * b.op("Sqrt", x), [], (33,)),
    31: (lambda b, x, y, z, w: (x * b.op("Sqrt", y)) * (z * b.op("Sqrt", y)), ["Mul", "Mul"], ()),
    32: (lambda b, x, y, z, w: (x * b.op("Sqrt", y)) * b.op("Sqrt", y), ["Mul"], ()),
    33: (lambda b, x, y, z, w: b.op("Sqrt", x) * b.op("Sqrt", y), ["Mul", "Sqrt"], ()),
    34: (lambda b, x, y, z, w: rsqrt(b, x) * rsqrt(b, x), ["Reciprocal"], (37,)),
    35: (lambda b, x, y, z, w: (x * rsqrt(b, y)) * rsqrt(b, y), ["Div"], ()),
    36: (lambda b, x, y, z, w: (x * rsqrt(b, y)) * (z * rsqrt(b, y)), ["Div", "Mul"], ()),
    37: (lambda b, x, y, z, w: rsqrt(b, x) * rsqrt(b, y), ["Mul", "Reciprocal", "Sqrt"], ()),
    38: (lambda b, x, y, z, w: x * rsqrt(b, x), ["Sqrt"], ()),
    39: (lambda b, x, y, z, w: b.op("Abs", x) * b.op("Abs", y), ["Abs", "Mul"], ()),
    40: (lambda b, x, y, z, w: (b.op("Abs", x) * z) * b.op("Abs", y), ["Abs", "Mul", "Mul"], ()),
    41: (lambda b, x, y, z, w: (b.op("Abs", x) * z) * (b.op("Abs", y) * w), ["Abs", "Mul", "Mul", "Mul"], ()),
    42: (lambda b, x, y, z, w: (-x) * 3.0, ["Mul"], ()),
    43: (lambda b, x, y, z, w: x / 1.0, [], (50,)),
    44: (lambda b, x, y, z, w: b.op("Exp", x) / b.op("Exp", y), ["Exp", "Sub"], (45,)),
    45: (lambda b, x, y, z, w: x / b.op("Exp", y), ["Exp", "Mul", "Neg"], ()),
    46: (lambda b, x, y, z, w: x / (y ** 3.0), ["Mul", "Pow"], ()),
    47: (lambda b, x, y, z, w: x / b.op("Sqrt", x), ["Sqrt"], (48,)),
    48: (lambda b, x, y, z, w: x / b.op("Sqrt", y), ["Mul", "Reciprocal", "Sqrt"], ()),
    49: (lambda b, x, y, z, w: x / rsqrt(b, y), ["Mul", "Sqrt"], ()),
    50: (lambda b, x, y, z, w: x / 4.0, ["Mul"], ()),
    51: (lambda b, x, y, z, w: (x / y) / (z / w), ["Div", "Mul", "Mul"], (53, 54)),
    52: (lambda b, x, y, z, w: (-x) / 4.0, ["Mul"], (50,)),
    53: (lambda b, x, y, z, w: (x / y) / z, ["Div", "Mul"], ()),
    54: (lambda b, x, y, z, w: x / (y / z), ["Div", "Mul"], ()),
    55: (lambda b, x, y, z, w: reduce(b, "ReduceSum", reduce(b, "ReduceSum", x, [1]), [0]), ["ReduceSum"], ()),
    56: (lambda b, x, y, z, w: reduce(b, "ReduceMin", reduce(b, "ReduceMin", x, [1]), [0]), ["ReduceMin"], ()),
    57: (lambda b, x, y, z, w: reduce(b, "ReduceMax", reduce(b, "ReduceMax", x, [0]), [1]), ["ReduceMax"], ()),
    58: (lambda b, x, y, z, w: reduce(b, "ReduceSum", -x, [1]), ["Neg", "ReduceSum"], ()),
    59: (lambda b, x, y, z, w: reduce(b, "ReduceSum", x / 4.0, [1]), ["Mul", "ReduceSum"], (50,)),
    60: (lambda b, x, y, z, w: reduce(b, "ReduceSum", x * 4.0, [1]), ["Mul", "ReduceSum"], ()),
    101: (lambda b, x, y, z, w: x * 1.0, [], ()),
}


def build_case(rid: int):
    expr = CASES[rid][0]
    return make_graph(lambda b, *ins: b.op("Identity", expr(b, *ins)))


def test_every_rule_has_a_case():
    assert sorted(CASES) == sorted(r.name for r in RULES)


@pytest.mark.parametrize("rid", sorted(CASES))
def test_rule(rid):
    _, expected, overlapping = CASES[rid]
    g = build_case(rid)
    before = clone(g)
    feeds = feeds_for(g)
    changed, ctx = run_pass("arithmetic_simplify", g)
    assert changed and ctx.stats["arithmetic_simplify"] >= 1
    assert ops(g) == sorted(expected + ["Identity"])
    check_numerics(before, g, feeds)
    # only this rule (and the listed ones doing the same rewrite) disabled: nothing happens
    off = build_case(rid)
    reference = structure(off)
    changed, _ = run_pass("arithmetic_simplify", off,
                          disable_simplify_exprs=tuple(str(i) for i in (rid, *overlapping)))
    assert not changed and structure(off) == reference


@pytest.mark.parametrize("rid", [2, 17, 50])
def test_enable_only_other_rule_leaves_graph(rid):
    g = build_case(rid)
    reference = structure(g)
    changed, _ = run_pass("arithmetic_simplify", g, enable_simplify_exprs_only=("1",))
    assert not changed and structure(g) == reference


def test_commutative_operands():
    g = make_graph(lambda b, x, y, z, w: b.op("Identity", b.op("Add", b.const(np.float32(0)), x)))
    run_pass("arithmetic_simplify", g)
    assert ops(g) == ["Identity"] and g.nodes[0].inputs[0] is g.inputs[0]


def test_integer_division_is_not_rewritten():
    g = make_graph(lambda b, x, y, z, w: b.op("Identity", x / b.const(np.int32(4))), dtype=DType.int32)
    changed, _ = run_pass("arithmetic_simplify", g)
    assert not changed and ops(g) == ["Div", "Identity"]


def test_shared_intermediate_blocks_op_rewrite():
    # x*z is also a graph output, so rule 2 (whose result is a new op) must not fire
    def build(b, x, y, z, w):
        xz = x * z
        return [b.op("Identity", xz + x * y), xz]
    g = make_graph(build)
    changed, _ = run_pass("arithmetic_simplify", g)
    assert not changed and ops(g) == ["Add", "Identity", "Mul", "Mul"]


def test_broadcast_result_gets_expand():
    g = make_graph(lambda b, x, *_: b.op("Identity", x + b.const(np.zeros((2, 3), np.float32))),
                   shapes=((3,),))
    before = clone(g)
    run_pass("arithmetic_simplify", g)
    assert ops(g) == ["Expand", "Identity"]
    check_numerics(before, g, feeds_for(g))


def test_graph_output_keeps_its_name_and_producer():
    g = make_graph(lambda b, x, y, z, w: (x + 1.0) + 2.0)
    name = g.outputs[0].name
    before = clone(g)
    run_pass("arithmetic_simplify", g)
    assert ops(g) == ["Add"] and g.outputs[0].name == name and g.outputs[0].producer is g.nodes[0]
    check_numerics(before, g, feeds_for(g))
    # a rewrite to a graph input cannot replace a graph output: left alone
    g = make_graph(lambda b, x, y, z, w: x + 0.0)
    assert not run_pass("arithmetic_simplify", g)[0]


def test_reduce_chain_without_keepdims_maps_axes():
    def build(b, x, *_):
        return b.op("Identity", reduce(b, "ReduceSum", reduce(b, "ReduceSum", x, [1], 0), [1], 0))
    g = make_graph(build, shapes=((2, 3, 4),))
    before = clone(g)
    run_pass("arithmetic_simplify", g)
    red = [n for n in g.nodes if n.op == "ReduceSum"]
    assert len(red) == 1 and red[0].inputs[1].const.tolist() == [1, 2]
    check_numerics(before, g, feeds_for(g))


def test_rules_apply_inside_graph_kernels():
    from converter_lite.ops.builder import GraphBuilder
    from converter_lite.ops.verify import verify

    sub = make_graph(lambda b, x, *_: (x / 4.0) + 0.0, shapes=((2, 3),), name="kernel")
    g = Graph("main")
    x = Value("x", sub.inputs[0].type)
    g.inputs = [x]
    out = Value("y", sub.outputs[0].type)
    g.nodes = [Node("GraphKernel", [x], [out], {"graph": sub, "kernel_name": "k", "source_nodes": ()}, "k")]
    g.outputs = [GraphBuilder(g).op("Identity", out).v]
    verify(g)
    before = clone(g)
    changed, _ = run_pass("arithmetic_simplify", g)
    assert changed and ops(sub) == ["Mul"]
    check_numerics(before, g, feeds_for(g))
