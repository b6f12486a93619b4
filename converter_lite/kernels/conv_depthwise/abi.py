"""The depthwise convolution driver's ABI (emit.py writes the code, bind.py the records).

    void cl_dwconv_v3_f32(i64* desc, i64 nthreads)

``desc``: ``FIELDS`` i64 words (``lo``/``hi`` as float64 bit patterns), then ``EXTRA`` words the entry point
writes (planes per chunk).
"""
from ..node_facts import conv_2d, is_depthwise

SYMBOL = "cl_dwconv_v3_f32"
SYMBOLS = (SYMBOL,)
FIELDS = ("n", "c", "h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl", "x", "y", "wt", "bias",
          "residual", "clamp", "lo", "hi", "coords", "nvec", "jlo", "jhi")
EXTRA = 1
MAX_KW = 11                        # kernel widths with plane functions: MixNet mixes 3x3 to 11x11 (v3: was 7)
MAX_WIDTH = 8192                   # input rows up to this wide (the zero row's length), and
ZERO_MARGIN = 256                  # taps reaching at most this far left of column 0 / right of the last one
VL = 16
OPS = ("Conv",)
EPILOGUE = True                    # takes a following residual Add and clamps (kernels/conv_epilogue.py)


def select(node) -> tuple[str, ...]:
    """Depthwise (group = C = M) float32 2-D Convs with constant weights, column stride 1 or 2, kernels at most
    MAX_KW wide (the expander turns most of them into fused tap kernels first at opt_level >= 1)."""
    g = conv_2d(node)
    ok = g is not None and g["dtype"] == "float32" and is_depthwise(g) and g["sw"] in (1, 2) and g["kw"] <= MAX_KW
    return SYMBOLS if ok else ()
