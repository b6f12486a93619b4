"""Transposes read in place (runtime/transpose_views.py): a Transpose whose every reader is a batched MatMul
becomes a strided view of its input (the head split of attention, K transposed for Q @ K^T); a Transpose read
by anything else (a 2-D-weight MatMul, an elementwise op, a Reshape), one that is a graph output or whose input
is a graph input keeps its copy.  Results match onnxruntime, planned from the imported graph (numpy fast
kernels and the GEMM driver's absence) and converted with dynamic dims (a plan per input shape, native GEMMs),
on one and two threads, including reruns over an arena first filled with NaNs."""
import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.frontend import import_model
from converter_lite.runtime.arena import check_plan
from converter_lite.runtime.plan import Plan

F = np.float32
H, D = 2, 4


def _attention(variant: str, dims=("b", "s", 8)):
    """x[b, s, 8] -> q, k, v (MatMul by [8, 8]) -> heads [b, 2, s, 4] -> softmax(q k^T) v -> merge -> y."""
    rng = np.random.default_rng(1)
    inits = {f"w{n}": (rng.standard_normal((8, 8)) * 0.4).astype(F) for n in "qkv"}
    inits["split"] = np.array([0, 0, H, D], np.int64)
    inits["merge"] = np.array([0, 0, H * D], np.int64)
    nodes, outs = [], ["y"]
    for n in "qkv":
        nodes += [oh.make_node("MatMul", ["x", f"w{n}"], [f"{n}0"]),
                  oh.make_node("Reshape", [f"{n}0", "split"], [f"{n}1"]),
                  oh.make_node("Transpose", [f"{n}1"], [f"{n}h"], perm=[0, 2, 1, 3])]
    nodes += [oh.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
              oh.make_node("MatMul", ["qh", "kt"], ["s"]), oh.make_node("Softmax", ["s"], ["p"], axis=-1),
              oh.make_node("MatMul", ["p", "vh"], ["o"]),
              oh.make_node("Transpose", ["o"], ["om"], perm=[0, 2, 1, 3]),
              oh.make_node("Reshape", ["om", "merge"], ["y"])]
    if variant == "also_elementwise":              # qh read by a Sigmoid too: its copy stays
        nodes.append(oh.make_node("Sigmoid", ["qh"], ["qs"]))
        outs.append("qs")
    elif variant == "output":                      # kt a graph output too: its copy stays
        outs.append("kt")
    out_info = [tensor_info(o, F, None) for o in outs]
    return make_model(nodes, [tensor_info("x", F, list(dims))], out_info, inits)


# (variant, Transpose steps left: the merge one always, which a Reshape reads; K's two compose into one view)
CASES = [("plain", 1), ("also_elementwise", 2), ("output", 3)]


@pytest.mark.parametrize("variant,left", CASES)
@pytest.mark.parametrize("nt", [1, 2])
def test_planned_from_the_imported_graph(variant, left, nt):
    proto = _attention(variant, (2, 5, 8))
    graph = import_model(proto)
    plan = Plan(graph, num_threads=nt, adaptive=False)
    assert [s.node.op for s in plan.steps].count("Transpose") == left
    check_plan(plan.program, plan.memory)
    x = np.random.default_rng(2).standard_normal((2, 5, 8)).astype(F)
    want = run_ort(proto, {"x": x})
    for rerun in range(2):
        if rerun:
            for ex in plan._free:
                ex.arena[...] = np.frombuffer(np.full(ex.arena.size // 4, np.nan, F).tobytes(), np.uint8)
        for got, w in zip(plan.execute([x]), want):
            assert_close(got, w, rtol=1e-5, atol=1e-6)


def test_dynamic_dims_read_the_heads_in_place(tmp_path):
    proto = _attention("plain")
    path = converter_lite.convert(proto, str(tmp_path / "att"), graph_kernel_flags="--opt_level=2")
    model = converter_lite.load(path, num_threads=2)
    rng = np.random.default_rng(3)
    for shape in ((1, 1, 8), (2, 7, 8), (1, 130, 8), (3, 33, 8)):
        x = rng.standard_normal(shape).astype(F)
        for _ in range(2):                                 # the generic run, then the shape's plan
            assert_close(model.run({"x": x})["y"], run_ort(proto, {"x": x})[0], rtol=1e-4, atol=1e-5)
        plan = model._shape_plans.plan_for((shape,))
        assert [s.node.op for s in plan.steps].count("Transpose") <= 1
