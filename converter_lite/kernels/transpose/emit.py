"""The transpose driver (a support function; abi.py gives the record).

    void cl_transpose_v1_x32(i8* desc, i64 nthreads)

One unit of work is one output row ``(i0, i1, i2)`` of ``d3`` elements, read from ``x`` at stride ``s3``
(one contiguous loop when ``s3`` is 1, which the loop vectorizer widens; a strided loop otherwise).  The rows
are cut into about ``CHUNKS_PER_THREAD`` pool chunks per thread of at least ``MIN_CHUNK`` elements, so a
small transpose (a token's heads) runs on the calling thread with no hand-off.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import chunk_body, chunked_entry
from ...codegen.loops import VECTORIZE, for_range
from ...codegen.types import I32
from ...codegen.vector import c64, cdiv, smin
from .abi import EXTRA, FIELDS, SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
CHUNKS_PER_THREAD = 4
MIN_CHUNK = 16384                         # elements: smaller transposes run as one chunk
I32P = I32.as_pointer()


def _emit_body(module: ir.Module) -> ir.Function:
    fn, b, f, rpc = chunk_body(module, f"{SYMBOL}.rows", FIELDS)
    d1, d2, d3 = f["d1"], f["d2"], f["d3"]
    x, y = b.inttoptr(f["x"], I32P), b.inttoptr(f["y"], I32P)
    units = b.mul(b.mul(f["d0"], d1), d2)
    u0 = b.mul(fn.args[1], rpc)
    unit_stride = b.icmp_signed("==", f["s3"], c64(1))
    with for_range(b, u0, smin(b, b.add(u0, rpc), units), "u") as u:
        i01, i2 = b.sdiv(u, d2), b.srem(u, d2)
        i0, i1 = b.sdiv(i01, d1), b.srem(i01, d1)
        src = b.gep(x, [b.add(b.add(b.mul(i0, f["s0"]), b.mul(i1, f["s1"])), b.mul(i2, f["s2"]))])
        dst = b.gep(y, [b.mul(u, d3)])
        with b.if_else(unit_stride) as (contiguous, strided):
            with contiguous, for_range(b, 0, d3, "c", VECTORIZE) as i:
                b.store(b.load(b.gep(src, [i])), b.gep(dst, [i]))
            with strided, for_range(b, 0, d3, "s") as i:
                b.store(b.load(b.gep(src, [b.mul(i, f["s3"])])), b.gep(dst, [i]))
    b.ret_void()
    return fn


def emit_transpose(module: ir.Module) -> ir.Function:
    """Defines ``SYMBOL`` in ``module``."""
    body = _emit_body(module)
    return chunked_entry(module, SYMBOL, body, lambda b, d: b.mul(b.mul(b.load(b.gep(d, [c64(_F["d0"])])),
                                                                        b.load(b.gep(d, [c64(_F["d1"])]))),
                                                                  b.load(b.gep(d, [c64(_F["d2"])]))),
                         len(FIELDS), CHUNKS_PER_THREAD,
                         lambda b, d: cdiv(b, c64(MIN_CHUNK), b.load(b.gep(d, [c64(_F["d3"])]))))


EMITTERS = {SYMBOL: emit_transpose}
assert EXTRA == 1
