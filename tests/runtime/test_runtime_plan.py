"""The flat execution plan: lowering, arena, in-place, views, kernel errors (converter_lite/runtime/plan.py)."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from runtime_graphs import chain_graph, f32, fused_graph

from converter_lite.errors import (
    RET_NOT_FIND_OP,
    RET_OP_EXECUTE_FAILURE,
    ConverterError,
)
from converter_lite.ir import DType, Graph, Node, TensorType, Value
from converter_lite.ops.interpret import eval_graph
from converter_lite.runtime.arena import check_plan
from converter_lite.runtime.plan import Plan


def test_matches_interpreter(rng):
    g = fused_graph()
    feeds = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2)]
    for got, want in zip(Plan(g).execute(feeds), eval_graph(g, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_reference_only_plan_matches_too(rng):
    g = chain_graph()
    feeds = [rng.standard_normal((2, 3)).astype(np.float32), np.arange(3)]
    for got, want in zip(Plan(g, fast=False).execute(feeds), eval_graph(g, feeds)):
        np.testing.assert_array_equal(got, want)


def _long_chain(n: int, width: int = 16) -> Graph:
    x = f32("x", width)
    vals, nodes = [x], []
    for i in range(n):
        v = f32(f"v{i}", width)
        op = ("Neg", "Abs", "Tanh")[i % 3]
        nodes.append(Node(op, [vals[-1]], [v], name=f"n{i}"))
        vals.append(v)
    return Graph("chain", [x], [vals[-1]], nodes)


def test_elementwise_chain_runs_in_place():
    plan = Plan(_long_chain(50))
    assert len(plan.memory.inplace) == 50                    # every step writes over its input
    assert plan.arena_bytes <= 128
    x = np.linspace(-2, 2, 16).astype(np.float32)
    want = x
    for i in range(50):
        want = (np.negative, np.abs, np.tanh)[i % 3](want)
    np.testing.assert_array_equal(plan.execute([x])[0], want)


def test_input_still_needed_is_not_overwritten(rng):
    """a = relu(x); b = a + x: Relu may not run in place of x (x is read again by the Add)."""
    x, a, b = f32("x", 8), f32("a", 8), f32("b", 8)
    g = Graph("g", [x], [b], [Node("Relu", [x], [a], name="r"), Node("Add", [a, x], [b], name="add")])
    plan = Plan(g)
    ids = plan.program.steps[0].outputs[0], plan.program.steps[0].inputs[0]
    assert ids[0] not in plan.memory.inplace
    xv = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(plan.execute([xv])[0], np.maximum(xv, 0) + xv)


def test_graph_outputs_are_never_overwritten(rng):
    """mid is a graph output and also feeds an elementwise op: the op may not take mid's buffer."""
    g = chain_graph()
    xv = rng.standard_normal((2, 3)).astype(np.float32)
    out, mid, n1 = Plan(g).execute([xv, np.arange(3)])
    np.testing.assert_array_equal(mid, xv * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(out, np.maximum(mid, 0))
    np.testing.assert_array_equal(n1, np.arange(3) + 1)


def _random_graph(rng, n_nodes: int) -> Graph:
    """A DAG of elementwise/reshape ops over [4, 6] values, each reading 1-2 earlier values."""
    x, y = f32("x", 4, 6), f32("y", 4, 6)
    vals, nodes = [x, y], []
    for i in range(n_nodes):
        kind = rng.integers(0, 4)
        a = vals[rng.integers(0, len(vals))]
        if kind == 0:
            b = vals[rng.integers(0, len(vals))]
            v = f32(f"v{i}", 4, 6)
            nodes.append(Node("Add" if rng.integers(2) else "Mul", [a, b], [v], name=f"n{i}"))
        elif kind == 1:
            v = f32(f"v{i}", 4, 6)
            nodes.append(Node("Tanh", [a], [v], name=f"n{i}"))
        elif kind == 2:
            mid = f32(f"r{i}", 24)
            shape = Value(f"s{i}", const=np.array([24], np.int64))
            back = Value(f"t{i}", const=np.array([4, 6], np.int64))
            v = f32(f"v{i}", 4, 6)
            nodes += [Node("Reshape", [a, shape], [mid], name=f"n{i}a"), Node("Relu", [mid], [f32(f"q{i}", 24)],
                                                                              name=f"n{i}b")]
            nodes.append(Node("Reshape", [nodes[-1].outputs[0], back], [v], name=f"n{i}c"))
        else:
            v = f32(f"v{i}", 4, 6)
            nodes.append(Node("Transpose", [a], [f32(f"p{i}", 6, 4)], {"perm": (1, 0)}, name=f"n{i}a"))
            nodes.append(Node("Transpose", [nodes[-1].outputs[0]], [v], {"perm": (1, 0)}, name=f"n{i}b"))
        vals.append(v)
    outs = [vals[-1], vals[len(vals) // 2]]
    if outs[0] is outs[1]:
        outs = outs[:1]
    return Graph("random", [x, y], outs, nodes)


@pytest.mark.parametrize("seed", range(12))
def test_arena_never_aliases_live_buffers(seed):
    rng = np.random.default_rng(seed)
    g = _random_graph(rng, 30)
    plan = Plan(g)
    check_plan(plan.program, plan.memory)
    feeds = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2)]
    for got, want in zip(plan.execute(feeds), eval_graph(g, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    for got, want in zip(plan.execute(feeds), eval_graph(g, feeds)):          # the same executor again
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_buffers_are_reused_along_a_chain():
    """Non-elementwise steps (Transpose) cannot run in place, but dead buffers are recycled: a chain of 40
    transposes needs two buffers, not 40."""
    x = f32("x", 8, 16)
    vals, nodes = [x], []
    for i in range(40):
        shape = (16, 8) if i % 2 == 0 else (8, 16)
        v = f32(f"v{i}", *shape)
        nodes.append(Node("Transpose", [vals[-1]], [v], {"perm": (1, 0)}, name=f"t{i}"))
        vals.append(v)
    plan = Plan(Graph("t", [x], [vals[-1]], nodes))
    assert plan.arena_bytes <= 3 * 8 * 16 * 4 + 3 * 64
    xv = np.arange(128, dtype=np.float32).reshape(8, 16)
    np.testing.assert_array_equal(plan.execute([xv])[0], xv)


def test_reshapes_are_views_without_steps():
    x, r, s, u, y = f32("x", 2, 3, 4), f32("r", 6, 4), f32("s", 1, 24), f32("u", 1, 1, 24), f32("y", 1, 1, 24)
    shape = Value("shape", const=np.array([6, 4], np.int64))
    axes = Value("axes", const=np.array([0], np.int64))
    g = Graph("g", [x], [y], [Node("Reshape", [x, shape], [r], name="reshape"),
                              Node("Flatten", [r], [s], {"axis": 0}, name="flat"),
                              Node("Unsqueeze", [s, axes], [u], name="unsq"),
                              Node("Relu", [u], [y], name="relu")])
    plan = Plan(g)
    assert [st.node.op for st in plan.steps] == ["Relu"]
    prog = plan.program
    assert prog.root(prog.steps[0].inputs[0]) == prog.inputs[0]     # the Relu reads the input buffer itself
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 12
    np.testing.assert_array_equal(plan.execute([xv])[0], np.maximum(xv, 0).reshape(1, 1, 24))


def test_constant_subgraphs_are_folded_at_load():
    x, t, y = f32("x", 2, 3), f32("t", 2, 3), f32("y", 2, 3)
    w = Value("w", const=np.arange(6, dtype=np.float32).reshape(3, 2))
    g = Graph("g", [x], [y], [Node("Transpose", [w], [t], {"perm": (1, 0)}, name="wt"),
                              Node("Add", [x, t], [y], name="add")])
    plan = Plan(g)
    assert [st.node.name for st in plan.steps] == ["add"]
    np.testing.assert_array_equal(plan.execute([np.ones((2, 3), np.float32)])[0], 1 + w.const.T)


def test_omitted_optional_input_and_multi_output():
    x = f32("x", 6)
    lo = Value("lo", const=np.float32(0.0))
    c, s0, s1 = f32("c", 6), f32("s0", 3), f32("s1", 3)
    g = Graph("g", [x], [s0, s1], [
        Node("Clip", [x, lo, None], [c], name="clip"),
        Node("Split", [c], [s0, s1], {"num_outputs": 2, "axis": 0}, name="split"),
    ])
    plan = Plan(g)
    out = plan.execute([np.array([-1, 2, -3, 4, -5, 6], np.float32)])
    np.testing.assert_array_equal(out[0], [0, 2, 0])
    np.testing.assert_array_equal(out[1], [4, 0, 6])
    assert [st.node.op for st in plan.steps] == ["Clip"]     # leading-axis Split parts are views


def test_outputs_are_fresh_arrays():
    x, y = f32("x", 3), f32("y", 3)
    plan = Plan(Graph("g", [x], [y], [Node("Neg", [x], [y], name="neg")]))
    a = plan.execute([np.ones(3, np.float32)])[0]
    b = plan.execute([np.full(3, 2, np.float32)])[0]
    np.testing.assert_array_equal(a, [-1, -1, -1])
    np.testing.assert_array_equal(b, [-2, -2, -2])
    a[:] = 7
    np.testing.assert_array_equal(plan.execute([np.ones(3, np.float32)])[0], [-1, -1, -1])


def test_unknown_op_is_rejected_at_plan_time():
    x, y = f32("x", 1), f32("y", 1)
    g = Graph("g", [x], [y], [Node("NoSuchOp", [x], [y], name="weird")])
    with pytest.raises(ConverterError) as e:
        Plan(g)
    assert e.value.code == RET_NOT_FIND_OP and "weird" in e.value.message and "NoSuchOp" in e.value.message


def test_kernel_failure_names_the_node():
    x, y = f32("x", 2, 3), Value("y", TensorType(DType.float32, (7,)))    # declared shape is wrong
    g = Graph("g", [x], [y], [Node("Relu", [x], [y], name="bad_relu")])
    with pytest.raises(ConverterError) as e:
        Plan(g).execute([np.ones((2, 3), np.float32)])
    assert e.value.code == RET_OP_EXECUTE_FAILURE
    assert "bad_relu" in e.value.message and "[7]" in e.value.message


def test_kernel_failure_names_the_node_after_good_steps():
    """The short path (static inputs/outputs, merged calls) finds the failing step among several."""
    x, t, u = f32("x", 2, 3), f32("t", 2, 3), f32("u", 2, 3)
    y = Value("y", TensorType(DType.float32, (7,)))
    g = Graph("g", [x], [y], [Node("Neg", [x], [t], name="neg"), Node("Abs", [t], [u], name="abs"),
                              Node("Relu", [u], [y], name="bad_relu")])
    plan = Plan(g)
    for _ in range(2):                       # the first run binds the steps, the second reuses them
        with pytest.raises(ConverterError) as e:
            plan.execute([np.ones((2, 3), np.float32)])
        assert e.value.code == RET_OP_EXECUTE_FAILURE and "bad_relu" in e.value.message


def test_outputs_cast_to_declared_dtype():
    x, y = f32("x", 2), Value("y", TensorType(DType.float64, (2,)))
    g = Graph("g", [x], [y], [Node("Relu", [x], [y], name="r")])
    assert Plan(g).execute([np.ones(2, np.float32)])[0].dtype == np.float64


def test_dynamic_shapes_run_through_cells(rng):
    """NonZero has a data-dependent shape: its output and everything after it live in per-run cells."""
    x = f32("x", 6)
    nz = Value("nz", TensorType(DType.int64, None))
    y = Value("y", TensorType(DType.int64, None))
    one = Value("one", const=np.array(1, np.int64))
    g = Graph("g", [x], [y], [Node("NonZero", [x], [nz], name="nz"), Node("Add", [nz, one], [y], name="add")])
    plan = Plan(g)
    for xv in (np.array([0, 1, 0, 2, 3, 0], np.float32), np.array([1, 0, 0, 0, 0, 0], np.float32)):
        np.testing.assert_array_equal(plan.execute([xv])[0], np.nonzero(xv)[0][None] + 1)


def test_timings_per_kernel(rng):
    g = fused_graph()
    plan = Plan(g)
    timings = [0.0] * len(plan.kernels)
    plan.execute([rng.standard_normal((4, 8)).astype(np.float32)] * 2, timings)
    assert len(timings) == 2 and all(t > 0 for t in timings)
    assert [k.node.name for k in plan.kernels] == ["gk0", "tanh0"]
    assert {plan.kernels[s.kernel].node.name for s in plan.steps} == {"gk0", "tanh0"}


def test_concurrent_runs_use_separate_arenas(rng):
    plan = Plan(_long_chain(30, width=4096))
    xs = [rng.standard_normal(4096).astype(np.float32) for _ in range(4)]
    want = [plan.execute([x])[0] for x in xs]
    errors = []

    def work(k):
        for _ in range(20):
            if not np.array_equal(plan.execute([xs[k]])[0], want[k]):
                errors.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_tiny_plans_run_on_one_thread_without_the_chooser(rng):
    small = Plan(fused_graph(), num_threads=2)
    assert small.chooser is None and small.run_threads == 1
    feeds = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2)]
    small.execute(feeds)
    assert set(small._free[-1].bound) == {1}
    assert Plan(fused_graph(), num_threads=2, adaptive=False).run_threads == 2      # an explicit count is kept
    x = f32("x", 256, 256)
    y, z = f32("y", 256, 256), f32("z", 256, 256)
    big = Graph("big", [x], [z], [Node("Tanh", [x], [y], name="t"), Node("Neg", [y], [z], name="n")])
    assert Plan(big, num_threads=2).chooser is not None


@pytest.mark.parametrize("k, n, tiny", [(16, 8, True), (1024, 64, False)])
def test_plans_with_small_products_only_are_tiny(rng, k, n, tiny):
    """A small plan with a BLAS op still runs on one thread when its products are tiny (legacy_opset9's Gemm);
    not when a product is large (here 4 x 64 x 1024 multiply-adds, buffers of 17 KB)."""
    x, y = f32("x", 4, k), f32("y", 4, n)
    w = Value("w", const=rng.standard_normal((k, n)).astype(np.float32))
    g = Graph("mm", [x], [y], [Node("MatMul", [x, w], [y], name="mm")])
    plan = Plan(g, num_threads=2)
    assert (plan.chooser is None and plan.run_threads == 1) == tiny
    feed = rng.standard_normal((4, k)).astype(np.float32)
    np.testing.assert_allclose(plan.execute([feed])[0], feed @ w.const, rtol=1e-5, atol=1e-4)


def _failing_fused_graph(n_sources: int):
    """GraphKernel 'gk0' whose sub-graph's Relu declares a wrong output shape: it fails at run time."""
    sx, sm = f32("sx", 2, 3), f32("sm", 2, 3)
    sr = Value("sr", TensorType(DType.float32, (7,)))
    sub = Graph("sub", [sx], [sr], [Node("Neg", [sx], [sm], name="neg0"), Node("Relu", [sm], [sr], name="relu0")])
    x, y = f32("x", 2, 3), Value("y", TensorType(DType.float32, (7,)))
    sources = ("neg0", "relu0") + tuple(f"extra{i}" for i in range(n_sources - 2))
    return Graph("g", [x], [y], [Node("GraphKernel", [x], [y], {"graph": sub, "kernel_name": "Fused_Neg_Relu_0",
                                                                   "source_nodes": sources}, name="gk0")])


def test_inlined_fused_kernel_failure_names_its_onnx_nodes():
    with pytest.raises(ConverterError) as e:
        Plan(_failing_fused_graph(2)).execute([np.ones((2, 3), np.float32)])
    assert e.value.code == RET_OP_EXECUTE_FAILURE
    assert e.value.message.startswith("node 'relu0' (Relu) in fused kernel 'gk0' (from ONNX nodes 'neg0', "
                                      "'relu0') failed: "), e.value.message


def test_native_fused_kernel_failure_names_up_to_four_onnx_nodes():
    def resolve(node):
        def run(ins):
            raise RuntimeError("native kernel fault")
        return run
    with pytest.raises(ConverterError) as e:
        Plan(_failing_fused_graph(7), resolve=resolve).execute([np.ones((2, 3), np.float32)])
    assert e.value.code == RET_OP_EXECUTE_FAILURE
    assert e.value.message == ("node 'gk0' (GraphKernel) (from ONNX nodes 'neg0', 'relu0', 'extra0', 'extra1' and "
                               "3 more) failed: RuntimeError: native kernel fault")


def test_quiet_plans_and_warnings(resolver, rng):
    """A plan is ``quiet`` (Model.run skips np.errstate) when no step can raise a floating-point warning: steps
    bound to native code only (a Conv on the direct driver, not on numpy), or moving/picking values (Gather,
    ArgMax); a numpy Div is not, and Model.run still silences it (x / 0 gives inf and no RuntimeWarning)."""
    import warnings

    from helpers import record_drivers

    from converter_lite.model.format import LoadedModel
    from converter_lite.runtime.model import Model
    from tests.runtime.test_fast_conv_native import _graph

    table = Value("t", const=rng.standard_normal((5, 8)).astype(np.float32))
    i, e, a = Value("i", TensorType(DType.int64, (1,))), f32("e", 1, 8), Value("a", TensorType(DType.int64, (1,)))
    pick = Graph("pick", [i], [a], [Node("Gather", [table, i], [e], name="g"),
                                    Node("ArgMax", [e], [a], {"axis": 1, "keepdims": 0}, name="am")])
    assert Plan(pick).quiet(1)
    x, w = rng.standard_normal((1, 4, 8, 8)).astype(np.float32), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    assert Plan(record_drivers(_graph(x, w, None, {"pads": (1, 1, 1, 1)})), resolver).quiet(1)
    assert not Plan(_graph(x, w, None, {"pads": (1, 1, 1, 1)})).quiet(1)
    x, z, q = f32("x", 4), f32("z", 4), f32("q", 4)
    div = Graph("div", [x, z], [q], [Node("Div", [x, z], [q], name="d")])
    model = Model(LoadedModel(div, {}, path="div.ms"))
    assert not model.plan.quiet(model.plan.run_threads)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = model.run({"x": np.ones(4, np.float32), "z": np.zeros(4, np.float32)})["q"]
    assert np.isinf(got).all()


def test_a_dropped_steps_output_keeps_the_plan_static(rng):
    """A step whose output nobody reads is dropped, and its value gets no buffer; that alone does not put the
    plan on the generic path (runtime/plan.py ``has_dynamic``: only values a step or the graph touches count)."""
    x, t, u, y = f32("x", 4, 8), f32("t", 8, 4), f32("u", 8, 4), f32("y", 4, 8)
    g = Graph("dropped", [x], [y], [Node("Transpose", [x], [t], {"perm": (1, 0)}, name="unused"),
                                    Node("Tanh", [t], [u], name="unused_too"),
                                    Node("Relu", [x], [y], name="relu")])
    plan = Plan(g)
    assert [s.node.op for s in plan.program.steps] == ["Relu"]
    ex = plan.acquire()
    try:
        assert not ex.has_dynamic and ex.fixed_buffers() is not None
    finally:
        plan.release(ex)
    a = rng.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(plan.execute([a])[0], np.maximum(a, 0))
