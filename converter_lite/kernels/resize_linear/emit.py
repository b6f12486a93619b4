"""The linear Resize driver: separable 2-tap resampling of the last two axes of float32 planes (a support
function).

    void cl_resize_linear_v1_f32(i8* desc, i64 nthreads)

Linear (bilinear) Resize of ``[planes, h, w]`` to ``[planes, oh, ow]``, with the taps and weights of each output
row and column tabulated by the runtime from the reference kernel's own geometry (every coordinate mode, the
clamping at the borders): output row ``oy`` of plane ``p`` is

    t[j] = wr[oy][0] * x[p, rows[oy][0], j] + wr[oy][1] * x[p, rows[oy][1], j]      (j < w: a vector loop)
    y[p, oy, ox] = wc0[ox] * t[c0[ox]] + wc1[ox] * t[c1[ox]]                       (ox < ow: gathers from t)

with ``t`` one row on the stack (``MAX_WIDTH`` columns at most), so each input element is read once per output
row that uses it and the gathers hit L1.  The output rows of all planes are cut into about
``CHUNKS_PER_THREAD`` pool chunks per thread.

Record (i64 fields, ``FIELDS``): ``planes h w oh ow``, addresses ``x y``, ``rows`` (i64 ``[oh][2]``), ``wrows``
(f32 ``[oh][2]``), ``cols`` (i32 ``[2][ow]``: first taps, then second taps), ``wcols`` (f32 ``[2][ow]``); then one
word the entry point writes (output rows per chunk).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import chunk_body, chunked_entry
from ...codegen.loops import VECTORIZE, for_range
from ...codegen.types import F32, I32, I64
from ...codegen.vector import FP, I64P, c64, smin
from .abi import EXTRA, FIELDS, MAX_WIDTH
from .abi import SYMBOL as RESIZE_LINEAR_SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
CHUNKS_PER_THREAD = 4


def _emit_body(module: ir.Module) -> ir.Function:
    fn, b, f, rpc = chunk_body(module, f"{RESIZE_LINEAR_SYMBOL}.rows", FIELDS)
    tmp = b.alloca(F32, c64(MAX_WIDTH))
    tmp.align = 64
    h, w, oh, ow = f["h"], f["w"], f["oh"], f["ow"]
    x, y = b.inttoptr(f["x"], FP), b.inttoptr(f["y"], FP)
    rows, wrows = b.inttoptr(f["rows"], I64P), b.inttoptr(f["wrows"], FP)
    cols, wcols = b.inttoptr(f["cols"], I32.as_pointer()), b.inttoptr(f["wcols"], FP)
    units = b.mul(f["planes"], oh)
    u0 = b.mul(fn.args[1], rpc)
    with for_range(b, u0, smin(b, b.add(u0, rpc), units), "u") as u:
        p, oy = b.sdiv(u, oh), b.srem(u, oh)
        two = b.mul(oy, c64(2))
        ia, ib = b.load(b.gep(rows, [two])), b.load(b.gep(rows, [b.add(two, c64(1))]))
        wa, wb = b.load(b.gep(wrows, [two])), b.load(b.gep(wrows, [b.add(two, c64(1))]))
        plane = b.mul(p, h)
        xa = b.gep(x, [b.mul(b.add(plane, ia), w)])
        xb = b.gep(x, [b.mul(b.add(plane, ib), w)])
        with for_range(b, 0, w, "j", VECTORIZE) as j:
            v = b.fadd(b.fmul(wa, b.load(b.gep(xa, [j]))), b.fmul(wb, b.load(b.gep(xb, [j]))))
            b.store(v, b.gep(tmp, [j]))
        yrow = b.gep(y, [b.mul(u, ow)])
        with for_range(b, 0, ow, "o", VECTORIZE) as o:
            c0 = b.sext(b.load(b.gep(cols, [o])), I64)
            c1 = b.sext(b.load(b.gep(cols, [b.add(o, ow)])), I64)
            w0, w1 = b.load(b.gep(wcols, [o])), b.load(b.gep(wcols, [b.add(o, ow)]))
            v = b.fadd(b.fmul(w0, b.load(b.gep(tmp, [c0]))), b.fmul(w1, b.load(b.gep(tmp, [c1]))))
            b.store(v, b.gep(yrow, [o]))
    b.ret_void()
    return fn


def emit_resize_linear(module: ir.Module) -> ir.Function:
    """Defines ``cl_resize_linear_v1_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    return chunked_entry(module, RESIZE_LINEAR_SYMBOL, _emit_body(module), plane_rows, len(FIELDS),
                         CHUNKS_PER_THREAD)


def plane_rows(b: ir.IRBuilder, d) -> ir.Value:
    """Output rows of all planes (the units of work of this driver and kernels/resize_nearest/: records whose
    ``planes`` and ``oh`` words are at the same places)."""
    return b.mul(b.load(b.gep(d, [c64(_F["planes"])])), b.load(b.gep(d, [c64(_F["oh"])])))


assert EXTRA == 1                         # rows per chunk, written by the entry point
EMITTERS = {RESIZE_LINEAR_SYMBOL: emit_resize_linear}
