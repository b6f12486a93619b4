"""runtime/fast/conv.py on the native convolution tile driver (kernels/conv_tiles/):
dense Conv steps bound to one driver call, checked against the reference kernel and onnxruntime on 1 and 2
threads (strides, asymmetric pads, dilations, groups, kernel sizes, batches, bias or not, float32/float64,
tiles that start and end inside output rows); the numpy path without native code.  The direct driver
(conv_direct.py, which float32 convolutions with column stride 1 or 2 take first) is switched off here: its
own tests are test_conv_direct.py."""
from __future__ import annotations

import numpy as np
from helpers import record_drivers
import onnx.helper as oh
import pytest

from converter_lite.ir import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.registry import infer_types
from converter_lite.kernels.conv_direct import bind as conv_direct
from converter_lite.kernels.conv_pointwise import bind as conv_pointwise
from converter_lite.kernels.conv_tiles import bind as conv_native
from converter_lite.kernels.blas import gemm_entry
from converter_lite.runtime.plan import Plan
from tests.helpers import make_model, run_ort, tensor_info

pytestmark = pytest.mark.skipif(gemm_entry(np.float32) is None, reason="numpy's BLAS exposes no CBLAS gemm")


@pytest.fixture(autouse=True)
def im2col_driver(monkeypatch):
    """Every Conv here goes to the im2col + BLAS driver (or numpy), not the direct one: the converter records
    the tile driver for every dense Conv, and the direct driver declines."""
    from converter_lite.kernels.conv_tiles import abi
    monkeypatch.setattr(conv_direct, "applies", lambda geo: False)
    monkeypatch.setattr(abi, "select", lambda node: tuple(abi.CONV_SYMBOLS.values()) if node.op == "Conv" else ())


def _graph(x, w, b, attrs, pad=None):
    xv = Value("x", TensorType(DType.from_np(x.dtype), tuple(x.shape)))
    ins, nodes, src = [xv, Value("w", const=w), None if b is None else Value("b", const=b)], [], xv
    if pad is not None:                                    # a Pad the Conv absorbs
        src = Value("xp")
        node = Node("Pad", [xv, Value("pads", const=np.array(pad, np.int64))], [src], {}, name="pad")
        src.type = infer_types(node)[0]
        nodes.append(node)
    ins[0] = src
    out = Value("y")
    node = Node("Conv", [v for v in ins if v is not None] if b is not None else ins[:2], [out], attrs, name="conv")
    out.type = infer_types(node)[0]
    return Graph("case", [xv], [out], nodes + [node])


def _run(resolver, x, w, b, attrs, driver=True, pad=None, shared=None):
    g = _graph(x, w, b, attrs, pad)
    want = eval_graph(g, [x])[0]
    plan = Plan(record_drivers(g), resolver, num_threads=2, adaptive=False)
    tol = 1e-4 if x.dtype == np.float32 else 1e-12
    for nt in (1, 2):
        for _ in range(2):                                      # a second run reuses the bound steps
            got = plan.execute([x], num_threads=nt)[0]
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        descs = [getattr(c, "conv_desc", None) for c in plan._free[-1].calls(nt)]
        used = [d is not None for d in descs]
        assert driver in used and (driver or not any(used)), f"driver used: {used}, expected {driver}"
        assert plan.needs_blas(nt) is (not driver)          # a Conv bound to a driver never calls numpy's BLAS
        if shared is not None and nt == 2:
            assert any(d[conv_native.FIELDS.index("shared")] == shared for d in descs if d is not None)
    return want


