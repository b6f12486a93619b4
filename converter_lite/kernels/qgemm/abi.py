"""The int8 GEMM driver's ABI (emit.py writes the code, bind.py the tile records and the packed weights).

    void cl_qgemm_v1(i8* tiles, i64 ntiles, i64 nthreads)      tile records of FIELDS (TILE_BYTES each)

computes ``C = (A - a_zp) @ B`` for uint8 activations ``A [M, K]`` and constant int8 weights ``B [K, N]``
(zero point 0), then either stores the int32 sums (``MatMulInteger``) or the float32
``float(sum) * (a_scale * b_scale[n]) + bias[n]`` (``MatMulIntegerToFloat``, onnxruntime's fusion of
``MatMulInteger -> Cast -> Mul -> Add``).  ``B`` is packed once at load into ``PANEL``-column panels of
``K / 4`` quads: byte ``[p][q][c][r]`` is ``B[4q + r, PANEL p + c]`` (zeros past N), so one 64-byte load gives
16 columns x 4 steps of k, the operand of AVX-512 VNNI's ``vpdpbusd`` (u8 x s8, four products summed into each
int32 lane, no saturation).  Tile record fields (i64), emit.py documents each.
"""
from ..node_facts import dtype

QGEMM_SYMBOL = "cl_qgemm_v1"
SYMBOLS = (QGEMM_SYMBOL,)
OPS = ("MatMulInteger", "MatMulIntegerToFloat")
FIELDS = ("M", "N", "KQ", "A", "lda", "B", "C", "ldc", "colsum", "azp", "ascale", "bscale", "bias", "flags",
          "unused0", "unused1")
TILE_FIELDS = len(FIELDS)
TILE_BYTES = TILE_FIELDS * 8
PANEL = 32                      # columns per packed panel (2 x 16 int32 lanes)
QUAD = 4                        # steps of k per int32 lane
FLAG_INT32 = 1                  # flags: store the int32 sums (MatMulInteger), else the scaled float32


def _const(node, i):
    v = node.inputs[i] if i < len(node.inputs) else None
    return None if v is None else v.const


def select(node) -> tuple[str, ...]:
    """``MatMulInteger(A uint8, B int8 constant [K, N], a_zp scalar?, b_zp 0?)`` and
    ``MatMulIntegerToFloat(A, B, a_scale float32 scalar, b_scale constant [N] or scalar, a_zp?, b_zp 0?,
    bias constant [N]?)`` with ``K`` a multiple of 4 (the activations are read in quads of k in place); the
    scalar zero point and ``a_scale`` may be computed (DynamicQuantizeLinear's)."""
    import numpy as np
    if dtype(node, 0) != "uint8":
        return ()
    w = _const(node, 1)
    if w is None or w.dtype != np.int8 or w.ndim != 2 or w.shape[0] % QUAD or min(w.shape) == 0:
        return ()
    a = node.inputs[0].type.shape
    if a is None or len(a) < 2 or a[-1] != w.shape[0]:
        return ()
    pos = 2 if node.op == "MatMulInteger" else 4
    zb_at = pos + 1
    if len(node.inputs) > zb_at and node.inputs[zb_at] is not None:
        zb = node.inputs[zb_at].const
        if zb is None or np.any(zb):
            return ()
    za = node.inputs[pos] if len(node.inputs) > pos else None
    if za is not None and (dtype(node, pos) != "uint8" or za.type.shape is None
                           or any(d != 1 for d in za.type.shape)):
        return ()
    if node.op == "MatMulIntegerToFloat":
        a_scale = node.inputs[2]
        if dtype(node, 2) != "float32" or a_scale.type.shape is None or any(d != 1 for d in a_scale.type.shape):
            return ()
        sb, bias = _const(node, 3), _const(node, 6)
        if sb is None or sb.dtype != np.float32 or sb.size not in (1, w.shape[1]) or (sb.size > 1 and sb.ndim != 1):
            return ()
        if len(node.inputs) > 6 and node.inputs[6] is not None and (
                bias is None or bias.dtype != np.float32 or bias.size not in (1, w.shape[1])
                or (bias.size > 1 and bias.ndim != 1)):
            return ()
    return SYMBOLS
