"""The int8 GEMM driver (a support function; abi.py gives the layouts).

    void cl_qgemm_v1(i8* tiles, i64 ntiles, i64 nthreads)

runs every tile record of ``tiles`` across the thread pool (one chunk per tile, the caller taking tiles too; on
the calling thread when ``nthreads <= 1`` or there is one tile).  A tile is a block of rows x whole panels of one
product; tiles write disjoint parts of C.

Tile record (``TILE_FIELDS`` i64 words):

====  =======  ==============================================================================================
 0    M        rows of the tile
 1    N        columns of the tile (its panels are ``ceil(N / PANEL)``; the last one masked)
 2    KQ       quads of k (``K / 4``)
 3    A        address of the tile's first activation row (uint8), rows ``lda`` bytes apart
 4    lda
 5    B        address of the tile's first packed panel (panels ``KQ * PANEL * 4`` bytes apart)
 6    C        address of the tile's first output element (float32 or int32), rows ``ldc`` elements apart
 7    ldc
 8    colsum   int32 column sums of B from the tile's first column (padded to whole panels)
 9    azp      address of A's uint8 zero point, or 0 (none)
10    ascale   address of A's float32 scale (float output)
11    bscale   float32 scale per column from the tile's first column, padded (float output)
12    bias     float32 bias per column from the tile's first column, padded, or 0 (float output)
13    flags    ``FLAG_INT32``: store the int32 sums, else ``float(sum) * (ascale * bscale[n]) + bias[n]``
====  =======  ==============================================================================================

The sum is ``A @ B - a_zp * colsum``: the zero point's share is taken off once per column in the epilogue, not
per product.  Loop nest: panels, then row blocks of balanced size (``M`` cut into ``ceil(M / MR)`` blocks that
differ by at most a row); a microkernel (one per block height and panel width in vectors) keeps its
``mr x 32`` int32 sums in registers over all of k: per quad of k it loads the panel's two 64-byte vectors
(prefetching ``PF_AHEAD`` quads ahead) and broadcasts four activation bytes per row.  With AVX-512 VNNI (the
target's features, passed to ``emit_qgemm``) each row and vector is one ``vpdpbusd``; without it the four
byte products are unpacked with shifts and multiplied in int32 lanes (the same sums, several times slower).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import (
    constant_table,
    internal_function,
    panel_blocks,
    prefetch,
    tile_record,
    tiles_entry,
)
from ...codegen.loops import loop_id
from ...codegen.threadpool import BODY_TYPE
from ...codegen.types import BYTE_PTR, F32, I32, I64, VOID
from ...codegen.vector import MASK, VEC, VL, c64, splat, splat_i32, tap_loop_head
from .abi import FIELDS, FLAG_INT32, PANEL, QGEMM_SYMBOL, QUAD, TILE_FIELDS

MR = 12                         # rows per block: 2 * MR int32 sums + 2 weight vectors + 1 broadcast (of 32)
PF_AHEAD = 16                   # quads of k the microkernel prefetches the panel ahead
IVEC = ir.VectorType(I32, VL)
IVECP = IVEC.as_pointer()
I8 = ir.IntType(8)
MK_TYPE = ir.FunctionType(VOID, [BYTE_PTR, I64, BYTE_PTR, I64, BYTE_PTR, I64, I64, I32.as_pointer(), I32, F32,
                                 F32.as_pointer(), F32.as_pointer(), I64])
# microkernel(A, lda, panel, KQ, C, ldc, ncols, colsum, azp, ascale, bscale, bias, flags)
_F = {name: i for i, name in enumerate(FIELDS)}
VNNI_FEATURES = frozenset({"avx512vnni", "avx512bw", "avx512f"})


def _dot4(module: ir.Module, vnni: bool):
    """``dot4(b, acc, a, w)``: ``acc + sum over the 4 bytes of each lane of u8(a) * s8(w)`` (int32 lanes)."""
    if vnni:
        name = "llvm.x86.avx512.vpdpbusd.512"
        fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(IVEC, [IVEC, IVEC, IVEC]), name)
        return lambda b, acc, a, w: b.call(fn, [acc, a, w])

    def generic(b, acc, a, w):
        for j in range(QUAD):
            aj = b.and_(b.lshr(a, splat_c(8 * j)), splat_c(255))
            wj = b.ashr(b.shl(w, splat_c(24 - 8 * j)), splat_c(24))
            acc = b.add(acc, b.mul(aj, wj))
        return acc
    return generic


def splat_c(v: int) -> ir.Constant:
    return ir.Constant(IVEC, [v] * VL)


def _lane_mask(b: ir.IRBuilder, count: ir.Value) -> ir.Value:
    return b.icmp_signed("<", ir.Constant(IVEC, list(range(VL))), splat_i32(b, count))


def microkernel(module: ir.Module, mr: int, nv: int, vnni: bool) -> ir.Function:
    """``cl_qgemm.mk<mr>x<nv>``: an ``mr x (16 * nv)`` block over all of k, then its epilogue."""
    fn = internal_function(module, f"cl_qgemm.mk{mr}x{nv}", MK_TYPE, noalias=(0, 2, 4))
    if not fn.is_declaration:
        return fn
    dot4 = _dot4(module, vnni)
    a, lda, bp, kq, c, ldc, ncols, colsum, azp, ascale, bscale, bias, flags = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("k.head", "k.body", "k.done"))
    b = ir.IRBuilder(entry)
    zero = ir.Constant(IVEC, None)
    rows = [b.bitcast(b.gep(a, [b.mul(c64(i), lda)]), I32.as_pointer()) for i in range(mr)]
    panel = b.bitcast(bp, IVECP)
    k, acc = tap_loop_head(b, head, entry, {(i, v): zero for i in range(mr) for v in range(nv)})
    b.cbranch(b.icmp_signed("<", k, kq), body, done)
    b.position_at_end(body)
    step = b.gep(panel, [b.mul(k, c64(PANEL // VL))])
    prefetch(module, b, b.gep(step, [c64(PF_AHEAD * PANEL // VL)]))
    prefetch(module, b, b.gep(step, [c64(PF_AHEAD * PANEL // VL + 1)]))
    wv = [b.load(b.gep(step, [c64(v)]), align=64) for v in range(nv)]
    for i in range(mr):
        quad = b.load(b.gep(rows[i], [k]), align=1)
        s = splat_i32(b, quad)
        for v in range(nv):
            acc[i, v].add_incoming(dot4(b, acc[i, v], s, wv[v]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    last = _lane_mask(b, b.sub(ncols, c64((nv - 1) * VL)))
    full = ir.Constant(MASK, [1] * VL)
    istore = _masked_store(module, IVEC)
    fstore = _masked_store(module, VEC)
    comp = [b.mul(b.load(b.gep(b.bitcast(colsum, IVECP), [c64(v)]), align=64), splat_i32(b, azp))
            for v in range(nv)]
    sums = {(i, v): b.sub(acc[i, v], comp[v]) for i in range(mr) for v in range(nv)}
    as_int = b.icmp_unsigned("!=", b.and_(flags, c64(FLAG_INT32)), c64(0))
    with b.if_else(as_int) as (ints, floats):
        with ints:
            ci = b.bitcast(c, I32.as_pointer())
            for i in range(mr):
                for v in range(nv):
                    ptr = b.bitcast(b.gep(ci, [b.add(b.mul(c64(i), ldc), c64(v * VL))]), IVECP)
                    b.call(istore, [sums[i, v], ptr, ir.Constant(I32, 4), last if v == nv - 1 else full])
        with floats:
            cf = b.bitcast(c, F32.as_pointer())
            sa = splat(b, ascale)
            vp = ir.VectorType(F32, VL).as_pointer()
            scale = [b.fmul(sa, b.load(b.gep(b.bitcast(bscale, vp), [c64(v)]), align=64)) for v in range(nv)]
            has_bias = b.icmp_unsigned("!=", b.ptrtoint(bias, I64), c64(0))
            bias_v = []
            for v in range(nv):
                loaded = b.load(b.gep(b.bitcast(b.select(has_bias, bias, bscale), vp), [c64(v)]), align=64)
                bias_v.append(b.select(has_bias, loaded, ir.Constant(VEC, None)))
            for i in range(mr):
                for v in range(nv):
                    out = b.fadd(b.fmul(b.sitofp(sums[i, v], VEC), scale[v]), bias_v[v])
                    ptr = b.bitcast(b.gep(cf, [b.add(b.mul(c64(i), ldc), c64(v * VL))]), vp)
                    b.call(fstore, [out, ptr, ir.Constant(I32, 4), last if v == nv - 1 else full])
    b.ret_void()
    return fn


def _masked_store(module: ir.Module, ty: ir.VectorType) -> ir.Function:
    suffix = "v16i32" if ty.element == I32 else "v16f32"
    name = f"llvm.masked.store.{suffix}.p0{suffix}"
    return module.globals.get(name) or ir.Function(
        module, ir.FunctionType(VOID, [ty, ty.as_pointer(), I32, ir.VectorType(ir.IntType(1), VL)]), name)


def _emit_tile(module: ir.Module, vnni: bool) -> ir.Function:
    """``void cl_qgemm_v1.tile(i8** tiles, i64 t)``: runs tile ``t`` (the pool's chunk body)."""
    entries = [microkernel(module, mr, nv, vnni) for nv in (1, 2) for mr in range(1, MR + 1)]
    table = constant_table(module, "cl_qgemm.table", MK_TYPE.as_pointer(), entries)
    fn = ir.Function(module, BODY_TYPE, f"{QGEMM_SYMBOL}.tile")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    f = tile_record(b, fn, _F, TILE_FIELDS)
    kq = f["KQ"]
    ptr = lambda name, ty=BYTE_PTR: b.inttoptr(f[name], ty)
    a, bm, c = ptr("A"), ptr("B"), ptr("C")
    colsum, bscale, bias = ptr("colsum", I32.as_pointer()), ptr("bscale", F32.as_pointer()), ptr("bias", F32.as_pointer())
    has_zp = b.icmp_unsigned("!=", f["azp"], c64(0))
    zp_addr = b.select(has_zp, f["azp"], f["A"])                      # (a readable address either way)
    azp = b.select(has_zp, b.zext(b.load(b.inttoptr(zp_addr, I8.as_pointer())), I32), ir.Constant(I32, 0))
    is_float = b.icmp_unsigned("==", b.and_(f["flags"], c64(FLAG_INT32)), c64(0))
    sc_addr = b.select(is_float, f["ascale"], f["A"])
    ascale = b.select(is_float, b.load(b.inttoptr(sc_addr, F32.as_pointer())), ir.Constant(F32, 0.0))
    pstride = b.mul(kq, c64(PANEL * QUAD))

    def per_panel(p, j0):
        return (b.gep(bm, [b.mul(p, pstride)]), b.gep(colsum, [j0]), b.gep(bscale, [j0]),
                b.select(b.icmp_unsigned("!=", f["bias"], c64(0)), b.gep(bias, [j0]), bias))

    def call(mk, i0, j0, w, values):
        panel, cs, bs, bb = values
        cblk = b.gep(c, [b.mul(b.add(b.mul(i0, f["ldc"]), j0), c64(4))])       # (f32 or i32)
        b.call(mk, [b.gep(a, [b.mul(i0, f["lda"])]), f["lda"], panel, kq, cblk, f["ldc"], w, cs, azp, ascale, bs,
                    bb, f["flags"]])
    panel_blocks(b, f["M"], f["N"], b.bitcast(table, MK_TYPE.as_pointer().as_pointer()), MR, PANEL, per_panel, call)
    b.ret_void()
    return fn


def emit_qgemm(module: ir.Module, features: frozenset[str] = frozenset()) -> ir.Function:
    """Defines ``QGEMM_SYMBOL`` in ``module``: ``vpdpbusd`` when ``features`` (the target's) have AVX-512 VNNI."""
    tile = _emit_tile(module, VNNI_FEATURES <= features)
    return tiles_entry(module, QGEMM_SYMBOL, tile)


EMITTERS = {QGEMM_SYMBOL: emit_qgemm}
