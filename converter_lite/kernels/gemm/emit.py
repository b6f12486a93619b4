"""The GEMM tile driver: a list of independent CBLAS GEMM calls run across the thread pool (a support function).

    void cl_gemm_tiles_v1(i8* tiles, i64 ntiles, i64 nthreads)

runs every *tile* of ``tiles`` (an array of ``ntiles`` fixed-layout records, below) with
``cl_pool_parallel_for`` (codegen/threadpool.py), one chunk per tile, the caller taking tiles too; on the calling thread alone
when ``nthreads <= 1`` or there is one tile.  A tile is one complete call of numpy's own CBLAS
``sgemm``/``dgemm`` (kernels/blas.py gives the address) with every argument precomputed by the runtime at bind
time, so a bound MatMul/Gemm/convolution step costs one foreign call.  Tiles must write disjoint parts of
their outputs (they run concurrently).

Tile record: ``TILE_FIELDS`` 8-byte little-endian fields (``TILE_BYTES`` = 160 bytes), in this order:

====  ========  =========================================================================================
 0    fn        address of the CBLAS gemm (``cblas_sgemm`` or ``cblas_dgemm``, possibly 64-bit-int build)
 1    kind      bit 0: double precision (dgemm, 8-byte elements) else sgemm; bit 1: BLAS ints are 64-bit
 2    order     CBLAS order (101 row-major)            \
 3    transA    CBLAS transpose flag (111 no, 112 yes)  |  passed as C ints
 4    transB    CBLAS transpose flag                   /
 5-7  M, N, K   sizes of this tile's product
 8    alpha     float64 (rounded to float32 for sgemm)
 9    A         address of this tile's first element of A
10    lda
11    B         address of this tile's first element of B
12    ldb
13    beta      float64 (rounded to float32 for sgemm)
14    C         address of this tile's first element of C (the output)
15    ldc
16    bias      0, or the address of a prefill source: before the GEMM, ``C[i, j] = bias[i * rs + j * cs]``
              for the tile's M x N block (so ``beta = 1`` adds a broadcast bias, the Gemm ``C`` input)
17    rs        prefill row stride (elements; 0 broadcasts one row)
18    cs        prefill column stride (elements; 1 copies rows with memcpy, 0 broadcasts one value per row)
19    (unused, 0)
====  ========  =========================================================================================

Integer fields are i64; ``alpha``/``beta`` are float64 bit patterns (the runtime builds the records as a numpy
structured array, ``bind.py``).  The symbol carries the layout's version: a change of the layout
gets a new symbol, so a model converted before it runs its products through numpy instead of misreading records.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import constant_table, internal_function, prefetch, tiles_entry
from ...codegen.loops import for_range, loop_id
from ...codegen.threadpool import BODY_TYPE
from ...codegen.types import BYTE_PTR, F32, F64, I1, I32, I64, VOID
from ...codegen.vector import (
    FP,
    MASK,
    VEC,
    VECP,
    VL,
    c64,
    smin,
    splat,
    splat_bool,
    splat_i32,
    transpose,
    vector_intrinsics,
)
from .abi import (  # noqa: F401
    FIELDS,
    FLAG_WIDE,
    GEMM_TILES_SYMBOL,
    KIND_DOUBLE,
    KIND_INT64,
    NO_TRANS,
    PACKED,
    PANEL,
    ROW_MAJOR,
    SGEMM_SYMBOL,
    TILE_FIELDS,
    TRANS,
)

_F = {name: i for i, name in enumerate(FIELDS)}


def _gemm_type(real: ir.Type, idx: ir.Type) -> ir.FunctionType:
    return ir.FunctionType(VOID, [I32, I32, I32, idx, idx, idx, real, BYTE_PTR, idx, BYTE_PTR, idx, real,
                                  BYTE_PTR, idx])


def _prefill(module: ir.Module, b: ir.IRBuilder, get, double: ir.Value) -> None:
    """``C[i, j] = bias[i * rs + j * cs]`` over the tile (when ``bias`` is not 0)."""
    c64 = lambda v: ir.Constant(I64, v)
    memcpy = module.declare_intrinsic("llvm.memcpy", [BYTE_PTR, BYTE_PTR, I64])
    bias = get("bias")
    with b.if_then(b.icmp_unsigned("!=", bias, c64(0))):
        es = b.select(double, c64(8), c64(4))
        m, n, ldc, rs, cs = get("M"), get("N"), get("ldc"), get("rs"), get("cs")
        c = b.inttoptr(get("C"), BYTE_PTR)
        src0 = b.inttoptr(bias, BYTE_PTR)
        with for_range(b, 0, m, "pi") as i:
            dst = b.gep(c, [b.mul(b.mul(i, ldc), es)])
            src = b.gep(src0, [b.mul(b.mul(i, rs), es)])
            with b.if_else(b.icmp_signed("==", cs, c64(1))) as (rows, other):
                with rows:
                    b.call(memcpy, [dst, src, b.mul(n, es), ir.Constant(I1, 0)])
                with other, b.if_else(double) as (d, s):
                    for blk, ty in ((d, I64), (s, I32)):
                        with blk:
                            dp, sp = b.bitcast(dst, ty.as_pointer()), b.bitcast(src, ty.as_pointer())
                            with for_range(b, 0, n, "pj") as j:
                                v = b.load(b.gep(sp, [b.mul(j, cs)]))
                                b.store(v, b.gep(dp, [j]))


def _emit_tile(module: ir.Module) -> ir.Function:
    """``void <symbol>.tile(i8** tiles, i64 t)``: runs tile ``t`` (the pool's chunk body)."""
    fn = ir.Function(module, BODY_TYPE, f"{GEMM_TILES_SYMBOL}.tile")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    rec = b.gep(b.bitcast(fn.args[0], I64.as_pointer()), [b.mul(fn.args[1], ir.Constant(I64, TILE_FIELDS))])

    def get(name):
        return b.load(b.gep(rec, [ir.Constant(I64, _F[name])]), name=name)

    def getf(name):
        return b.load(b.bitcast(b.gep(rec, [ir.Constant(I64, _F[name])]), F64.as_pointer()), name=name)

    kind = get("kind")
    double = b.icmp_unsigned("!=", b.and_(kind, ir.Constant(I64, KIND_DOUBLE)), ir.Constant(I64, 0))
    wide = b.icmp_unsigned("!=", b.and_(kind, ir.Constant(I64, KIND_INT64)), ir.Constant(I64, 0))
    _prefill(module, b, get, double)
    flags = [b.trunc(get(n), I32) for n in ("order", "transA", "transB")]
    ints = {n: get(n) for n in ("M", "N", "K", "lda", "ldb", "ldc")}
    ptrs = {n: b.inttoptr(get(n), BYTE_PTR) for n in ("A", "B", "C")}
    alpha, beta = getf("alpha"), getf("beta")
    gemm = get("fn")
    with b.if_else(double) as (d, s):
        for blk, real in ((d, F64), (s, F32)):
            with blk:
                a_, b_ = (alpha, beta) if real is F64 else (b.fptrunc(alpha, F32), b.fptrunc(beta, F32))
                with b.if_else(wide) as (w64, w32):
                    for wblk, idx in ((w64, I64), (w32, I32)):
                        with wblk:
                            iv = {n: v if idx is I64 else b.trunc(v, I32) for n, v in ints.items()}
                            callee = b.inttoptr(gemm, _gemm_type(real, idx).as_pointer())
                            b.call(callee, flags + [iv["M"], iv["N"], iv["K"], a_, ptrs["A"], iv["lda"],
                                                    ptrs["B"], iv["ldb"], b_, ptrs["C"], iv["ldc"]])
    b.ret_void()
    return fn


def emit_gemm_tiles(module: ir.Module) -> ir.Function:
    """Defines ``GEMM_TILES_SYMBOL`` (see the module doc) in ``module``; the pool is declared if not defined."""
    tile = _emit_tile(module)
    return tiles_entry(module, GEMM_TILES_SYMBOL, tile)



# -- the native float32 GEMM (cl_sgemm_v1) ----------------------------------------------------------------------
# A native float32 GEMM with CBLAS's signature, register-tiled for AVX-512 (a support function).
#
#     void cl_sgemm_v1(i32 flags, i32 transA, i32 transB, i64 M, i64 N, i64 K, float alpha, float* A, i64 lda,
#                      float* B, i64 ldb, float beta, float* C, i64 ldc)
#
# computes ``C = alpha * op(A) @ op(B) + beta * C`` (row-major; ``beta == 0``: C is not read, as in BLAS) and
# takes the place of ``cblas_sgemm`` (64-bit integers) in the GEMM tile driver's records (gemm_driver.py), so
# MatMul/Gemm/FusedMatMul and the patch/im2col convolutions run on it through the same tiles and pool.  numpy's
# OpenBLAS runs its AVX2 kernel on CPUs it does not know (~120 GFLOP/s per core on this Zen 5); this one keeps
# ``MR x 32`` outputs in 512-bit registers (~250 GFLOP/s per core measured, onnxruntime's MLAS ~247).
#
# * ``flags``: ``ROW_MAJOR`` (101, the only order) ``| FLAG_WIDE`` when the CPU has 32 vector registers
#   (AVX-512: row blocks of up to ``MR_WIDE`` rows, else ``MR_NARROW``).
# * ``transA``: ``NO_TRANS`` (111: ``A[i, k] = A[i*lda + k]``) or ``TRANS`` (112: ``A[k*lda + i]``); read in
#   place either way (one scalar broadcast per row and step of k).
# * ``transB``: ``NO_TRANS`` (B read in place, rows ``ldb`` apart), ``TRANS`` (``B[j*ldb + k]``: each 32-column
#   panel is packed per call into a stack buffer of ``KC`` steps of k, 16 x 16 blocks transposed in registers)
#   or ``PACKED`` (constant weights packed once by the runtime, bind.py: panel ``p`` holds columns
#   ``32p .. 32p+31`` as ``[K][32]`` floats, zero past N, and starts ``ldb`` floats after panel ``p-1``).
#
# Loop nest: K in chunks (one chunk unless B is packed per call), 32-column panels, then row blocks of balanced
# size (``M`` split into ``ceil(M / MR)`` blocks that differ by at most one row: no one-row tail block); a
# microkernel (one per block height) accumulates its ``mr x 32`` block over the chunk with FMAs, the last 16
# columns masked to the panel's width, then stores ``alpha * acc + beta * C`` (masked).  Each step of k prefetches
# the panel's row ``PF_AHEAD`` steps ahead: a model's weights do not stay in the cache from one run to the next,
# and the first row block of every panel streamed its B from memory without it (48 chained 197x768x768 MatMuls
# with 113 MB of weights, 2 threads: 592 -> 447 us a MatMul, onnxruntime 494; with the weights in L3, 4 MatMuls:
# 504 -> 457, onnxruntime 455).

NR = PANEL                        # columns per panel
MR_WIDE, MR_NARROW = 14, 3        # rows per block: 2 * MR accumulators + 2 B vectors (32 / 16 registers)
PF_AHEAD = 64                     # B rows (steps of k) the microkernel prefetches ahead
KC = 256                          # steps of k per chunk when B is packed per call (stack buffer KC x NR floats)

IVEC = ir.VectorType(I32, VL)
SGEMM_TYPE = ir.FunctionType(VOID, [I32, I32, I32, I64, I64, I64, F32, FP, I64, FP, I64, F32, FP, I64])
MK_TYPE = ir.FunctionType(VOID, [FP, I64, I64, FP, I64, I64, FP, I64, I64, F32, F32])
# microkernel(A, a_rs, a_cs, B, bks, K, C, ldc, ncols, alpha, beta): B row k of the panel at B + k*bks


def _lane_mask(b: ir.IRBuilder, count: ir.Value) -> ir.Value:
    """Lanes ``0 .. count-1`` set (``count`` an i64, clamped by the comparison to [0, VL])."""
    return b.icmp_signed("<", ir.Constant(IVEC, list(range(VL))), splat_i32(b, count))


def microkernel(module: ir.Module, mr: int, nv: int) -> ir.Function:
    """``cl_sgemm.mk<mr>x<nv>``: an ``mr x (16 * nv)`` block (the last vector masked to ``ncols``)."""
    fn = internal_function(module, f"cl_sgemm.mk{mr}x{nv}", MK_TYPE, noalias=(0, 3, 6))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = vector_intrinsics(module)
    a, a_rs, a_cs, bp, bks, kk, c, ldc, ncols, alpha, beta = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("k.head", "k.body", "k.done"))
    b = ir.IRBuilder(entry)
    zero = ir.Constant(VEC, None)
    last = _lane_mask(b, b.sub(ncols, c64((nv - 1) * VL)))
    rows = [b.gep(a, [b.mul(c64(i), a_rs)]) for i in range(mr)]
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64, "k")
    k.add_incoming(c64(0), entry)
    acc = {}
    for i in range(mr):
        for v in range(nv):
            acc[i, v] = b.phi(VEC, f"acc{i}_{v}")
            acc[i, v].add_incoming(zero, entry)
    b.cbranch(b.icmp_signed("<", k, kk), body, done)
    b.position_at_end(body)
    brow = b.gep(bp, [b.mul(k, bks)])
    ahead = b.gep(brow, [b.mul(bks, c64(PF_AHEAD))])
    for v in range(nv):
        prefetch(module, b, b.gep(ahead, [c64(v * VL)]))
    bv = []
    for v in range(nv):
        ptr = b.bitcast(b.gep(brow, [c64(v * VL)]), VECP)
        bv.append(b.load(ptr, align=4) if v < nv - 1 else
                  b.call(mload, [ptr, ir.Constant(I32, 4), last, zero]))
    ka = b.mul(k, a_cs)
    for i in range(mr):
        s = splat(b, b.load(b.gep(rows[i], [ka])))
        for v in range(nv):
            acc[i, v].add_incoming(b.call(fma, [s, bv[v], acc[i, v]]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    av, bev = splat(b, alpha), splat(b, beta)
    read_c = b.fcmp_unordered("!=", beta, ir.Constant(F32, 0.0))
    for i in range(mr):
        crow = b.gep(c, [b.mul(c64(i), ldc)])
        for v in range(nv):
            ptr = b.bitcast(b.gep(crow, [c64(v * VL)]), VECP)
            mask = last if v == nv - 1 else ir.Constant(MASK, [1] * VL)
            out = b.fmul(acc[i, v], av)
            old = b.call(mload, [ptr, ir.Constant(I32, 4), b.and_(mask, splat_bool(b, read_c)), zero])
            out = b.select(read_c, b.call(fma, [old, bev, out]), out)
            b.call(mstore, [out, ptr, ir.Constant(I32, 4), mask])
    b.ret_void()
    return fn


def _table(module: ir.Module) -> ir.GlobalVariable:
    """Microkernel pointers indexed ``[(nv - 1) * MR_WIDE + mr - 1]``."""
    entries = [microkernel(module, mr, nv) for nv in (1, 2) for mr in range(1, MR_WIDE + 1)]
    return constant_table(module, "cl_sgemm.table", MK_TYPE.as_pointer(), entries)


def _pack_transposed(module: ir.Module) -> ir.Function:
    """``cl_sgemm.pack_t(B, ldb, j0, w, k0, kc, buf)``: ``buf[k][c] = B[(j0 + c)*ldb + k0 + k]`` for c < w
    (zeros for w <= c < NR), k < kc; 16 x 16 blocks loaded as rows of B (masked), transposed in registers."""
    fn = internal_function(module, "cl_sgemm.pack_t", ir.FunctionType(VOID, [FP, I64, I64, I64, I64, I64, FP]))
    if not fn.is_declaration:
        return fn
    _, mload, _ = vector_intrinsics(module)
    bsrc, ldb, j0, w, k0, kc, buf = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(VEC, None)
    nkb = b.sdiv(b.add(kc, c64(VL - 1)), c64(VL))
    with for_range(b, 0, nkb, "kb") as kb:
        kk = b.mul(kb, c64(VL))
        kmask = _lane_mask(b, b.sub(kc, kk))
        for half in range(NR // VL):
            cols = []
            for cc in range(VL):
                col = c64(half * VL + cc)
                ok = b.icmp_signed("<", col, w)
                src = b.gep(bsrc, [b.add(b.mul(b.add(j0, b.select(ok, col, c64(0))), ldb), b.add(k0, kk))])
                mask = b.and_(kmask, splat_bool(b, ok))
                cols.append(b.call(mload, [b.bitcast(src, VECP), ir.Constant(I32, 4), mask, zero]))
            for r, vec in enumerate(transpose(b, cols)):
                krow = b.add(kk, c64(r))
                with b.if_then(b.icmp_signed("<", krow, kc)):
                    dst = b.gep(buf, [b.add(b.mul(krow, c64(NR)), c64(half * VL))])
                    b.store(vec, b.bitcast(dst, VECP), align=4)
    b.ret_void()
    return fn


def emit_sgemm(module: ir.Module) -> ir.Function:
    """Defines ``SGEMM_SYMBOL`` (see the module doc) in ``module``."""
    table = _table(module)
    pack_t = _pack_transposed(module)
    fn = ir.Function(module, SGEMM_TYPE, SGEMM_SYMBOL)
    flags, ta, tb, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    buf = b.alloca(F32, KC * NR)
    buf.align = 64
    wide = b.icmp_signed("!=", b.and_(flags, ir.Constant(I32, FLAG_WIDE)), ir.Constant(I32, 0))
    mr_max = b.select(wide, c64(MR_WIDE), c64(MR_NARROW))
    trans_a = b.icmp_signed("==", ta, ir.Constant(I32, TRANS))
    a_rs = b.select(trans_a, c64(1), lda)
    a_cs = b.select(trans_a, lda, c64(1))
    packed = b.icmp_signed("==", tb, ir.Constant(I32, PACKED))
    trans_b = b.icmp_signed("==", tb, ir.Constant(I32, TRANS))
    kc_max = b.select(trans_b, c64(KC), b.select(b.icmp_signed("<", k, c64(1)), c64(1), k))
    nblk = b.sdiv(b.add(m, b.sub(mr_max, c64(1))), mr_max)         # balanced row blocks
    nblk = b.select(b.icmp_signed("<", nblk, c64(1)), c64(1), nblk)
    base_rows, extra = b.sdiv(m, nblk), b.srem(m, nblk)
    tptr = b.bitcast(table, MK_TYPE.as_pointer().as_pointer())
    nchunks = b.sdiv(b.add(k, b.sub(kc_max, c64(1))), kc_max)
    nchunks = b.select(b.icmp_signed("<", nchunks, c64(1)), c64(1), nchunks)     # K == 0: C = beta * C
    with b.if_then(b.and_(b.icmp_signed(">", m, c64(0)), b.icmp_signed(">", n, c64(0)))), \
            for_range(b, 0, nchunks, "kch") as kch:
        k0 = b.mul(kch, kc_max)
        kc = smin(b, kc_max, b.sub(k, k0))
        kc = b.select(b.icmp_signed("<", kc, c64(0)), c64(0), kc)
        beta_c = b.select(b.icmp_signed("==", kch, c64(0)), beta, ir.Constant(F32, 1.0))
        npan = b.sdiv(b.add(n, c64(NR - 1)), c64(NR))
        with for_range(b, 0, npan, "pan") as p:
            j0 = b.mul(p, c64(NR))
            w = smin(b, c64(NR), b.sub(n, j0))
            # the panel's k-rows: packed weights, B in place (row-major), or the stack buffer
            direct = b.gep(bm, [b.add(b.mul(k0, ldb), j0)])
            pre = b.gep(bm, [b.add(b.mul(p, ldb), b.mul(k0, c64(NR)))])
            with b.if_then(trans_b):
                b.call(pack_t, [bm, ldb, j0, w, k0, kc, buf])
            panel = b.select(packed, pre, b.select(trans_b, buf, direct))
            bks = b.select(b.or_(packed, trans_b), c64(NR), ldb)
            nv = b.select(b.icmp_signed(">", w, c64(VL)), c64(2), c64(1))
            row0 = b.mul(b.sub(nv, c64(1)), c64(MR_WIDE))
            with for_range(b, 0, nblk, "blk") as blk:
                i0 = b.add(b.mul(blk, base_rows), smin(b, blk, extra))
                mr = b.add(base_rows, b.select(b.icmp_signed("<", blk, extra), c64(1), c64(0)))
                mk = b.load(b.gep(tptr, [b.add(row0, b.sub(mr, c64(1)))]))
                ablk = b.gep(a, [b.add(b.mul(i0, a_rs), b.mul(k0, a_cs))])
                cblk = b.gep(c, [b.add(b.mul(i0, ldc), j0)])
                b.call(mk, [ablk, a_rs, a_cs, panel, bks, kc, cblk, ldc, w, alpha, beta_c])
    b.ret_void()
    return fn


EMITTERS = {GEMM_TILES_SYMBOL: emit_gemm_tiles, SGEMM_SYMBOL: emit_sgemm}
