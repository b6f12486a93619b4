"""A depthwise QuantizedConv on the native int8 depthwise driver (emit.py): weights packed at load, a record and a
scratch per bind.

``PackedQDepthwise(w, w_scale, x_scale, x_zero_point, bias)``: the int8 weights ``[C, 1, kh, kw]`` as ``wq
[C][kh][nq]`` int32 words of four weights (``nq = ceil(kw / 4)``, zeros past ``kw``), the per-channel
``comp = x_zero_point * sum(w[c])``, ``scale = x_scale * w_scale[c]`` and the bias.

``qdw_step(address, packed, x, y, pads, dilations, nt, strides, clamp, requantize, silu, silu_requantize)`` -> the
bound step (``requantize`` = (scale, zero point): the output stored as DequantizeLinear(QuantizeLinear(y)); a uint8
``x`` is read as quantized already, a uint8 ``y`` takes the output's last pair's QuantizeLinear bytes, as
kernels/qconv/bind.py ``qconv_step``), or None when the buffers do not fit.
"""
from __future__ import annotations

import functools

import numpy as np

from ..native_call import aligned, call_driver, data_address, float_bits, record
from .abi import BLOCK, EXTRA, FIELDS, QUAD, STRIDES


class PackedQDepthwise:
    def __init__(self, w: np.ndarray, w_scale: np.ndarray, x_scale: float, x_zero_point: int,
                 bias: np.ndarray | None):
        c, _, kh, kw = w.shape
        self.c, self.kh, self.kw = c, kh, kw
        self.nq = -(-kw // QUAD)
        padded = np.zeros((c, kh, self.nq * QUAD), np.int8)
        padded[:, :, :kw] = w[:, 0]
        self.wq = aligned((c, kh * self.nq), np.int32)
        self.wq[...] = padded.view(np.int32).reshape(c, kh * self.nq)
        self.comp = np.ascontiguousarray(int(x_zero_point) * w.reshape(c, -1).sum(1, dtype=np.int64), np.int32)
        self.scale = np.ascontiguousarray(np.float32(x_scale) * np.broadcast_to(
            np.asarray(w_scale, np.float32).reshape(-1), (c,)), np.float32)
        self.bias = None if bias is None else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(c))
        self.xscale = np.array([x_scale], np.float32)
        self.xzp = int(x_zero_point)


