"""The flat execution plan: slots, liveness, kernel errors (converter_lite/runtime/plan.py)."""
from __future__ import annotations

import weakref

import numpy as np
import pytest
from runtime_graphs import chain_graph, f32, fused_graph

from converter_lite.errors import RET_NOT_FIND_OP, RET_OP_EXECUTE_FAILURE, ConverterError
from converter_lite.ir import DType, Graph, Node, TensorType, Value
from converter_lite.ir.interpret import eval_graph
from converter_lite.runtime.plan import NULL_SLOT, Plan


def test_matches_interpreter(rng):
    g = fused_graph()
    feeds = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(2)]
    for got, want in zip(Plan(g).execute(feeds), eval_graph(g, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_liveness_releases_every_intermediate_once():
    g = chain_graph()
    plan = Plan(g)
    released = [s for step in plan.steps for s in step.release]
    assert len(released) == len(set(released))
    keep = set(plan.output_slots) | {NULL_SLOT} | {i for i, c in enumerate(plan.template) if c is not None}
    produced = {s for step in plan.steps for s in step.outputs} | set(plan.input_slots)
    assert set(released) == produced - keep
    # each released slot is not read by any later step
    for k, step in enumerate(plan.steps):
        for s in step.release:
            assert all(s not in later.inputs for later in plan.steps[k + 1:])


def test_intermediates_are_freed_during_the_run():
    """When n2 runs, n0's output (last read by n1) is no longer referenced by the run."""
    x = f32("x", 3)
    a, b, c = f32("a", 3), f32("b", 3), f32("c", 3)
    g = Graph("g", [x], [c], [Node("Relu", [x], [a], name="n0"), Node("Neg", [a], [b], name="n1"),
                              Node("Abs", [b], [c], name="n2")])
    refs, alive_at_n2 = [], []

    def resolve(node):
        if node.name == "n0":
            def n0(ins):
                out = np.maximum(ins[0], 0)
                refs.append(weakref.ref(out))
                return [out]
            return n0
        if node.name == "n2":
            def n2(ins):
                alive_at_n2.append(refs[0]() is not None)
                return [np.abs(ins[0])]
            return n2
        return None
    Plan(g, resolve).execute([np.ones(3, np.float32)])
    assert alive_at_n2 == [False]


def test_omitted_optional_input_and_multi_output():
    x = f32("x", 6)
    lo = Value("lo", const=np.float32(0.0))
    c, s0, s1 = f32("c", 6), f32("s0", 3), f32("s1", 3)
    g = Graph("g", [x], [s0, s1], [
        Node("Clip", [x, lo, None], [c], name="clip"),
        Node("Split", [c], [s0, s1], {"num_outputs": 2, "axis": 0}, name="split"),
    ])
    out = Plan(g).execute([np.array([-1, 2, -3, 4, -5, 6], np.float32)])
    np.testing.assert_array_equal(out[0], [0, 2, 0])
    np.testing.assert_array_equal(out[1], [4, 0, 6])


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


def test_outputs_cast_to_declared_dtype():
    x, y = f32("x", 2), Value("y", TensorType(DType.float64, (2,)))
    g = Graph("g", [x], [y], [Node("Relu", [x], [y], name="r")])
    assert Plan(g).execute([np.ones(2, np.float32)])[0].dtype == np.float64


def test_timings_per_step(rng):
    g = fused_graph()
    plan = Plan(g)
    timings = [0.0] * len(plan.steps)
    plan.execute([rng.standard_normal((4, 8)).astype(np.float32)] * 2, timings)
    assert len(timings) == 2 and all(t > 0 for t in timings)
