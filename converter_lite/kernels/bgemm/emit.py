"""The bf16 GEMM driver (a support function; abi.py gives the layouts).

    void cl_bgemm_v1(i8* tiles, i64 ntiles, i64 nthreads)

runs every tile record of ``tiles`` across the thread pool (one chunk per tile, the caller taking tiles too; on
the calling thread when ``nthreads <= 1`` or there is one tile).  A tile is a block of rows x whole panels of one
product; tiles write disjoint parts of C.

Tile record (``TILE_FIELDS`` i64 words):

====  =======  ==============================================================================================
 0    M        rows of the tile
 1    N        columns of the tile (its panels are ``ceil(N / PANEL)``; the last one masked)
 2    K        steps of k (``ceil(K / 2)`` pairs)
 3    A        address of the tile's first activation row (float32), rows ``lda`` bytes apart
 4    lda
 5    B        address of the tile's first packed panel (panels ``ceil(K / 2) * PANEL * 4`` bytes apart)
 6    C        address of the tile's first output element (float32), rows ``ldc`` elements apart
 7    ldc
 8    bias     float32 bias per column from the tile's first column, padded to whole panels, or 0 (none)
 9    flags    (none yet)
====  =======  ==============================================================================================

A tile first converts its rows of A to bfloat16 into a buffer of its own (malloc'ed; rows of ``ceil(K / 32)``
64-byte vectors, each ``vcvtne2ps2bf16`` of two masked loads of 16 floats, zeros past K), then loops like the int8
GEMM (kernels/qgemm/emit.py): panels, then row blocks of balanced size (``M`` cut into ``ceil(M / MR)`` blocks
that differ by at most a row); a microkernel (one per block height and panel width in vectors) keeps its
``mr x 32`` float32 sums in registers over all of k: per pair of k it loads the panel's two 64-byte vectors
(prefetching ``PF_AHEAD`` pairs ahead) and broadcasts one 32-bit pair per row, one ``vdpbf16ps`` per row and
vector.  The epilogue adds the bias and stores with the last vector masked.  The conversion is repeated by every
tile of the same rows (a product split along N): per row ``K / 32`` conversions against the tile's ``K * N / 32``
``vdpbf16ps``, a share of ``1 / N`` (N the tile's columns).  Measured on this repo's Zen 4 VM (medians, blocks
alternating with the float32 GEMM, kernels/gemm/, packed weights): 512x768 @ 768x3072 218 GFLOPS on 1 thread (float32
108), 425 on 2 (212); 512x3072 @ 3072x768 217 (83); 128x128 @ 128x512 223 (111).

Without AVX-512 BF16 in the target's features the same arithmetic is emulated: bfloat16 rounding in integer
lanes (denormals to signed zero, NaN quieted, round to nearest even: abi.py, ops/bf16.py ``to_bf16``) and per
pair two exact float32 products added in ``vdpbf16ps``'s order (odd k first), several times slower.  A model is
never converted to use that (``--bf16=on`` refuses on such a host); tools that build every driver do.
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
from ...codegen.loops import for_range, loop_id
from ...codegen.threadpool import BODY_TYPE
from ...codegen.types import BYTE_PTR, F32, I32, I64, VOID
from ...codegen.vector import MASK, VEC, VL, c64, smin, splat_i32, tap_loop_head
from .abi import BGEMM_SYMBOL, FIELDS, PAIR, PANEL, REQUIRED_FEATURES, TILE_FIELDS

MR = 12                         # rows per block: 2 * MR float32 sums + 2 weight vectors (+ broadcasts) of 32
PF_AHEAD = 16                   # pairs of k the microkernel prefetches the panel ahead
CHUNK = 2 * VL                  # floats of A converted per vector of 32 bfloat16
IVEC = ir.VectorType(I32, VL)
IVECP = IVEC.as_pointer()
FP = F32.as_pointer()
VECP = VEC.as_pointer()
I16 = ir.IntType(16)
MK_TYPE = ir.FunctionType(VOID, [I32.as_pointer(), I64, BYTE_PTR, I64, FP, I64, I64, FP])
# microkernel(A bf16 pairs, lda in pairs, panel, pairs, C, ldc, ncols, bias (PANEL zeros when none))
_F = {name: i for i, name in enumerate(FIELDS)}
BF16_FEATURES = frozenset(REQUIRED_FEATURES) | {"avx512f", "avx512bw"}


class _BFloat(ir.types.Type):
    """LLVM's ``bfloat`` (llvmlite has no such type): the element of the BF16 intrinsics' operands."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


