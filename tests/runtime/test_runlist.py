"""kernels/runlist/ (bind.py + emit.py): runs of native steps executed as one foreign call."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import converter_lite
from converter_lite.kernels.runlist import bind as runlist
from converter_lite.runtime.plan import Executor


def test_batch_merges_only_runs_of_native_steps():
    log = []

    def py(name):
        return lambda: log.append(name)

    def nat(name):
        return runlist.tag(py(name), 1, 2, 0, 1)
    calls = [py("a"), nat("b"), nat("c"), nat("d"), py("e"), nat("f"), py("g"), nat("h"), nat("i")]
    assert runlist.batch(calls, None) == (calls, list(range(9)))          # no runner: unchanged
    merged, first = runlist.batch(calls, 12345)
    assert first == [0, 1, 4, 5, 6, 7]
    assert [len(getattr(m, "steps", [m])) for m in merged] == [1, 3, 1, 1, 1, 2]
    assert merged[5].table.shape == (2, runlist.RUN_FIELDS) and tuple(merged[5].table[0]) == (1, 2, 0, 1, 0)
    assert merged[3] is calls[5]                                         # a lone native step stays as it is


def _mixed_model(path):
    """MatMul -> Add+Tanh (fused) -> MatMul -> Relu+Mul (fused) -> TopK (numpy) -> Sigmoid (fused)."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((48, 64)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((64, 40)).astype(np.float32), "w2")
    b1 = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b1")
    k = numpy_helper.from_array(np.array([8], np.int64), "k")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Tanh", ["a1"], ["t1"]), helper.make_node("MatMul", ["t1", "w2"], ["m2"]),
             helper.make_node("Relu", ["m2"], ["r2"]), helper.make_node("Mul", ["r2", "r2"], ["s2"]),
             helper.make_node("TopK", ["s2", "k"], ["v", "i"]), helper.make_node("Sigmoid", ["v"], ["y"])]
    g = helper.make_graph(nodes, "mixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [33, 48])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [33, 8])], [w1, w2, b1, k])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


@pytest.mark.parametrize("nt", [1, 2])
def test_merged_runs_match_per_step_runs_and_onnxruntime(tmp_path, rng, nt):
    src = str(tmp_path / "mixed.onnx")
    _mixed_model(src)
    model = converter_lite.load(converter_lite.convert(src, str(tmp_path / "mixed"),
                                                       graph_kernel_flags="--opt_level=2"), num_threads=nt)
    plan = model.plan
    assert plan.runner
    ex = Executor(plan)
    merged, _ = ex.merged_calls(nt)
    assert len(merged) < len(ex.calls(nt))                               # some steps ran merged
    assert any(hasattr(m, "table") for m in merged)
    x = rng.standard_normal((33, 48)).astype(np.float32)
    got = model.run({"x": x})["y"]
    timings = [0.0] * len(plan.kernels)
    profiled = plan.execute([x], timings)[0]                            # per-step path
    np.testing.assert_array_equal(got, profiled)
    assert all(t > 0 for t in timings)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_failing_step_after_a_merged_run_is_named(tmp_path, rng):
    src = str(tmp_path / "mixed.onnx")
    _mixed_model(src)
    model = converter_lite.load(converter_lite.convert(src, str(tmp_path / "mixed"),
                                                       graph_kernel_flags="--opt_level=2"), num_threads=1)
    ex = Executor(model.plan)
    merged, first = ex.merged_calls(1)
    k = next(i for i, m in enumerate(merged) if not hasattr(m, "table") and getattr(m, "native", None) is None)

    def boom():
        raise ValueError("boom")
    merged[k] = boom
    model.plan._free[:] = [ex]
    with pytest.raises(converter_lite.ConverterError, match=repr(ex.nodes[first[k]].name)):
        model.plan.execute([rng.standard_normal((33, 48)).astype(np.float32)], num_threads=1)
