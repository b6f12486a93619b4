"""The linear Resize driver's ABI (emit.py writes the code, bind.py the records).

    void cl_resize_linear_v1_f32(i64* desc, i64 nthreads)

``desc``: ``FIELDS`` i64 words, then ``EXTRA`` word the entry point writes (rows per chunk).
"""
from ..node_facts import dtype

SYMBOL = "cl_resize_linear_v1_f32"
SYMBOLS = (SYMBOL,)
FIELDS = ("planes", "h", "w", "oh", "ow", "x", "y", "rows", "wrows", "cols", "wcols")
EXTRA = 1
MAX_WIDTH = 8192                   # input columns of the stack row (32 KB)
OPS = ("Resize",)


def select(node) -> tuple[str, ...]:
    """float32 Resize in linear mode (the binder checks the rest: constant scales, last two axes, no
    antialias)."""
    ok = node.op == "Resize" and dtype(node, 0) == "float32" and node.attrs.get("mode", "nearest") == "linear"
    return SYMBOLS if ok else ()
