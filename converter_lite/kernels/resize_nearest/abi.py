"""The nearest Resize driver's ABI (emit.py writes the code, bind.py the records).

    void cl_resize_nearest_v1_x32(i64* desc, i64 nthreads)

``desc``: ``FIELDS`` i64 words, then ``EXTRA`` word the entry point writes (rows per chunk).  Elements are moved
as 32-bit words, so any 4-byte dtype (float32, int32, uint32) runs on it.
"""
from ..node_facts import dtype

SYMBOL = "cl_resize_nearest_v1_x32"
SYMBOLS = (SYMBOL,)
FIELDS = ("planes", "h", "w", "oh", "ow", "x", "y", "rows", "cols")
EXTRA = 1
OPS = ("Resize",)
WORD_DTYPES = ("float32", "int32", "uint32")


def select(node) -> tuple[str, ...]:
    """A Resize of 4-byte elements in nearest mode (the binder checks the rest: constant scales/sizes, only the
    last two axes resized, not ``tf_crop_and_resize``)."""
    ok = node.op == "Resize" and dtype(node, 0) in WORD_DTYPES and node.attrs.get("mode", "nearest") == "nearest"
    return SYMBOLS if ok else ()
