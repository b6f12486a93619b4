"""The depth-to-space driver's ABI (emit.py writes the code, bind.py the records).

    void cl_depth_to_space_v1_x32(i64* desc, i64 nthreads)

One block rearrangement between a "depth" tensor ``[n, c*bh*bw, hd, wd]`` and a "space" tensor
``[n, c, hd*bh, wd*bw]`` (NCHW, 32-bit elements moved as i32 words, so float32, int32 and uint32 alike):

    space[n, k, h*bh + i, w*bw + j] = depth[n, k*sc + i*si + j*sj, h, w]          (+ bias[k])

in either direction: DepthToSpace (DCR: ``sc = 1, si = bw*c, sj = c``; CRD: ``sc = bh*bw, si = bw, sj = 1``),
SpaceToDepth (the same maps, read the other way), and the scatter of a ConvTranspose whose kernel equals its
stride (runtime/fast/patch.py: the GEMM's ``[n, (m, kh, kw), h*w]`` scratch is a CRD depth tensor; float32, the
bias added per output channel as it is scattered).

``desc``: ``FIELDS`` i64 words, then ``EXTRA`` word the entry point writes (space rows per chunk).
"""
from ..node_facts import conv_transpose_blocks, dtype

SYMBOL = "cl_depth_to_space_v1_x32"
SYMBOLS = (SYMBOL,)
FIELDS = ("n", "c", "hd", "wd", "bh", "bw", "sc", "si", "sj", "depth", "space", "bias", "to_space")
EXTRA = 1
OPS = ("DepthToSpace", "SpaceToDepth", "ConvTranspose")
WORD_DTYPES = ("float32", "int32", "uint32")


def select(node) -> tuple[str, ...]:
    """DepthToSpace / SpaceToDepth of 4-byte elements (the binder checks the rest: 4-D, the mode), and float32
    2-D ConvTranspose with constant weights whose kernel equals its stride, without pads, output padding,
    output shape or dilation, group 1 (runtime/fast/patch.py ``conv_transpose_patches`` scatters its GEMM
    with the driver)."""
    if node.op in ("DepthToSpace", "SpaceToDepth"):
        return SYMBOLS if dtype(node, 0) in WORD_DTYPES else ()
    if node.op == "ConvTranspose":
        return SYMBOLS if conv_transpose_blocks(node) else ()
    return ()

