"""runtime/fast/linalg.py on the native GEMM tile driver: MatMul/Gemm steps bound to one driver call, checked
against the reference kernels and onnxruntime, on 1 and 2 threads; the numpy path without native code."""
from __future__ import annotations

import numpy as np
from helpers import record_drivers
import onnx.helper as oh
import pytest
from runtime_graphs import single_node_graph

from converter_lite.ops.interpret import eval_graph
from converter_lite.kernels.gemm import bind as gemm_tiles
from converter_lite.kernels.blas import gemm_entry
from converter_lite.runtime.plan import Plan
from tests.helpers import make_model, run_ort, tensor_info

pytestmark = pytest.mark.skipif(gemm_entry(np.float32) is None, reason="numpy's BLAS exposes no CBLAS gemm")


def _graph(op, inputs, attrs, consts):
    return single_node_graph(op, inputs, attrs, consts)


def _run(resolver, op, inputs, attrs=None, consts=(), threads=(1, 2), driver=True):
    g, feeds = _graph(op, inputs, attrs, consts)
    want = eval_graph(g, feeds)[0]
    plan = Plan(record_drivers(g), resolver, num_threads=max(threads), adaptive=False)
    tol = 2e-5 if want.dtype == np.float32 else 1e-12
    for nt in threads:
        for _ in range(2):                                      # a second run reuses the bound steps
            got = plan.execute(feeds, num_threads=nt)[0]
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1, inputs[0].shape[-1]))
        ex = plan._free[-1]
        used = [getattr(c, "tiles", None) is not None for c in ex.calls(nt)]
        assert used == [driver] * len(used), f"driver used: {used}, expected {driver}"
    return plan


def _arr(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(autouse=True)
def _split_small(monkeypatch):
    monkeypatch.setattr(gemm_tiles, "MIN_WORK", 0)               # exercise the multi-tile path on small sizes


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (3, 17, 130), (130, 3, 17), (17, 130, 130), (130, 130, 3)])
def test_matmul_weights(resolver, dtype, mnk):
    m, n, k = mnk
    rng = np.random.default_rng(m + n + k)
    _run(resolver, "MatMul", [_arr(rng, m, k, dtype=dtype), _arr(rng, k, n, dtype=dtype)], consts=(1,))
    _run(resolver, "MatMul", [_arr(rng, 2, m, k, dtype=dtype), _arr(rng, k, n, dtype=dtype)], consts=(1,))


@pytest.mark.parametrize("shapes", [((2, 2, 64, 64), (2, 2, 64, 64)), ((3, 1, 4, 5), (2, 5, 6)),
                                    ((5, 7), (4, 7, 9)), ((8,), (8, 3)), ((4, 8), (8,)), ((2, 3, 8), (8,)),
                                    ((8,), (2, 8, 3)), ((8,), (8,))])
def test_batched_and_vector_matmul(resolver, shapes):
    rng = np.random.default_rng(len(shapes[0]) * 10 + len(shapes[1]))
    _run(resolver, "MatMul", [_arr(rng, *shapes[0]), _arr(rng, *shapes[1])])


def test_empty_product_falls_back(resolver):
    rng = np.random.default_rng(0)
    _run(resolver, "MatMul", [_arr(rng, 0, 5), _arr(rng, 5, 4)], consts=(1,), driver=False)
    _run(resolver, "MatMul", [_arr(rng, 3, 0), _arr(rng, 0, 4)], consts=(1,), driver=False)


def test_no_native_library_keeps_numpy():
    rng = np.random.default_rng(0)
    _run(None, "MatMul", [_arr(rng, 40, 30), _arr(rng, 30, 20)], consts=(1,), driver=False)
    _run(None, "Gemm", [_arr(rng, 40, 30), _arr(rng, 30, 20), _arr(rng, 20)], consts=(1, 2), driver=False)


