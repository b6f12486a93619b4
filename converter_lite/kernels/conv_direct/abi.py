"""The direct convolution driver's ABI (emit.py writes the code, bind.py the records).

    void cl_conv2d_direct_v2_f32(i64* desc, i64 nthreads)

``desc``: ``FIELDS`` i64 words (floats ``lo``/``hi`` as float64 bit patterns), then ``EXTRA`` words the entry
point writes for its chunks (tiles per chunk, channel units per chunk).  Weights packed ``[G, nblk, K, VL]``.
"""
from ..node_facts import conv_2d, is_depthwise, is_patch

SYMBOL = "cl_conv2d_direct_v2_f32"
SYMBOLS = (SYMBOL,)
FIELDS = ("n", "c", "h", "w", "m", "group", "oh", "ow", "sh", "sw", "pt", "pl", "hp", "wp", "pad", "x", "xp",
          "y", "wpk", "bpk", "koff", "k", "nblk", "residual", "clamp", "lo", "hi", "wide")
EXTRA = 2                          # words after FIELDS the driver writes (tiles, channel units per chunk)
VL = 16                            # output channels per packed block (one 16-lane vector)
STRIDES = (1, 2, 4)                # column strides with their own microkernels
OPS = ("Conv",)
EPILOGUE = True                    # takes a following residual Add and clamps (kernels/conv_epilogue.py)


def xp_floats(n: int, c: int, hp: int, wp: int) -> int:
    """Floats of one zero-bordered copy of the input, rounded up to 64 bytes: the second copy starts there."""
    return -(-n * c * hp * wp // VL) * VL


def select(node) -> tuple[str, ...]:
    """Dense or grouped (not depthwise) float32 2-D Convs with constant weights and a column stride in STRIDES."""
    g = conv_2d(node)
    ok = g is not None and g["dtype"] == "float32" and not is_depthwise(g) and not is_patch(g, node) \
        and g["sw"] in STRIDES
    return SYMBOLS if ok else ()
