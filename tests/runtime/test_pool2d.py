"""MaxPool, AveragePool and the global pools through the native pooling driver (kernels/pool2d/,
runtime/fast/pooling.py): the pools of models with dynamic input dims, which run node by node.  Window geometry
(kernels, strides, pads and auto_pad, dilations, ceil_mode, 1-D windows), AveragePool's divisors with and
without count_include_pad, global pools of every plane size, against onnxruntime and bit for bit against the
reference kernels (NaN first taps kept and later NaNs skipped, the sign of zero maxima and sums) on 1 and 2
threads; the declined cases and the numpy fallback; and a small network with a dynamic image size run at
several sizes."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.frontend.onnx_import import import_model
from converter_lite.kernels.pool2d import abi as pool2d
from converter_lite.ops.interpret import eval_graph

FLAGS = "--opt_level=2"
DESC_LENGTHS = {len(pool2d.POOL_FIELDS) + pool2d.EXTRA, len(pool2d.GLOBAL_FIELDS) + pool2d.EXTRA}


def _model(op, c, attrs, rank=4, dtype=np.float32, n_outputs=1, dynamic=True):
    """One pooling node over an input ``["N", c, "H", "W"]`` (rank 3: ``["N", c, "W"]``; static: ``c`` is the
    whole shape)."""
    dims = (["N", c, "H", "W"] if rank == 4 else ["N", c, "W"] if rank == 3 else ["N", c, "D", "H", "W"]) \
        if dynamic else list(c)
    outs = ["y", "idx"][:n_outputs]
    node = oh.make_node(op, ["x"], outs, **attrs)
    out_info = [tensor_info("y", dtype, None)] + ([tensor_info("idx", np.int64, None)] if n_outputs > 1 else [])
    return make_model([node], [tensor_info("x", dtype, dims)], out_info)


def _converted(tmp_path, model, nt, native=True):
    path = tmp_path / "pool.onnx"
    path.write_bytes(model.SerializeToString())
    out = converter_lite.convert(str(path), str(tmp_path / "pool"), graph_kernel_flags=FLAGS)
    return converter_lite.load(out, num_threads=nt, adaptive_threads=False, native=native)


def _on_driver(m, nt, feeds=None) -> bool:
    plan = m.plan if feeds is None else m._plan_for(m.check_feeds(feeds))
    descs = [getattr(c, "conv_desc", None) for c in plan.acquire().calls(nt)]
    return any(d is not None and len(d) in DESC_LENGTHS for d in descs)


def _reference(model, x):
    with np.errstate(all="ignore"):
        return eval_graph(import_model(model), {"x": x})[0]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


MAX_CASES = [
    dict(shape=(1, 16, 80, 80), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),    # ResNet's stem
    dict(shape=(2, 8, 20, 20), kernel_shape=[5, 5], pads=[2, 2, 2, 2]),                     # SPPF
    dict(shape=(1, 4, 45, 70), kernel_shape=[5, 5], pads=[2, 2, 2, 2]),                     # whole chunks
    dict(shape=(1, 3, 8, 10), kernel_shape=[2, 2], strides=[2, 2]),
    dict(shape=(1, 3, 17, 41), kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 1, 2, 1]),
    dict(shape=(1, 3, 17, 40), kernel_shape=[3, 2], strides=[2, 2], dilations=[1, 3]),
    dict(shape=(1, 3, 9, 11), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(shape=(1, 3, 10, 37), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    dict(shape=(1, 3, 10, 11), kernel_shape=[3, 3], pads=[0, 2, 1, 0]),                     # asymmetric
    dict(shape=(1, 3, 1, 1), kernel_shape=[3, 3], pads=[1, 1, 1, 1]),                       # 1x1 input
    dict(shape=(1, 3, 1, 1), kernel_shape=[1, 1]),
    dict(shape=(3, 5, 13, 7), kernel_shape=[3, 3], strides=[1, 2]),                         # odd sizes
    dict(shape=(1, 3, 19, 50), kernel_shape=[4, 4], strides=[3, 3], pads=[1, 2, 2, 1]),     # stride 3
    dict(shape=(1, 3, 11, 35), kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(shape=(1, 3, 11, 35), kernel_shape=[2, 4], strides=[2, 3], auto_pad="SAME_LOWER"),
    dict(shape=(2, 3, 41), kernel_shape=[3], strides=[2], pads=[1, 1]),                     # 1-D
]


@pytest.mark.parametrize("case", MAX_CASES, ids=lambda c: "-".join(str(v) for v in c.values()).replace(" ", ""))
@pytest.mark.parametrize("nt", [1, 2])
def test_maxpool_matches_onnxruntime_and_the_reference(tmp_path, rng, case, nt):
    case = dict(case)
    shape = case.pop("shape")
    model = _model("MaxPool", shape[1], case, rank=len(shape))
    m = _converted(tmp_path, model, nt)
    x = rng.standard_normal(shape).astype(np.float32)
    assert _on_driver(m, nt, {"x": x})
    got = m.run({"x": x})["y"]
    np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])
    np.testing.assert_array_equal(_bits(got), _bits(_reference(model, x)))


AVG_CASES = [
    dict(shape=(1, 16, 40, 40), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(shape=(2, 8, 20, 33), kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
    dict(shape=(1, 3, 8, 10), kernel_shape=[2, 2], strides=[2, 2]),
    dict(shape=(1, 3, 9, 11), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(shape=(1, 3, 10, 37), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    dict(shape=(1, 3, 12, 37), kernel_shape=[4, 3], strides=[3, 3], pads=[1, 0, 0, 1], ceil_mode=1),
    dict(shape=(1, 3, 10, 11), kernel_shape=[3, 3], pads=[0, 2, 1, 0]),
    dict(shape=(1, 3, 1, 1), kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    dict(shape=(1, 3, 19, 50), kernel_shape=[4, 4], strides=[3, 3], pads=[1, 2, 2, 1]),
    dict(shape=(1, 3, 11, 35), kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(shape=(2, 3, 41), kernel_shape=[3], strides=[2], pads=[1, 1]),
]


@pytest.mark.parametrize("case", AVG_CASES, ids=lambda c: "-".join(str(v) for v in c.values()).replace(" ", ""))
@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("nt", [1, 2])
def test_averagepool_matches_onnxruntime_and_the_reference(tmp_path, rng, case, include, nt):
    case = dict(case)
    shape = case.pop("shape")
    model = _model("AveragePool", shape[1], dict(case, count_include_pad=include), rank=len(shape))
    m = _converted(tmp_path, model, nt)
    x = rng.standard_normal(shape).astype(np.float32)
    assert _on_driver(m, nt, {"x": x})
    got = m.run({"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(_bits(got), _bits(_reference(model, x)))


GLOBAL_SHAPES = [(1, 16, 20, 20), (2, 1024, 3, 5), (1, 8, 1, 1), (3, 5, 7, 1), (1, 4, 100, 90), (2, 6, 1, 9),
                 (1, 3, 129, 1), (2, 3, 17)]


@pytest.mark.parametrize("shape", GLOBAL_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("nt", [1, 2])
def test_global_pools_match_onnxruntime_and_the_reference(tmp_path, rng, shape, op, nt):
    model = _model(op, shape[1], {}, rank=len(shape))
    m = _converted(tmp_path, model, nt)
    x = (rng.standard_normal(shape) * 10 + 3).astype(np.float32)
    assert _on_driver(m, nt, {"x": x})
    got = m.run({"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, _reference(model, x))        # numpy's pairwise mean, bit for bit


def test_global_average_pool_sums_every_plane_size_as_numpy(tmp_path, rng):
    """Every plane size up to past two of numpy's pairwise blocks (n < 8: plain sum; <= 128: eight
    accumulators and the rest; above: halves split at a multiple of 8), large values that round."""
    model = _model("GlobalAveragePool", 3, {}, rank=3)
    m = _converted(tmp_path, model, 2)
    for n in list(range(1, 300)) + [1000, 4099]:
        x = (rng.standard_normal((1, 3, n)) * 10.0 ** rng.uniform(-3, 3, (1, 3, n))).astype(np.float32)
        np.testing.assert_array_equal(_bits(m.run({"x": x})["y"]), _bits(_reference(model, x)), err_msg=str(n))


SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2])),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[3, 3], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[2, 2])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1)),
    ("GlobalMaxPool", {}), ("GlobalAveragePool", {}),
])
@pytest.mark.parametrize("nt", [1, 2])
def test_nan_inf_and_signed_zeros_as_the_reference(tmp_path, rng, op, attrs, nt):
    """Inputs full of NaN, infinities and zeros of both signs: MaxPool and AveragePool match the reference bit
    for bit (a NaN first tap kept, later NaNs skipped, the first of equal zeros, +0.0 sums where padding
    was added); the global pools match its values (NaN where the plane holds one)."""
    model = _model(op, 4, attrs)
    m = _converted(tmp_path, model, nt)
    for shape, p in (((1, 4, 23, 37), 0.3), ((2, 4, 9, 18), 0.05), ((1, 4, 6, 7), 0.9)):
        x = rng.standard_normal(shape).astype(np.float32)
        pick = rng.random(shape) < p
        x[pick] = rng.choice(SPECIAL, int(pick.sum()))
        x[0, 1] = -0.0                                      # a plane of negative zeros
        x[0, 2, ::2] = np.nan                               # NaN rows
        feeds = {"x": x}
        assert _on_driver(m, nt, feeds)
        got, want = m.run(feeds)["y"], _reference(model, x)
        if op.startswith("Global"):
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_array_equal(_bits(got), _bits(want))
        if op == "MaxPool":                                 # onnxruntime's NaN rule differs: without NaNs
            feeds = {"x": np.where(np.isnan(x), np.float32(1.5), x)}
            np.testing.assert_array_equal(m.run(feeds)["y"], run_ort(model, feeds)[0])


def test_declined_cases_and_the_numpy_fallback(tmp_path, rng):
    """MaxPool with its Indices output, float64 and 3-D windows stay off the driver; a model whose native code
    is not used (native=False) runs the numpy paths with the same results."""
    x = rng.standard_normal((1, 3, 9, 10)).astype(np.float32)
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    model = _model("MaxPool", 3, attrs, n_outputs=2)
    m = _converted(tmp_path, model, 2)
    assert not _on_driver(m, 2, {"x": x})
    for got, want in zip(m.run({"x": x}).values(), run_ort(model, {"x": x})):
        np.testing.assert_array_equal(got, want)
    model, x64 = _model("MaxPool", 3, attrs, dtype=np.float64), {"x": x.astype(np.float64)}
    m = _converted(tmp_path, model, 2)
    assert not _on_driver(m, 2, x64)
    np.testing.assert_array_equal(m.run(x64)["y"], run_ort(model, x64)[0])
    x5 = rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    model = _model("MaxPool", 2, dict(kernel_shape=[2, 2, 2]), rank=5)
    m = _converted(tmp_path, model, 2)
    assert not _on_driver(m, 2, {"x": x5})
    np.testing.assert_array_equal(m.run({"x": x5})["y"], run_ort(model, {"x": x5})[0])
    for op, at in (("MaxPool", attrs), ("AveragePool", attrs), ("GlobalAveragePool", {})):
        model = _model(op, 3, at)
        native, plain = _converted(tmp_path, model, 2), _converted(tmp_path, model, 2, native=False)
        assert _on_driver(native, 2, {"x": x}) and not _on_driver(plain, 2, {"x": x})
        np.testing.assert_array_equal(native.run({"x": x})["y"], plain.run({"x": x})["y"])


def test_static_global_max_pool_runs_on_the_driver(tmp_path, rng):
    """A GlobalMaxPool of known shape is not fused: it runs on the driver too."""
    x = rng.standard_normal((2, 32, 7, 9)).astype(np.float32)
    model = _model("GlobalMaxPool", x.shape, {}, dynamic=False)
    m = _converted(tmp_path, model, 2)
    assert _on_driver(m, 2)
    np.testing.assert_array_equal(m.run({"x": x})["y"], run_ort(model, {"x": x})[0])


def test_dynamic_image_size_runs_on_the_driver(tmp_path, rng):
    """A ResNet-like stem and an SPPF block with dynamic batch, height and width, converted without input
    shapes: Conv -> MaxPool 3x3/2 -> Conv -> three chained MaxPool 5x5/1 -> Concat -> AveragePool ->
    GlobalAveragePool and GlobalMaxPool; every size runs its pools on the driver and matches onnxruntime."""
    w1 = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32)
    nodes = [oh.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             oh.make_node("MaxPool", ["c1"], ["p0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             oh.make_node("Conv", ["p0", "w2"], ["c2"]),
             oh.make_node("MaxPool", ["c2"], ["p1"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             oh.make_node("MaxPool", ["p1"], ["p2"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             oh.make_node("MaxPool", ["p2"], ["p3"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
             oh.make_node("Concat", ["c2", "p1", "p2", "p3"], ["cat"], axis=1),
             oh.make_node("AveragePool", ["cat"], ["a"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
             oh.make_node("GlobalAveragePool", ["a"], ["gap"]),
             oh.make_node("GlobalMaxPool", ["a"], ["gmp"])]
    model = make_model(nodes, [tensor_info("x", np.float32, ["N", 3, "H", "W"])],
                       [tensor_info("a", np.float32, None), tensor_info("gap", np.float32, None),
                        tensor_info("gmp", np.float32, None)], {"w1": w1, "w2": w2}, opset=17)
    m = _converted(tmp_path, model, 2)
    for shape in ((1, 3, 64, 64), (2, 3, 48, 80), (1, 3, 37, 29), (1, 3, 64, 64)):
        x = rng.standard_normal(shape).astype(np.float32)
        feeds = {"x": x}
        plan = m._plan_for(m.check_feeds(feeds))
        descs = [getattr(c, "conv_desc", None) for c in plan.acquire().calls(2)]
        assert sum(d is not None and len(d) in DESC_LENGTHS for d in descs) >= 4, shape
        got, want = m.run(feeds), run_ort(model, feeds)
        for name, w in zip(("a", "gap", "gmp"), want):
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5, err_msg=f"{name} {shape}")


def _node(op, shape, dtype=None, n_outputs=1, **attrs):
    from converter_lite.ir.core import Node, TensorType, Value
    from converter_lite.ir.dtype import DType
    dtype = dtype or DType.float32
    x = Value("x", TensorType(dtype, shape))
    return Node(op, [x], [Value(f"y{i}", TensorType(dtype, None)) for i in range(n_outputs)], attrs)


def test_selection():
    from converter_lite.ir.dtype import DType
    from converter_lite.kernels import registry
    k = {"kernel_shape": [3, 3]}
    assert registry.select(_node("MaxPool", (1, 3, 8, 8), **k)) == (pool2d.POOL_SYMBOL,)
    assert registry.select(_node("AveragePool", (1, 3, 8), kernel_shape=[3])) == (pool2d.POOL_SYMBOL,)
    assert registry.select(_node("GlobalMaxPool", (1, 3, 8, 8))) == (pool2d.GLOBAL_SYMBOL,)
    assert registry.select(_node("GlobalAveragePool", (1, 3, 2, 8, 8))) == (pool2d.GLOBAL_SYMBOL,)
    for node in (_node("MaxPool", (1, 3, 8, 8), n_outputs=2, **k), _node("MaxPool", (1, 3, 8, 8), DType.float64, **k),
                 _node("MaxPool", (1, 3, 4, 8, 8), kernel_shape=[2, 2, 2]), _node("LpPool", (1, 3, 8, 8), **k),
                 _node("GlobalAveragePool", (1, 3, 8, 8), DType.float16)):
        assert registry.select(node) == (), node.op
    # a node whose shapes are known only at run time records both symbols; its concrete copy selects one
    assert set(registry.candidates(_node("MaxPool", None, **k))) == set(pool2d.SYMBOLS)
