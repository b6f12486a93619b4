"""The im2col tile convolution driver's ABI (emit.py writes the code, bind.py the records).

    void cl_conv2d_tiles_v<LAYOUT>_f32(i8* desc, i64 nthreads)       (and ..._f64: double, dgemm)

``desc``: ``FIELDS`` i64 words, then ``nslots`` slot flags.  The symbols carry the record layout's version.
"""
from ..conv_direct.abi import STRIDES
from ..node_facts import conv_2d, is_depthwise, is_patch

LAYOUT = 2                        # bumped with every change of FIELDS: a model's code and the runtime must agree
CONV_SYMBOLS = {"float32": f"cl_conv2d_tiles_v{LAYOUT}_f32", "float64": f"cl_conv2d_tiles_v{LAYOUT}_f64"}
SYMBOLS = tuple(CONV_SYMBOLS.values())
FIELDS = ("n", "c", "h", "w", "m", "group", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl", "oh", "ow",
          "x", "wt", "bias", "y", "residual", "scratch", "slot_bytes", "tile_p", "tile_m", "n_ptiles", "n_mtiles",
          "gemm", "int64", "direct", "clamp", "lo", "hi", "shared", "cur", "n_cparts", "nslots")
OPS = ("Conv",)
EPILOGUE = True                    # takes a following residual Add and clamps (kernels/conv_epilogue.py)


def select(node) -> tuple[str, ...]:
    """Dense (not depthwise) 2-D Convs with constant weights the direct driver does not take: float64 ones, and
    float32 ones with a column stride other than 1, 2 or 4."""
    g = conv_2d(node)
    if g is None or is_depthwise(g) or is_patch(g, node):
        return ()
    if g["dtype"] == "float64":
        return (CONV_SYMBOLS["float64"],)
    return (CONV_SYMBOLS["float32"],) if g["dtype"] == "float32" and g["sw"] not in STRIDES else ()
