"""The int8 convolution driver's ABI (emit.py writes the code, bind.py the records and the packed weights).

    void cl_qconv2d_v1(i64* desc, i64 nthreads)

A ``QuantizedConv`` (ops/quantized_conv.py): the float32 input quantized to uint8 with its scale and zero point,
convolved with int8 weights (one scale per output channel) in int32, the sums scaled back to float32 per output
channel plus the bias -- ``Conv(DequantizeLinear(QuantizeLinear(x)), DequantizeLinear(w), B)``, the form a QDQ
model gives its convolutions.  ``desc``: ``FIELDS`` i64 words (floats ``lo``/``hi`` as float64 bit patterns),
then ``EXTRA`` words the entry point writes for its chunks (planes per chunk, rows per chunk).  ``wc``: the
weights packed for the channel-lane body (emit_channels.py), 0 for the pixel-lane one.  ``xu8`` = 1: ``x`` is
uint8, quantized already (the uint8 hand-off); ``yu8`` = 1: ``y`` is uint8, the output's last quantization pair
(``pscale``/``pzp`` with a SiLU, else ``oscale``/``ozp``) quantizes it instead of a round trip.  ``lut``:
``LUT_WORDS`` int32 words of workspace for a SiLU after the output's round trip (``silu`` and ``oscale`` set) whose
product is quantized (``yu8``, or ``pscale`` set): the entry point fills them with the product's byte for each of
the 256 quantized values and the epilogues look it up instead of computing the sigmoid per element; 0: computed.
"""
QCONV_SYMBOL = "cl_qconv2d_v1"
SYMBOLS = (QCONV_SYMBOL,)
FIELDS = ("n", "c", "h", "w", "m", "oh", "ow", "pt", "pl", "hp", "wp", "cq", "x", "xscale", "xzp", "xq", "wq",
          "kq", "koff", "comp", "scale", "bias", "y", "residual", "clamp", "lo", "hi", "sh", "sw", "wps", "flat",
          "hps", "plane", "oscale", "ozp", "silu", "sscale", "szp", "pscale", "pzp", "wc", "xu8", "yu8",
          "lut")
STRIDES = (1, 2)                    # column strides: the packed rows are split into this many column phases
EXTRA = 2
LUT_WORDS = 256 + 64                # the SiLU table: a word, then a byte, per quantized value (``lut``)
QUAD = 4                            # input channels per int32 lane of the packed input (vpdpbusd's four bytes)
OPS = ("QuantizedConv",)


def operands(node, strides_allowed: tuple[int, ...] = STRIDES):
    """The int8 convolution drivers' common test of a QuantizedConv (this ``select`` and
    kernels/qconv_depthwise/abi.py's): a float32 (or, quantized already, uint8) NCHW input with a constant scalar
    float32 scale and uint8 zero point; constant int8 weights ``[M, C/group, kh, kw]`` with a float32 scale per
    output channel (or one) and a float32 bias per output channel; a column stride in ``strides_allowed``, a row
    stride >= 1, no negative pads; the output's pair (inputs 6, 7), where given, a scalar float32 scale and uint8
    zero point, and one where the output is uint8.  ``(x, w)`` (the Values), or None."""
    import numpy as np
    ins = node.inputs
    if len(ins) < 5 or any(v is None for v in ins[:5]):
        return None
    x, xs, xz, w, ws = ins[:5]
    b = ins[5] if len(ins) > 5 else None
    if x.type is None or x.type.shape is None or len(x.type.shape) != 4 or \
            str(x.type.dtype.np) not in ("float32", "uint8"):
        return None
    if xs.const is None or xs.const.size != 1 or xs.const.dtype != np.float32:
        return None
    if xz.const is None or xz.const.size != 1 or xz.const.dtype != np.uint8:
        return None
    if w.const is None or w.const.dtype != np.int8 or w.const.ndim != 4 or min(w.const.shape) == 0:
        return None
    if ws.const is None or ws.const.dtype != np.float32 or ws.const.size not in (1, w.const.shape[0]):
        return None
    if b is not None and (b.const is None or b.const.dtype != np.float32 or b.const.size != w.const.shape[0]):
        return None
    a = node.attrs
    strides = tuple(int(v) for v in a.get("strides", (1, 1)))
    if len(strides) != 2 or strides[1] not in strides_allowed or strides[0] < 1 or \
            a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or any(int(p) < 0 for p in a.get("pads", ())):
        return None
    ys, yz = (ins[i] if len(ins) > i else None for i in (6, 7))
    if ys is not None and (ys.const is None or ys.const.size != 1 or ys.const.dtype != np.float32 or yz is None
                           or yz.const is None or yz.const.size != 1 or yz.const.dtype != np.uint8):
        return None
    if a.get("uint8_out") and (a.get("silu_product_q") if a.get("silu") else ys) is None:
        return None                                     # (no pair quantizes the uint8 output)
    return x, w


def select(node) -> tuple[str, ...]:
    """QuantizedConv of a float32 (or, quantized already, uint8) NCHW input with constant scalar scale and uint8
    zero point, constant int8 weights ``[M, C, kh, kw]`` with a scale per output channel, one group, column
    stride 1 or 2 (any row stride, dilation and padding): ``operands`` and one group."""
    got = operands(node)
    if got is None:
        return ()
    x, w = got
    if int(node.attrs.get("group", 1)) != 1 or x.type.shape[1] != w.const.shape[1]:
        return ()
    return SYMBOLS