@functools.lru_cache(maxsize=256)
def tap_offsets(kh: int, nq: int, dh: int, sh: int, hps: int, wpp: int) -> np.ndarray:
    """``toff[kh * nq]``: the byte offset of tap ``(ky, k)`` (kernel row, its quad) in the padded plane from
    ``sw * g``: the row phase and row of ``ky * dh`` rows down, the quad's first column."""
    ky, k = np.meshgrid(np.arange(kh), np.arange(nq), indexing="ij")
    row = ky * dh
    off = np.ascontiguousarray(((row % sh) * hps * wpp + (row // sh) * wpp + k * QUAD).reshape(-1), dtype=np.int64)
    off.setflags(write=False)
    return off


@functools.lru_cache(maxsize=64)
def direct_tables(h: int, w: int, oh: int, ow: int, s: int, kh: int, kw: int, nq: int, dh: int, pt: int, pl: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The direct form's (toff, masks) (emit.py; strides ``s x s``, output flat index ``g = oy * w + ox``, so that
    ``s * g`` is the input plane's offset of the output's first tap): ``toff[kh * nq]`` the byte offset of tap
    ``(ky, k)`` from ``s * g`` (``(ky * dh - pt) * w + 4k - pl``, negative at the top), ``masks[blocks][kh *
    nq][4]`` per block, tap and sum vector the 64 bytes its load takes from the input (bit ``4 * lane + j``: tap
    ``4k + j`` of the lane's output inside the image, the kernel and the output), the others the zero point -- the
    padding, without a padded copy."""
    blocks = -(-oh * w // BLOCK)
    lanes = np.arange(16)[None, :]
    phase = np.arange(4)[:, None]
    within = 4 * lanes + phase if s == 1 else 32 * (phase // 2) + 2 * lanes + phase % 2       # emit.phase_of
    g = np.arange(blocks)[:, None, None] * BLOCK + within[None]                             # [blocks][phase][lane]
    oy, ox = g // w, g % w
    inside = (g < oh * w) & (ox < ow)
    taps = []
    for ky in range(kh):
        iy = s * oy + ky * dh - pt
        row_ok = inside & (iy >= 0) & (iy < h)
        for k in range(nq):
            bits = np.zeros(g.shape + (QUAD,), bool)
            for j in range(QUAD):
                kx = QUAD * k + j
                ix = s * ox + kx - pl
                bits[..., j] = row_ok & (kx < kw) & (ix >= 0) & (ix < w)
            taps.append(np.packbits(bits.reshape(blocks, 4, 64), axis=-1, bitorder="little").view(np.uint64)[..., 0])
    masks = np.ascontiguousarray(np.stack(taps, axis=1))                               # [blocks][taps][phase]
    toff = np.array([(ky * dh - pt) * w + QUAD * k - pl for ky in range(kh) for k in range(nq)], np.int64)
    masks.setflags(write=False)
    toff.setflags(write=False)
    return toff, masks


def direct_pays(w: int, ow: int, sh: int, sw: int) -> bool:
    """Whether the driver reads a uint8 input where it is (the direct form) rather than from a padded copy: equal
    strides (the output's flat index over the input's width, ``ow <= w``).  At stride 2 half the sums are of the
    columns past ``ow`` and still faster, without the copy: one thread, 3x3, direct / copy / float driver: 288 x
    10 x 10 11.7 / 19.8 / 8.0 us, 96 x 20 x 20 11.3 / 12.6 / 9.6, 96 x 40 x 40 44.6 / 53.7 / 56.3, 48 x 80 x 80
    79.0 / 78.7 / 103.5."""
    return sh == sw and ow <= w


def fast_epilogue(packed: PackedQDepthwise, yu8: bool, silu: bool, requantize) -> bool:
    """Whether the driver's short epilogue computes this output (emit.py): uint8 bytes of the output's pair, no
    SiLU, finite scales and bias (so the values it quantizes are never NaN)."""
    finite = np.isfinite(packed.scale).all() and (packed.bias is None or np.isfinite(packed.bias).all())
    return bool(yu8 and not silu and requantize is not None and finite)


def clamp_saturates(clamp: tuple[float, float], requantize: tuple[float, int]) -> bool:
    """Whether the uint8 output's quantization alone gives what the clamp before it would: QuantizeLinear maps
    ``lo`` to 0 and ``hi`` to 255 (ReLU6 with the range [0, 6] or less calibrated), so, being monotonic, it maps
    everything below ``lo`` to 0 and above ``hi`` to 255 too; the fast epilogue then skips the clamp."""
    s, z = np.float32(requantize[0]), np.float32(requantize[1])
    q = np.clip(np.rint(np.array(clamp, np.float32) / s) + z, 0, 255)
    return bool(q[0] == 0 and q[1] == 255)


def qdw_step(address: int, packed: PackedQDepthwise, x: np.ndarray, y: np.ndarray,
             pads: tuple[int, int, int, int], dilations: tuple[int, int], nt: int, strides: tuple[int, int] = (1, 1),
             clamp: tuple[float, float] | None = None, requantize: tuple[float, int] | None = None,
             silu: bool = False,
             silu_requantize: tuple[tuple[float, int] | None, tuple[float, int] | None] = (None, None)):
    """The bound step, or None when the buffers do not fit (not contiguous float32 or uint8 NCHW of ``packed``'s
    channels, a column stride other than 1 or 2, a column dilation other than 1, a uint8 ``y`` without a last
    quantization pair)."""
    n, c, h, w = x.shape
    pt, pl, pb, pr = pads
    sh, sw = strides
    if sw not in STRIDES or sh < 1 or dilations[1] != 1:
        return None
    hp, wp = h + pt + pb, w + pl + pr
    oh = (hp - dilations[0] * (packed.kh - 1) - 1) // sh + 1
    ow = (wp - (packed.kw - 1) - 1) // sw + 1
    io = (np.float32, np.uint8)
    if c != packed.c or y.shape != (n, c, oh, ow) or x.dtype not in io or y.dtype not in io or \
            not x.flags.c_contiguous or not y.flags.c_contiguous or min(oh, ow) <= 0:
        return None
    yu8 = y.dtype == np.uint8
    if yu8 and (silu_requantize[1] if silu else requantize) is None:
        return None
    nt = max(1, int(nt))
    hps, wpp = -(-hp // sh), -(-wp // sw) * sw
    pitch = wpp // sw
    direct = x.dtype == np.uint8 and direct_pays(w, ow, sh, sw)
    if direct:                                    # (the input read where it is: pitch w)
        wpp, pitch = w, w
        toff, dmask = direct_tables(h, w, oh, ow, sh, packed.kh, packed.kw, packed.nq, dilations[0], pt, pl)
    else:
        toff, dmask = tap_offsets(packed.kh, packed.nq, dilations[0], sh, hps, wpp), None
    blocks = -(-oh * pitch // BLOCK)
    # the plane, and what the last block's loads read past it (its phases: up to 2 * BLOCK + 3 bytes), zeroed
    reach = sw * BLOCK * blocks + 2 * BLOCK + int(toff.max())
    sfill = BLOCK if direct else -(-max(sh * hps * wpp, reach) // BLOCK) * BLOCK       # (direct: no copy)
    scratch = aligned((nt * 2 * sfill,), np.uint8)              # (two planes a chunk: emit.py)
    words = {"n": n, "c": c, "h": h, "w": w, "oh": oh, "ow": ow, "pt": pt, "pl": pl, "sh": sh, "sw": sw,
             "hps": hps, "wpp": wpp, "pitch": pitch, "taps": packed.kh * packed.nq, "toff": toff.ctypes.data,
             "x": data_address(x), "xscale": data_address(packed.xscale), "xzp": packed.xzp,
             "wq": data_address(packed.wq), "comp": data_address(packed.comp), "scale": data_address(packed.scale),
             "bias": 0 if packed.bias is None else data_address(packed.bias), "y": data_address(y),
             "xu8": int(x.dtype == np.uint8), "yu8": int(yu8), "scratch": data_address(scratch), "sstride": 2 * sfill,
             "sfill": sfill, "silu": int(silu), "fast": int(fast_epilogue(packed, yu8, silu, requantize)),
             "dmask": 0 if dmask is None else dmask.ctypes.data}
    if clamp is not None and not (words["fast"] and clamp_saturates(clamp, requantize)):
        words.update(clamp=1, lo=float_bits(clamp[0]), hi=float_bits(clamp[1]))
    for (name, zp), q in zip((("sscale", "szp"), ("pscale", "pzp")), silu_requantize):
        if q is not None:
            words[name], words[zp] = float_bits(float(np.float32(q[0]))), int(q[1])
    if requantize is not None:
        words.update(oscale=float_bits(float(np.float32(requantize[0]))), ozp=int(requantize[1]))
    desc = record(FIELDS, EXTRA, words)
    return call_driver(address, desc, nt, (x, y, scratch, toff, dmask, packed))
