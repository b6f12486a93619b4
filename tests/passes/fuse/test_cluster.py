"""graph_kernel_cluster on small graphs: exact clusters, numerics before/after, cluster lists, records."""
import numpy as np
import pytest

from converter_lite.config import parse_flags
from converter_lite.ops.interpret import eval_graph
from converter_lite.passes.base import PassContext
from converter_lite.passes.fuse import GraphKernelClusterPass
from converter_lite.passes.fuse.cluster import CLUSTER_FILE, SPLIT_MODE_FILE

from .fuse_testing import (
    axes,
    basic_ops,
    check_same_results,
    cluster,
    const,
    context,
    kernel_nodes,
    kernels,
    new_graph,
    random_feeds,
)


def _clustered(graph, **flags):
    """Clusters ``graph`` and checks eval_graph gives the same outputs as before; returns the context."""
    feeds = random_feeds(graph)
    before = eval_graph(graph, feeds)
    ctx = cluster(graph, **flags)
    check_same_results(before, graph, feeds)
    return ctx


def chain(shape=(4, 8)):
    g, b, (x,) = new_graph(("x", shape))
    m = b.op("Mul", x, const(b, 2.0), name="mul")
    a = b.op("Add", m, const(b, 1.0), name="add")
    e = b.op("Exp", a, name="exp")
    n = b.op("Neg", e, name="neg")
    g.outputs = [n.v]
    return g


def test_chain_is_one_kernel():
    g = chain()
    _clustered(g)
    assert kernels(g) == [("mul", "add", "exp", "neg")]
    (k,) = kernel_nodes(g)
    assert k.attrs["kernel_name"] == "Fused_Mul_Add_Exp_Neg_0" == k.name
    assert [v.name for v in k.inputs] == ["x"]
    assert g.outputs[0] is k.outputs[0]                       # the graph output keeps its Value (and name)
    sub = k.attrs["graph"]
    assert [n.op for n in sub.nodes] == ["Mul", "Add", "Exp", "Neg"]
    assert all(v.const is not None for n in sub.nodes for v in n.inputs[1:])   # scalars captured


def test_diamond_is_one_kernel():
    g, b, (x,) = new_graph(("x", (3, 5)))
    a = b.op("Mul", x, const(b, 2.0), name="a")
    e = b.op("Exp", a, name="exp")
    n = b.op("Neg", a, name="neg")
    d = b.op("Add", e, n, name="add")
    g.outputs = [d.v]
    _clustered(g)
    assert kernels(g) == [("a", "exp", "neg", "add")]


def test_reduce_takes_its_elementwise_producers():
    g, b, (x, y) = new_graph(("x", (4, 8)), ("y", (4, 8)))
    m = b.op("Mul", x, y, name="mul")
    s = b.op("ReduceSum", m, axes(b, 1), keepdims=0, name="sum")
    g.outputs = [s.v]
    _clustered(g)
    assert kernels(g) == [("mul", "sum")]
    assert kernel_nodes(g)[0].attrs["pattern"] == "reduce"
    assert kernel_nodes(g)[0].attrs["dominant"] == "sum"


def test_elementwise_consumer_of_reduce_is_not_fused():
    """reduce -> elementwise is stitch fusion (opt_level 3), not basic clustering."""
    g, b, (x,) = new_graph(("x", (4, 8)))
    e = b.op("Exp", x, name="exp")
    s = b.op("ReduceSum", e, axes(b, 1), name="sum")
    t = b.op("Mul", s, const(b, 0.5), name="half")
    d = b.op("Div", e, t, name="div")
    g.outputs = [d.v]
    _clustered(g)
    # "half" reads the reduction: it is pushed into its own consumer, never into the reduce kernel
    assert kernels(g) == [("exp", "sum"), ("half", "div")]
    assert basic_ops(g) == []


