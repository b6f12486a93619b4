"""kernels/conv_depthwise/ (emit.py + bind.py): depthwise Convs left as Conv (here: the expander
disabled) run on the native driver; results against onnxruntime, the epilogue, and the declines."""
import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info

import converter_lite
from converter_lite.kernels.conv_depthwise import bind as conv_depthwise

FLAGS = "--opt_level=2 --disable_expand_ops=Conv"


def _model(rng, n, c, h, w, k, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), bias=True, epilogue=None):
    kh, kw = k
    oh_ = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow_ = (w + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    inits = {"w": rng.standard_normal((c, 1, kh, kw)).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(c).astype(np.float32)
        ins.append("b")
    nodes = [oh.make_node("Conv", ins, ["y0"], group=c, kernel_shape=[kh, kw], strides=list(strides),
                          pads=list(pads), dilations=list(dil))]
    inputs = [tensor_info("x", np.float32, [n, c, h, w])]
    feeds = {"x": rng.standard_normal((n, c, h, w)).astype(np.float32)}
    last = "y0"
    if epilogue == "clip":
        inits["lo"], inits["hi"] = np.array(0, np.float32), np.array(6, np.float32)
        nodes.append(oh.make_node("Clip", ["y0", "lo", "hi"], ["y"]))
        last = "y"
    elif epilogue in ("residual", "add"):          # residual + Relu, or the residual alone (no clamp)
        inputs.append(tensor_info("r", np.float32, [n, c, oh_, ow_]))
        feeds["r"] = rng.standard_normal((n, c, oh_, ow_)).astype(np.float32)
        if epilogue == "residual":
            nodes += [oh.make_node("Add", ["y0", "r"], ["s"]), oh.make_node("Relu", ["s"], ["y"])]
        else:
            nodes.append(oh.make_node("Add", ["y0", "r"], ["y"]))
        last = "y"
    model = make_model(nodes, inputs, [tensor_info(last, np.float32, [n, c, oh_, ow_])], inits)
    return model, feeds


def _converted(tmp_path, model, nt=1):
    path = tmp_path / "dw.onnx"
    path.write_bytes(model.SerializeToString())
    return converter_lite.load(converter_lite.convert(str(path), str(tmp_path / "dw"), graph_kernel_flags=FLAGS),
                               num_threads=nt)


def _kinds(model):
    return {type(getattr(s.impl.bind, "__self__", None)).__name__ for s in model.plan.program.steps
            if s.node.op == "Conv"}


CASES = [
    dict(n=1, c=96, h=40, w=40, k=(3, 3), pads=(1, 1, 1, 1)),                  # mobilenet
    dict(n=1, c=48, h=80, w=80, k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
    dict(n=2, c=5, h=17, w=23, k=(5, 5), pads=(2, 2, 2, 2), bias=False),
    dict(n=1, c=8, h=9, w=9, k=(7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),      # rows shorter than the kernel
    dict(n=1, c=4, h=12, w=35, k=(3, 3), pads=(2, 2, 2, 2), dil=(2, 2)),
    dict(n=1, c=3, h=33, w=37, k=(3, 3), strides=(2, 2)),
    dict(n=1, c=6, h=10, w=50, k=(3, 5), strides=(1, 2), pads=(0, 2, 1, 0)),    # kh != kw, asymmetric pads
    dict(n=1, c=7, h=11, w=13, k=(9, 1), pads=(4, 0, 4, 0)),                    # tall kernel: kh is not limited
    dict(n=1, c=2, h=3, w=70, k=(1, 7), strides=(2, 1), pads=(0, 3, 0, 3)),
    dict(n=1, c=6, h=14, w=14, k=(9, 9), strides=(2, 2), pads=(4, 4, 4, 4)),     # MixNet's 9x9 and 11x11
    dict(n=1, c=5, h=13, w=30, k=(11, 11), strides=(2, 2), pads=(5, 5, 5, 5)),
    dict(n=1, c=6, h=40, w=50, k=(5, 5), strides=(2, 2), pads=(2, 2, 2, 2)),    # too large for the channel form
    dict(n=1, c=3, h=37, w=36, k=(7, 7), strides=(2, 2), pads=(3, 2, 3, 1)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("nt", [1, 2])
def test_matches_onnxruntime(tmp_path, rng, case, nt):
    model, feeds = _model(rng, **case)
    m = _converted(tmp_path, model, nt)
    assert _kinds(m) == {"DepthwiseConv"}
    np.testing.assert_allclose(m.run(feeds)["y0"], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue", ["clip", "residual", "add"])
def test_epilogue_runs_in_the_driver(tmp_path, rng, epilogue):
    model, feeds = _model(rng, 1, 24, 20, 20, (3, 3), pads=(1, 1, 1, 1), epilogue=epilogue)
    feeds["x"][0, 0, 3, 3] = np.nan                                    # NaN stays NaN through the clamp
    m = _converted(tmp_path, model)
    assert [s.node.op for s in m.plan.program.steps] == ["Conv"]        # the fused epilogue kernel was absorbed
    got, want = m.run(feeds)["y"], run_ort(model, feeds)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_declined_geometries_use_the_numpy_path(tmp_path, rng):
    for case in (dict(n=1, c=4, h=12, w=12, k=(3, 13), pads=(1, 6, 1, 6)),     # kw > MAX_KW
                 dict(n=1, c=4, h=12, w=12, k=(3, 3), strides=(3, 3))):         # column stride 3
        model, feeds = _model(rng, **case)
        m = _converted(tmp_path, model)
        assert _kinds(m) == {"_Depthwise"}
        np.testing.assert_allclose(m.run(feeds)["y0"], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


# flat planes (stride 1, square kernel, output as wide as the input): planes smaller than a vector, planes that
# are not a multiple of 16, several images (windows reaching into the neighbouring planes), k = 1..11, a column
# dilation other than 1 (masked loads only), one plane alone (first and last of the tensor at once)
FLAT_CASES = [
    dict(n=1, c=96, h=40, w=40, k=(3, 3), pads=(1, 1, 1, 1)),
    dict(n=2, c=7, h=5, w=5, k=(3, 3), pads=(1, 1, 1, 1)),
    dict(n=1, c=5, h=10, w=10, k=(3, 3), pads=(1, 1, 1, 1), bias=False),
    dict(n=1, c=1, h=13, w=3, k=(3, 3), pads=(1, 1, 1, 1)),
    dict(n=2, c=3, h=9, w=21, k=(5, 5), pads=(2, 2, 2, 2)),
    dict(n=1, c=4, h=15, w=17, k=(7, 7), pads=(3, 3, 3, 3)),
    dict(n=1, c=3, h=4, w=4, k=(7, 7), pads=(3, 3, 3, 3)),                     # kernel wider than the image
    dict(n=1, c=6, h=7, w=9, k=(1, 1)),
    dict(n=1, c=4, h=12, w=35, k=(3, 3), pads=(2, 2, 2, 2), dil=(2, 2)),        # masked loads only
    dict(n=1, c=3, h=11, w=18, k=(3, 3), pads=(0, 1, 1, 1)),                    # asymmetric rows: oh != h
    dict(n=1, c=4, h=14, w=14, k=(9, 9), pads=(4, 4, 4, 4)),                   # MixNet's 9x9 and 11x11
    dict(n=2, c=3, h=7, w=7, k=(11, 11), pads=(5, 5, 5, 5)),                   # kernel wider than the image
    dict(n=1, c=2, h=20, w=33, k=(11, 11), pads=(5, 5, 5, 5)),
    dict(n=3, c=4, h=16, w=16, k=(3, 3), pads=(1, 1, 1, 1)),                   # whole vectors per row
    dict(n=1, c=2, h=6, w=33, k=(3, 3), pads=(1, 1, 1, 1)),
]


def _flat_convs(model):
    return [s.impl.bind.__self__ for s in model.plan.program.steps if s.node.op == "Conv"]


@pytest.mark.parametrize("case", FLAT_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("nt", [1, 2])
def test_flat_planes_match_onnxruntime(tmp_path, rng, case, nt):
    model, feeds = _model(rng, **case)
    m = _converted(tmp_path, model, nt)
    convs = _flat_convs(m)
    assert len(convs) == 1 and convs[0].coords is not None            # the flat form ran
    np.testing.assert_allclose(m.run(feeds)["y0"], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue", [None, "clip", "residual", "add"])
def test_flat_planes_keep_infinities_to_their_own_plane(tmp_path, rng, epilogue):
    """Windows read the neighbouring planes' rows; those lanes are masked off, so an infinity or NaN next to a
    plane (first/last row and column of the neighbours) reaches only the outputs that really see it."""
    model, feeds = _model(rng, 2, 6, 9, 11, (3, 3), pads=(1, 1, 1, 1), epilogue=epilogue)
    x = feeds["x"]
    x[0, 1, 0, :] = np.inf
    x[0, 2, -1, :] = -np.inf
    x[0, 3, :, 0] = np.nan
    x[1, 4, :, -1] = np.inf
    m = _converted(tmp_path, model)
    assert _flat_convs(m)[0].coords is not None
    name = "y0" if epilogue is None else "y"
    got, want = m.run(feeds)[name], run_ort(model, feeds)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_flat_tables():
    """The coordinate table and the plain-load window of a 10x10 3x3 plane."""
    from types import SimpleNamespace
    geo = SimpleNamespace(oh=10, ow=10, h=10, w=10, kh=3, kw=3, dh=1, dw=1, pads=(1, 1, 1, 1))
    coords, (jlo, jhi) = conv_depthwise.flat_tables(geo)
    assert coords.shape == (7, 2, 16) and coords.ctypes.data % 64 == 0
    p = np.arange(112)
    assert (coords[:, 0].reshape(-1) == p % 10).all()
    assert (coords[:, 1].reshape(-1)[:100] == p[:100] // 10).all() and (coords[:, 1].reshape(-1)[100:] < 0).all()
    # windows of vector j, tap row ky: [16j - 11 + 10ky, 16j - 11 + 10ky + 32) inside [0, 100)
    assert (jlo, jhi) == (1, 4)
    geo.dw = 2
    assert conv_depthwise.flat_tables(geo)[1] == (0, 0)


@pytest.mark.parametrize("group", [1, "c"])
@pytest.mark.parametrize("k,pads", [((3, 3), (0, 0, 1, 1)), ((5, 5), (1, 1, 2, 2))])
def test_zero_pad_before_a_valid_conv_is_absorbed(tmp_path, rng, group, k, pads):
    """What PyTorch exports for a ZeroPad2d + ``padding="valid"`` stride-2 Conv (HF EfficientNet): the Pad folds
    into the Conv's pads (auto_pad VALID means zero pads), so no Pad step and no numpy Conv remain."""
    c = 32
    g = c if group == "c" else 1
    w = rng.standard_normal((c, c // g) + k).astype(np.float32)
    nodes = [oh.make_node("Pad", ["x", "pads", "zero"], ["xp"], mode="constant"),
             oh.make_node("Conv", ["xp", "w"], ["y"], group=g, kernel_shape=list(k), strides=[2, 2],
                          auto_pad="VALID")]
    inits = {"w": w, "pads": np.array([0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]], np.int64),
             "zero": np.array(0, np.float32)}
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, 28, 28])],
                       [tensor_info("y", np.float32, None)], inits)
    feeds = {"x": rng.standard_normal((1, c, 28, 28)).astype(np.float32)}
    for nt in (1, 2):
        m = _converted(tmp_path, model, nt)
        assert [s.node.op for s in m.plan.program.steps] == ["Conv"]
        assert not _kinds(m) & {"_Depthwise", "NoneType"}
        np.testing.assert_allclose(m.run(feeds)["y"], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-4)


def test_flat_row_taps_loaded_and_shifted(tmp_path, rng):
    """Both ways of reading a tap row's other taps in the flat form (emit.ROW_TAPS: 3x3 by unaligned loads, 5x5
    and 7x7 by lane shifts of the row's two loads) in one model, against onnxruntime, on 1 and 2 threads (planes
    too large for the channel form)."""
    from converter_lite.kernels.conv_depthwise import emit as dw_emit
    assert {dw_emit.ROW_TAPS.get(k, "shift") for k in (3, 5, 7)} == {"load", "shift"}
    c, h, w = 6, 30, 41
    assert not any(_channel_form(dict(h=h, w=w, k=(k, k), pads=(k // 2,) * 4)) for k in (3, 5, 7))
    inits = {f"w{k}": rng.standard_normal((c, 1, k, k)).astype(np.float32) for k in (3, 5, 7)}
    nodes = [oh.make_node("Conv", [src, f"w{k}"], [dst], group=c, kernel_shape=[k, k], pads=[k // 2] * 4)
             for k, src, dst in ((3, "x", "a"), (5, "a", "b"), (7, "b", "y"))]
    model = make_model(nodes, [tensor_info("x", np.float32, [2, c, h, w])],
                       [tensor_info("y", np.float32, [2, c, h, w])], inits)
    feeds = {"x": rng.standard_normal((2, c, h, w)).astype(np.float32)}
    want = run_ort(model, feeds)[0]
    for nt in (1, 2):
        m = _converted(tmp_path, model, nt)
        assert len(_flat_convs(m)) == 3 and all(conv.coords is not None for conv in _flat_convs(m))
        np.testing.assert_allclose(m.run(feeds)["y"], want, rtol=1e-4, atol=1e-4)


def _channel_form(case) -> bool:
    """Whether the driver runs ``case`` in the channel form (emit.py's ``_chan_form``, which decides natively)."""
    from converter_lite.kernels.conv_depthwise import emit as dw_emit
    (kh, kw), (sh, sw), (dh, dw) = case["k"], case.get("strides", (1, 1)), case.get("dil", (1, 1))
    pads = case.get("pads", (0, 0, 0, 0))
    oh_ = (case["h"] + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow_ = (case["w"] + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    hp = max(pads[0] + case["h"], (oh_ - 1) * sh + (kh - 1) * dh + 1)
    wp = max(pads[1] + case["w"], (ow_ - 1) * sw + (kw - 1) * dw + 1)
    return (kh == kw >= dw_emit.CHAN_MIN_K[sh * sw != 1] and hp * wp <= dw_emit.CHAN_IN
            and oh_ * ow_ <= dw_emit.CHAN_OUT)


# the channel form (16 channels per vector): PP-LCNet's 5x5 planes at strides 1 and 2, channel counts that are
# not a multiple of 16 (one block partly filled, one channel alone), several images, 3x3 and 7x7 at stride 2,
# odd and non-square planes, asymmetric pads, no pads, dilation, kernels wider than the plane, MixNet's 9x9 and
# 11x11, the largest planes it takes (28 x 28 5x5; 29 x 29 3x3 at stride 2), a row stride 2 with a column stride 1
CHAN_CASES = [
    dict(n=1, c=256, h=14, w=14, k=(5, 5), pads=(2, 2, 2, 2)),
    dict(n=1, c=512, h=7, w=7, k=(5, 5), pads=(2, 2, 2, 2)),
    dict(n=1, c=256, h=14, w=14, k=(5, 5), strides=(2, 2), pads=(2, 2, 2, 2)),
    dict(n=2, c=37, h=9, w=11, k=(5, 5), pads=(2, 2, 2, 2), bias=False),
    dict(n=1, c=1, h=7, w=7, k=(5, 5), pads=(2, 2, 2, 2)),
    dict(n=3, c=20, h=13, w=6, k=(5, 5), strides=(2, 2), pads=(1, 2, 3, 0)),
    dict(n=1, c=40, h=14, w=14, k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)),
    dict(n=1, c=18, h=15, w=9, k=(3, 3), strides=(2, 2)),
    dict(n=1, c=33, h=7, w=7, k=(7, 7), pads=(3, 3, 3, 3)),
    dict(n=1, c=17, h=10, w=10, k=(7, 7), strides=(2, 2), pads=(3, 3, 3, 3)),
    dict(n=1, c=18, h=8, w=8, k=(5, 5), pads=(4, 4, 4, 4), dil=(2, 2)),
    dict(n=2, c=5, h=6, w=6, k=(5, 5)),
    dict(n=1, c=3, h=4, w=4, k=(7, 7), pads=(3, 3, 3, 3)),
    dict(n=1, c=21, h=14, w=14, k=(9, 9), pads=(4, 4, 4, 4)),
    dict(n=1, c=19, h=13, w=13, k=(11, 11), strides=(2, 2), pads=(5, 5, 5, 5)),
    dict(n=1, c=24, h=28, w=28, k=(5, 5), pads=(2, 2, 2, 2)),
    dict(n=1, c=24, h=29, w=29, k=(3, 3), strides=(2, 2), pads=(0, 0, 0, 0)),
    dict(n=1, c=24, h=14, w=14, k=(5, 5), strides=(2, 1), pads=(2, 2, 2, 2)),
]


@pytest.mark.parametrize("case", CHAN_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize("nt", [1, 2])
def test_channel_form_matches_onnxruntime(tmp_path, rng, case, nt):
    assert _channel_form(case)
    model, feeds = _model(rng, **case)
    m = _converted(tmp_path, model, nt)
    assert _kinds(m) == {"DepthwiseConv"}
    np.testing.assert_allclose(m.run(feeds)["y0"], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("epilogue", [None, "clip", "residual", "add"])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
@pytest.mark.parametrize("nt", [1, 2])
def test_channel_form_epilogue_and_infinities(tmp_path, rng, epilogue, strides, nt):
    """The epilogue on the transposed-back outputs (NaN through the clamp), and infinities / NaN that stay in
    their own channel (lanes) and image: 2 images of 21 channels (two blocks, the second partly filled)."""
    case = dict(n=2, c=21, h=9, w=11, k=(5, 5), strides=strides, pads=(2, 2, 2, 2))
    assert _channel_form(case)
    model, feeds = _model(rng, **case, epilogue=epilogue)
    x = feeds["x"]
    x[0, 1, 0, :] = np.inf
    x[0, 15, -1, :] = -np.inf
    x[0, 16, :, 0] = np.nan
    x[1, 20, 4, 4] = np.inf
    m = _converted(tmp_path, model, nt)
    if epilogue is not None:
        assert [s.node.op for s in m.plan.program.steps] == ["Conv"]    # the epilogue was absorbed
    name = "y0" if epilogue is None else "y"
    got, want = m.run(feeds)[name], run_ort(model, feeds)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_channel_form_bounds():
    """Which geometries take the channel form: 3x3 at stride 1 keeps the flat form; planes past CHAN_IN padded
    pixels or CHAN_OUT outputs keep the row / flat forms (their cases above check the results)."""
    assert not _channel_form(dict(h=14, w=14, k=(3, 3), pads=(1, 1, 1, 1)))
    assert _channel_form(dict(h=14, w=14, k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    assert not _channel_form(dict(h=56, w=56, k=(5, 5), pads=(2, 2, 2, 2)))
    assert not _channel_form(dict(h=56, w=56, k=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1)))
    assert not _channel_form(dict(h=9, w=9, k=(5, 3), pads=(2, 1, 2, 1)))
    assert not any(_channel_form(c) for c in CASES[-2:])
    assert sum(_channel_form(c) for c in FLAT_CASES + CASES) < len(FLAT_CASES + CASES) // 2