BVEC = ir.VectorType(_BFloat(), 2 * VL)


def _intrinsic(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, ty, name)


def _splat(v: int) -> ir.Constant:
    return ir.Constant(IVEC, [v] * VL)


def _lane_mask(b: ir.IRBuilder, count: ir.Value) -> ir.Value:
    return b.icmp_signed("<", ir.Constant(IVEC, list(range(VL))), splat_i32(b, count))


def _to_bf16(module: ir.Module, native: bool):
    """``cvt(b, lo, hi)``: 32 floats (two vectors, ``lo`` first) as 32 bfloat16 in order, a ``<16 x i32>``."""
    if native:
        fn = _intrinsic(module, "llvm.x86.avx512bf16.cvtne2ps2bf16.512", ir.FunctionType(BVEC, [VEC, VEC]))
        return lambda b, lo, hi: b.bitcast(b.call(fn, [hi, lo]), IVEC)

    def generic(b, lo, hi):
        halves = []
        for v in (lo, hi):
            x = b.bitcast(v, IVEC)
            sign = b.and_(x, _splat(-0x80000000))
            mag = b.and_(x, _splat(0x7FFFFFFF))
            rne = b.lshr(b.add(x, b.add(_splat(0x7FFF), b.and_(b.lshr(x, _splat(16)), _splat(1)))), _splat(16))
            nan = b.or_(b.lshr(x, _splat(16)), _splat(0x40))
            r = b.select(b.icmp_unsigned(">", mag, _splat(0x7F800000)), nan, rne)
            r = b.select(b.icmp_unsigned("<", mag, _splat(0x00800000)), b.lshr(sign, _splat(16)), r)
            halves.append(b.trunc(r, ir.VectorType(I16, VL)))
        both = b.shuffle_vector(halves[0], halves[1], ir.Constant(ir.VectorType(I32, 2 * VL), list(range(2 * VL))))
        return b.bitcast(both, IVEC)
    return generic


def _dot2(module: ir.Module, native: bool):
    """``dot2(b, acc, a, w)``: ``acc + a.hi * w.hi + a.lo * w.lo`` per lane (bfloat16 pairs in int32 lanes)."""
    if native:
        fn = _intrinsic(module, "llvm.x86.avx512bf16.dpbf16ps.512", ir.FunctionType(VEC, [VEC, BVEC, BVEC]))
        return lambda b, acc, a, w: b.call(fn, [acc, b.bitcast(a, BVEC), b.bitcast(w, BVEC)])

    def generic(b, acc, a, w):
        hi = _splat(-0x10000)
        for part in (lambda x: b.and_(x, hi), lambda x: b.shl(x, _splat(16))):
            acc = b.fadd(acc, b.fmul(b.bitcast(part(a), VEC), b.bitcast(part(w), VEC)))
        return acc
    return generic


