"""kernels/qconv: the int8 convolution driver (input quantized and packed per call, u8 x s8 sums, float
epilogue) against an integer numpy convolution (bit for bit) and the float convolution of the dequantized values."""
import numpy as np
import pytest
from helpers import all_drivers_library

from converter_lite.kernels.qconv.abi import QCONV_SYMBOL
from converter_lite.kernels.qconv.bind import PackedQConv, qconv_step


@pytest.fixture(scope="module", params=["linked", "avx2"])
def lib(request):
    """The driver as linked for this host (VNNI here) and built for an AVX2 target (the generic byte products)."""
    if request.param == "avx2":
        from converter_lite.codegen import build_kernels
        from converter_lite.kernels.registry import emitters
        from converter_lite.runtime.native import NativeLibrary
        bundle = build_kernels([], target={"cpu_type": "x86-64-v3"}, cache_dir="", drivers=emitters([QCONV_SYMBOL]))
        lib = NativeLibrary.from_sections(bundle.sections, trust_native_code=True)
    else:
        lib = all_drivers_library()
    assert lib.support(QCONV_SYMBOL)
    yield lib
    del lib


def _quantize(x, s, z):
    t = np.rint(x / np.float32(s)) + np.float32(z)
    t = np.where(np.isnan(t), 0, t)
    return np.clip(t, 0, 255).astype(np.int64)


def _windows(xq, zx, kh, kw, pads, dil, strides):
    """(ky, kx, window - zx) for every tap of a kh x kw kernel over ``xq`` padded with ``zx`` (a float zero):
    window[n, c, oy, ox] is the input under tap (ky, kx) of output pixel (oy, ox)."""
    n, c, h, wd = xq.shape
    pt, pl, pb, pr = pads
    sh, sw = strides
    xp = np.full((n, c, h + pt + pb, wd + pl + pr), zx, np.int64)
    xp[:, :, pt:pt + h, pl:pl + wd] = xq
    oh = (xp.shape[2] - dil[0] * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dil[1] * (kw - 1) - 1) // sw + 1
    for ky in range(kh):
        for kx in range(kw):
            yield ky, kx, xp[:, :, ky * dil[0]:ky * dil[0] + sh * (oh - 1) + 1:sh,
                             kx * dil[1]:kx * dil[1] + sw * (ow - 1) + 1:sw] - zx


def _int_conv(xq, zx, w, pads, dil, strides=(1, 1)):
    """sum over (c, ky, kx) of (xq - zx) * w, the input padded with zx (= a float zero)."""
    return sum(np.einsum("nchw,mc->nmhw", patch, w[:, :, ky, kx].astype(np.int64))
               for ky, kx, patch in _windows(xq, zx, *w.shape[2:], pads, dil, strides))


CASES = [  # (n, c, h, w, m, kh, kw, pads, dilations, strides)
    (1, 16, 32, 32, 16, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),
    (1, 3, 17, 23, 8, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),          # C not a multiple of 4, odd sizes
    (2, 5, 9, 40, 30, 1, 1, (0, 0, 0, 0), (1, 1), (1, 1)),          # 1x1, two images, > 2 x 12 channels
    (1, 8, 12, 12, 13, 3, 3, (2, 2, 2, 2), (2, 2), (1, 1)),          # dilation
    (1, 4, 6, 50, 4, 5, 3, (2, 0, 1, 1), (1, 1), (1, 1)),           # asymmetric pads, two row segments
    (1, 12, 7, 7, 25, 7, 7, (3, 3, 3, 3), (1, 1), (1, 1)),
    (1, 3, 33, 35, 16, 7, 7, (3, 3, 3, 3), (1, 1), (2, 2)),         # a stem: stride 2, odd sizes
    (2, 16, 16, 70, 20, 3, 3, (1, 1, 1, 1), (1, 1), (2, 2)),        # stride 2, rows of several segments
    (1, 8, 9, 11, 8, 1, 1, (0, 0, 0, 0), (1, 1), (2, 2)),           # a 1x1 stride-2 shortcut
    (1, 8, 10, 13, 9, 3, 3, (0, 1, 2, 0), (2, 1), (1, 2)),          # column stride only, odd left pad
    (1, 8, 10, 13, 9, 3, 2, (1, 0, 0, 1), (1, 2), (3, 1)),          # row stride only
]


