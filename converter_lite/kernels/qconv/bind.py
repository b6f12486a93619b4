"""QuantizedConv on the native int8 convolution driver (emit.py): weights packed at load, a record per bind.

``PackedQConv(w, w_scale, x_scale, x_zero_point, bias)``: the int8 weights ``[M, C, kh, kw]`` as ``wq
[M][kq][4]`` (``kq = ceil(C/4) * kh * kw`` taps of four input channels, ``t = (c/4, ky, kx)``, zeros past C), the
per-channel int32 ``comp = x_zero_point * sum(w[o])``, float32 ``scale = x_scale * w_scale[o]`` and the bias;
for the channel-lane body (emit_channels.py) also ``wc [M/16][kq][16][4]``, packed when a bind first picks it.

``qconv_step(address, packed, x, y, geometry, nt, residual=None, clamp=None, requantize=None)`` -> the bound step
(``requantize`` = (scale, zero point): the output stored as DequantizeLinear(QuantizeLinear(y)), uint8; a uint8 ``x``
is read as quantized already, a uint8 ``y`` takes the output's last pair's QuantizeLinear bytes): the record
(abi.FIELDS) and the packed-input workspace ``xq`` (``n * cq * plane * 4`` bytes and a slack the pixel vectors
of a row's last segment may read past the end); the body as ``channel_lanes_pay`` says, unless the caller picks
one (``channel_lanes``, or ``flat`` for the pixel-lane body's mode); with a SiLU after the output's round trip
and its product quantized, a ``LUT_WORDS`` table the driver fills with SiLU's 256 results.
"""
from __future__ import annotations

import functools

import numpy as np

from ..native_call import aligned, call_driver, data_address, float_bits, record
from .abi import EXTRA, FIELDS, LUT_WORDS, QUAD, STRIDES

SLACK = 256                   # bytes after xq (at least): a row's or run's last pixel vectors read past its end
LANES = 16                    # output channels per vector of the channel-lane body (emit_channels.py)
ONE_VECTOR = 0.8              # the channel-lane body's lanes, counted for a single channel vector (m <= 16)
SMALL_PLANE = 196             # output pixels (14 x 14) up to which it pays with short sums too ...
LONG_SUM = 32                 # ... and the taps of four input channels a sum needs for it on larger planes
FLAT_GAIN = 1.15              # flat runs pay when they fill this much more of the lanes (they store row by row)


