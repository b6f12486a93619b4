"""kernels/qconv_depthwise: the int8 depthwise convolution driver (input quantized or read as uint8, per-channel
int8 taps, the dense driver's epilogue) against an integer numpy depthwise convolution, bit for bit."""
import numpy as np
import pytest
from test_qconv import _quantize, _windows

from converter_lite.kernels.qconv_depthwise.abi import SYMBOL
from converter_lite.kernels.qconv_depthwise.bind import PackedQDepthwise, qdw_step


@pytest.fixture(scope="module", params=["host", "avx2"])
def lib(request):
    """The driver built for this host (AVX-512 VNNI here) and for an AVX2 target (the generic byte products, the
    masked byte loads and stores done without AVX-512)."""
    from converter_lite.codegen import build_kernels
    from converter_lite.kernels.registry import emitters
    from converter_lite.runtime.native import NativeLibrary
    target = {"cpu_type": "x86-64-v3"} if request.param == "avx2" else None
    bundle = build_kernels([], target=target, cache_dir="", drivers=emitters([SYMBOL]))
    lib = NativeLibrary.from_sections(bundle.sections, trust_native_code=True)
    assert lib.support(SYMBOL)
    yield lib
    del lib


def _int_depthwise(xq, zx, w, pads, dil, strides):
    """sum over (ky, kx) of (xq - zx) * w per channel, the input padded with zx (= a float zero)."""
    return sum(patch * w[None, :, 0, ky, kx, None, None].astype(np.int64)
               for ky, kx, patch in _windows(xq, zx, *w.shape[2:], pads, dil, strides))


CASES = [  # (n, c, h, w, kh, kw, pads, dilations, strides)
    (1, 16, 20, 20, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),
    (1, 96, 40, 40, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),            # mobilenet_v2_half's
    (1, 48, 80, 80, 3, 3, (1, 1, 1, 1), (1, 1), (2, 2)),            # ... stride 2
    (1, 21, 17, 23, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),            # channels not a multiple of 16, odd sizes
    (2, 7, 9, 35, 3, 3, (1, 1, 1, 1), (1, 1), (2, 2)),              # two images, odd width, stride 2
    (1, 33, 5, 5, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1)),              # 5 x 5 planes
    (1, 18, 5, 5, 5, 5, (2, 2, 2, 2), (1, 1), (1, 1)),              # 5x5 kernel on a 5 x 5 plane
    (1, 20, 14, 13, 5, 5, (2, 2, 2, 2), (1, 1), (2, 2)),            # 5x5 stride 2, odd width
    (1, 5, 12, 12, 3, 3, (2, 1, 2, 1), (2, 1), (1, 1)),             # row dilation
    (1, 6, 10, 13, 3, 2, (0, 1, 2, 0), (1, 1), (3, 1)),             # row stride only, asymmetric pads
    (1, 6, 10, 13, 3, 3, (1, 0, 0, 1), (3, 1), (1, 2)),             # column stride only, row dilation
    (1, 9, 16, 37, 3, 6, (1, 3, 1, 2), (1, 1), (2, 2)),             # two quads a kernel row, stride 2
    (1, 4, 7, 7, 7, 7, (0, 0, 0, 0), (1, 1), (1, 1)),               # no padding, one output pixel
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("nt", [1, 3])
@pytest.mark.parametrize("xu8", [False, True])
def test_matches_the_integer_convolution(lib, case, nt, xu8):
    n, c, h, wd, kh, kw, pads, dil, strides = case
    rng = np.random.default_rng(c * 100 + kh)
    x = (rng.standard_normal((n, c, h, wd)) * 2).astype(np.float32)
    x.flat[0] = np.nan
    w = rng.integers(-128, 128, (c, 1, kh, kw)).astype(np.int8)
    w[0] = -128                                                       # the extremes: exact sums
    sx, zx = np.float32(0.03), 117
    ws = rng.uniform(0.001, 0.01, c).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    xq = _quantize(x, sx, zx)
    packed = PackedQDepthwise(w, ws, sx, zx, bias)
    acc = _int_depthwise(xq, zx, w, pads, dil, strides)
    y = np.full(acc.shape, np.nan, np.float32)
    src = xq.astype(np.uint8) if xu8 else x
    step = qdw_step(lib.support(SYMBOL), packed, src, y, pads, dil, nt, strides=strides)
    step()
    want = acc.astype(np.float32) * (sx * ws)[None, :, None, None] + bias[None, :, None, None]
    np.testing.assert_array_equal(y, want)
    assert not np.isnan(y).any()