def test_softmax_max_and_sub_stay_apart():
    g, b, (x,) = new_graph(("x", (4, 8)))
    m = b.op("ReduceMax", x, axes(b, 1), name="max")
    d = b.op("Sub", x, m, name="sub")
    e = b.op("Exp", d, name="exp")
    g.outputs = [e.v]
    _clustered(g)
    # separate kernels: the max is a single-op kernel (split from its fusible user, as on MindSpore's CPU)
    assert kernels(g) == [("max",), ("sub", "exp")]


def test_cycle_through_an_opaque_op_is_rejected():
    g, b, (x,) = new_graph(("x", (4, 8)))
    a = b.op("Mul", x, const(b, 2.0), name="a")
    e = b.op("Exp", a, name="e")
    mm = b.op("MatMul", e, const(b, np.eye(8)), name="mm")
    c = b.op("Add", e, mm, name="c")
    d = b.op("Neg", c, name="d")
    g.outputs = [d.v]
    _clustered(g)
    # {a, e, c, d} would make e -> mm -> c a path leaving and re-entering the kernel
    assert kernels(g) == [("a", "e"), ("c", "d")]
    assert basic_ops(g) == ["mm"]


def test_composite_op_limit_size():
    g, b, (x,) = new_graph(("x", (4, 8)))
    v = x
    for i in range(6):
        v = b.op("Exp" if i % 2 else "Neg", v, name=f"n{i}")
    g.outputs = [v.v]
    ctx = _clustered(g, composite_op_limit_size=3, dump_as_text=True)
    assert kernels(g) == [("n0", "n1", "n2"), ("n3", "n4", "n5")]
    assert "composite_op_limit_size=3" in "\n".join(ctx.records[SPLIT_MODE_FILE])


def test_default_limit_fuses_all():
    g = chain()
    _clustered(g, composite_op_limit_size=200)
    assert len(kernels(g)[0]) == 4


def _reduce_after_chain():
    g, b, (x,) = new_graph(("x", (4, 8)))
    c = b.op("Add", x, const(b, 1.0), name="add")
    c = b.op("Mul", c, const(b, 2.0), name="mul")
    c = b.op("Exp", c, name="exp")
    s = b.op("ReduceSum", c, axes(b, 1), name="sum")
    g.outputs = [s.v, c.v]        # the chain is also a graph output: no backward push into the reduce
    return g


def test_reduce_fuse_depth():
    g = _reduce_after_chain()
    _clustered(g)
    assert kernels(g) == [("add", "mul", "exp", "sum")]
    assert len(kernel_nodes(g)[0].outputs) == 2
    g = _reduce_after_chain()
    _clustered(g, reduce_fuse_depth=2)
    assert kernels(g) == [("add", "mul", "exp"), ("sum",)]


def test_lone_op_and_index_map_groups_are_not_wrapped():
    g, b, (x,) = new_graph(("x", (4, 8)))
    e = b.op("Exp", x, name="exp")
    m = b.op("MatMul", e, const(b, np.ones((8, 4))), name="mm")
    r = b.op("Reshape", m, b.const(np.array([16], np.int64)), name="reshape")
    t = b.op("Reshape", r, b.const(np.array([2, 8], np.int64)), name="reshape2")
    g.outputs = [t.v]
    assert not cluster(g).stats
    assert kernels(g) == []


def test_single_op_split_from_fusible_neighbours_is_a_kernel():
    g, b, (x,) = new_graph(("x", (4, 8)))
    s = b.op("ReduceSum", x, axes(b, 1), name="sum")
    m = b.op("Mul", s, const(b, 0.125), name="mean")
    d = b.op("Sub", x, m, name="d")
    s2 = b.op("ReduceSum", d, axes(b, 1), name="sum2")
    g.outputs = [s2.v]
    _clustered(g)
    assert kernels(g) == [("sum",), ("mean",), ("d", "sum2")]


