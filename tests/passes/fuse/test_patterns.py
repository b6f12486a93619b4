"""Area classification, the reach table, and each fusion pattern on its own."""
import numpy as np
import pytest

from converter_lite.passes.fuse.area import (
    Pattern,
    Relation,
    edge_relation,
    node_pattern,
)
from converter_lite.passes.fuse.cluster import DEFAULT_CLUSTER, clusterable
from converter_lite.passes.fuse.patterns import (
    FuseBwd,
    FuseEpilogue,
    FuseFwd,
    FuseIsolateReshape,
    FuseReduceFwd,
    FuseReshape,
    FuseType,
    cpu_patterns,
)
from converter_lite.passes.fuse.split_model import SplitModel, limit_area_size

from .fuse_testing import axes, const, new_graph


def _model(g):
    return SplitModel(g, lambda n: clusterable(n, DEFAULT_CLUSTER))


def _groups(model):
    return [sorted(n.name for n in a.nodes) for a in model.areas if a.alive and a.size > 1]


def test_node_patterns_and_relations():
    _, b, (x, row) = new_graph(("x", (4, 8)), ("row", (8,)))
    add_scalar = b.op("Add", x, const(b, 1.0))
    add_row = b.op("Add", x, row)
    reshape = b.op("Reshape", x, b.const(np.array([8, 4], np.int64)))
    expand = b.op("Expand", row, b.const(np.array([4, 8], np.int64)))
    reduce = b.op("ReduceSum", x, axes(b, 1))
    matmul = b.op("MatMul", x, const(b, np.ones((8, 2))))
    nodes = {v.v.producer.op + str(i): v.v.producer for i, v in
             enumerate([add_scalar, add_row, reshape, expand, reduce, matmul])}
    assert node_pattern(nodes["Add0"]) == Pattern.ELEMWISE          # a size-1 constant is an immediate
    assert node_pattern(nodes["Add1"]) == Pattern.BROADCAST
    assert node_pattern(nodes["Reshape2"]) == Pattern.RESHAPE
    assert node_pattern(nodes["Expand3"]) == Pattern.BROADCAST
    assert node_pattern(nodes["ReduceSum4"]) == Pattern.REDUCE
    assert node_pattern(nodes["MatMul5"]) == Pattern.OPAQUE
    assert edge_relation(nodes["Add1"], x.v) == Relation.INJECTIVE
    assert edge_relation(nodes["Add1"], row.v) == Relation.BROADCAST
    assert edge_relation(nodes["ReduceSum4"], x.v) == Relation.INJECTIVE


def test_reach_table_sees_paths_through_opaque_nodes():
    g, b, (x,) = new_graph(("x", (4, 8)))
    a = b.op("Exp", x, name="a")
    mm = b.op("MatMul", a, const(b, np.eye(8)), name="mm")
    c = b.op("Add", a, mm, name="c")
    g.outputs = [c.v]
    model = _model(g)
    area_a, area_mm, area_c = model.areas
    assert not area_mm.fusible
    assert model.reach.reachable(area_a, area_c) and not model.reach.reachable(area_c, area_a)
    assert model.reach.has_circle(area_a, area_c)
    assert not model.reach.has_circle(area_a, area_mm)


def _chain_with_side_user():
    g, b, (x,) = new_graph(("x", (4, 8)))
    a = b.op("Neg", x, name="a")
    e = b.op("Exp", a, name="e")
    t = b.op("Tanh", a, name="t")
    g.outputs = [e.v, t.v]
    return g


def test_fwd_depth_needs_a_single_user_width_does_not():
    g = _chain_with_side_user()
    model = _model(g)
    model.run([FuseFwd(FuseType.DEPTH)], 200)
    assert _groups(model) == []
    model.run([FuseFwd(FuseType.WIDTH)], 200)
    assert _groups(model) == [["a", "e", "t"]]


def test_reshape_pattern_picks_the_lowest_neighbour():
    g, b, (x, row) = new_graph(("x", (4, 8)), ("row", (8,)))
    a = b.op("Add", x, row, name="bcast")                 # BROADCAST input
    r = b.op("Reshape", a, b.const(np.array([32], np.int64)), name="reshape")
    e = b.op("Exp", r, name="exp")                         # ELEMWISE user: lower, preferred
    g.outputs = [e.v]
    model = _model(g)
    model.run([FuseReshape()], 200)
    assert _groups(model) == [["exp", "reshape"]]
    assert "reshape: <" in model.log[0] and "Backward" in model.log[0]