def _q(v, s, z):
    return _quantize(v, s, z).astype(np.float32)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
@pytest.mark.parametrize("pair", [(6 / 255, 0), (0.02, 3)])        # the quantization saturates the clamp, or not
def test_clamp_round_trip_and_uint8_output(lib, strides, pair):
    """ReLU6 and the output's pair: the float output is its round trip, the uint8 one its QuantizeLinear bytes."""
    rng = np.random.default_rng(3)
    c = 24
    xq = rng.integers(0, 256, (1, c, 11, 19)).astype(np.uint8)
    w = rng.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, c).astype(np.float32)
    sx, zx, so, zo = np.float32(0.05), 100, np.float32(pair[0]), pair[1]
    packed = PackedQDepthwise(w, ws, sx, zx, None)
    acc = _int_depthwise(xq.astype(np.int64), zx, w, (1, 1, 1, 1), (1, 1), strides)
    v = np.clip(acc.astype(np.float32) * (sx * ws)[None, :, None, None], 0, 6).astype(np.float32)
    bytes_ = _q(v, so, zo)
    yf = np.zeros(acc.shape, np.float32)
    yb = np.zeros(acc.shape, np.uint8)
    addr = lib.support(SYMBOL)
    for y in (yf, yb):
        qdw_step(addr, packed, xq, y, (1, 1, 1, 1), (1, 1), 2, strides=strides, clamp=(0.0, 6.0),
                 requantize=(so, zo))()
    np.testing.assert_array_equal(yf, ((bytes_ - zo) * so).astype(np.float32))
    np.testing.assert_array_equal(yb, bytes_.astype(np.uint8))


def test_silu(lib):
    """SiLU with the sigmoid's and the product's pairs, float32 and uint8 outputs (the dense driver's tail)."""
    from converter_lite.ops.registry import OPS
    rng = np.random.default_rng(5)
    c = 17
    xq = rng.integers(0, 256, (1, c, 9, 9)).astype(np.uint8)
    w = rng.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, c).astype(np.float32)
    sx, zx = np.float32(0.05), 128
    sq, pq = (np.float32(1 / 255), 0), (np.float32(0.03), 10)
    packed = PackedQDepthwise(w, ws, sx, zx, None)
    acc = _int_depthwise(xq.astype(np.int64), zx, w, (1, 1, 1, 1), (1, 1), (1, 1))
    v = acc.astype(np.float32) * (sx * ws)[None, :, None, None]
    sig = OPS["Sigmoid"].compute({}, v)
    sig = (_q(sig, *sq) - sq[1]) * sq[0]
    prod = (v * sig).astype(np.float32)
    pbytes = _q(prod, *pq)
    yf, yb = np.zeros(acc.shape, np.float32), np.zeros(acc.shape, np.uint8)
    for y in (yf, yb):
        qdw_step(lib.support(SYMBOL), packed, xq, y, (1, 1, 1, 1), (1, 1), 1, silu=True,
                 silu_requantize=(sq, pq))()
    np.testing.assert_array_equal(yb, pbytes.astype(np.uint8))
    np.testing.assert_allclose(yf, ((pbytes - pq[1]) * pq[0]).astype(np.float32), rtol=0, atol=pq[0] * 1.01)