@pytest.mark.parametrize("case", CASES + [
    (1, 24, 5, 5, 40, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),           # small planes: flat runs over rows
    (2, 8, 3, 7, 12, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),
    (1, 4, 9, 9, 8, 3, 3, (4, 4, 4, 4), (4, 4), (1, 1))])           # ... with a wide dilation
@pytest.mark.parametrize("nt", [1, 3])
@pytest.mark.parametrize("flat", [None, False, True])
def test_matches_the_integer_convolution(lib, case, nt, flat):
    n, c, h, wd, m, kh, kw, pads, dil, strides = case
    rng = np.random.default_rng(c * 100 + m)
    x = (rng.standard_normal((n, c, h, wd)) * 2).astype(np.float32)
    x.flat[0] = np.nan
    w = rng.integers(-127, 128, (m, c, kh, kw)).astype(np.int8)
    sx, zx = np.float32(0.03), 117
    ws = rng.uniform(0.001, 0.01, m).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    packed = PackedQConv(w, ws, sx, zx, bias)
    acc = _int_conv(_quantize(x, sx, zx), zx, w, pads, dil, strides)
    y = np.full(acc.shape, np.nan, np.float32)
    step = qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, pads, dil, nt, strides=strides, flat=flat)
    step()
    want = acc.astype(np.float32) * (sx * ws)[None, :, None, None] + bias[None, :, None, None]
    np.testing.assert_array_equal(y, want)
    # the float convolution of the dequantized values, sum((q - zx) * sx * w * ws), in float64
    np.testing.assert_allclose(y, acc * (np.float64(sx) * ws[None, :, None, None]) + bias[None, :, None, None],
                               rtol=1e-5, atol=1e-5)


BODIES = [{"flat": False}, {"flat": True}, {"channel_lanes": True}]   # rows, flat runs, channel lanes


@pytest.mark.parametrize("body", BODIES)
def test_residual_and_clamp(lib, body):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = rng.integers(-127, 128, (8, 8, 3, 3)).astype(np.int8)
    ws = np.full(8, 0.01, np.float32)
    packed = PackedQConv(w, ws, np.float32(0.05), 128, None)
    res = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    y = np.zeros_like(res)
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, (1, 1, 1, 1), (1, 1), 2, residual=res, clamp=(0.0, 6.0),
               **body)()
    acc = _int_conv(_quantize(x, 0.05, 128), 128, w, (1, 1, 1, 1), (1, 1))
    want = np.clip(acc.astype(np.float32) * np.float32(0.05 * np.float32(0.01)) + res, 0, 6)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_declines_what_it_cannot_read(lib):
    packed = PackedQConv(np.ones((4, 4, 3, 3), np.int8), np.ones(4, np.float32), np.float32(1), 0, None)
    x = np.zeros((1, 4, 8, 8), np.float32)
    assert qconv_step(lib.support(QCONV_SYMBOL), packed, x, np.zeros((1, 4, 7, 7), np.float32), (1, 1, 1, 1),
                      (1, 1), 1) is None                                   # wrong output shape
    assert qconv_step(lib.support(QCONV_SYMBOL), packed, x[:, :, :, ::2], np.zeros((1, 4, 8, 4), np.float32),
                      (1, 1, 1, 1), (1, 1), 1) is None                     # not contiguous


