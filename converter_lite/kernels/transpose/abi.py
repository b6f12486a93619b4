"""The transpose driver's ABI (emit.py writes the code, bind.py the records).

    void cl_transpose_v1_x32(i64* desc, i64 nthreads)

A copy of 32-bit elements (float32, int32, uint32: moved as i32 words, bits kept) from a strided view into a
contiguous output of at most ``RANK`` dims (bind.py merges the dims a permutation keeps together and drops
the ones of size 1, so a head split ``[b, s, h, d] -> [b, h, s, d]`` is 3-D):

    y[i0, i1, i2, i3] = x[i0*s0 + i1*s1 + i2*s2 + i3*s3]            (y C-contiguous, dims d0..d3)

A Transpose left as its own step (a dynamic-shape plan's head splits, which the converter could not fuse
into the kernels around them) runs here instead of numpy, so it joins the native steps the runner calls in
one go (kernels/runlist).

``desc``: ``FIELDS`` i64 words, then ``EXTRA`` word the entry point writes (rows per chunk).
"""
from ..node_facts import dtype

SYMBOL = "cl_transpose_v1_x32"
SYMBOLS = (SYMBOL,)
RANK = 4
FIELDS = ("d0", "d1", "d2", "d3", "s0", "s1", "s2", "s3", "x", "y")
EXTRA = 1
OPS = ("Transpose",)
WORD_DTYPES = ("float32", "int32", "uint32")


def select(node) -> tuple[str, ...]:
    """A Transpose of 4-byte elements (the binder checks the rest: at most ``RANK`` dims once merged)."""
    return SYMBOLS if node.op == "Transpose" and dtype(node, 0) in WORD_DTYPES else ()
