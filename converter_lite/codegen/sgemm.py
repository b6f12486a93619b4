"""A native float32 GEMM with CBLAS's signature, register-tiled for AVX-512 (a support function).

    void cl_sgemm_v1(i32 flags, i32 transA, i32 transB, i64 M, i64 N, i64 K, float alpha, float* A, i64 lda,
                     float* B, i64 ldb, float beta, float* C, i64 ldc)

computes ``C = alpha * op(A) @ op(B) + beta * C`` (row-major; ``beta == 0``: C is not read, as in BLAS) and
takes the place of ``cblas_sgemm`` (64-bit integers) in the GEMM tile driver's records (gemm_driver.py), so
MatMul/Gemm/FusedMatMul and the patch/im2col convolutions run on it through the same tiles and pool.  numpy's
OpenBLAS runs its AVX2 kernel on CPUs it does not know (~120 GFLOP/s per core on this Zen 5); this one keeps
``MR x 32`` outputs in 512-bit registers (~250 GFLOP/s per core measured, onnxruntime's MLAS ~247).

* ``flags``: ``ROW_MAJOR`` (101, the only order) ``| FLAG_WIDE`` when the CPU has 32 vector registers
  (AVX-512: row blocks of up to ``MR_WIDE`` rows, else ``MR_NARROW``).
* ``transA``: ``NO_TRANS`` (111: ``A[i, k] = A[i*lda + k]``) or ``TRANS`` (112: ``A[k*lda + i]``); read in
  place either way (one scalar broadcast per row and step of k).
* ``transB``: ``NO_TRANS`` (B read in place, rows ``ldb`` apart), ``TRANS`` (``B[j*ldb + k]``: each 32-column
  panel is packed per call into a stack buffer of ``KC`` steps of k, 16 x 16 blocks transposed in registers)
  or ``PACKED`` (constant weights packed once by the runtime, runtime/gemm_pack.py: panel ``p`` holds columns
  ``32p .. 32p+31`` as ``[K][32]`` floats, zero past N, and starts ``ldb`` floats after panel ``p-1``).

Loop nest: K in chunks (one chunk unless B is packed per call), 32-column panels, then row blocks of balanced
size (``M`` split into ``ceil(M / MR)`` blocks that differ by at most one row: no one-row tail block); a
microkernel (one per block height) accumulates its ``mr x 32`` block over the chunk with FMAs, the last 16
columns masked to the panel's width, then stores ``alpha * acc + beta * C`` (masked).  Each step of k prefetches
the panel's row ``PF_AHEAD`` steps ahead: a model's weights do not stay in the cache from one run to the next,
and the first row block of every panel streamed its B from memory without it (48 chained 197x768x768 MatMuls
with 113 MB of weights, 2 threads: 592 -> 447 us a MatMul, onnxruntime 494; with the weights in L3, 4 MatMuls:
504 -> 457, onnxruntime 455).
"""
from __future__ import annotations

from llvmlite import ir

from .conv_direct import _intrinsics, _splat, _splat_bool, _splat_i32, transpose
from .internal import constant_table, internal_function, prefetch
from .loops import for_range, loop_id
from .types import F32, I1, I32, I64, VOID

SGEMM_SYMBOL = "cl_sgemm_v1"
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
PACKED = 150                      # transB: B packed in NR-column panels (not a CBLAS value)
FLAG_WIDE = 1 << 16
VL = 16
NR = 2 * VL                       # columns per panel
MR_WIDE, MR_NARROW = 14, 3        # rows per block: 2 * MR accumulators + 2 B vectors (32 / 16 registers)
PF_AHEAD = 64                     # B rows (steps of k) the microkernel prefetches ahead
KC = 256                          # steps of k per chunk when B is packed per call (stack buffer KC x NR floats)