@pytest.mark.parametrize("body", BODIES)
def test_requantized_output(lib, body):
    """The output through QuantizeLinear -> DequantizeLinear (uint8) in the epilogue, after a Relu clamp: what a QDQ
    model's next pair computes, bit for bit."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 8, 9, 11)).astype(np.float32)
    w = rng.integers(-127, 128, (10, 8, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, 10).astype(np.float32)
    packed = PackedQConv(w, ws, np.float32(0.04), 110, rng.standard_normal(10).astype(np.float32))
    y = np.full((1, 10, 9, 11), np.nan, np.float32)
    osc, ozp = np.float32(0.07), 3
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, (1, 1, 1, 1), (1, 1), 2, clamp=(0.0, np.inf),
               requantize=(osc, ozp), **body)()
    acc = _int_conv(_quantize(x, 0.04, 110), 110, w, (1, 1, 1, 1), (1, 1))
    conv = acc.astype(np.float32) * packed.scale[None, :, None, None] + packed.bias[None, :, None, None]
    q = _quantize(np.maximum(conv, 0), osc, ozp)
    np.testing.assert_array_equal(y, (q.astype(np.float32) - np.float32(ozp)) * osc)


def _fq(v, s, z):
    return (np.clip(np.rint(v / np.float64(s)) + z, 0, 255) - z) * np.float64(s)


@pytest.mark.parametrize("body", [{"channel_lanes": False}, {"channel_lanes": True}])
@pytest.mark.parametrize("stages", ["silu", "product", "qdq"])
def test_silu_epilogue(lib, stages, body):
    """SiLU (y * sigmoid(y)) in the epilogue: alone (within float32 rounding of numpy's), with the product's
    quantization round trip, and as a QDQ model writes it (the convolution's output, the sigmoid's and the
    product's round trips); quantized, within one quantization step of numpy's."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((1, 8, 9, 13)) * 3).astype(np.float32)
    w = rng.integers(-127, 128, (10, 8, 3, 3)).astype(np.int8)
    packed = PackedQConv(w, np.full(10, 0.02, np.float32), np.float32(0.05), 128, None)
    y = np.full((1, 10, 9, 13), np.nan, np.float32)
    qa, qb, qc = (np.float32(0.1), 100), (np.float32(1 / 255), 0), (np.float32(0.05), 20)
    kw = {"silu": True, **body}
    if stages == "product":
        kw["silu_requantize"] = (None, qc)
    elif stages == "qdq":
        kw.update(requantize=qa, silu_requantize=(qb, qc))
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, (1, 1, 1, 1), (1, 1), 2, **kw)()
    acc = _int_conv(_quantize(x, 0.05, 128), 128, w, (1, 1, 1, 1), (1, 1))
    conv = (acc.astype(np.float32) * packed.scale[None, :, None, None]).astype(np.float64)
    assert np.abs(conv).max() > 20                                      # both tails of the sigmoid are reached
    if stages == "silu":
        np.testing.assert_allclose(y, conv / (1 + np.exp(-conv)), rtol=1e-6, atol=1e-6)
        return
    if stages == "product":
        want, step = _fq(conv / (1 + np.exp(-conv)), *qc), qc[0]
    else:
        a = _fq(conv, *qa)
        want, step = _fq(a * _fq(1 / (1 + np.exp(-a)), *qb), *qc), qc[0]
    assert np.abs(y - want).max() <= step * 1.001 and np.mean(y != want.astype(np.float32)) < 0.02


SMALL = [  # (n, c, h, w, m, kh, kw, pads, dilations, strides): small planes, m around multiples of 16
    (1, 64, 5, 5, 256, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),          # 5 x 5: 4 pixel groups, 6 channel blocks
    (1, 32, 10, 10, 40, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),         # 10 x 10, the last channel vector half used
    (1, 20, 7, 7, 33, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),           # 7 x 7, one channel of the third vector
    (2, 16, 5, 5, 200, 1, 1, (0, 0, 0, 0), (1, 1), (1, 1)),          # 1x1, two images, 13 vectors in 5 blocks
    (1, 24, 10, 10, 48, 1, 1, (0, 0, 0, 0), (1, 1), (2, 2)),         # 1x1 stride 2 -> 5 x 5
    (1, 16, 10, 10, 64, 3, 3, (1, 1, 1, 1), (1, 1), (2, 2)),         # 3x3 stride 2 -> 5 x 5
    (1, 12, 20, 20, 17, 3, 3, (1, 1, 1, 1), (1, 1), (2, 2)),         # -> 10 x 10, m = 17
    (1, 8, 14, 14, 8, 7, 7, (3, 3, 3, 3), (1, 1), (2, 2)),           # a 7x7 kernel -> 7 x 7, m < 16
    (1, 3, 2, 3, 16, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),            # 6 pixels: one group of fewer than 8
    (1, 8, 9, 9, 24, 3, 3, (4, 4, 4, 4), (4, 4), (1, 2)),            # dilation, column stride only
    (1, 6, 6, 9, 20, 3, 2, (2, 0, 1, 1), (1, 1), (1, 1)),            # asymmetric pads, a partial channel quad
]


@pytest.mark.parametrize("case", SMALL + CASES)
@pytest.mark.parametrize("nt", [1, 2])
def test_channel_lanes_match_the_integer_convolution(lib, case, nt):
    """The channel-lane body (emit_channels.py) bit for bit, on the small planes it is chosen for and on every geometry
    of CASES (it reads the same packed input)."""
    n, c, h, wd, m, kh, kw, pads, dil, strides = case
    rng = np.random.default_rng(c * 100 + m + 1)
    x = (rng.standard_normal((n, c, h, wd)) * 2).astype(np.float32)
    x.flat[-1] = np.nan
    w = rng.integers(-128, 128, (m, c, kh, kw)).astype(np.int8)
    sx, zx = np.float32(0.03), 131
    ws = rng.uniform(0.001, 0.01, m).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    packed = PackedQConv(w, ws, sx, zx, bias)
    acc = _int_conv(_quantize(x, sx, zx), zx, w, pads, dil, strides)
    y = np.full(acc.shape, np.nan, np.float32)
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, pads, dil, nt, strides=strides, channel_lanes=True)()
    want = acc.astype(np.float32) * (sx * ws)[None, :, None, None] + bias[None, :, None, None]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("nt", [1, 2])
