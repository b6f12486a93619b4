"""Models with dynamic input dims convert once, without --inputShape, and run at any admitted shape with no
compiler in the run process (runtime/shape_plans.py, runtime/concretize.py): results match onnxruntime at
several shapes, a new shape builds a plan once, bad shapes give -600 naming the input and dim, --inputShape
ranges bound dims, and a fresh process with an empty HOME runs the .ms without importing llvmlite."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.frontend import import_model

F = np.float32
I64 = np.int64
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))




def mlp_model():
    """x[batch, seq, 16] -> MatMul + bias -> x*sigmoid(x) -> LayerNorm-ish -> Shape/Gather/Concat/Reshape to
    [batch*seq, 32] -> ReduceSum: an exporter's shape arithmetic over both dynamic dims."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((16, 32)).astype(F), rng.standard_normal(32).astype(F)
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["h"]), oh.make_node("Add", ["h", "b"], ["hb"]),
        oh.make_node("Sigmoid", ["hb"], ["s"]), oh.make_node("Mul", ["hb", "s"], ["a"]),
        oh.make_node("ReduceMean", ["a", "ax"], ["mu"]), oh.make_node("Sub", ["a", "mu"], ["c"]),
        oh.make_node("Mul", ["c", "c"], ["c2"]), oh.make_node("ReduceMean", ["c2", "ax"], ["var"]),
        oh.make_node("Add", ["var", "eps"], ["ve"]), oh.make_node("Sqrt", ["ve"], ["sd"]),
        oh.make_node("Div", ["c", "sd"], ["n"]),
        oh.make_node("Shape", ["x"], ["shp"]),
        oh.make_node("Gather", ["shp", "i0"], ["d0"], axis=0), oh.make_node("Gather", ["shp", "i1"], ["d1"], axis=0),
        oh.make_node("Mul", ["d0", "d1"], ["rows"]), oh.make_node("Unsqueeze", ["rows", "ax0"], ["rows1"]),
        oh.make_node("Concat", ["rows1", "c32"], ["newshape"], axis=0),
        oh.make_node("Reshape", ["n", "newshape"], ["flat"]),
        oh.make_node("ReduceSum", ["flat", "ax"], ["y"], keepdims=0),
    ]
    inits = {"w": w, "b": b, "ax": np.array([-1], I64), "eps": np.array(1e-5, F), "i0": np.array(0, I64),
             "i1": np.array(1, I64), "ax0": np.array([0], I64), "c32": np.array([32], I64)}
    return make_model(nodes, [tensor_info("x", F, ["batch", "seq", 16])], [tensor_info("y", F, [None])], inits)