def test_epilogue_pulls_the_users_of_the_head():
    g, b, (x,) = new_graph(("x", (4, 8)))
    mm = b.op("MatMul", x, const(b, np.ones((8, 8))), name="mm")
    y = b.op("Add", mm, const(b, np.arange(8)), name="bias")
    r = b.op("Max", y, const(b, 0.0), name="relu")
    s = b.op("Neg", y, name="neg")
    g.outputs = [r.v, s.v]
    model = _model(g)
    model.run([FuseEpilogue()], 200)
    assert _groups(model) == [["bias", "neg", "relu"]]


def test_reduce_fwd_respects_the_size_limit():
    g, b, (x,) = new_graph(("x", (4, 8)))
    a = b.op("Neg", x, name="a")
    a = b.op("Exp", a, name="b")
    s = b.op("ReduceSum", a, axes(b, 1), name="sum")
    g.outputs = [s.v]
    model = _model(g)
    model.run([FuseFwd(FuseType.DEPTH), FuseReduceFwd(FuseType.DEPTH, 1)], 200)
    assert _groups(model) == [["a", "b"]]
    model.run([FuseReduceFwd(FuseType.DEPTH, 2)], 200)
    assert _groups(model) == [["a", "b", "sum"]]


def test_bwd_takes_all_users_or_none():
    g, b, (x, y) = new_graph(("x", (4, 8)), ("y", (4, 8)))
    a = b.op("Neg", x, name="a")
    u1 = b.op("Exp", a, name="u1")
    u2 = b.op("MatMul", a, const(b, np.ones((8, 8))), name="mm")   # opaque user: nothing fuses
    g.outputs = [u1.v, u2.v]
    model = _model(g)
    model.run([FuseBwd(FuseType.WIDTH, 20)], 200)
    assert _groups(model) == []
    del y


def test_bwd_is_blocked_for_graph_outputs_and_broadcast_into_reduce():
    g, b, (x,) = new_graph(("x", (4, 8)))
    m = b.op("ReduceSum", x, axes(b, 1), name="sum")
    scaled = b.op("Mul", m, const(b, 0.125), name="mean")          # [4, 1]
    d = b.op("Sub", x, scaled, name="d")                           # broadcast edge
    s2 = b.op("ReduceSum", d, axes(b, 1), name="sum2")
    g.outputs = [s2.v]
    model = _model(g)
    model.run(cpu_patterns(20), 200)
    assert _groups(model) == [["d", "sum2"]]                         # "mean" stays a basic op


def test_isolate_reshape_joins_a_neighbour():
    g, b, (x,) = new_graph(("x", (4, 8)))
    s = b.op("ReduceSum", x, axes(b, 1), keepdims=0, name="sum")
    r = b.op("Unsqueeze", s, axes(b, 0), name="unsqueeze")
    g.outputs = [r.v]
    model = _model(g)
    model.run([FuseIsolateReshape()], 200)
    assert _groups(model) == [["sum", "unsqueeze"]]


@pytest.mark.parametrize("limit,kept", [(10, [1, 2, 3]), (4, [1, 2]), (2, [1]), (1, [])])
def test_limit_area_size_prefers_small_areas(limit, kept):
    class A:
        def __init__(self, size):
            self.size = size
    dom, areas = A(1), [A(3), A(1), A(2)]
    assert [a.size for a in limit_area_size(dom, areas, limit)] == (kept if limit < 10 else [3, 1, 2])


def test_cpu_pattern_order():
    names = [p.name for p in cpu_patterns(20)]
    assert names == ["reshape", "elemwise_fwd_depth", "elemwise_fwd_width", "epilogue",
                     "elemwise_broadcast_fwd_depth", "elemwise_broadcast_fwd_width", "reduce_fwd_depth",
                     "reduce_fwd_width", "elemwise_broadcast_bwd_depth", "elemwise_broadcast_bwd_width",
                     "isolate_reshape"]