def test_integer_matmul_keeps_the_reference(resolver):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    g, feeds = _graph("MatMul", [a, a.T.copy()], None, ())
    plan = Plan(record_drivers(g), resolver, num_threads=2, adaptive=False)
    np.testing.assert_array_equal(plan.execute(feeds)[0], a @ a.T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("alpha_beta", [(1.0, 1.0), (0.5, 2.0), (1.0, 0.0)])
def test_gemm(resolver, dtype, ta, tb, alpha_beta):
    rng = np.random.default_rng(ta * 2 + tb)
    m, k, n = 33, 17, 70
    a = _arr(rng, *((k, m) if ta else (m, k)), dtype=dtype)
    b = _arr(rng, *((n, k) if tb else (k, n)), dtype=dtype)
    attrs = {"transA": ta, "transB": tb, "alpha": alpha_beta[0], "beta": alpha_beta[1]}
    for c in (_arr(rng, n, dtype=dtype), _arr(rng, m, 1, dtype=dtype), _arr(rng, m, n, dtype=dtype)):
        _run(resolver, "Gemm", [a, b, c], attrs, consts=(1, 2))
        _run(resolver, "Gemm", [a, b, c], attrs)                   # C computed at run time
    _run(resolver, "Gemm", [a, b], attrs, consts=(1,))


def test_against_onnxruntime(tmp_path, monkeypatch):
    """Converted models (the driver comes with the model's native code) against onnxruntime."""
    import onnx

    from converter_lite.api import convert, load
    rng = np.random.default_rng(5)
    w1, w2, bias = _arr(rng, 128, 512), _arr(rng, 96, 512), _arr(rng, 96)
    nodes = [oh.make_node("MatMul", ["x", "w1"], ["h"]),                     # [2, 65, 128] @ [128, 512]
             oh.make_node("Gemm", ["h2", "w2", "bias"], ["g"], transB=1, alpha=0.5),
             oh.make_node("Reshape", ["h", "shape"], ["h2"]),
             oh.make_node("MatMul", ["q", "k"], ["att"])]                   # batched [2, 2, 64, 16] @ [.., 16, 64]
    nodes = [nodes[0], nodes[2], nodes[1], nodes[3]]
    model = make_model(nodes, [tensor_info("x", np.float32, [2, 65, 128]), tensor_info("q", np.float32, [2, 2, 64, 16]),
                               tensor_info("k", np.float32, [2, 2, 16, 64])],
                       [tensor_info("g", np.float32, [130, 96]), tensor_info("att", np.float32, [2, 2, 64, 64])],
                       initializers={"w1": w1, "w2": w2, "bias": bias, "shape": np.array([130, 512], np.int64)})
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    out = convert(str(src), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    feeds = {"x": _arr(rng, 2, 65, 128), "q": _arr(rng, 2, 2, 64, 16), "k": _arr(rng, 2, 2, 16, 64)}
    want = run_ort(model, feeds)
    for nt in (1, 2):
        m = load(out, num_threads=nt)
        got = m.run(feeds)
        for name, w in zip(("g", "att"), want):
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4)


def test_concurrent_runs_share_the_pool(resolver):
    """Two Python threads running one plan: each run has its own executor (its own tile records); a caller
    that finds the pool busy runs its tiles itself."""
    import threading
    rng = np.random.default_rng(9)
    a, w = _arr(rng, 2, 64, 96), _arr(rng, 96, 80)
    g, feeds = _graph("MatMul", [a, w], None, (1,))
    plan = Plan(record_drivers(g), resolver, num_threads=2, adaptive=False)
    want = eval_graph(g, feeds)[0]
    errors = []

    def work():
        try:
            for _ in range(30):
                np.testing.assert_allclose(plan.execute(feeds)[0], want, rtol=2e-5, atol=2e-4)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize("act", [("", "none"), ("Relu", "none"), ("Gelu", "none"), ("Gelu", "tanh")])
@pytest.mark.parametrize("case", [((2, 33, 40), (40, 50), (50,)), ((2, 33, 40), (40, 50), (33, 1)),
                                  ((2, 2, 16, 8), (2, 2, 8, 16), (2, 1, 1, 16)), ((5, 7), (7, 3), None)])
def test_fused_matmul(resolver, act, case):
    rng = np.random.default_rng(len(case[0]))
    a, b, bias = _arr(rng, *case[0]), _arr(rng, *case[1]), None if case[2] is None else _arr(rng, *case[2])
    attrs = {"activation": act[0], "approximate": act[1], "has_bias": int(bias is not None)}
    inputs = [a, b] if bias is None else [a, b, bias]
    _run(resolver, "FusedMatMul", inputs, attrs, consts=(1, 2))


def test_fused_matmul_without_native_code_keeps_the_reference():
    rng = np.random.default_rng(0)
    g, feeds = _graph("FusedMatMul", [_arr(rng, 4, 5), _arr(rng, 5, 3), _arr(rng, 3)], {"activation": "Relu",
                                                                                      "has_bias": 1}, (1, 2))
    plan = Plan(g, None, num_threads=1)
    assert plan.program.steps[0].impl.bind is None                   # the reference kernel
    np.testing.assert_allclose(plan.execute(feeds)[0], eval_graph(g, feeds)[0])