def test_single_epilogue_op_is_a_kernel():
    g, b, (x,) = new_graph(("x", (4, 8)))
    mm = b.op("MatMul", x, const(b, np.ones((8, 8))), name="mm")
    a = b.op("Add", mm, const(b, np.arange(8)), name="bias")
    mm2 = b.op("MatMul", a, const(b, np.ones((8, 2))), name="mm2")
    g.outputs = [mm2.v]
    _clustered(g)
    assert kernels(g) == [("bias",)]
    assert kernel_nodes(g)[0].attrs["epilogue_of"] == "mm"


def test_reshape_joins_its_elementwise_neighbour():
    g, b, (x,) = new_graph(("x", (4, 8)))
    a = b.op("Add", x, const(b, 1.0), name="add")
    r = b.op("Reshape", a, b.const(np.array([2, 16], np.int64)), name="reshape")
    e = b.op("Exp", r, name="exp")
    g.outputs = [e.v]
    _clustered(g)
    assert kernels(g) == [("add", "reshape", "exp")]
    sub = kernel_nodes(g)[0].attrs["graph"]
    assert sub.nodes[1].inputs[1].const is not None          # the shape stays a constant inside


def test_large_constants_become_kernel_inputs():
    g, b, (x,) = new_graph(("x", (4, 100)))
    a = b.op("Add", x, const(b, np.arange(100)), name="add")
    e = b.op("Exp", a, name="exp")
    g.outputs = [e.v]
    _clustered(g)
    (k,) = kernel_nodes(g)
    assert len(k.inputs) == 2 and k.inputs[1].const is not None and k.inputs[1].const.size == 100


def test_intermediate_graph_output_becomes_kernel_output():
    g = chain()
    add = next(n for n in g.nodes if n.name == "add")
    g.outputs.append(add.outputs[0])
    _clustered(g)
    (k,) = kernel_nodes(g)
    assert [o.name for o in k.outputs] == [add.outputs[0].name, g.outputs[0].name]


def _mul_exp_add():
    g, b, (x,) = new_graph(("x", (4, 8)))
    m = b.op("Mul", x, const(b, 2.0), name="mul")
    e = b.op("Exp", m, name="exp")
    a = b.op("Add", e, const(b, 1.0), name="add")
    g.outputs = [a.v]
    return g


@pytest.mark.parametrize("flags", ["--disable_cluster_ops=Exp", "--enable_cluster_ops_only=Mul,Add"])
def test_cluster_lists_remove_ops(flags):
    g = _mul_exp_add()
    ctx = PassContext(parse_flags("--opt_level=1 " + flags))
    cluster(g, ctx)
    assert kernels(g) == []                 # Exp excluded: Mul and Add are no longer adjacent


def test_enable_cluster_ops_adds_an_op():
    g, b, (x,) = new_graph(("x", (4, 8)))
    m = b.op("Mul", x, const(b, 2.0), name="mul")
    s = b.op("Sigmoid", m, name="sigmoid")
    a = b.op("Add", s, const(b, 1.0), name="add")
    g.outputs = [a.v]
    cluster(g)
    assert kernels(g) == []
    cluster(g, PassContext(parse_flags("--opt_level=1 --enable_cluster_ops=Sigmoid")))
    assert kernels(g) == [("mul", "sigmoid", "add")]


def test_mindspore_spelling_in_cluster_lists():
    g, b, (x,) = new_graph(("x", (4, 8)))
    m = b.op("Max", x, const(b, 0.0), name="relu")
    a = b.op("Add", m, const(b, 1.0), name="add")
    g.outputs = [a.v]
    cluster(g, PassContext(parse_flags("--opt_level=1 --disable_cluster_ops=Maximum")))
    assert kernels(g) == []


