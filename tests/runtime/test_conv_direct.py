"""kernels/conv_direct/ and kernels/conv_pointwise/: dense float32 Conv through the
direct (register-tiled, no im2col) drivers, against the reference kernel on 1, 2 and 3 threads, with the 16- and
32-register tile sets, 1x1 convolutions through both the pointwise and the direct driver:
strides 1/2 (mixed), asymmetric and absorbed pads, dilations, groups, batches, channel counts that are not
multiples of 16, output widths/heights that leave partial tiles, bias or not, Relu/Clip and residual epilogues,
NaN/inf propagation; and a converted model against onnxruntime."""
from __future__ import annotations

import ctypes

import numpy as np
from helpers import record_drivers
import onnx.helper as oh
import pytest

from converter_lite.ops.interpret import eval_graph
from converter_lite.codegen import vector
from converter_lite.kernels.conv_direct import bind as conv_direct
from converter_lite.kernels.conv_direct import emit as direct_emit
from converter_lite.runtime.program import NodeCtx
from converter_lite.kernels.conv_pointwise import bind as conv_pointwise
from converter_lite.runtime.plan import Plan
from tests.helpers import run_ort
from tests.runtime.test_fast_conv_native import CASES, _arr, _fused_model, _graph

EXTRA_CASES = [  # x shape, w shape, attrs
    ((1, 5, 9, 40), (40, 5, 3, 3), {"pads": (1, 1, 1, 1)}),                      # 40 channels: 2.5 blocks
    ((1, 7, 13, 27), (33, 7, 3, 3), {"strides": (2, 2), "pads": (1, 1, 1, 1)}),
    ((2, 16, 5, 5), (20, 16, 3, 3), {"pads": (1, 1, 1, 1)}),                     # several rows per tile
    ((1, 8, 7, 7), (17, 8, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((1, 8, 3, 3), (9, 8, 3, 3), {"pads": (1, 1, 1, 1)}),
    ((1, 8, 2, 1), (5, 8, 1, 1), {}),                                             # one output column
    ((1, 3, 29, 31), (16, 3, 7, 7), {"strides": (2, 2), "pads": (3, 3, 3, 3)}),  # a stem
    ((1, 12, 16, 16), (12, 4, 3, 3), {"pads": (0, 0, 2, 2), "group": 3}),        # bottom/right pads only
    ((1, 4, 11, 30), (6, 4, 3, 3), {"strides": (2, 1), "pads": (1, 1, 1, 1)}),   # row stride only
    ((1, 6, 10, 10), (8, 6, 3, 3), {"strides": (1, 2), "dilations": (2, 2)}),     # no pads, dilated, strided
    ((1, 3, 40, 44), (32, 3, 4, 4), {"strides": (4, 4)}),                         # ConvNeXt's patch embedding
    ((1, 16, 5, 5), (80, 16, 3, 3), {"pads": (1, 1, 1, 1)}),   # 3 super-blocks: plane mode (padding phase)
    ((1, 8, 20, 21), (24, 8, 3, 3), {"pads": (1, 2, 1, 0)}),   # one super-block: row mode (chunks pad rows)
    ((2, 12, 9, 9), (72, 4, 3, 3), {"pads": (1, 1, 1, 1), "group": 3}),           # batches x groups
    ((2, 5, 19, 23), (20, 5, 3, 5), {"strides": (2, 4), "pads": (1, 2, 1, 2)}),   # column stride 4, padded
    ((1, 4, 6, 32), (8, 4, 3, 3), {"pads": (2, 17, 1, 18)}),   # pads wider than a vector: whole zero vectors
    ((3, 5, 9, 1), (7, 5, 3, 3), {"pads": (1, 1, 1, 1)}),       # one input column, 3 images: row parts of each
    ((1, 6, 31, 17), (16, 6, 3, 3), {"strides": (2, 1), "pads": (2, 1, 0, 1)}),   # rows above the image only
    ((1, 5, 9, 15), (10, 5, 3, 3), {"pads": (1, 1, 1, 1)}),    # one channel block: 15-pixel tiles
    ((2, 3, 7, 47), (16, 3, 3, 3), {"strides": (1, 2), "pads": (1, 1, 1, 1)}),    # one block, column stride 2
    ((1, 3, 16, 64), (8, 3, 4, 4), {"strides": (4, 4)}),       # one block, column stride 4, 16-pixel tiles
]
POINTWISE_CASES = [
    ((1, 8, 40, 40), (48, 8, 1, 1), {}),                                          # 1600 pixels: 25 blocks
    ((2, 12, 9, 11), (15, 4, 1, 1), {"group": 3}),
    ((1, 160, 5, 5), (70, 160, 1, 1), {}),
    ((1, 3, 1, 1), (7, 3, 1, 1), {}),
    ((1, 16, 8, 8), (6, 16, 1, 1), {}),
    ((1, 40, 7, 7), (97, 40, 1, 1), {}),       # one pixel block: chunks split the 17 channel blocks (last: 1 row)
    ((1, 24, 3, 3), (13, 24, 1, 1), {}),       # 3 channel blocks for up to 3 threads, the last one channel
]
ALL = CASES + EXTRA_CASES + POINTWISE_CASES
DESCS = (len(conv_direct.FIELDS) + conv_direct.EXTRA,
         len(conv_pointwise.PointwiseConv.FIELDS) + conv_pointwise.PointwiseConv.EXTRA)


@pytest.fixture(params=[True, False], ids=["wide", "narrow"])
def wide(request, monkeypatch):
    monkeypatch.setattr(NodeCtx, "wide_vectors", lambda self: request.param)
    return request.param


@pytest.fixture(params=[True, False], ids=["pointwise", "direct"])
def pointwise(request, monkeypatch):
    """1x1 convolutions through the pointwise driver, or all through the direct one."""
    monkeypatch.setattr(conv_direct, "pointwise_pays", lambda geo, wide: request.param)
    return request.param


def _run_and_record(plan, x, want, nt):
    """Runs ``plan`` on ``nt`` threads against ``want``; the record of its one Conv step (with the words the
    driver wrote after its fields)."""
    np.testing.assert_allclose(plan.execute([x], num_threads=nt)[0], want, rtol=1e-4, atol=1e-4)
    (desc,) = [c.conv_desc for c in plan._free[-1].calls(nt) if hasattr(c, "conv_desc")]
    return desc


def _check(resolver, x, w, b, attrs, pad=None, threads=(1, 2, 3)):
    g = _graph(x, w, b, attrs, pad)
    want = eval_graph(g, [x])[0]
    plan = Plan(record_drivers(g), resolver, num_threads=max(threads), adaptive=False)
    for nt in threads:
        for _ in range(2):                                      # a second run reuses the bound steps
            got = plan.execute([x], num_threads=nt)[0]
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        descs = [getattr(c, "conv_desc", None) for c in plan._free[-1].calls(nt)]
        assert any(d is not None and len(d) in DESCS for d in descs)


@pytest.mark.parametrize("case", range(len(ALL)))
@pytest.mark.parametrize("bias", [True, False])
def test_against_reference(resolver, wide, pointwise, case, bias):
    xs, ws, attrs = ALL[case]
    if attrs.get("strides", (1, 1))[1] not in conv_direct.STRIDES:
        pytest.skip("column stride 3: the im2col driver's case")
    rng = np.random.default_rng(case)
    _check(resolver, _arr(rng, *xs), _arr(rng, *ws), _arr(rng, ws[0]) if bias else None, attrs)


def test_absorbed_pad(resolver, wide):
    rng = np.random.default_rng(7)
    x, w, b = _arr(rng, 1, 4, 13, 11), _arr(rng, 6, 4, 3, 3), _arr(rng, 6)
    _check(resolver, x, w, b, {"pads": (1, 0, 0, 1)}, pad=(0, 0, 2, 1, 0, 0, 0, 3))


def test_nan_and_inf_propagate(resolver):
    rng = np.random.default_rng(9)
    x, w, b = _arr(rng, 1, 4, 9, 9), _arr(rng, 20, 4, 3, 3), _arr(rng, 20)
    x[0, 1, 4, 4], x[0, 2, 0, 0], x[0, 3, 8, 2] = np.nan, np.inf, -np.inf
    g = _graph(x, w, b, {"pads": (1, 1, 1, 1)})
    want = eval_graph(g, [x])[0]
    got = Plan(record_drivers(g), resolver, num_threads=2, adaptive=False).execute([x], num_threads=2)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_other_column_strides_and_float64_use_other_paths(resolver):
    rng = np.random.default_rng(1)
    x, w = _arr(rng, 1, 3, 12, 12), _arr(rng, 4, 3, 3, 3)
    g = _graph(x, w, None, {"strides": (3, 3)})
    plan = Plan(record_drivers(g), resolver, num_threads=1, adaptive=False)
    np.testing.assert_allclose(plan.execute([x])[0], eval_graph(g, [x])[0], rtol=1e-4, atol=1e-4)
    descs = [getattr(c, "conv_desc", None) for c in plan._free[-1].calls(1)]
    assert all(d is None or len(d) not in DESCS for d in descs)


def test_pointwise_choice():
    from types import SimpleNamespace
    geo = lambda c, h, w: SimpleNamespace(c=c, group=1, h=h, w=w)
    assert conv_pointwise.pointwise_pays(geo(8, 40, 40), True)
    assert not conv_pointwise.pointwise_pays(geo(160, 5, 5), True)


def test_transpose_is_a_transpose():
    """The in-register butterfly transpose of the epilogue, compiled and run on a 16 x 16 matrix."""
    import ctypes

    from llvmlite import ir

    from converter_lite.codegen.jit import jit_library
    from converter_lite.codegen.types import F32, VOID
    vec = ir.VectorType(F32, vector.VL)
    module = ir.Module("t")
    fn = ir.Function(module, ir.FunctionType(VOID, [vec.as_pointer(), vec.as_pointer()]), "tr")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    rows = [b.load(b.gep(fn.args[0], [ir.Constant(ir.IntType(64), i)]), align=4) for i in range(vector.VL)]
    for i, v in enumerate(vector.transpose(b, rows)):
        b.store(v, b.gep(fn.args[1], [ir.Constant(ir.IntType(64), i)]), align=4)
    b.ret_void()
    lib = jit_library(str(module))
    src = np.arange(vector.VL ** 2, dtype=np.float32).reshape(vector.VL, -1)
    dst = np.zeros_like(src)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(lib.address("tr"))(src.ctypes.data, dst.ctypes.data)
    np.testing.assert_array_equal(dst, src.T)


def test_model_with_epilogues_against_onnxruntime(tmp_path):
    """A converted model: stem conv with Relu, a residual Add + Relu, Clip, groups; direct driver on 1/2 threads;
    the clamps and residuals taken over from the fused kernels."""
    from converter_lite.api import load
    rng = np.random.default_rng(5)
    inits = {"w0": _arr(rng, 24, 3, 7, 7), "b0": _arr(rng, 24), "w1": _arr(rng, 24, 24, 3, 3), "b1": _arr(rng, 24),
             "w2": _arr(rng, 36, 12, 3, 3), "w3": _arr(rng, 40, 36, 1, 1), "b3": _arr(rng, 40),
             "lo": np.array(0.0, np.float32), "hi": np.array(0.25, np.float32)}
    nodes = [oh.make_node("Conv", ["x", "w0", "b0"], ["c0"], strides=[2, 2], pads=[3, 3, 3, 3]),
             oh.make_node("Relu", ["c0"], ["r0"]),
             oh.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             oh.make_node("Add", ["c1", "r0"], ["a1"]), oh.make_node("Relu", ["a1"], ["r1"]),
             oh.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=2, strides=[2, 2]),
             oh.make_node("Conv", ["c2", "w3", "b3"], ["c3"]),
             oh.make_node("Clip", ["c3", "lo", "hi"], ["y"])]
    model, out = _fused_model(tmp_path, nodes, inits, ["y"], x_shape=(2, 3, 37, 35))
    feeds = {"x": _arr(rng, 2, 3, 37, 35)}
    want = run_ort(model, feeds)[0]
    for nt in (1, 2):
        m = load(out, num_threads=nt)
        np.testing.assert_allclose(m.run(feeds)["y"], want, rtol=1e-4, atol=1e-4)
    steps = m.plan.program.steps
    assert [s.node.op for s in steps] == ["Conv"] * 4, [s.node.op for s in steps]
    descs = [c.conv_desc for c in m.plan._free[-1].calls(2) if hasattr(c, "conv_desc")]
    fields = [conv_direct.FIELDS] * 3 + [conv_direct.PointwiseConv.FIELDS]       # the last is a 1x1 on 9x9
    got = [(int(d[f.index("clamp")]), bool(d[f.index("residual")])) for d, f in zip(descs, fields)]
    assert got == [(1, False), (1, True), (0, False), (1, False)], got
    assert [len(d) for d in descs] == [DESCS[0]] * 3 + [DESCS[1]]


def test_every_epilogue_combination_against_onnxruntime(tmp_path):
    """Residual on/off x clamp on/off through both drivers (the epilogues are one straight-line version per
    combination), pointwise with masked pixel tails (9 x 11 pixels), direct with partial tiles."""
    from converter_lite.api import load
    rng = np.random.default_rng(11)
    inits = {f"w{i}": _arr(rng, 16, 16, k, k) for i, k in enumerate((3, 3, 1, 1, 1))}
    inits.update({f"b{i}": _arr(rng, 16) for i in range(5)})
    nodes = [oh.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             oh.make_node("Conv", ["c0", "w1", "b1"], ["d1"], pads=[1, 1, 1, 1]),
             oh.make_node("Add", ["d1", "c0"], ["c1"]),
             oh.make_node("Conv", ["c1", "w2", "b2"], ["d2"]), oh.make_node("Add", ["d2", "c1"], ["e2"]),
             oh.make_node("Relu", ["e2"], ["c2"]),
             oh.make_node("Conv", ["c2", "w3", "b3"], ["d3"]), oh.make_node("Add", ["d3", "c2"], ["c3"]),
             oh.make_node("Conv", ["c3", "w4", "b4"], ["y"])]
    model, out = _fused_model(tmp_path, nodes, inits, ["y"], x_shape=(1, 16, 9, 11))
    x = _arr(rng, 1, 16, 9, 11)
    x[0, 3, 4, 5], x[0, 7, 0, 0] = np.nan, np.inf
    feeds = {"x": x}
    want = run_ort(model, feeds)[0]
    for nt in (1, 2):
        m = load(out, num_threads=nt)
        got = m.run(feeds)["y"]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=1e-4, atol=1e-4)
    descs = [c.conv_desc for c in m.plan._free[-1].calls(2) if hasattr(c, "conv_desc")]
    fields = [conv_direct.FIELDS] * 2 + [conv_direct.PointwiseConv.FIELDS] * 3
    assert [len(d) for d in descs] == [DESCS[0]] * 2 + [DESCS[1]] * 3
    got = [(int(d[f.index("clamp")]), bool(d[f.index("residual")])) for d, f in zip(descs, fields)]
    assert got == [(0, False), (0, True), (1, True), (0, True), (0, False)], got


