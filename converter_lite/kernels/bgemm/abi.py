"""The bf16 GEMM driver's ABI (emit.py writes the code, bind.py the tile records and the packed weights).

    void cl_bgemm_v1(i8* tiles, i64 ntiles, i64 nthreads)      tile records of FIELDS (TILE_BYTES each)

computes ``C[M, N] = bf16(A) @ B + bias`` in float32 for float32 activations ``A [M, K]`` and constant weights
``B [K, N]`` stored as bfloat16 (uint16 bit patterns, ops/bf16.py ``MatMulBf16``; made by ``--bf16=on``,
passes/bf16.py).  ``A`` is converted to bfloat16 inside the driver (per tile, round to nearest even,
``vcvtne2ps2bf16``); the products are AVX-512 BF16's ``vdpbf16ps``: 16 float32 lanes, each adding the products
of one *pair* of k.  ``B`` is packed once at load into ``PANEL``-column panels of ``ceil(K / 2)`` pairs:
uint16 ``[p][q][c][r]`` is ``B[2q + r, PANEL p + c]`` (zeros past K and N), so one 64-byte load gives 16 columns
x 2 steps of k, the operand of ``vdpbf16ps`` (an odd K ends with a zero pair half, on both sides).

``REQUIRED_FEATURES``: the CPU features whose absence makes a model using this driver refuse to load
(runtime/native.py) and ``--bf16=on`` refuse to convert (pipeline.py); the emitter writes an emulation of the
same arithmetic (integer rounding, two float32 products per pair) for targets without them, used only by tests
and tools that build every driver.
"""
from ..node_facts import dtype

BGEMM_SYMBOL = "cl_bgemm_v1"
SYMBOLS = (BGEMM_SYMBOL,)
OPS = ("MatMulBf16",)
FIELDS = ("M", "N", "K", "A", "lda", "B", "C", "ldc", "bias", "flags", "unused0", "unused1")
TILE_FIELDS = len(FIELDS)
TILE_BYTES = TILE_FIELDS * 8
PANEL = 32                      # columns per packed panel (2 x 16 float32 lanes)
PAIR = 2                        # steps of k per float32 lane
REQUIRED_FEATURES = ("avx512bf16",)           # LLVM's name (/proc/cpuinfo: avx512_bf16)
CPUINFO_FLAGS = {"avx512bf16": "avx512_bf16"}


def select(node) -> tuple[str, ...]:
    """``MatMulBf16(A float32 [..., K], B uint16 constant [K, N], bias float32 constant [N] or one?)``."""
    import numpy as np
    if dtype(node, 0) != "float32":
        return ()
    w = node.inputs[1].const if len(node.inputs) > 1 and node.inputs[1] is not None else None
    if w is None or w.dtype != np.uint16 or w.ndim != 2 or min(w.shape) == 0:
        return ()
    a = node.inputs[0].type.shape
    if a is None or len(a) < 2 or a[-1] != w.shape[0]:
        return ()
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        bias = node.inputs[2].const
        if bias is None or bias.dtype != np.float32 or bias.size not in (1, w.shape[1]):
            return ()
    return SYMBOLS
