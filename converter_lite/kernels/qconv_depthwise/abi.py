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
from ..qconv.abi import operands

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
    got = operands(node, STRIDES)                     # (the input, weights, scales, bias, strides, output pair)
    if got is None:
        return ()
    x, w = got
    c = int(w.const.shape[0])
    dil = tuple(int(v) for v in node.attrs.get("dilations", (1, 1)))
    if int(node.attrs.get("group", 1)) != c or w.const.shape[1] != 1 or x.type.shape[1] != c or len(dil) != 2 or \
            dil[1] != 1:
        return ()
    return SYMBOLS