def test_pointwise_splits_small_images_by_channel_blocks(resolver, monkeypatch):
    """49 pixels are one pixel block: with 2 or 3 threads the driver splits the 17 channel blocks instead (the
    words after FIELDS: pixels, channel blocks per chunk), else one thread did the whole convolution."""
    rng = np.random.default_rng(3)
    x, w, b = _arr(rng, 1, 40, 7, 7), _arr(rng, 97, 40, 1, 1), _arr(rng, 97)
    plan, want = _wide_plan(resolver, monkeypatch, x, w, b, {}, 3, pointwise=True)        # 64-pixel blocks
    n = len(conv_direct.PointwiseConv.FIELDS)
    for nt, per_chunk in ((1, 17), (2, 9), (3, 6)):
        desc = _run_and_record(plan, x, want, nt)
        assert len(desc) == DESCS[1] and (desc[n], desc[n + 1]) == (64, per_chunk)     # pixels, channel blocks


def _wide_plan(resolver, monkeypatch, x, w, b, attrs, threads, pointwise=False):
    """One Conv on the 16-block wide tiles (1x1 ones on the pointwise driver when ``pointwise``), planned for
    up to ``threads`` threads: (plan, reference output)."""
    monkeypatch.setattr(NodeCtx, "wide_vectors", lambda self: True)
    if pointwise:
        monkeypatch.setattr(conv_direct, "pointwise_pays", lambda geo, wide: True)
    g = _graph(x, w, b, attrs)
    return Plan(record_drivers(g), resolver, num_threads=threads, adaptive=False), eval_graph(g, [x])[0]


