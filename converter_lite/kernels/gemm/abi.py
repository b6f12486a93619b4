"""The GEMM drivers' ABI (emit.py and emit_sgemm.py write the code, bind.py the tile records).

    void cl_gemm_tiles_v1(i8* tiles, i64 ntiles, i64 nthreads)      tile records of FIELDS (TILE_BYTES each)
    void cl_sgemm_v1(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)   CBLAS, i64 sizes

A tile is one CBLAS GEMM call with every argument precomputed (emit.py documents each field); ``alpha`` and
``beta`` are float64 bit patterns.  The native sgemm takes CBLAS's signature with 64-bit integers; its order
word may carry ``FLAG_WIDE`` (32-register tiles) and ``transB = PACKED`` reads B packed in ``PANEL``-column
panels (ldb = the panel stride in floats).  The symbols carry the layouts' versions.
"""
from ..blas import NO_TRANS, ROW_MAJOR, TRANS  # noqa: F401  (CBLAS flags the records and the sgemm take)
from ..node_facts import conv_2d, conv_transpose_blocks, dtype, is_patch

GEMM_TILES_SYMBOL = "cl_gemm_tiles_v1"      # the version of the tile-record layout
SGEMM_SYMBOL = "cl_sgemm_v1"
SYMBOLS = (GEMM_TILES_SYMBOL, SGEMM_SYMBOL)
FIELDS = ("fn", "kind", "order", "transA", "transB", "M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta",
          "C", "ldc", "bias", "rs", "cs", "unused")
FLOAT_FIELDS = ("alpha", "beta")
TILE_FIELDS = len(FIELDS)
TILE_BYTES = TILE_FIELDS * 8
KIND_DOUBLE, KIND_INT64 = 1, 2              # tile "kind" bits: dgemm, 64-bit BLAS integers
PACKED = 150                                # transB: B packed in PANEL-column panels (not a CBLAS value)
FLAG_WIDE = 1 << 16                         # in the order word: the sgemm may use its 32-register tiles
PANEL = 32                                  # columns per packed panel (2 x 16-lane vectors)
OPS = ("MatMul", "Gemm", "FusedMatMul", "Conv", "ConvTranspose", "LSTM", "GRU", "RNN")


def select(node) -> tuple[str, ...]:
    """MatMul/Gemm/FusedMatMul of float32 (tiles + the native sgemm) or float64 (tiles on numpy's CBLAS),
    patch-embedding Convs and kernel = stride ConvTransposes (float32: one GEMM each), and recurrent layers
    (the input's part of the gates for every step at once, runtime/fast/rnn.py)."""
    if node.op == "ConvTranspose":
        return SYMBOLS if conv_transpose_blocks(node) else ()
    if node.op == "Conv":
        g = conv_2d(node)
        if g is None or not is_patch(g, node):
            return ()
        dt = g["dtype"]
    else:
        dt = dtype(node, 0)
    return SYMBOLS if dt == "float32" else (GEMM_TILES_SYMBOL,) if dt == "float64" else ()