FP = F32.as_pointer()
VEC = ir.VectorType(F32, VL)
VECP = VEC.as_pointer()
MASK = ir.VectorType(I1, VL)
IVEC = ir.VectorType(I32, VL)
SGEMM_TYPE = ir.FunctionType(VOID, [I32, I32, I32, I64, I64, I64, F32, FP, I64, FP, I64, F32, FP, I64])
MK_TYPE = ir.FunctionType(VOID, [FP, I64, I64, FP, I64, I64, FP, I64, I64, F32, F32])
# microkernel(A, a_rs, a_cs, B, bks, K, C, ldc, ncols, alpha, beta): B row k of the panel at B + k*bks


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _min(b: ir.IRBuilder, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _lane_mask(b: ir.IRBuilder, count: ir.Value) -> ir.Value:
    """Lanes ``0 .. count-1`` set (``count`` an i64, clamped by the comparison to [0, VL])."""
    return b.icmp_signed("<", ir.Constant(IVEC, list(range(VL))), _splat_i32(b, count))


def microkernel(module: ir.Module, mr: int, nv: int) -> ir.Function:
    """``cl_sgemm.mk<mr>x<nv>``: an ``mr x (16 * nv)`` block (the last vector masked to ``ncols``)."""
    fn = internal_function(module, f"cl_sgemm.mk{mr}x{nv}", MK_TYPE, noalias=(0, 3, 6))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = _intrinsics(module)
    a, a_rs, a_cs, bp, bks, kk, c, ldc, ncols, alpha, beta = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("k.head", "k.body", "k.done"))
    b = ir.IRBuilder(entry)
    zero = ir.Constant(VEC, None)
    last = _lane_mask(b, b.sub(ncols, _c((nv - 1) * VL)))
    rows = [b.gep(a, [b.mul(_c(i), a_rs)]) for i in range(mr)]
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64, "k")
    k.add_incoming(_c(0), entry)
    acc = {}
    for i in range(mr):
        for v in range(nv):
            acc[i, v] = b.phi(VEC, f"acc{i}_{v}")
            acc[i, v].add_incoming(zero, entry)
    b.cbranch(b.icmp_signed("<", k, kk), body, done)
    b.position_at_end(body)
    brow = b.gep(bp, [b.mul(k, bks)])
    ahead = b.gep(brow, [b.mul(bks, _c(PF_AHEAD))])
    for v in range(nv):
        prefetch(module, b, b.gep(ahead, [_c(v * VL)]))
    bv = []
    for v in range(nv):
        ptr = b.bitcast(b.gep(brow, [_c(v * VL)]), VECP)
        bv.append(b.load(ptr, align=4) if v < nv - 1 else
                  b.call(mload, [ptr, ir.Constant(I32, 4), last, zero]))
    ka = b.mul(k, a_cs)
    for i in range(mr):
        s = _splat(b, b.load(b.gep(rows[i], [ka])))
        for v in range(nv):
            acc[i, v].add_incoming(b.call(fma, [s, bv[v], acc[i, v]]), body)
    k.add_incoming(b.add(k, _c(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    av, bev = _splat(b, alpha), _splat(b, beta)
    read_c = b.fcmp_unordered("!=", beta, ir.Constant(F32, 0.0))
    for i in range(mr):
        crow = b.gep(c, [b.mul(_c(i), ldc)])
        for v in range(nv):
            ptr = b.bitcast(b.gep(crow, [_c(v * VL)]), VECP)
            mask = last if v == nv - 1 else ir.Constant(MASK, [1] * VL)
            out = b.fmul(acc[i, v], av)
            old = b.call(mload, [ptr, ir.Constant(I32, 4), b.and_(mask, _splat_bool(b, read_c)), zero])
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
    _, mload, _ = _intrinsics(module)
    bsrc, ldb, j0, w, k0, kc, buf = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(VEC, None)
    nkb = b.sdiv(b.add(kc, _c(VL - 1)), _c(VL))
    with for_range(b, 0, nkb, "kb") as kb:
        kk = b.mul(kb, _c(VL))
        kmask = _lane_mask(b, b.sub(kc, kk))
        for half in range(NR // VL):
            cols = []
            for cc in range(VL):
                col = _c(half * VL + cc)
                ok = b.icmp_signed("<", col, w)
                src = b.gep(bsrc, [b.add(b.mul(b.add(j0, b.select(ok, col, _c(0))), ldb), b.add(k0, kk))])
                mask = b.and_(kmask, _splat_bool(b, ok))
                cols.append(b.call(mload, [b.bitcast(src, VECP), ir.Constant(I32, 4), mask, zero]))
            for r, vec in enumerate(transpose(b, cols)):
                krow = b.add(kk, _c(r))
                with b.if_then(b.icmp_signed("<", krow, kc)):
                    dst = b.gep(buf, [b.add(b.mul(krow, _c(NR)), _c(half * VL))])
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
    mr_max = b.select(wide, _c(MR_WIDE), _c(MR_NARROW))
    trans_a = b.icmp_signed("==", ta, ir.Constant(I32, TRANS))
    a_rs = b.select(trans_a, _c(1), lda)
    a_cs = b.select(trans_a, lda, _c(1))
    packed = b.icmp_signed("==", tb, ir.Constant(I32, PACKED))
    trans_b = b.icmp_signed("==", tb, ir.Constant(I32, TRANS))
    kc_max = b.select(trans_b, _c(KC), b.select(b.icmp_signed("<", k, _c(1)), _c(1), k))
    nblk = b.sdiv(b.add(m, b.sub(mr_max, _c(1))), mr_max)         # balanced row blocks
    nblk = b.select(b.icmp_signed("<", nblk, _c(1)), _c(1), nblk)
    base_rows, extra = b.sdiv(m, nblk), b.srem(m, nblk)
    tptr = b.bitcast(table, MK_TYPE.as_pointer().as_pointer())
    nchunks = b.sdiv(b.add(k, b.sub(kc_max, _c(1))), kc_max)
    nchunks = b.select(b.icmp_signed("<", nchunks, _c(1)), _c(1), nchunks)     # K == 0: C = beta * C
    with b.if_then(b.and_(b.icmp_signed(">", m, _c(0)), b.icmp_signed(">", n, _c(0)))), \
            for_range(b, 0, nchunks, "kch") as kch:
        k0 = b.mul(kch, kc_max)
        kc = _min(b, kc_max, b.sub(k, k0))
        kc = b.select(b.icmp_signed("<", kc, _c(0)), _c(0), kc)
        beta_c = b.select(b.icmp_signed("==", kch, _c(0)), beta, ir.Constant(F32, 1.0))
        npan = b.sdiv(b.add(n, _c(NR - 1)), _c(NR))
        with for_range(b, 0, npan, "pan") as p:
            j0 = b.mul(p, _c(NR))
            w = _min(b, _c(NR), b.sub(n, j0))
            # the panel's k-rows: packed weights, B in place (row-major), or the stack buffer
            direct = b.gep(bm, [b.add(b.mul(k0, ldb), j0)])
            pre = b.gep(bm, [b.add(b.mul(p, ldb), b.mul(k0, _c(NR)))])
            with b.if_then(trans_b):
                b.call(pack_t, [bm, ldb, j0, w, k0, kc, buf])
            panel = b.select(packed, pre, b.select(trans_b, buf, direct))
            bks = b.select(b.or_(packed, trans_b), _c(NR), ldb)
            nv = b.select(b.icmp_signed(">", w, _c(VL)), _c(2), _c(1))
            row0 = b.mul(b.sub(nv, _c(1)), _c(MR_WIDE))
            with for_range(b, 0, nblk, "blk") as blk:
                i0 = b.add(b.mul(blk, base_rows), _min(b, blk, extra))
                mr = b.add(base_rows, b.select(b.icmp_signed("<", blk, extra), _c(1), _c(0)))
                mk = b.load(b.gep(tptr, [b.add(row0, b.sub(mr, _c(1)))]))
                ablk = b.gep(a, [b.add(b.mul(i0, a_rs), b.mul(k0, a_cs))])
                cblk = b.gep(c, [b.add(b.mul(i0, ldc), j0)])
                b.call(mk, [ablk, a_rs, a_cs, panel, bks, kc, cblk, ldc, w, alpha, beta_c])
    b.ret_void()
    return fn