def conv_model():
    """x[N, 3, H, W] -> Conv 3x3 pad 1 -> Relu -> Conv 3x3 stride 2 -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(1)
    w1, b1 = rng.standard_normal((8, 3, 3, 3)).astype(F) * 0.3, rng.standard_normal(8).astype(F)
    w2 = rng.standard_normal((16, 8, 3, 3)).astype(F) * 0.2
    g, gb = rng.standard_normal((5, 16)).astype(F), rng.standard_normal(5).astype(F)
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), oh.make_node("Relu", ["c1"], ["r1"]),
        oh.make_node("Conv", ["r1", "w2"], ["c2"], strides=[2, 2]), oh.make_node("Sigmoid", ["c2"], ["s2"]),
        oh.make_node("Mul", ["c2", "s2"], ["a2"]),
        oh.make_node("GlobalAveragePool", ["a2"], ["p"]), oh.make_node("Flatten", ["p"], ["f"]),
        oh.make_node("Gemm", ["f", "g", "gb"], ["y"], transB=1),
    ]
    inits = {"w1": w1, "b1": b1, "w2": w2, "g": g, "gb": gb}
    return make_model(nodes, [tensor_info("x", F, ["N", 3, "H", -1])], [tensor_info("y", F, ["N", 5])], inits)


def attention_model():
    """x[1, seq, 8] -> q, k, v -> softmax(q k^T / sqrt(8)) v: the attention scores are [seq, seq]."""
    rng = np.random.default_rng(2)
    ws = [rng.standard_normal((8, 8)).astype(F) * 0.5 for _ in range(3)]
    nodes = [oh.make_node("MatMul", ["x", f"w{i}"], [n]) for i, n in enumerate("qkv")] + [
        oh.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), oh.make_node("MatMul", ["q", "kt"], ["s"]),
        oh.make_node("Mul", ["s", "scale"], ["ss"]), oh.make_node("Softmax", ["ss"], ["p"], axis=-1),
        oh.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    inits = {**{f"w{i}": w for i, w in enumerate(ws)}, "scale": np.array(8 ** -0.5, F)}
    return make_model(nodes, [tensor_info("x", F, [1, "?", 8])], [tensor_info("y", F, [1, None, 8])], inits)


CASES = {
    "mlp": (mlp_model, [(1, 1, 16), (2, 7, 16), (3, 64, 16), (1, 130, 16), (0, 5, 16)]),
    "conv": (conv_model, [(1, 3, 16, 16), (2, 3, 9, 23), (1, 3, 31, 8), (3, 3, 5, 5)]),
    "attention": (attention_model, [(1, 1, 8), (1, 5, 8), (1, 77, 8), (1, 200, 8)]),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("dynamic")
    out = {}
    for name, (build, _) in CASES.items():
        m = build()
        out[name] = (m, converter_lite.convert(m, str(d / name), enable_graph_kernel=True))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_runs_at_every_shape_like_onnxruntime(converted, name):
    proto, path = converted[name]
    model = converter_lite.load(path)
    rng = np.random.default_rng(3)
    shapes = CASES[name][1]
    generic = name != "conv"                # its generic plan would run the convolutions on numpy
    assert model._generic_first == generic
    from converter_lite.runtime.shape_plans import GENERIC_MAX_ELEMENTS
    # first sight: the generic plan when it is cheap (and the input small), else the shape's own plan
    planned_at_once = [not generic or int(np.prod(s)) > GENERIC_MAX_ELEMENTS for s in shapes]
    for k, shape in enumerate(shapes + shapes + shapes[:1]):
        x = rng.standard_normal(shape).astype(F)
        got = model.run({"x": x})
        want = run_ort(proto, {"x": x})
        for g, w in zip(got.values(), want):
            assert g.shape == w.shape, (shape, g.shape, w.shape)
            assert_close(g, w, rtol=1e-4, atol=1e-4, what=f"{name} at {shape}")
        if k < len(shapes):
            assert model._shape_plans.built == sum(planned_at_once[:k + 1])
    assert model._shape_plans.built == len(shapes)        # built at the second sight; the third reused it


def test_input_shapes_report_the_symbols(converted):
    assert converter_lite.load(converted["conv"][1]).input_shapes == {"x": ["N", 3, "H", "x_d3"]}
    assert converter_lite.load(converted["mlp"][1]).input_shapes == {"x": ["batch", "seq", 16]}
    g = import_model(conv_model())
    assert g.inputs[0].type.shape is None
    assert json.loads(g.metadata["input_dims"])["x"][1] == 3


@pytest.mark.parametrize("shape,words", [
    ((1, 3, 8), ["rank 4", "'x'"]),
    ((1, 4, 8, 8), ["dim 1 is fixed to 3", "'x'"]),
    ((1, 3, 8, 8, 1), ["rank 4"]),
])
def test_bad_shapes_are_600_and_the_model_stays_usable(converted, shape, words):
    model = converter_lite.load(converted["conv"][1])
    with pytest.raises(ConverterError) as e:
        model.run({"x": np.zeros(shape, F)})
    assert e.value.code == -600
    for w in words:
        assert w in e.value.message, e.value.message
    x = np.ones((1, 3, 6, 6), F)
    assert_close(model.run({"x": x})["y"], run_ort(converted["conv"][0], {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_input_shape_ranges_bound_dims(tmp_path):
    path = converter_lite.convert(attention_model(), str(tmp_path / "att"), input_shape="x:1,1-64,8")
    model = converter_lite.load(path)
    assert model.input_shapes == {"x": [1, "x_d1", 8]}
    model.run({"x": np.ones((1, 64, 8), F)})
    with pytest.raises(ConverterError) as e:
        model.run({"x": np.ones((1, 65, 8), F)})
    assert e.value.code == -600 and "dim 1" in e.value.message and "[1, 64]" in e.value.message
    with pytest.raises(ConverterError) as e:
        converter_lite.convert(attention_model(), str(tmp_path / "bad"), input_shape="x:1,9-2,8")
    assert e.value.code == -600 and "range" in e.value.message
    assert not os.path.exists(tmp_path / "bad.ms")


def test_resize_builds_the_plan_ahead(converted):
    model = converter_lite.load(converted["conv"][1])
    model.resize({"x": (2, 3, 12, 12)})
    assert model._shape_plans.built == 1
    model.resize(["x"], [(1, 3, 7, 9)])
    model.run({"x": np.ones((2, 3, 12, 12), F)})
    model.run({"x": np.ones((1, 3, 7, 9), F)})
    assert model._shape_plans.built == 2
    with pytest.raises(ConverterError) as e:
        model.resize({"x": (1, 2, 7, 9)})
    assert e.value.code == -600 and "dim 1" in e.value.message


def test_outputs_binding_at_a_dynamic_shape(converted):
    model = converter_lite.load(converted["conv"][1])
    x = np.ones((3, 3, 10, 10), F)
    out = np.empty((3, 5), F)
    got = model.run({"x": x}, outputs={"y": out})
    assert got["y"] is out
    assert_close(out, run_ort(converted["conv"][0], {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_fresh_process_runs_without_llvmlite(converted, tmp_path):
    """The deployment case: an empty HOME (no kernel cache), shapes never seen, and no compiler: llvmlite is
    never imported, and no ``cc`` can be found (PATH names an empty directory)."""
    _, path = converted["conv"]
    script = (
        "import sys, numpy as np, converter_lite\n"
        f"m = converter_lite.load({path!r})\n"
        "for s in [(1, 3, 11, 13), (2, 3, 40, 24), (1, 3, 5, 64), (4, 3, 8, 8)]:\n"
        "    y = m.run({'x': np.ones(s, np.float32)})['y']\n"
        "    assert y.shape == (s[0], 5), y.shape\n"
        "plan = m._shape_plans.plan_for(((1, 3, 9, 9),))\n"
        "assert all(n.attrs.get('native_drivers') for n in plan.graph.nodes if n.op == 'Conv')\n"
        "print('llvmlite' in sys.modules)\n")
    home, nobin = tmp_path / "home", tmp_path / "nobin"
    home.mkdir()
    nobin.mkdir()
    env = dict(os.environ, HOME=str(home), PYTHONPATH=ROOT, PATH=str(nobin))
    env.pop("CONVERTER_LITE_CACHE_DIR", None)
    env.pop("CC", None)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    assert not os.listdir(home)                 # nothing cached, nothing written


def test_benchmark_runs_at_given_shapes(converted, tmp_path):
    from click.testing import CliRunner

    from converter_lite.cli.benchmark import main
    _, path = converted["mlp"]
    r = CliRunner().invoke(main, [f"--modelFile={path}", "--inputShapes=2,9,16", "--loopCount=3"])
    assert r.exit_code == 0, r.output
    assert "AvgRunTime" in r.output
    r = CliRunner().invoke(main, [f"--modelFile={path}", "--loopCount=3"])   # dynamic dims at their lower bound
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, [f"--modelFile={path}", "--inputShapes=3,50,16", "--loopCount=2",
                                  "--timeProfiling=true"])                  # the kernels of that shape's plan
    assert r.exit_code == 0 and "DynFused" in r.output, r.output
    r = CliRunner().invoke(main, [f"--modelFile={path}", "--inputShapes=2,9,15", "--loopCount=3"])
    assert r.exit_code != 0 and "dim 2 is fixed to 16" in r.output


def test_plan_cache_is_bounded_by_count_and_memory(converted, monkeypatch):
    from converter_lite.runtime import shape_plans
    model = converter_lite.load(converted["conv"][1])
    model._shape_plans.max_plans = 2
    for s in (8, 9, 10):
        model.run({"x": np.ones((1, 3, s, s), F)})
    assert [k[0][2] for k in model._shape_plans.cached()] == [9, 10]
    model._shape_plans.max_bytes = 1                      # every plan is over it: only the latest stays
    model.run({"x": np.ones((1, 3, 11, 11), F)})
    assert [k[0][2] for k in model._shape_plans.cached()] == [11]
    assert shape_plans.MAX_BYTES >= 1 << 28


def test_repeated_shapes_take_the_last_plan_and_new_ones_are_still_checked(converted):
    model = converter_lite.load(converted["conv"][1])
    x = np.ones((1, 3, 9, 9), F)
    model.run({"x": x})
    assert model._same_shapes({"x": x})[1] is not None          # the fast path: same shapes as the last run
    assert model._same_shapes({"x": np.ones((1, 3, 9, 10), F)}) == (None, None)
    assert model._same_shapes({"x": x.astype(np.float64)}) == (None, None)
    with pytest.raises(ConverterError) as e:                     # a bad shape after good ones: still -600
        model.run({"x": np.ones((1, 2, 9, 9), F)})
    assert e.value.code == -600
    assert model.run({"x": x})["y"].shape == (1, 5)


def test_plans_share_one_grow_only_block(converted):
    """The plans of every shape carve their arena and scratch out of one block (runtime/shared_arena.py): a
    smaller shape after a larger one needs no new memory, and results stay right as shapes alternate."""
    proto, path = converted["conv"]
    model = converter_lite.load(path, num_threads=2)
    shapes = [(2, 3, 24, 24), (1, 3, 8, 8), (1, 3, 16, 20), (2, 3, 24, 24), (1, 3, 8, 8)]
    for s in shapes:
        x = np.random.default_rng(sum(s)).standard_normal(s).astype(F)
        assert_close(model.run({"x": x})["y"], run_ort(proto, {"x": x})[0], rtol=1e-4, atol=1e-4)
    arena = model._shape_plans.arena
    assert arena.grown == 1
    plans = [model._shape_plans.plan_for((s,)) for s in shapes[:3]]
    assert arena.nbytes >= max(p.arena_bytes + p.workspace for p in plans)
    blocks = {ex.arena.__array_interface__["data"][0] for p in plans for ex in p._free}
    assert len(blocks) == 1                                  # every plan's arena starts at the block


def test_a_replaced_block_rebinds_and_concurrent_runs_get_their_own(converted, monkeypatch):
    """Without the address-space reservation the block is replaced when a larger shape comes: executors bound
    to the old one are rebuilt on the new one when next used.  Runs from several threads at once are right:
    the one that finds the block in use runs on memory of its own."""
    import threading

    from converter_lite.runtime import shared_arena
    monkeypatch.setattr(shared_arena, "RESERVE", 0)
    proto, path = converted["conv"]
    model = converter_lite.load(path, num_threads=1)
    small, large = np.ones((1, 3, 8, 8), F), np.ones((2, 3, 30, 30), F)
    want_small, want_large = run_ort(proto, {"x": small})[0], run_ort(proto, {"x": large})[0]
    model.run({"x": small})
    gen = model._shape_plans.arena.generation
    model.run({"x": large})
    assert model._shape_plans.arena.generation == gen + 1       # grown: a new block
    assert_close(model.run({"x": small})["y"], want_small, rtol=1e-4, atol=1e-4)
    plan = model._shape_plans.plan_for((small.shape,))
    assert all(not model._shape_plans.arena.stale(ex.generation) for ex in plan._free if ex.lock is not None)
    errors, results = [], []

    def worker(k):
        try:
            for i in range(30):
                x = large if (i + k) % 2 else small
                results.append((x is large, model.run({"x": x})["y"]))
        except Exception as e:                                   # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for is_large, y in results:
        assert_close(y, want_large if is_large else want_small, rtol=1e-4, atol=1e-4)


def test_a_shape_seen_once_runs_on_the_generic_plan(converted):
    """A model whose generic plan is cheap (its fused kernels native at any shape, no convolution) runs a new
    shape on it, and builds the shape's plan when the shape comes again (runtime/shape_plans.py); results are
    the same either way.  ``outputs=`` and ``resize`` build the plan at once."""
    proto, path = converted["attention"]
    model = converter_lite.load(path, num_threads=2)
    assert model._generic_first and any(k.native for k in model.kernels)   # row/column kernels run native
    x = np.random.default_rng(5).standard_normal((1, 33, 8)).astype(F)
    want = run_ort(proto, {"x": x})[0]
    first = model.run({"x": x})["y"]
    assert model._shape_plans.built == 0
    second = model.run({"x": x})["y"]
    assert model._shape_plans.built == 1
    assert_close(first, want, rtol=1e-4, atol=1e-4)
    assert_close(second, want, rtol=1e-4, atol=1e-4)
    out = np.empty((1, 34, 8), F)
    x2 = np.random.default_rng(6).standard_normal((1, 34, 8)).astype(F)
    model.run({"x": x2}, outputs={"y": out})
    assert model._shape_plans.built == 2
    assert_close(out, run_ort(proto, {"x": x2})[0], rtol=1e-4, atol=1e-4)
    model.resize({"x": (1, 35, 8)})
    assert model._shape_plans.built == 3


def test_a_conv_model_warms_up_at_load(converted, monkeypatch):
    """The converter records small shapes the model admits (passes/fuse/dynamic.py ``warm_shapes``); a model whose
    first runs are planned (convolutions) builds and runs a plan at them when it loads, so its weights are packed
    before the first run (shape_plans.ShapePlans.warm_up); the warm-up plan is not kept."""
    from converter_lite.model.format import load_model
    from converter_lite.runtime.shape_plans import ShapePlans
    proto, path = converted["conv"]
    warm = json.loads(load_model(path).graph.metadata["warm_shapes"])
    assert warm["x"][1] == 3 and all(d <= 32 for d in warm["x"])
    calls = []
    real = ShapePlans.warm_up
    monkeypatch.setattr(ShapePlans, "warm_up", lambda self, *a: calls.append(a[0]) or real(self, *a))
    model = converter_lite.load(path)
    assert calls == [(tuple(warm["x"]),)] and model._shape_plans.built == 0 and not model._shape_plans.cached()
    x = np.random.default_rng(9).standard_normal((2, 3, 12, 17)).astype(F)
    assert_close(model.run({"x": x})["y"], run_ort(proto, {"x": x})[0], rtol=1e-4, atol=1e-4)
    calls.clear()
    converter_lite.load(converted["attention"][1])      # a generic first run needs no warm-up
    assert calls == []


def test_a_plan_goes_to_the_oldest_gc_generation(converted):
    """The objects a new plan keeps are moved to the oldest generation when it is built (shape_plans.py
    ``_collector_paused``: freeze + unfreeze), so the young collections after it do not walk them; the
    collector stays on, and objects the process froze itself stay frozen (the move is skipped then)."""
    import gc
    _, path = converted["conv"]
    model = converter_lite.load(path)
    assert gc.isenabled()
    model.run({"x": np.zeros((1, 3, 21, 10), F)})
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 700            # ~5,000 objects were made: none left in the young generation
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        model.run({"x": np.zeros((1, 3, 22, 10), F)})
        assert gc.get_freeze_count() > frozen // 2 and gc.isenabled()     # (unfreeze would make it 0)
    finally:
        gc.unfreeze()


def test_shape_arithmetic_folds_but_generators_wait_for_their_size(tmp_path):
    """Shape arithmetic on small constants folds before type inference (runtime/concretize.py
    ``_fold_early``), but a ConstantOfShape whose small shape input asks for more than FOLD_ELEMENTS elements
    stays a node, and the results match onnxruntime either way."""
    from converter_lite.runtime.concretize import FOLD_ELEMENTS, concretize
    nodes = [oh.make_node("Shape", ["x"], ["s"]), oh.make_node("Mul", ["s", "k"], ["s2"]),
             oh.make_node("ConstantOfShape", ["s2"], ["z"], value=oh.make_tensor("v", 1, [1], [0.5])),
             oh.make_node("ReduceSum", ["z"], ["y"], keepdims=0)]
    proto = make_model(nodes, [tensor_info("x", F, ["a", "b"])], [tensor_info("y", F, [])],
                       {"k": np.array([3, 3], I64)})
    graph = import_model(proto)
    small = concretize(graph, {"x": (2, 3)})
    assert small.nodes == [] and small.outputs[0].const == 27       # all of it folded
    big = concretize(graph, {"x": (100, 100)})                     # 300 x 300 > FOLD_ELEMENTS
    assert 300 * 300 > FOLD_ELEMENTS and [n.op for n in big.nodes] == ["ConstantOfShape", "ReduceSum"]
    model = converter_lite.load(converter_lite.convert(proto, str(tmp_path / "gen")))
    for shape in [(2, 3), (100, 100)]:
        x = np.zeros(shape, F)
        assert_close(model.run({"x": x})["y"], run_ort(proto, {"x": x})[0], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_kept_node_facts_change_no_plan(converted, name):
    """ShapePlans keeps what concretize finds of each node whatever the shapes (concretize._node_facts: static
    outputs, fold candidates, the drivers to ask): a graph concretized with the facts of earlier shapes equals
    one concretized from scratch, node by node, type by type, and drivers re-selected exactly as
    kernels.registry.select does."""
    from converter_lite.kernels.registry import DRIVERS_ATTR, select
    from converter_lite.model.format import load_model
    from converter_lite.runtime.concretize import concretize
    graph = load_model(converted[name][1]).graph
    dynamic = next(v.name for v in graph.inputs if not v.type.is_static)
    facts: dict = {}

    def summary(g):
        return [(n.op, n.name, [None if o.type is None else (o.type.dtype, o.type.shape) for o in n.outputs],
                 n.attrs.get(DRIVERS_ATTR)) for n in g.nodes]
    for shape in CASES[name][1]:
        kept = concretize(graph, {dynamic: shape}, facts=facts)
        assert summary(kept) == summary(concretize(graph, {dynamic: shape}))
        originals = {n.name: n for n in graph.nodes}
        for n in kept.nodes:
            among = originals[n.name].attrs.get(DRIVERS_ATTR)
            if among and all(o.type.is_static for o in n.outputs):
                assert n.attrs[DRIVERS_ATTR] == list(select(n, among))
    assert len(facts) == len(graph.nodes)