def test_channel_lanes_epilogue(lib, nt):
    """Residual, clamp and the output's round trip on the channel-lane body with several channel vectors (the
    last one partial) and pixel groups of 7 and 6, no bias."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((1, 40, 10, 10)).astype(np.float32)
    w = rng.integers(-127, 128, (72, 40, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, 72).astype(np.float32)
    packed = PackedQConv(w, ws, np.float32(0.05), 128, None)
    res = rng.standard_normal((1, 72, 5, 5)).astype(np.float32)
    y = np.full_like(res, np.nan)
    osc, ozp = np.float32(0.03), 100
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, (1, 1, 1, 1), (1, 1), nt, residual=res, clamp=(-1.0, 2.5),
               strides=(2, 2), requantize=(osc, ozp), channel_lanes=True)()
    acc = _int_conv(_quantize(x, 0.05, 128), 128, w, (1, 1, 1, 1), (1, 1), (2, 2))
    conv = np.clip(acc.astype(np.float32) * packed.scale[None, :, None, None] + res, np.float32(-1), np.float32(2.5))
    q = _quantize(conv, osc, ozp)
    np.testing.assert_array_equal(y, (q.astype(np.float32) - np.float32(ozp)) * osc)


def test_the_body_rule():
    """Channel lanes where they fill more lanes than the pixel-lane body, on a larger plane only for long sums
    (bind.channel_lanes_pay)."""
    from converter_lite.kernels.qconv.bind import channel_lanes_pay
    assert channel_lanes_pay(5, 5, 7, 256, 576) and channel_lanes_pay(10, 10, 12, 128, 288)  # resnet's 3x3
    assert channel_lanes_pay(5, 5, 5, 80, 120) and channel_lanes_pay(10, 10, 10, 32, 4)      # 1x1: 52%, 89% lanes
    assert channel_lanes_pay(40, 40, 42, 32, 72) and not channel_lanes_pay(40, 40, 40, 96, 4)  # 3x3; short sums
    assert not channel_lanes_pay(20, 20, 20, 64, 16)                                         # 1x1: flat 100%
    assert not channel_lanes_pay(5, 5, 7, 8, 18) and not channel_lanes_pay(10, 10, 10, 16, 4)  # half a vector;
    assert not channel_lanes_pay(80, 80, 82, 64, 144)                                        # one; full pixels
    from converter_lite.kernels.qconv.bind import flat_pays
    assert flat_pays(5, 5, 7) and flat_pays(40, 40, 40) and not flat_pays(40, 40, 42)   # a 1x1 on 40 x 40: flat
    assert not channel_lanes_pay(40, 40, 40, 128, 32)                                      # ... not channel lanes


@pytest.mark.parametrize("case", CASES + SMALL[:3] + [
    (1, 5, 7, 150, 9, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),           # rows of 64 + 64 + 22 pixels packed
    (1, 6, 5, 101, 12, 3, 3, (1, 0, 1, 1), (1, 1), (2, 2))])         # ... 64 + 37, column stride 2
@pytest.mark.parametrize("body", BODIES)
def test_uint8_input_is_read_as_quantized(lib, case, body):
    """A uint8 input (the uint8 hand-off: quantized by the previous convolution) gives bit for bit what the float
    input it quantizes gives, on every body and geometry (its own packing: bytes interleaved, no division)."""
    n, c, h, wd, m, kh, kw, pads, dil, strides = case
    rng = np.random.default_rng(c * 10 + m + 2)
    x = (rng.standard_normal((n, c, h, wd)) * 2).astype(np.float32)
    w = rng.integers(-128, 128, (m, c, kh, kw)).astype(np.int8)
    sx, zx = np.float32(0.03), 121
    packed = PackedQConv(w, rng.uniform(0.001, 0.01, m).astype(np.float32), sx, zx,
                         rng.standard_normal(m).astype(np.float32))
    acc = _int_conv(_quantize(x, sx, zx), zx, w, pads, dil, strides)
    want = np.full(acc.shape, np.nan, np.float32)
    got = np.full(acc.shape, np.nan, np.float32)
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, want, pads, dil, 2, strides=strides, **body)()
    qconv_step(lib.support(QCONV_SYMBOL), packed, _quantize(x, sx, zx).astype(np.uint8), got, pads, dil, 2,
               strides=strides, **body)()
    np.testing.assert_array_equal(got, want)


def _requantized_case(case, seed, nan_at):
    """(rng, input with a NaN at ``nan_at``, int8 weights, their PackedQConv with biases) of a ``case`` row, for
    the tests of requantized and SiLU outputs."""
    n, c, h, wd, m, kh, kw = case[:7]
    rng = np.random.default_rng(c * 10 + m + seed)
    x = (rng.standard_normal((n, c, h, wd)) * 3).astype(np.float32)
    x.flat[nan_at] = np.nan
    w = rng.integers(-128, 128, (m, c, kh, kw)).astype(np.int8)
    packed = PackedQConv(w, rng.uniform(0.001, 0.01, m).astype(np.float32), np.float32(0.05), 118,
                         rng.standard_normal(m).astype(np.float32))
    return rng, x, w, packed


@pytest.mark.parametrize("case", CASES[:4] + SMALL[:4])
@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("tail", ["requantize", "silu"])
@pytest.mark.parametrize("nt", [1, 3])
def test_uint8_output_is_the_quantized_round_trip(lib, case, body, tail, nt):
    """A uint8 output holds QuantizeLinear's bytes of the output's last pair (the round trip's, or with a SiLU the
    product's), exactly the values the float output's round trip dequantizes; after a clamp, with NaN input."""
    n, c, h, wd, _, _, _, pads, dil, strides = case
    _, x, w, packed = _requantized_case(case, 3, nan_at=1)
    pair = (np.float32(0.04), 37)
    kw_ = {"requantize": pair, "clamp": (-1.5, np.inf)} if tail == "requantize" else \
        {"requantize": (np.float32(0.06), 90), "silu": True, "silu_requantize": ((np.float32(1 / 255), 0), pair)}
    shape = _int_conv(np.zeros((n, c, h, wd), np.int64), 0, w, pads, dil, strides).shape
    yf = np.full(shape, np.nan, np.float32)
    yq = np.zeros(shape, np.uint8)
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, yf, pads, dil, nt, strides=strides, **body, **kw_)()
    qconv_step(lib.support(QCONV_SYMBOL), packed, x, yq, pads, dil, nt, strides=strides, **body, **kw_)()
    np.testing.assert_array_equal(yq, _quantize(yf, *pair))
    np.testing.assert_array_equal((yq.astype(np.float32) - np.float32(pair[1])) * pair[0], yf)


def test_uint8_output_needs_its_pair(lib):
    packed = PackedQConv(np.ones((4, 4, 1, 1), np.int8), np.ones(4, np.float32), np.float32(1), 0, None)
    x, y = np.zeros((1, 4, 6, 6), np.float32), np.zeros((1, 4, 6, 6), np.uint8)
    assert qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, (0, 0, 0, 0), (1, 1), 1) is None
    assert qconv_step(lib.support(QCONV_SYMBOL), packed, x, y, (0, 0, 0, 0), (1, 1), 1, silu=True,
                      requantize=(np.float32(1), 0)) is None              # a SiLU: the product's pair is last


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[4], CASES[6], CASES[7], CASES[9]] + SMALL[:3] + [
    (1, 3, 40, 40, 16, 3, 3, (1, 1, 1, 1), (1, 1), (2, 2)),          # a stem: 3 channels, stride 2
    (1, 16, 20, 40, 24, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1))])        # rows of 32 + 8 pixels
@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("out", ["uint8", "float32"])
@pytest.mark.parametrize("nt", [1, 3])
def test_silu_table_is_the_computed_silu(lib, case, body, out, nt):
    """SiLU after the output's round trip, its product quantized, looked up from the driver's table (bind.py
    ``silu_table``) gives bit for bit what computing it per element gives: a uint8 output's bytes, a float32
    output's round trip; with a residual, a clamp, NaN input, and a uint8 input."""
    n, c, h, wd, _, _, _, pads, dil, strides = case
    rng, x, w, packed = _requantized_case(case, 4, nan_at=2)
    shape = _int_conv(np.zeros((n, c, h, wd), np.int64), 0, w, pads, dil, strides).shape
    res = rng.standard_normal(shape).astype(np.float32)
    kw_ = {"requantize": (np.float32(0.06), 90), "silu": True, "clamp": (-4.0, 6.0), "residual": res,
           "silu_requantize": ((np.float32(1 / 255), 0), (np.float32(0.04), 37))}
    ys = []
    for xin, table in ((x, True), (x, False), (_quantize(x, 0.05, 118).astype(np.uint8), True)):
        y = np.zeros(shape, np.uint8) if out == "uint8" else np.full(shape, np.nan, np.float32)
        qconv_step(lib.support(QCONV_SYMBOL), packed, xin, y, pads, dil, nt, strides=strides, silu_table=table,
                   **body, **kw_)()
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_array_equal(ys[2], ys[1])
    assert len(np.unique(ys[0])) > 20                                   # (a spread of values went through it)