def test_opaque_op_in_enable_list_still_stays_out():
    g, b, (x,) = new_graph(("x", (4, 8)))
    m = b.op("MatMul", x, const(b, np.ones((8, 8))), name="mm")
    a = b.op("Add", m, const(b, 1.0), name="add")
    e = b.op("Exp", a, name="exp")
    g.outputs = [e.v]
    cluster(g, PassContext(parse_flags("--opt_level=1 --enable_cluster_ops=MatMul")))
    assert kernels(g) == [("add", "exp")]


def test_matmul_epilogue():
    g, b, (x, r) = new_graph(("x", (4, 8)), ("r", (4, 16)))
    rng = np.random.default_rng(1)
    mm = b.op("MatMul", x, const(b, rng.standard_normal((8, 16))), name="mm")
    y = b.op("Add", mm, const(b, rng.standard_normal(16)), name="bias_add")
    z = b.op("Max", y, const(b, 0.0), name="relu")
    o = b.op("Add", z, r, name="residual")
    g.outputs = [o.v]
    _clustered(g)
    assert kernels(g) == [("bias_add", "relu", "residual")]
    assert basic_ops(g) == ["mm"]
    (k,) = kernel_nodes(g)
    assert k.attrs["epilogue_of"] == "mm"
    assert k.inputs[0].producer.name == "mm"


def test_epilogue_with_a_shared_bias_add_output():
    """The bias add feeds both the activation and a graph output: the epilogue still forms one kernel."""
    g, b, (x,) = new_graph(("x", (4, 8)))
    mm = b.op("MatMul", x, const(b, np.ones((8, 8))), name="mm")
    y = b.op("Add", mm, const(b, np.arange(8)), name="bias_add")
    t = b.op("Tanh", y, name="tanh")
    g.outputs = [y.v, t.v]
    _clustered(g)
    assert kernels(g) == [("bias_add", "tanh")]


def test_records(tmp_path):
    g = chain()
    ctx = _clustered(g, dump_as_text=True)
    text = "\n".join(ctx.records[CLUSTER_FILE])
    assert text.startswith("Source nodes of Fused_Mul_Add_Exp_Neg_0 = GraphKernel(x) -> (")
    for name in ("mul", "add", "exp", "neg"):
        assert f"    {name}: " in text
    assert text.rstrip().endswith("=======================")
    split = "\n".join(ctx.records[SPLIT_MODE_FILE])
    assert split.startswith("********** main graph: g **********")
    assert "elemwise_fwd_depth: <" in split
    assert "-------- subgraph 0, mode: composite --------" in split


def test_no_records_without_dump_as_text():
    g = chain()
    assert _clustered(g).records == {}


def test_deterministic_names():
    names = []
    for _ in range(2):
        g = _reduce_after_chain()
        cluster(g)
        names.append([n.attrs["kernel_name"] for n in kernel_nodes(g)])
    assert names[0] == names[1] == ["Fused_Add_Mul_Exp_ReduceSum_0"]


def test_second_run_keeps_names_unique():
    g = chain()
    cluster(g)
    b_nodes = [n for n in g.nodes]
    assert len(b_nodes) == 1
    cluster(g)                               # nothing left to fuse: GraphKernel is not clusterable
    assert [n.name for n in g.nodes] == ["Fused_Mul_Add_Exp_Neg_0"]


def test_dynamic_shape_values_are_never_fused():
    from converter_lite.ir.core import Node, TensorType, Value
    from converter_lite.ir.dtype import DType
    g, b, (x,) = new_graph(("x", (4, 8)))
    dyn = Value("dyn", TensorType(DType.float32, None))         # shape known only at run time
    g.nodes.append(Node("Reshape", [x.v, b.const(np.array([-1], np.int64))], [dyn], name="reshape"))
    e = Value("e", TensorType(DType.float32, None))
    g.nodes.append(Node("Exp", [dyn], [e], name="exp"))
    n = Value("n", TensorType(DType.float32, None))
    g.nodes.append(Node("Neg", [e], [n], name="neg"))
    g.outputs = [n]
    GraphKernelClusterPass().run(g, context())
    assert kernels(g) == []
