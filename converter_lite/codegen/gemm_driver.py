"""The GEMM tile driver: a list of independent CBLAS GEMM calls run across the thread pool (a support function).

    void cl_gemm_tiles_v1(i8* tiles, i64 ntiles, i64 nthreads)

runs every *tile* of ``tiles`` (an array of ``ntiles`` fixed-layout records, below) with
``cl_pool_parallel_for`` (pool.py), one chunk per tile, the caller taking tiles too; on the calling thread alone
when ``nthreads <= 1`` or there is one tile.  A tile is one complete call of numpy's own CBLAS
``sgemm``/``dgemm`` (runtime/blas.py gives the address) with every argument precomputed by the runtime at bind
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
structured array, ``runtime/gemm_tiles.py``).  The symbol carries the layout's version: a change of the layout
gets a new symbol, so a model converted before it runs its products through numpy instead of misreading records.
"""
from __future__ import annotations

from llvmlite import ir

from .loops import for_range
from .pool import BODY_TYPE, declare_pool
from .types import BYTE_PTR, BYTE_PTR_PTR, F32, F64, I1, I32, I64, VOID

GEMM_TILES_SYMBOL = "cl_gemm_tiles_v1"      # the version of the tile-record layout below
TILE_FIELDS = 20
TILE_BYTES = TILE_FIELDS * 8
FIELDS = ("fn", "kind", "order", "transA", "transB", "M", "N", "K", "alpha", "A", "lda", "B", "ldb", "beta",
          "C", "ldc", "bias", "rs", "cs", "unused")
KIND_DOUBLE, KIND_INT64 = 1, 2

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
    pool = declare_pool(module)
    fn = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR, I64, I64]), GEMM_TILES_SYMBOL)
    tiles, ntiles, nthreads = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bufs = b.bitcast(tiles, BYTE_PTR_PTR)
    one = ir.Constant(I64, 1)
    with b.if_else(b.and_(b.icmp_signed(">", nthreads, one), b.icmp_signed(">", ntiles, one))) as (par, ser):
        with par:
            b.call(pool, [tile, bufs, ntiles, nthreads])
        with ser, for_range(b, 0, ntiles, "t") as t:
            b.call(tile, [bufs, t])
    b.ret_void()
    return fn
