"""The pooling driver's ABI (emit.py writes the code, bind.py the records).

    void cl_pool2d_v1_f32(i64* desc, i64 nthreads)          MaxPool / AveragePool over [planes, h, w]
    void cl_global_pool_v1_f32(i64* desc, i64 nthreads)     GlobalAveragePool / GlobalMaxPool over [planes, size]

``desc``: the symbol's ``*_FIELDS`` i64 words, then ``EXTRA`` word the entry point writes (units per chunk).
float32 only; MaxPool's optional Indices output is not served.
"""
from ..node_facts import dtype, shape

POOL_SYMBOL = "cl_pool2d_v1_f32"
GLOBAL_SYMBOL = "cl_global_pool_v1_f32"
SYMBOLS = (POOL_SYMBOL, GLOBAL_SYMBOL)
POOL_FIELDS = ("planes", "h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "dh", "dw", "pt", "pl", "mode", "x", "y",
               "masks", "rowtaps", "rcount", "ccount", "rstart")
LANES = 16                         # outputs per vector: the column masks and tables are per chunk of LANES
GLOBAL_FIELDS = ("planes", "size", "mode", "x", "y")
EXTRA = 1
MODE_MAX, MODE_AVG = 0, 1
WINDOW_OPS = ("MaxPool", "AveragePool")
GLOBAL_OPS = ("GlobalAveragePool", "GlobalMaxPool")
OPS = WINDOW_OPS + GLOBAL_OPS


def select(node) -> tuple[str, ...]:
    """float32 pooling: MaxPool (its Y output alone) and AveragePool of rank 3 or 4 (1-D or 2-D windows), the
    global pools of rank 3 and more (the binder checks the rest: the window geometry, no negative pads)."""
    if dtype(node, 0) != "float32":
        return ()
    rank = len(shape(node, 0) or ())
    if node.op in WINDOW_OPS:
        outs = [o for o in node.outputs if o is not None]
        if rank not in (3, 4) or (node.op == "MaxPool" and len(outs) != 1) or "kernel_shape" not in node.attrs:
            return ()
        return (POOL_SYMBOL,)
    return (GLOBAL_SYMBOL,) if node.op in GLOBAL_OPS and rank >= 3 else ()
