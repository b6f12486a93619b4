"""The depth-to-space driver: block rearrangement between ``[n, c*bh*bw, hd, wd]`` and ``[n, c, hd*bh, wd*bw]``
of 32-bit elements (a support function).

    void cl_depth_to_space_v1_x32(i8* desc, i64 nthreads)

    space[n, k, h*bh + i, w*bw + j] = depth[n, k*sc + i*si + j*sj, h, w]  (+ bias[k])

One unit of work is one row of the space tensor, ``(n, k, h*bh + i)``: it interleaves (DepthToSpace) or
de-interleaves (SpaceToDepth) the ``bw`` depth rows ``k*sc + i*si + j*sj`` of row ``h``.  For ``bw`` 2 the inner
loop moves both rows at once (interleaved loads/stores that the loop vectorizer widens into shuffles); other
widths loop over ``j`` with a strided inner loop (unrolled variants for 3 and 4 measured no faster here, the
moves being memory-bound, and tripled the driver's code and compile time: 8 KB, 0.25 s now).  Elements move as
i32 words (the input's bits, NaN payloads and signed zeros kept), except when ``bias`` is set (the
ConvTranspose scatter, float32 only): then each element is ``depth + bias[k]`` in float32, rounded as numpy's
``out + bias`` is.  The space rows of all planes are cut into about ``CHUNKS_PER_THREAD`` pool chunks per
thread, of at least ``MIN_CHUNK`` elements each.

Record (i64 fields, ``FIELDS``): ``n c hd wd bh bw sc si sj``, addresses ``depth space bias`` (``bias`` 0: none;
f32 ``[c]``), ``to_space`` (1: write the space tensor, 0: write the depth tensor); then one word the entry
point writes (space rows per chunk).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import chunk_body, chunked_entry
from ...codegen.loops import VECTORIZE, for_range
from ...codegen.types import F32, I32
from ...codegen.vector import c64, cdiv, smin
from .abi import EXTRA, FIELDS
from .abi import SYMBOL as DEPTH_TO_SPACE_SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
CHUNKS_PER_THREAD = 4
MIN_CHUNK = 4096                          # elements: smaller tensors run as one chunk (no pool hand-off)
UNROLLED = (2,)                           # block widths moved by one interleaving inner loop
I32P = I32.as_pointer()


def _rows(b: ir.IRBuilder, srow, drows, wd, bw, to_space: bool, bias) -> None:
    """The inner loops of one space row: ``srow[w*bw + j] <-> drows[j][w]`` for ``w < wd``, ``j < bw``
    (``drows`` one pointer per ``j`` when ``bw`` is a Python int, else a function ``j -> pointer``)."""
    def move(src_ptr, dst_ptr):
        v = b.load(src_ptr)
        if bias is not None:
            v = b.bitcast(b.fadd(b.bitcast(v, F32), bias), I32)
        b.store(v, dst_ptr)

    if isinstance(bw, int):
        with for_range(b, 0, wd, "w", VECTORIZE) as w:
            base = b.mul(w, c64(bw))
            for j, drow in enumerate(drows):
                s, d = b.gep(srow, [b.add(base, c64(j))]), b.gep(drow, [w])
                move(d, s) if to_space else move(s, d)
        return
    with for_range(b, 0, bw, "j") as j:
        drow = drows(j)
        with for_range(b, 0, wd, "w") as w:
            s, d = b.gep(srow, [b.add(b.mul(w, bw), j)]), b.gep(drow, [w])
            move(d, s) if to_space else move(s, d)


def _emit_body(module: ir.Module) -> ir.Function:
    fn, b, f, rpc = chunk_body(module, f"{DEPTH_TO_SPACE_SYMBOL}.rows", FIELDS)
    c, hd, wd, bh, bw = f["c"], f["hd"], f["wd"], f["bh"], f["bw"]
    hs, ws = b.mul(hd, bh), b.mul(wd, bw)
    cd = b.mul(c, b.mul(bh, bw))
    plane = b.mul(hd, wd)
    jstep = b.mul(f["sj"], plane)                    # depth elements between the rows of j and j + 1
    depth, space = b.inttoptr(f["depth"], I32P), b.inttoptr(f["space"], I32P)
    bias_p = b.inttoptr(f["bias"], F32.as_pointer())
    has_bias = b.icmp_signed("!=", f["bias"], c64(0))
    to_space = b.icmp_signed("!=", f["to_space"], c64(0))
    units = b.mul(b.mul(f["n"], c), hs)
    u0 = b.mul(fn.args[1], rpc)
    with for_range(b, u0, smin(b, b.add(u0, rpc), units), "u") as u:
        nk, sr = b.sdiv(u, hs), b.srem(u, hs)
        n, k = b.sdiv(nk, c), b.srem(nk, c)
        h, i = b.sdiv(sr, bh), b.srem(sr, bh)
        ch = b.add(b.mul(k, f["sc"]), b.mul(i, f["si"]))
        d0 = b.gep(depth, [b.add(b.mul(b.add(b.mul(n, cd), ch), plane), b.mul(h, wd))])
        srow = b.gep(space, [b.mul(u, ws)])
        cases = [(bw_, add, put) for put in (True, False) for add in ((True, False) if put else (False,))
                 for bw_ in (*UNROLLED, None)]
        done = fn.append_basic_block("row.done")
        for bw_, add, put in cases:
            take = b.and_(b.icmp_signed("==", to_space, ir.Constant(ir.IntType(1), int(put))),
                          b.icmp_signed("==", has_bias, ir.Constant(ir.IntType(1), int(add))))
            if bw_ is not None:
                take = b.and_(take, b.icmp_signed("==", bw, c64(bw_)))
            yes, no = fn.append_basic_block("row.case"), fn.append_basic_block("row.next")
            b.cbranch(take, yes, no)
            b.position_at_end(yes)
            bias = b.load(b.gep(bias_p, [k])) if add else None
            if bw_ is None:
                drows = (lambda j, d0=d0: b.gep(d0, [b.mul(j, jstep)]))
            else:
                drows = [d0 if j == 0 else b.gep(d0, [b.mul(c64(j), jstep)]) for j in range(bw_)]
            _rows(b, srow, drows, wd, bw if bw_ is None else bw_, put, bias)
            b.branch(done)
            b.position_at_end(no)
        b.branch(done)
        b.position_at_end(done)
    b.ret_void()
    return fn


def emit_depth_to_space(module: ir.Module) -> ir.Function:
    """Defines ``cl_depth_to_space_v1_x32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    def field(b, d, name):
        return b.load(b.gep(d, [c64(_F[name])]))

    def units(b, d):                                   # space rows
        return b.mul(b.mul(field(b, d, "n"), field(b, d, "c")), b.mul(field(b, d, "hd"), field(b, d, "bh")))

    def least(b, d):                                   # rows of at least MIN_CHUNK elements
        ws = b.mul(field(b, d, "wd"), field(b, d, "bw"))
        return cdiv(b, c64(MIN_CHUNK), b.select(b.icmp_signed("<", ws, c64(1)), c64(1), ws))
    return chunked_entry(module, DEPTH_TO_SPACE_SYMBOL, _emit_body(module), units, len(FIELDS), CHUNKS_PER_THREAD,
                         least)


assert EXTRA == 1                         # space rows per chunk, written by the entry point
EMITTERS = {DEPTH_TO_SPACE_SYMBOL: emit_depth_to_space}