def _padded_3x3(resolver, monkeypatch, rng, cg, m, group, hw, bias):
    """A 3x3 "same" Conv (``cg`` input channels per group) planned for 2 threads: (plan, x, reference)."""
    x, w = _arr(rng, 1, cg * group, *hw), _arr(rng, m, cg, 3, 3)
    plan, want = _wide_plan(resolver, monkeypatch, x, w, _arr(rng, m) if bias else None,
                            {"pads": (1, 1, 1, 1), "group": group}, 2)
    return plan, x, want


@pytest.mark.parametrize("m, group, units", [(96, 1, 3), (48, 1, 2), (128, 1, 4), (64, 4, 4), (12, 3, 3)])
def test_direct_chunks_are_rows_of_every_channel(resolver, monkeypatch, m, group, units):
    """On a large image (24 x 24: at least ROWS_MIN_PIXELS) each chunk computes a run of rows for every group
    and channel super-block (96 channels: 3 super-blocks, 48: one of 32 and one of 16, 4 groups of 16), so both
    threads compute the same rows of every convolution (the words after FIELDS: tiles per chunk, channel units
    per chunk)."""
    plan, x, want = _padded_3x3(resolver, monkeypatch, np.random.default_rng(5), 8, m, group, (24, 24), True)
    n = len(conv_direct.FIELDS)
    assert 24 * 24 >= direct_emit.ROWS_MIN_PIXELS
    tiles = 24 * 2                                # 24 rows of two 12-column segments (12 pixels per tile)
    for nt in (1, 2):
        desc = _run_and_record(plan, x, want, nt)
        assert (desc[n], desc[n + 1]) == (tiles // nt, units)


@pytest.mark.parametrize("hw, m, group, per_chunk", [((7, 7), 768, 1, (7, 12)), ((7, 7), 96, 6, (4, 3)),
                                                     ((3, 3), 96, 1, (1, 2)), ((14, 14), 768, 1, (28, 12)),
                                                     ((11, 11), 96, 1, (6, 3)), ((28, 28), 768, 1, (42, 24)),
                                                     ((30, 30), 768, 1, (30, 48)), ((15, 15), 768, 1, (15, 24))])
def test_direct_chunks_of_small_images_split_channels(resolver, monkeypatch, hw, m, group, per_chunk):
    """Small images are split by channel units (768 channels: 24 super-blocks, 12 each; 6 groups of 16: 3 each,
    in 4 tiles of two 7-pixel rows (SOLO); a 3x3 image is one tile) unless those share out much worse than rows
    (3 super-blocks of 96 channels on an 11 x 11 image: 6 + 5 rows); a 28 x 28 image is split by rows (tiles per
    chunk, channel units per chunk).  Pixel tiles (rows of 15 or 30 pixels) take one 16-channel block a unit: 48
    units of 768 channels, a 15 x 15 image split by them, a 30 x 30 one by rows of two tiles."""
    plan, x, want = _padded_3x3(resolver, monkeypatch, np.random.default_rng(6), 4, m, group, hw, False)
    n = len(conv_direct.FIELDS)
    desc = _run_and_record(plan, x, want, 2)
    assert (desc[n], desc[n + 1]) == per_chunk


def test_pointwise_chunks_split_pixels_in_vectors(resolver, monkeypatch):
    """784 pixels on 2 threads: 400 + 384 (a chunk is a multiple of 16 pixels, its last block masked), not
    448 + 336 in whole 64-pixel blocks."""
    rng = np.random.default_rng(4)
    x, w = _arr(rng, 1, 24, 28, 28), _arr(rng, 30, 24, 1, 1)
    plan, want = _wide_plan(resolver, monkeypatch, x, w, None, {}, 3, pointwise=True)
    n = len(conv_direct.PointwiseConv.FIELDS)
    for nt, ppc in ((1, 784), (2, 400), (3, 272)):
        desc = _run_and_record(plan, x, want, nt)
        assert (desc[n], desc[n + 1]) == (ppc, 5)                       # pixels, channel blocks per chunk


def test_odd_row_parts_pad_their_own_copy(resolver, monkeypatch):
    """Planned for several threads, a padded Conv has two zero-bordered copies of its input (one copy for 1
    thread): on 2 threads the first row part pads the rows it reads into the first copy and the second part
    into the second, so the two never write the same halo rows (on 4 threads the parts use copies 0, 1, 0, 1);
    results match the reference on 1 to 4 threads."""
    rng = np.random.default_rng(8)
    x, w = _arr(rng, 1, 8, 24, 24), _arr(rng, 16, 8, 3, 3)
    hp = wp = 26
    floats = conv_direct.xp_floats(1, 8, hp, wp)
    for threads, copies in ((1, 1), (4, 2)):
        plan, want = _wide_plan(resolver, monkeypatch, x, w, None, {"pads": (1, 1, 1, 1)}, threads)
        (conv,) = [s.impl.bind.__self__ for s in plan.program.steps if s.node.op == "Conv"]
        assert conv.workspace == copies * floats * 4 + 64
    desc = _run_and_record(plan, x, want, 2)
    xp = np.ctypeslib.as_array((ctypes.c_float * (2 * floats)).from_address(int(desc[conv_direct.FIELDS.index("xp")])))
    xp[:] = np.nan
    _run_and_record(plan, x, want, 2)                           # the same bound step, the same copies
    first, second = (xp[i * floats:i * floats + 8 * hp * wp].reshape(8, hp, wp) for i in (0, 1))
    padded = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
    # 24 rows of two 12-pixel tiles: output rows 0-11 read padded rows 0-13, rows 12-23 read 12-25
    np.testing.assert_array_equal(first[:, :14], padded[:, :14])
    assert np.isnan(first[:, 14:]).all()
    np.testing.assert_array_equal(second[:, 12:], padded[:, 12:])
    assert np.isnan(second[:, :12]).all()
    for nt in (1, 3, 4):
        _run_and_record(plan, x, want, nt)


PIXEL_CASES = [  # column stride 1, rows filling >= 15/16 of their vectors: pixel tiles
    ((1, 3, 32, 32), (16, 3, 3, 3), {"pads": (1, 1, 1, 1)}),                     # conv_net's stem
    ((2, 16, 9, 30), (12, 16, 3, 3), {"pads": (1, 1, 1, 1)}),                    # 15 + 15 pixels, 12 channels
    ((1, 6, 20, 36), (16, 6, 5, 5), {"pads": (2, 3, 1, 0), "dilations": (1, 2)}),  # asymmetric, dilated
    ((1, 8, 13, 29), (16, 4, 3, 3), {"strides": (2, 1), "pads": (0, 4, 3, 0), "group": 2}),  # left pad > reach
    ((1, 4, 5, 16), (16, 4, 7, 7), {"pads": (3, 3, 3, 3)}),                      # most of the window outside
    ((1, 5, 4, 33), (7, 5, 1, 3), {}),                                            # unpadded, 31 = 16 + 15 pixels
    ((1, 32, 3, 63), (40, 32, 1, 3), {"pads": (0, 1, 0, 1)}),                     # vad's rows, 3 channel blocks
    ((2, 12, 6, 16), (36, 4, 3, 3), {"pads": (1, 1, 1, 1), "group": 3}),         # 12 channels a group, 2 images
]


@pytest.mark.parametrize("case", range(len(PIXEL_CASES)))
def test_pixel_tiles_against_reference(resolver, monkeypatch, case):
    """Shapes the pixel tiles take (``emit.pixel_kernel``: the unpadded input read with per-window-position masks,
    rows outside the image skipped): pads on every side, wider than the kernel reaches, dilations, row stride 2,
    groups, batches, fewer than 16 channels or several blocks, partial vectors, a NaN and an inf in the input
    (next to the left edge, at the last pixel); 1 to 3 threads, against the reference kernel."""
    monkeypatch.setattr(NodeCtx, "wide_vectors", lambda self: True)
    xs, ws, attrs = PIXEL_CASES[case]
    rng = np.random.default_rng(40 + case)
    x = _arr(rng, *xs)
    x[0, 0, 1, 0], x[-1, -1, -1, -1] = np.nan, np.inf
    _check(resolver, x, _arr(rng, *ws), _arr(rng, ws[0]), attrs)


def test_pixel_tile_epilogues_against_onnxruntime(tmp_path):
    """Residual on/off x Relu, Clip, HardSwish or nothing through the pixel tiles (16-channel 3x3 convolutions
    on a 30-pixel-wide image) on 1 and 2 threads."""
    from converter_lite.api import load
    rng = np.random.default_rng(13)
    inits = {f"w{i}": _arr(rng, 16, 16, 3, 3) for i in range(6)} | {f"b{i}": _arr(rng, 16) for i in range(6)}
    inits |= {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}
    conv = lambda i, src, out: oh.make_node("Conv", [src, f"w{i}", f"b{i}"], [out], pads=[1, 1, 1, 1])
    nodes = [conv(0, "x", "c0"), oh.make_node("Relu", ["c0"], ["r0"]),                           # clamp
             conv(1, "r0", "c1"), oh.make_node("Add", ["c1", "r0"], ["a1"]),                       # residual
             conv(2, "a1", "c2"), oh.make_node("HardSwish", ["c2"], ["g2"]),                      # gate
             conv(3, "g2", "c3"), oh.make_node("Add", ["c3", "g2"], ["s3"]),
             oh.make_node("Clip", ["s3", "lo", "hi"], ["k3"]),                                     # residual + clamp
             conv(4, "k3", "c4"), oh.make_node("Add", ["c4", "k3"], ["s4"]),
             oh.make_node("HardSwish", ["s4"], ["g4"]),                                            # residual + gate
             conv(5, "g4", "y")]                                                                   # nothing
    model, out = _fused_model(tmp_path, nodes, inits, ["y"], x_shape=(1, 16, 6, 30))
    feeds = {"x": _arr(rng, 1, 16, 6, 30)}
    want = run_ort(model, feeds)[0]
    for nt in (1, 2):
        m = load(out, num_threads=nt)
        np.testing.assert_allclose(m.run(feeds)["y"], want, rtol=1e-4, atol=1e-4)
    assert [s.node.op for s in m.plan.program.steps] == ["Conv"] * 6


@pytest.mark.parametrize("m, group, tiles", [(16, 1, 56), (12, 3, 56), (48, 3, 56), (32, 1, 84), (96, 3, 84)])
def test_one_channel_block_takes_wider_tiles(resolver, monkeypatch, m, group, tiles):
    """Wide channel tiles hold 12 pixels of two 16-channel blocks, or SOLO = 16 pixels when every group has one
    block (at most 16 output channels): a 28 x 28 image (rows of 14 + 14 pixels fill 7/8 of their vectors: too
    few for pixel tiles) is 28 rows of two 14-pixel tiles instead of three of 10, 9 and 9 pixels (tiles per chunk
    on one thread); results match the reference on 1 to 3 threads."""
    assert direct_emit.SOLO == 16 and direct_emit.PIXEL_FILL == (15, 16)
    plan, x, want = _padded_3x3(resolver, monkeypatch, np.random.default_rng(9), 4, m, group, (28, 28), True)
    assert _run_and_record(plan, x, want, 1)[len(conv_direct.FIELDS)] == tiles
    for nt in (2, 3):
        _run_and_record(plan, x, want, nt)