def _arr(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture(params=["default", "small_tiles", "shared"])
def tiling(request, monkeypatch):
    if request.param == "small_tiles":                          # many tiles, starting and ending inside rows
        monkeypatch.setattr(conv_native, "COLS_BYTES", 1500)
        monkeypatch.setattr(conv_native, "MIN_TILE_WORK", 0)
        monkeypatch.setattr(conv_native, "P_ALIGN", 5)
    elif request.param == "shared":                             # on 2 threads: columns shared, channel tiles
        monkeypatch.setattr(conv_native, "MIN_TILE_WORK", 0)
        monkeypatch.setattr(conv_native, "P_ALIGN", 1 << 20)
        monkeypatch.setattr(conv_native, "MIN_TILE_M", 2)
        monkeypatch.setattr(conv_native, "CHUNKS_PER_THREAD", 3)
    return request.param


CASES = [  # x shape, w shape, attrs
    ((1, 3, 17, 19), (8, 3, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((2, 4, 20, 21), (6, 2, 3, 3), {"strides": (2, 2), "pads": (0, 1, 2, 0), "group": 2}),
    ((1, 5, 23, 23), (7, 5, 7, 7), {"strides": (3, 3), "pads": (3, 3, 3, 3)}),
    ((1, 3, 31, 30), (8, 3, 7, 7), {"strides": (2, 2), "pads": (3, 2, 1, 3)}),
    ((1, 6, 15, 16), (9, 6, 3, 3), {"strides": (1, 2), "pads": (2, 2, 2, 2), "dilations": (2, 2)}),
    ((1, 6, 12, 13), (6, 3, 3, 2), {"strides": (2, 1), "pads": (1, 0, 0, 1), "dilations": (1, 3), "group": 2}),
    ((2, 8, 9, 9), (16, 8, 1, 1), {}),
    ((1, 8, 9, 7), (12, 4, 1, 1), {"group": 2}),
    ((1, 8, 10, 10), (12, 8, 1, 1), {"strides": (2, 2)}),
    ((1, 4, 6, 5), (5, 4, 2, 3), {"pads": (0, 0, 0, 0)}),
    ((3, 16, 11, 13), (24, 16, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((1, 2, 4, 4), (3, 2, 5, 5), {"pads": (3, 4, 3, 4)}),                    # taps entirely in the padding
    # 1x1 planes whose last pixel tile needs 1 (196 px; on 2 threads 3 and 2), 3 (100 px) or 2 (25 px) vectors
    ((1, 16, 14, 14), (13, 16, 1, 1), {}),
    ((2, 8, 10, 10), (7, 8, 1, 1), {}),
    ((1, 8, 5, 5), (6, 8, 1, 1), {}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("bias", [True, False])
def test_against_reference(resolver, tiling, case, bias):
    xs, ws, attrs = CASES[case]
    rng = np.random.default_rng(case)
    direct = ws[2:] == (1, 1) and attrs.get("strides", (1, 1)) == (1, 1) and not attrs.get("pads")
    _run(resolver, _arr(rng, *xs), _arr(rng, *ws), _arr(rng, ws[0]) if bias else None, attrs,
         shared=int(tiling == "shared" and not direct) if ws[0] // attrs.get("group", 1) >= 4 else None)


@pytest.mark.parametrize("case", [1, 3, 5, 6])
def test_float64(resolver, case):
    xs, ws, attrs = CASES[case]
    rng = np.random.default_rng(case)
    _run(resolver, _arr(rng, *xs, dtype=np.float64), _arr(rng, *ws, dtype=np.float64),
         _arr(rng, ws[0], dtype=np.float64), attrs)


def test_absorbed_pad_and_auto_pad(resolver):
    rng = np.random.default_rng(7)
    x, w, b = _arr(rng, 1, 4, 13, 11), _arr(rng, 6, 4, 3, 3), _arr(rng, 6)
    _run(resolver, x, w, b, {"pads": (1, 0, 0, 1)}, pad=(0, 0, 2, 1, 0, 0, 0, 3))
    _run(resolver, x, w, b, {"auto_pad": "SAME_UPPER", "strides": (2, 2)})



def test_no_native_library_keeps_numpy():
    rng = np.random.default_rng(0)
    _run(None, _arr(rng, 1, 4, 9, 9), _arr(rng, 6, 4, 3, 3), _arr(rng, 6), {"pads": (1, 1, 1, 1)}, driver=False)


def test_against_onnxruntime(tmp_path):
    """A converted model (the driver comes with the model's native code) against onnxruntime."""
    import onnx

    from converter_lite.api import convert, load
    rng = np.random.default_rng(5)
    w1, b1, w2, w3, b3 = _arr(rng, 16, 3, 7, 7), _arr(rng, 16), _arr(rng, 16, 8, 3, 3), _arr(rng, 24, 16, 1, 1), \
        _arr(rng, 24)
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["h1"], strides=[2, 2], pads=[3, 3, 3, 3]),
             oh.make_node("Relu", ["h1"], ["r1"]),
             oh.make_node("Conv", ["r1", "w2"], ["h2"], pads=[1, 0, 1, 2], group=2, dilations=[1, 2]),
             oh.make_node("Conv", ["h2", "w3", "b3"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [2, 3, 33, 29])],
                       [tensor_info("y", np.float32, None)],
                       initializers={"w1": w1, "b1": b1, "w2": w2, "w3": w3, "b3": b3})
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    out = convert(str(src), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    feeds = {"x": _arr(rng, 2, 3, 33, 29)}
    want = run_ort(model, feeds)[0]
    # outputs reach ~300 through three float32 sums (147, 72 and 16 terms): an output near 0 carries the rounding
    # of its large terms, so the absolute tolerance follows the outputs' scale (a Zen 5 core's summation order
    # missed a fixed 1e-4 by 1.9e-4 at an output of -0.074)
    atol = 2e-6 * float(np.abs(want).max())
    for nt in (1, 2):
        got = load(out, num_threads=nt).run(feeds)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol)


def _fused_model(tmp_path, nodes, inits, outputs, x_shape=(1, 4, 12, 12)):
    import onnx

    from converter_lite.api import convert
    model = make_model(nodes, [tensor_info("x", np.float32, list(x_shape))],
                       [tensor_info(o, np.float32, None) for o in outputs], initializers=inits)
    src = tmp_path / "f.onnx"
    onnx.save(model, src)
    return model, convert(str(src), str(tmp_path / "f"), graph_kernel_flags="--opt_level=2")


def test_relu_and_residual_epilogues(tmp_path):
    """Relu / Add / Add+Relu after a Conv run in the Conv's epilogue (the fused kernel disappears), the Add's
    other input computed before; a Conv output read twice keeps its own kernel."""
    from converter_lite.api import load
    rng = np.random.default_rng(11)
    inits = {f"w{i}": _arr(rng, 4, 4, 3, 3) for i in range(5)} | {f"b{i}": _arr(rng, 4) for i in range(5)}
    conv = lambda i, src, out: oh.make_node("Conv", [src, f"w{i}", f"b{i}"], [out], pads=[1, 1, 1, 1])
    nodes = [conv(0, "x", "c0"), oh.make_node("Relu", ["c0"], ["r0"]),                 # Relu
             conv(1, "r0", "c1"), oh.make_node("Add", ["c1", "x"], ["a1"]),             # Add (no Relu)
             conv(2, "a1", "c2"), oh.make_node("Add", ["r0", "c2"], ["s2"]), oh.make_node("Relu", ["s2"], ["r2"]),
             conv(3, "r2", "c3"), oh.make_node("Relu", ["c3"], ["r3"]), oh.make_node("Add", ["c3", "r3"], ["y3"]),
             conv(4, "y3", "c4"), oh.make_node("Clip", ["c4", "lo", "hi"], ["y"])]                # Relu6
    inits |= {"lo": np.array(0.0, np.float32), "hi": np.array(0.5, np.float32)}
    model, out = _fused_model(tmp_path, nodes, inits, ["y", "a1"])
    feeds = {"x": _arr(rng, 1, 4, 12, 12)}
    want = run_ort(model, feeds)
    for nt in (1, 2):
        m = load(out, num_threads=nt)
        got = m.run(feeds)
        for name, w in zip(("y", "a1"), want):
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4)
    steps = load(out, num_threads=2).plan.program.steps
    convs = [len(s.inputs) for s in steps if s.node.op == "Conv"]
    assert convs == [3, 4, 4, 3, 3], convs                 # c1 and c2 read their residual; c3 is read twice
    assert sum(s.node.op == "GraphKernel" for s in steps) <= 1
    m = load(out, num_threads=1)
    m.run(feeds)
    descs = [c.conv_desc for c in m.plan._free[-1].calls(1)[:len(steps)] if hasattr(c, "conv_desc")]
    at = conv_native.FIELDS.index
    clamps = [(int(d[at("clamp")]), float(d[at("hi"):at("hi") + 1].view(np.float64)[0])) for d in descs]
    assert clamps == [(1, np.inf), (0, 0.0), (1, np.inf), (0, 0.0), (1, 0.5)], clamps


def test_every_thread_count_fits_the_workspace(resolver, monkeypatch):
    monkeypatch.setattr(conv_native, "MIN_TILE_WORK", 0)
    monkeypatch.setattr(conv_native, "MIN_TILE_M", 2)
    rng = np.random.default_rng(3)
    x, w, b = _arr(rng, 2, 8, 9, 11), _arr(rng, 12, 8, 3, 3), _arr(rng, 12)
    g = _graph(x, w, b, {"pads": (1, 1, 1, 1)})
    want = eval_graph(g, [x])[0]
    plan = Plan(record_drivers(g), resolver, num_threads=4, adaptive=False)
    for nt in (1, 2, 3, 4):
        np.testing.assert_allclose(plan.execute([x], num_threads=nt)[0], want, rtol=1e-4, atol=1e-4)