class PackedQConv:
    def __init__(self, w: np.ndarray, w_scale: np.ndarray, x_scale: float, x_zero_point: int,
                 bias: np.ndarray | None):
        m, c, kh, kw = w.shape
        self.m, self.c, self.kh, self.kw = m, c, kh, kw
        self.cq = -(-c // QUAD)
        padded = np.zeros((m, self.cq * QUAD, kh, kw), np.int8)
        padded[:, :c] = w
        # [m][cq][4][kh][kw] -> [m][cq][kh][kw][4]
        self.wq = aligned((m, self.cq * kh * kw * QUAD), np.int8)
        self.wq[...] = padded.reshape(m, self.cq, QUAD, kh, kw).transpose(0, 1, 3, 4, 2).reshape(m, -1)
        self.kq = self.cq * kh * kw
        self._wc = None
        self.comp = np.ascontiguousarray(int(x_zero_point) * w.reshape(m, -1).sum(1, dtype=np.int64), np.int32)
        self.scale = np.ascontiguousarray(np.float32(x_scale) * np.broadcast_to(np.asarray(w_scale, np.float32)
                                                                               .reshape(-1), (m,)), np.float32)
        self.bias = None if bias is None else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(m))
        self.xscale = np.array([x_scale], np.float32)
        self.xzp = int(x_zero_point)

    @property
    def wc(self) -> np.ndarray:
        """The channel-lane body's weights ``[m/16][kq][16][4]`` (zeros past ``m``: a tap's 16 output channels x 4
        input channels as one 64-byte vector), packed on first use."""
        if self._wc is None:
            nvec = -(-self.m // LANES)
            padded = np.zeros((nvec * LANES, self.kq, QUAD), np.int8)
            padded[:self.m] = self.wq.reshape(self.m, self.kq, QUAD)
            wc = aligned((nvec, self.kq * LANES * QUAD), np.int8)
            wc[...] = padded.reshape(nvec, LANES, self.kq, QUAD).transpose(0, 2, 1, 3).reshape(nvec, -1)
            self._wc = wc
        return self._wc


@functools.lru_cache(maxsize=256)
def quad_offsets(cq: int, kh: int, kw: int, plane: int, dh: int, dw: int, sh: int, sw: int, hps: int,
                 wps: int) -> np.ndarray:
    """``koff[kq]``: the word offset (in bytes) in the packed input of every tap ``(c/4, ky, kx)``: its channel
    quad's plane, the phase plane of its row and column offsets, the position in it (emit.py)."""
    q, ky, kx = np.meshgrid(np.arange(cq), np.arange(kh), np.arange(kw), indexing="ij")
    row, col = ky * dh, kx * dw
    koff = q * plane + ((row % sh) * sw + col % sw) * hps * wps + (row // sh) * wps + col // sw
    koff = np.ascontiguousarray(koff.reshape(-1) * QUAD, dtype=np.int64)
    koff.setflags(write=False)
    return koff


def _lanes(oh: int, ow: int, wps: int) -> tuple[float, float]:
    """The fractions of the pixel-lane body's lanes that hold output pixels: row by row (segments of 32 pixels)
    and flat (runs over the phase planes' width ``wps``)."""
    return ow / (16 * -(-ow // 16)), oh * ow / (16 * -(-(oh * wps) // 16))


def flat_pays(oh: int, ow: int, wps: int) -> bool:
    """Whether the output rows are better computed as one flat run over the phase planes' width ``wps``
    (emit.py): when that fills ``FLAT_GAIN`` times the lanes the rows one by one would (5 x 5: 5 of 16 lanes a
    row, 25 of 48 flat; a 1x1 on 40 x 40: 40 of 48, all flat -- it was 1.25, and those ran on the channel lanes
    or in rows: one thread, flat / chosen, with SiLU looked up: 0.91 (192->64), 0.88 (128->64), 0.94 (96->64),
    0.95 (64->64), 0.96 (64->18); a 3x3 on 40 x 40 stays in rows or on the channel lanes: 40 of 48 against 1600
    of 1680 flat, 0.96 as much, and flat was 1.02x the channel lanes' time for 64->64)."""
    rowwise, flat = _lanes(oh, ow, wps)
    return flat > FLAT_GAIN * rowwise


def channel_lanes_pay(oh: int, ow: int, wps: int, m: int, kq: int) -> bool:
    """Whether the channel-lane body (emit_channels.py) is the faster one: when it fills more of its lanes (``m`` of
    ``16 * ceil(m / 16)``) than the pixel-lane body does with this plane (``_lanes``, the mode ``flat_pays``
    picks), counting the lanes of a single channel vector (m <= 16) at ``ONE_VECTOR`` (its 8 pixels x 1 vector
    tile loads a word per product), and, on a plane of more than ``SMALL_PLANE`` pixels, for sums of at least
    ``LONG_SUM`` taps (``kq``): its epilogue (a transpose, stores of 8 floats) costs more than the pixel-lane
    one, which short sums (1x1 on few channels) do not pay back where the pixel lanes are mostly full.
    Measured on one Zen 4 thread, channel / pixel-lane time, 3x3: 0.54 (256->256, 5 x 5: 100% of the lanes
    against 52%), 0.64 (128->128, 10 x 10: 62%), 0.83 (16->16, 10 x 10), 0.91 (32->32 and 64->64, 20 x 20:
    89%), 0.95 (32->32, 28 x 28: 92%), 0.89 (40 x 40: 83%), 0.95 (56 x 56: 88%), but 0.98 (16->16, 20 x 20),
    1.15 (24->24, 20 x 20: 75% of the channel lanes), 1.31 (16->8, 10 x 10); 1x1: 0.77 (160->1280 and 80->480,
    5 x 5), 0.88 (32->192, 10 x 10), 0.96 (64->128, 14 x 14), but 1.06 (32->128, 28 x 28: 8 taps), 1.12
    (16->96, 40 x 40), 1.03 (64->64, 20 x 20: 100% flat), 1.32 (8->48, 80 x 80)."""
    rowwise, flat = _lanes(oh, ow, wps)
    pixel = flat if flat > FLAT_GAIN * rowwise else rowwise
    channel = m / (LANES * -(-m // LANES)) * (ONE_VECTOR if m <= LANES else 1.0)
    return channel > pixel and (oh * ow <= SMALL_PLANE or kq >= LONG_SUM)


def qconv_step(address: int, packed: PackedQConv, x: np.ndarray, y: np.ndarray, pads: tuple[int, int, int, int],
               dilations: tuple[int, int], nt: int, residual: np.ndarray | None = None,
               clamp: tuple[float, float] | None = None, strides: tuple[int, int] = (1, 1), flat: bool | None = None,
               requantize: tuple[float, int] | None = None, silu: bool = False,
               silu_requantize: tuple[tuple[float, int] | None, tuple[float, int] | None] = (None, None),
               channel_lanes: bool | None = None, silu_table: bool = True):
    """The bound step, or None when the buffers do not fit (not contiguous float32 or uint8 NCHW, a column
    stride other than 1 or 2, a uint8 ``y`` without a last quantization pair).  ``silu_table``: a SiLU after the
    output's round trip, its product quantized, looked up from the table the driver makes (abi.py ``lut``), or
    (False) computed per element: the same values."""
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    sh, sw = strides
    if sw not in STRIDES or sh < 1:
        return None
    hp, wp = h + pt + pb, w + pl + pr
    hps, wps = -(-hp // sh), -(-wp // sw)                  # a phase plane's rows and words per row
    plane = sh * sw * hps * wps                             # words per channel quad
    oh = (hp - dilations[0] * (packed.kh - 1) - 1) // sh + 1
    ow = (wp - dilations[1] * (packed.kw - 1) - 1) // sw + 1
    io = (np.float32, np.uint8)
    if c != packed.c or y.shape != (n, packed.m, oh, ow) or x.dtype not in io or y.dtype not in io or \
            not x.flags.c_contiguous or not y.flags.c_contiguous or min(oh, ow) <= 0:
        return None
    yu8 = y.dtype == np.uint8
    if yu8 and (silu_requantize[1] if silu else requantize) is None:
        return None
    if residual is not None and (residual.shape != y.shape or residual.dtype != np.float32 or
                                 not residual.flags.c_contiguous):
        return None
    slack = max(SLACK, QUAD * (2 * 32 + (packed.kw - 1) * dilations[1]) + 64)
    xq = aligned((n * packed.cq * plane * QUAD + slack,), np.uint8)
    koff = quad_offsets(packed.cq, packed.kh, packed.kw, plane, *dilations, sh, sw, hps, wps)
    words = {"n": n, "c": c, "h": h, "w": w, "m": packed.m, "oh": oh, "ow": ow, "pt": pt, "pl": pl, "hp": hp,
             "wp": wp, "cq": packed.cq, "x": data_address(x), "xscale": data_address(packed.xscale),
             "xzp": packed.xzp, "xq": data_address(xq), "wq": data_address(packed.wq), "kq": packed.kq,
             "koff": koff.ctypes.data, "comp": data_address(packed.comp), "scale": data_address(packed.scale),
             "bias": 0 if packed.bias is None else data_address(packed.bias), "y": data_address(y),
             "residual": 0 if residual is None else data_address(residual), "sh": sh, "sw": sw, "wps": wps,
             "hps": hps, "plane": plane, "xu8": int(x.dtype == np.uint8), "yu8": int(yu8)}
    if channel_lanes is None:                   # (a caller that picks the pixel-lane body's mode gets that body)
        channel_lanes = flat is None and channel_lanes_pay(oh, ow, wps, packed.m, packed.kq)
    if channel_lanes:
        words["wc"] = data_address(packed.wc)
    if flat is None:
        flat = flat_pays(oh, ow, wps)
    words["flat"] = int(bool(flat))
    if clamp is not None:
        words.update(clamp=1, lo=float_bits(clamp[0]), hi=float_bits(clamp[1]))
    words["silu"] = int(silu)                    # y * sigmoid(y) after the clamp and the round trip
    lut = None
    if silu_table and silu and requantize is not None and (yu8 or silu_requantize[1] is not None):
        # (its 256 inputs: the round trip's values; the driver fills it)
        lut = aligned((LUT_WORDS,), np.int32)
        words["lut"] = data_address(lut)
    for (name, zp), q in zip((("sscale", "szp"), ("pscale", "pzp")), silu_requantize):
        if q is not None:                        # the sigmoid's, the product's round trip
            words[name], words[zp] = float_bits(float(np.float32(q[0]))), int(q[1])
    if requantize is not None:                   # the output through QuantizeLinear -> DequantizeLinear (uint8)
        words.update(oscale=float_bits(float(np.float32(requantize[0]))), ozp=int(requantize[1]))
    desc = record(FIELDS, EXTRA, words)
    return call_driver(address, desc, nt, (x, y, xq, koff, packed, residual, lut))
