"""The nearest Resize driver: one-tap resampling of the last two axes of planes of 32-bit elements (a support
function).

    void cl_resize_nearest_v1_x32(i8* desc, i64 nthreads)

Nearest Resize of ``[planes, h, w]`` to ``[planes, oh, ow]``, with the source row of each output row and the
source column of each output column tabulated by the runtime from the reference kernel's own geometry (every
coordinate and nearest mode, the clamping at the borders; kernels/resize_nearest/bind.py):

    y[p, oy, ox] = x[p, rows[oy], cols[ox]]

An output row whose source row is the previous output row's (an upsampling by 2 repeats every row) copies that
row when this chunk wrote it, instead of gathering again.  Elements move as i32 words: the result is the
input's bits (NaN payloads and signed zeros kept), for float32 and 32-bit integers alike.  The output rows of
all planes are cut into about ``CHUNKS_PER_THREAD`` pool chunks per thread.

Record (i64 fields, ``FIELDS``): ``planes h w oh ow``, addresses ``x y``, ``rows`` (i64 ``[oh]``), ``cols``
(i32 ``[ow]``); then one word the entry point writes (output rows per chunk).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import chunk_body, chunked_entry
from ...codegen.loops import VECTORIZE, for_range
from ...codegen.types import I32, I64
from ...codegen.vector import I64P, c64, smin
from ..resize_linear.abi import FIELDS as LINEAR_FIELDS
from ..resize_linear.emit import plane_rows
from .abi import EXTRA, FIELDS
from .abi import SYMBOL as RESIZE_NEAREST_SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
CHUNKS_PER_THREAD = 4
I32P = I32.as_pointer()
assert FIELDS[:5] == LINEAR_FIELDS[:5]   # planes h w oh ow where plane_rows reads them


def _emit_body(module: ir.Module) -> ir.Function:
    fn, b, f, rpc = chunk_body(module, f"{RESIZE_NEAREST_SYMBOL}.rows", FIELDS)
    h, w, oh, ow = f["h"], f["w"], f["oh"], f["ow"]
    x, y = b.inttoptr(f["x"], I32P), b.inttoptr(f["y"], I32P)
    rows, cols = b.inttoptr(f["rows"], I64P), b.inttoptr(f["cols"], I32P)
    units = b.mul(f["planes"], oh)
    u0 = b.mul(fn.args[1], rpc)
    with for_range(b, u0, smin(b, b.add(u0, rpc), units), "u") as u:
        p, oy = b.sdiv(u, oh), b.srem(u, oh)
        r = b.load(b.gep(rows, [oy]))
        prev = b.load(b.gep(rows, [b.select(b.icmp_signed(">", oy, c64(0)), b.sub(oy, c64(1)), oy)]))
        repeat = b.and_(b.and_(b.icmp_signed(">", u, u0), b.icmp_signed(">", oy, c64(0))),
                        b.icmp_signed("==", prev, r))
        yrow = b.gep(y, [b.mul(u, ow)])
        with b.if_else(repeat) as (then, otherwise):
            with then:                          # the row this chunk just wrote
                last = b.gep(yrow, [b.neg(ow)])
                with for_range(b, 0, ow, "c", VECTORIZE) as o:
                    b.store(b.load(b.gep(last, [o])), b.gep(yrow, [o]))
            with otherwise:
                xrow = b.gep(x, [b.mul(b.add(b.mul(p, h), r), w)])
                with for_range(b, 0, ow, "o", VECTORIZE) as o:
                    c = b.sext(b.load(b.gep(cols, [o])), I64)
                    b.store(b.load(b.gep(xrow, [c])), b.gep(yrow, [o]))
    b.ret_void()
    return fn


def emit_resize_nearest(module: ir.Module) -> ir.Function:
    """Defines ``cl_resize_nearest_v1_x32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    return chunked_entry(module, RESIZE_NEAREST_SYMBOL, _emit_body(module), plane_rows, len(FIELDS),
                         CHUNKS_PER_THREAD)


assert EXTRA == 1                         # rows per chunk, written by the entry point
EMITTERS = {RESIZE_NEAREST_SYMBOL: emit_resize_nearest}
