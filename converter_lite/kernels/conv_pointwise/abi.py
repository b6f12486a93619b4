"""The 1x1 (pointwise) convolution driver's ABI (emit.py writes the code, bind.py the records).

    void cl_conv1x1_v1_f32(i64* desc, i64 nthreads)

``desc``: ``FIELDS`` i64 words (``lo``/``hi`` as float64 bit patterns), then ``EXTRA`` words the entry point
writes (pixels per chunk, channel blocks per chunk).  Weights packed ``[G, nmb, C/G, MR]``.
"""
from ..node_facts import conv_2d, is_depthwise

SYMBOL = "cl_conv1x1_v1_f32"
SYMBOLS = (SYMBOL,)
FIELDS = ("n", "c", "m", "group", "p", "x", "y", "wpk", "bpk", "nmb", "residual", "clamp", "lo", "hi", "wide")
EXTRA = 2
MR = 6                             # output channels per packed block
OPS = ("Conv",)
EPILOGUE = True                    # takes a following residual Add and clamps (kernels/conv_epilogue.py)


def select(node) -> tuple[str, ...]:
    """1x1, stride 1, unpadded float32 Convs (the direct driver is recorded too: which of the two pays depends on
    the host's vector width, known at load)."""
    g = conv_2d(node)
    ok = g is not None and g["dtype"] == "float32" and not is_depthwise(g) and (g["kh"], g["kw"]) == (1, 1) \
        and (g["sh"], g["sw"]) == (1, 1) and not any(g["pads"]) and g["auto_pad"] in ("NOTSET", "VALID")
    return SYMBOLS if ok else ()
