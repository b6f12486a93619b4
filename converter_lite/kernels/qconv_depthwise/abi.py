"""The int8 depthwise convolution driver's ABI (emit.py writes the code, bind.py the records and the weights).

    void cl_qdwconv2d_v1(i64* desc, i64 nthreads)

A depthwise ``QuantizedConv`` (ops/quantized_conv.py, ``group == C == M``, weights ``[C, 1, kh, kw]``): the
input quantized to uint8 (or uint8 already: the hand-off from the int8 convolution before it), each channel
convolved with its int8 taps, the sums scaled back per channel plus the bias, then the same epilogue options as
the dense int8 convolution (kernels/qconv/): clamp, the output's quantization round trip, SiLU with its pairs,
or the output's uint8 bytes for the next int8 convolution.  ``desc``: ``FIELDS`` i64 words (``lo``/``hi`` and the
scales ``oscale``/``sscale``/``pscale`` as float64 bit patterns, 0 for none), then ``EXTRA`` words the entry point
writes (planes per chunk).  ``scratch``: ``sstride`` bytes per chunk (bind.py sizes it for the thread count of
the bind): two buffers of ``sfill`` bytes (a multiple of 64: a plane and the next), each a plane's padded bytes
in ``sh`` row phases of ``hps`` rows of ``wpp`` bytes and what the last output block reads past them, filled
with the zero point per plane.  ``wq``: per channel ``taps = kh * ceil(kw / 4)`` int32 words of four int8 weights
(a kernel row's taps 4k .. 4k + 3, zeros past ``kw``); ``toff``: per tap its byte offset from the output's; ``comp``:
the zero point x the channel's weight sum; ``pitch``: the flat outputs per output row (emit.py); ``fast``: the
uint8 output's short epilogue applies (bind.py ``fast_epilogue``); ``dmask`` != 0: the direct form (a uint8 input
at equal strides read where it is, ``pitch = wpp = w``; ``dmask`` the loads' byte masks, bind.py
``direct_tables``).
"""
SYMBOL = "cl_qdwconv2d_v1"
SYMBOLS = (SYMBOL,)
FIELDS = ("n", "c", "h", "w", "oh", "ow", "pt", "pl", "sh", "sw", "hps", "wpp", "pitch", "taps", "toff", "x",
          "xscale", "xzp", "wq", "comp", "scale", "bias", "y", "clamp", "lo", "hi", "oscale", "ozp", "silu", "sscale",
          "szp", "pscale", "pzp", "xu8", "yu8", "scratch", "sstride", "sfill", "fast", "dmask")
EXTRA = 1
BLOCK = 64                          # flat outputs per block: four vectors of sums (independent chains)
STRIDES = (1, 2)                    # column strides: four phases of 16 outputs a block, or two of two halves
QUAD = 4                            # taps of a kernel row per int32 lane (vpdpbusd's four bytes)
OPS = ("QuantizedConv",)


def select(node) -> tuple[str, ...]:
    """A depthwise QuantizedConv (``group == C == M``, weights ``[C, 1, kh, kw]``) of a
    float32 or uint8 NCHW input with constant scalar float32 scale and uint8 zero point, constant int8 weights
    with one scale per channel (or one), a constant float32 bias per channel, column stride 1 or 2, column dilation 1
    (any kernel, row stride, row dilation and padding), no residual."""
    import numpy as np
    ins = node.inputs
    if len(ins) < 5 or any(v is None for v in ins[:5]):
        return ()
    x, xs, xz, w, ws = ins[:5]
    b = ins[5] if len(ins) > 5 else None
    if x.type is None or x.type.shape is None or len(x.type.shape) != 4 or \
            str(x.type.dtype.np) not in ("float32", "uint8"):
        return ()
    if xs.const is None or xs.const.size != 1 or xs.const.dtype != np.float32 or \
            xz.const is None or xz.const.size != 1 or xz.const.dtype != np.uint8:
        return ()
    if w.const is None or w.const.dtype != np.int8 or w.const.ndim != 4 or min(w.const.shape) == 0:
        return ()
    c = int(w.const.shape[0])
    a = node.attrs
    dil = tuple(int(v) for v in a.get("dilations", (1, 1)))
    if int(a.get("group", 1)) != c or w.const.shape[1] != 1 or x.type.shape[1] != c or len(dil) != 2 or \
            dil[1] != 1:
        return ()
    if ws.const is None or ws.const.dtype != np.float32 or ws.const.size not in (1, c):
        return ()
    if b is not None and (b.const is None or b.const.dtype != np.float32 or b.const.size != c):
        return ()
    strides = tuple(int(v) for v in a.get("strides", (1, 1)))
    if len(strides) != 2 or strides[1] not in STRIDES or strides[0] < 1 or \
            a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or any(int(p) < 0 for p in a.get("pads", ())):
        return ()
    ys, yz = (ins[i] if len(ins) > i else None for i in (6, 7))
    if ys is not None and (ys.const is None or ys.const.size != 1 or ys.const.dtype != np.float32 or yz is None
                           or yz.const is None or yz.const.size != 1 or yz.const.dtype != np.uint8):
        return ()
    if a.get("uint8_out") and (a.get("silu_product_q") if a.get("silu") else ys) is None:
        return ()                                       # (no pair quantizes the uint8 output)
    return SYMBOLS