@pytest.mark.parametrize("case", [(3, 40, 40, (1, 1)), (5, 5, 5, (1, 1)), (4, 9, 35, (2, 2)), (6, 10, 10, (1, 2))])
def test_writes_nothing_outside_the_output(lib, case):
    """The row stores (whole 64-output blocks, masked) and the direct form's loads (masked past the plane) stay
    inside: guard bytes around the output are untouched, on the uint8 and the float32 paths."""
    c, h, wd, strides = case
    rng = np.random.default_rng(9)
    xq = rng.integers(0, 256, (1, c, h, wd)).astype(np.uint8)
    w = rng.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.001, 0.01, c).astype(np.float32)
    packed = PackedQDepthwise(w, ws, np.float32(0.05), 7, None)
    acc = _int_depthwise(xq.astype(np.int64), 7, w, (1, 1, 1, 1), (1, 1), strides)
    for dtype, extra in ((np.uint8, {"requantize": (np.float32(0.02), 128)}), (np.float32, {})):
        guard = 256
        buf = np.full(acc.size + 2 * guard, 77, dtype)
        y = buf[guard:guard + acc.size].reshape(acc.shape)
        qdw_step(lib.support(SYMBOL), packed, xq, y, (1, 1, 1, 1), (1, 1), 2, strides=strides, **extra)()
        assert (buf[:guard] == 77).all() and (buf[guard + acc.size:] == 77).all()
        v = acc.astype(np.float32) * (np.float32(0.05) * ws)[None, :, None, None]
        want = _q(v, np.float32(0.02), 128).astype(np.uint8) if dtype == np.uint8 else v
        np.testing.assert_array_equal(y, want)


def test_declines_what_it_cannot_read(lib):
    packed = PackedQDepthwise(np.ones((4, 1, 3, 3), np.int8), np.ones(4, np.float32), np.float32(1), 0, None)
    x = np.zeros((1, 4, 8, 8), np.float32)
    addr = lib.support(SYMBOL)
    assert qdw_step(addr, packed, x, np.zeros((1, 4, 7, 7), np.float32), (1, 1, 1, 1), (1, 1), 1) is None
    assert qdw_step(addr, packed, x[:, :, :, ::2], np.zeros((1, 4, 8, 4), np.float32), (1, 1, 1, 1), (1, 1),
                    1) is None
    assert qdw_step(addr, packed, x, np.zeros((1, 4, 8, 8), np.uint8), (1, 1, 1, 1), (1, 1), 1) is None
    assert qdw_step(addr, packed, x, np.zeros((1, 4, 8, 6), np.float32), (1, 1, 1, 1), (1, 2), 1) is None


def _ulps(v, k: int) -> np.float32:
    v = np.float32(v)
    for _ in range(abs(k)):
        v = np.nextafter(v, np.float32(np.inf if k > 0 else -np.inf))
    return v


@pytest.mark.parametrize("so", [0.0123, 0.047, 6 / 255, 0.003])
def test_rounding_ties_of_the_output_quantization(lib, so):
    """Outputs on (or next to) the output grid's half steps: the uint8 epilogue's rint(v * (1 / s)) shortcut
    (emit.py NEAR_HALF) gives QuantizeLinear's rint(v / s) on every one, the division where they could differ."""
    c = 32
    xq = np.tile(np.arange(256, dtype=np.uint8), c * 4)[:c * 16 * 16].reshape(1, c, 16, 16)
    w = np.zeros((c, 1, 3, 3), np.int8)
    w[:, 0, 1, 1] = 1                                               # one tap: the sums are x - z
    so, sx = np.float32(so), np.float32(0.05)
    ulps = np.arange(c) - c // 2                                    # scales and biases a few ulps apart
    ws = np.array([_ulps(so / sx, k) for k in ulps], np.float32)
    bias = np.array([_ulps(np.float32(0.5) * so, k % 5 - 2) for k in ulps], np.float32)   # on the half steps
    packed = PackedQDepthwise(w, ws, sx, 128, bias)
    acc = _int_depthwise(xq.astype(np.int64), 128, w, (1, 1, 1, 1), (1, 1), (1, 1))
    v = acc.astype(np.float32) * packed.scale[None, :, None, None] + bias[None, :, None, None]
    y = np.zeros(acc.shape, np.uint8)
    qdw_step(lib.support(SYMBOL), packed, xq, y, (1, 1, 1, 1), (1, 1), 1, requantize=(so, 100))()
    np.testing.assert_array_equal(y, _q(v, so, 100).astype(np.uint8))
    assert (np.rint(v * (np.float32(1) / so)) != np.rint(v / so)).any()   # (multiplying would differ)