def microkernel(module: ir.Module, mr: int, nv: int, native: bool) -> ir.Function:
    """``cl_bgemm.mk<mr>x<nv>``: an ``mr x (16 * nv)`` block over all of k, then its epilogue."""
    fn = internal_function(module, f"cl_bgemm.mk{mr}x{nv}", MK_TYPE, noalias=(0, 2, 4))
    if not fn.is_declaration:
        return fn
    dot2 = _dot2(module, native)
    a, lda, bp, kp, c, ldc, ncols, bias = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("k.head", "k.body", "k.done"))
    b = ir.IRBuilder(entry)
    zero = ir.Constant(VEC, None)
    rows = [b.gep(a, [b.mul(c64(i), lda)]) for i in range(mr)]
    panel = b.bitcast(bp, IVECP)
    k, acc = tap_loop_head(b, head, entry, {(i, v): zero for i in range(mr) for v in range(nv)})
    b.cbranch(b.icmp_signed("<", k, kp), body, done)
    b.position_at_end(body)
    step = b.gep(panel, [b.mul(k, c64(PANEL // VL))])
    prefetch(module, b, b.gep(step, [c64(PF_AHEAD * PANEL // VL)]))
    prefetch(module, b, b.gep(step, [c64(PF_AHEAD * PANEL // VL + 1)]))
    wv = [b.load(b.gep(step, [c64(v)]), align=64) for v in range(nv)]
    for i in range(mr):
        s = splat_i32(b, b.load(b.gep(rows[i], [k]), align=4))
        for v in range(nv):
            acc[i, v].add_incoming(dot2(b, acc[i, v], s, wv[v]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    last = _lane_mask(b, b.sub(ncols, c64((nv - 1) * VL)))
    full = ir.Constant(MASK, [1] * VL)
    store = _masked_store(module)
    bias_v = [b.load(b.gep(b.bitcast(bias, VECP), [c64(v)]), align=4) for v in range(nv)]   # (zeros: none)
    for i in range(mr):
        for v in range(nv):
            ptr = b.bitcast(b.gep(c, [b.add(b.mul(c64(i), ldc), c64(v * VL))]), VECP)
            b.call(store, [b.fadd(acc[i, v], bias_v[v]), ptr, ir.Constant(I32, 4), last if v == nv - 1 else full])
    b.ret_void()
    return fn


def _masked_store(module: ir.Module) -> ir.Function:
    return _intrinsic(module, "llvm.masked.store.v16f32.p0v16f32",
                      ir.FunctionType(VOID, [VEC, VECP, I32, MASK]))


def _masked_load(module: ir.Module) -> ir.Function:
    return _intrinsic(module, "llvm.masked.load.v16f32.p0v16f32", ir.FunctionType(VEC, [VECP, I32, MASK, VEC]))


def _convert_rows(module: ir.Module, native: bool) -> ir.Function:
    """``cl_bgemm.convert(A, lda bytes, rows, K, out, ld in vectors)``: each row of A as bfloat16, ``ld``
    64-byte vectors per row (zeros past K)."""
    ty = ir.FunctionType(VOID, [BYTE_PTR, I64, I64, I64, IVECP, I64])
    fn = internal_function(module, "cl_bgemm.convert", ty, noalias=(0, 4))
    if not fn.is_declaration:
        return fn
    a, lda, m, kk, out, ld = fn.args
    cvt = _to_bf16(module, native)
    load = _masked_load(module)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(VEC, None)
    with for_range(b, 0, m, "row") as i:
        row = b.bitcast(b.gep(a, [b.mul(i, lda)]), FP)
        orow = b.gep(out, [b.mul(i, ld)])
        with for_range(b, 0, ld, "chunk") as j:
            k0 = b.mul(j, c64(CHUNK))
            halves = []
            for h in range(2):
                at = b.add(k0, c64(h * VL))
                left = smin(b, b.sub(kk, at), c64(VL))          # (may be negative: no lane)
                ptr = b.bitcast(b.gep(row, [b.select(b.icmp_signed(">", left, c64(0)), at, c64(0))]), VECP)
                halves.append(b.call(load, [ptr, ir.Constant(I32, 4), _lane_mask(b, left), zero]))
            b.store(cvt(b, *halves), b.gep(orow, [j]), align=64)
    b.ret_void()
    return fn


def _zeros(module: ir.Module) -> ir.Value:
    """``PANEL`` float32 zeros (the bias of a product without one), as a float pointer constant expression."""
    g = module.globals.get("cl_bgemm.zeros")
    if g is None:
        ty = ir.ArrayType(F32, PANEL)
        g = ir.GlobalVariable(module, ty, "cl_bgemm.zeros")
        g.linkage = "internal"
        g.global_constant = True
        g.align = 64
        g.initializer = ir.Constant(ty, None)
    return g.bitcast(FP)


def _emit_tile(module: ir.Module, native: bool) -> ir.Function:
    """``void cl_bgemm_v1.tile(i8** tiles, i64 t)``: runs tile ``t`` (the pool's chunk body)."""
    entries = [microkernel(module, mr, nv, native) for nv in (1, 2) for mr in range(1, MR + 1)]
    table = constant_table(module, "cl_bgemm.table", MK_TYPE.as_pointer(), entries)
    convert = _convert_rows(module, native)
    zeros = _zeros(module)
    malloc = module.globals.get("malloc") or ir.Function(module, ir.FunctionType(BYTE_PTR, [I64]), "malloc")
    free = module.globals.get("free") or ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR]), "free")
    fn = ir.Function(module, BODY_TYPE, f"{BGEMM_SYMBOL}.tile")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    f = tile_record(b, fn, _F, TILE_FIELDS)
    m, kk = f["M"], f["K"]
    kp = b.sdiv(b.add(kk, c64(PAIR - 1)), c64(PAIR))
    ld = b.sdiv(b.add(kk, c64(CHUNK - 1)), c64(CHUNK))                 # vectors per converted row
    bm, c = b.inttoptr(f["B"], BYTE_PTR), b.inttoptr(f["C"], FP)
    bias = b.inttoptr(f["bias"], FP)
    pstride = b.mul(kp, c64(PANEL * PAIR * 2))
    with b.if_then(b.and_(b.icmp_signed(">", m, c64(0)), b.icmp_signed(">", f["N"], c64(0)))):
        mem = b.call(malloc, [b.add(b.mul(b.mul(m, ld), c64(64)), c64(64))])
        aligned = b.inttoptr(b.and_(b.add(b.ptrtoint(mem, I64), c64(63)), c64(-64)), IVECP)
        b.call(convert, [b.inttoptr(f["A"], BYTE_PTR), f["lda"], m, kk, aligned, ld])
        lda_pairs = b.mul(ld, c64(VL))                                  # int32 pairs per converted row

        def per_panel(p, j0):
            return (b.gep(bm, [b.mul(p, pstride)]),
                    b.select(b.icmp_unsigned("!=", f["bias"], c64(0)), b.gep(bias, [j0]), zeros))

        def call(mk, i0, j0, w, values):
            ablk = b.bitcast(b.gep(aligned, [b.mul(i0, ld)]), I32.as_pointer())
            b.call(mk, [ablk, lda_pairs, values[0], kp, b.gep(c, [b.add(b.mul(i0, f["ldc"]), j0)]), f["ldc"], w,
                        values[1]])
        panel_blocks(b, m, f["N"], b.bitcast(table, MK_TYPE.as_pointer().as_pointer()), MR, PANEL, per_panel, call)
        b.call(free, [mem])
    b.ret_void()
    return fn


def emit_bgemm(module: ir.Module, features: frozenset[str] = frozenset()) -> ir.Function:
    """Defines ``BGEMM_SYMBOL`` in ``module``: ``vcvtne2ps2bf16``/``vdpbf16ps`` when ``features`` (the
    target's) have AVX-512 BF16, else their emulation (module doc)."""
    tile = _emit_tile(module, BF16_FEATURES <= features)
    return tiles_entry(module, BGEMM_SYMBOL, tile)


EMITTERS = {BGEMM_SYMBOL: emit_bgemm}
