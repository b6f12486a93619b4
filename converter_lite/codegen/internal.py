"""Module-internal definitions shared by the support drivers (sgemm, conv_direct, conv_pointwise,
conv_depthwise, ...): get-or-create an internal function, a constant table of function pointers, a driver's
exported entry point (and one that cuts rows into chunks for the thread pool, with the prologue of its pool
body), and a software prefetch.

    fn = internal_function(module, "cl_x.mk4", MK_TYPE, noalias=(0, 2))
    if not fn.is_declaration:
        return fn                   # defined by an earlier call: the drivers share their helpers
    ...emit the body...
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from llvmlite import ir

from .types import BYTE_PTR, BYTE_PTR_PTR, I64, VOID


def internal_function(module: ir.Module, name: str, fnty: ir.FunctionType, noalias: Iterable[int] = ()
                      ) -> ir.Function:
    """``name`` in ``module``: the existing function, or a new internal one (no body yet) whose arguments at
    the ``noalias`` positions are marked noalias."""
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, fnty, name)
    fn.linkage = "internal"
    for i in noalias:
        fn.args[i].add_attribute("noalias")
    return fn


def constant_table(module: ir.Module, name: str, elem: ir.Type, entries: Sequence[ir.Constant]
                   ) -> ir.GlobalVariable:
    """An internal constant array ``name`` of ``entries`` (function pointers, or null constants of ``elem``)."""
    ty = ir.ArrayType(elem, len(entries))
    g = ir.GlobalVariable(module, ty, name)
    g.linkage = "internal"
    g.global_constant = True
    g.initializer = ir.Constant(ty, list(entries))
    return g


def driver_entry(module: ir.Module, symbol: str) -> tuple[ir.Function, ir.IRBuilder, ir.Value, ir.Value]:
    """A driver's exported ``void symbol(i8* desc, i64 nthreads)``: the function, a builder at its entry block,
    the record pointer and the thread count (at least 1)."""
    fn = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR, I64]), symbol)
    desc, nthreads = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    one = ir.Constant(I64, 1)
    return fn, b, desc, b.select(b.icmp_signed("<", nthreads, one), one, nthreads)


def tiles_entry(module: ir.Module, symbol: str, tile: ir.Function) -> ir.Function:
    """A tile driver's exported ``void symbol(i8* tiles, i64 ntiles, i64 nthreads)``: the pool body ``tile``
    (``void (i8** tiles, i64 t)``) over every tile across the thread pool, or on the calling thread when
    ``nthreads <= 1`` or there is one tile."""
    from .loops import for_range
    from .threadpool import declare_pool
    pool = declare_pool(module)
    fn = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR, I64, I64]), symbol)
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


def tile_record(b: ir.IRBuilder, fn: ir.Function, fields: dict[str, int], words: int) -> dict[str, ir.Value]:
    """The i64 fields of tile ``fn.args[1]`` of a tile body ``fn`` (``void (i8** tiles, i64 t)``): records of
    ``words`` words from ``fn.args[0]``, ``fields`` name -> word (names starting ``unused`` skipped)."""
    from .vector import c64
    rec = b.gep(b.bitcast(fn.args[0], I64.as_pointer()), [b.mul(fn.args[1], c64(words))])
    return {name: b.load(b.gep(rec, [c64(i)]), name=name) for name, i in fields.items()
            if not name.startswith("unused")}


def panel_blocks(b: ir.IRBuilder, m: ir.Value, n: ir.Value, table: ir.Value, mr_max: int, panel: int,
                 per_panel: Callable, call: Callable) -> None:
    """The loop nest of the packed-panel GEMMs (kernels/qgemm, kernels/bgemm): panels of ``panel`` columns (two
    vectors, the last one masked), then ``m`` rows in ``ceil(m / mr_max)`` blocks of balanced height (differing
    by at most a row).  ``table`` (a constant_table of microkernels, one per panel width in vectors (1, 2) and
    block height 1..mr_max) gives each block's microkernel.  ``per_panel(p, j0)`` -> the panel's values (built
    once per panel); ``call(mk, i0, j0, width, values)`` emits the microkernel call for rows from ``i0``.
    Nothing runs when ``m`` or ``n`` is 0."""
    from .loops import for_range
    from .vector import VL, c64, smin
    nblk = b.sdiv(b.add(m, c64(mr_max - 1)), c64(mr_max))
    nblk = b.select(b.icmp_signed("<", nblk, c64(1)), c64(1), nblk)
    base_rows, extra = b.sdiv(m, nblk), b.srem(m, nblk)
    npan = b.sdiv(b.add(n, c64(panel - 1)), c64(panel))
    with b.if_then(b.and_(b.icmp_signed(">", m, c64(0)), b.icmp_signed(">", n, c64(0)))), \
            for_range(b, 0, npan, "pan") as p:
        j0 = b.mul(p, c64(panel))
        w = smin(b, c64(panel), b.sub(n, j0))
        row0 = b.mul(b.select(b.icmp_signed(">", w, c64(VL)), c64(1), c64(0)), c64(mr_max))
        values = per_panel(p, j0)
        with for_range(b, 0, nblk, "blk") as blk:
            i0 = b.add(b.mul(blk, base_rows), smin(b, blk, extra))
            mr = b.add(base_rows, b.select(b.icmp_signed("<", blk, extra), c64(1), c64(0)))
            call(b.load(b.gep(table, [b.add(row0, b.sub(mr, c64(1)))])), i0, j0, w, values)


def chunked_entry(module: ir.Module, symbol: str, body: ir.Function, units: Callable, slot: int,
                  per_thread: int, least: Callable | None = None) -> ir.Function:
    """A driver's exported entry point (``driver_entry``) running the pool body ``body`` over ``units(b, d)``
    units of work (``d``: the record as ``i64*``), cut into about ``per_thread`` chunks per thread of at least
    ``least(b, d)`` units (default 1); the units per chunk go to record word ``slot``, where the body reads
    them.  Nothing runs for no units."""
    from .threadpool import declare_pool
    from .vector import I64P, c64, cdiv
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, symbol)
    d = b.bitcast(desc, I64P)
    n = units(b, d)
    per_chunk = cdiv(b, n, b.mul(nt, c64(per_thread)))
    low = c64(1) if least is None else least(b, d)
    per_chunk = b.select(b.icmp_signed("<", per_chunk, low), low, per_chunk)
    b.store(per_chunk, b.gep(d, [c64(slot)]))
    with b.if_then(b.icmp_signed(">", n, c64(0))):
        b.call(pool, [body, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, n, per_chunk), nt])
    b.ret_void()
    return fn


def chunk_body(module: ir.Module, name: str, fields: Sequence[str]
               ) -> tuple[ir.Function, ir.IRBuilder, dict[str, ir.Value], ir.Value]:
    """The pool body ``void name(i8** desc, i64 chunk)`` of a ``chunked_entry`` driver whose record has
    ``fields``: (the internal function, a builder at its entry, every field loaded by name, the units per chunk
    ``chunked_entry`` stored in the word after them).  The chunk index is ``fn.args[1]``."""
    from .threadpool import BODY_TYPE
    from .vector import I64P, c64
    fn = ir.Function(module, BODY_TYPE, name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = b.bitcast(fn.args[0], I64P)
    f = {field: b.load(b.gep(d, [c64(i)]), name=field) for i, field in enumerate(fields)}
    return fn, b, f, b.load(b.gep(d, [c64(len(fields))]))


def prefetch(module: ir.Module, b: ir.IRBuilder, ptr: ir.Value) -> None:
    """A read prefetch of the cache line at ``ptr`` into all cache levels (``llvm.prefetch``: a hint, so an
    address past the end of an array is harmless).  The microkernels prefetch their weights a fixed distance
    ahead: a model's weights are not in the cache from one run to the next."""
    i8p = ir.IntType(8).as_pointer()
    fn = module.globals.get("llvm.prefetch.p0i8") or ir.Function(
        module, ir.FunctionType(VOID, [i8p, ir.IntType(32), ir.IntType(32), ir.IntType(32)]), "llvm.prefetch.p0i8")
    i32 = ir.IntType(32)
    b.call(fn, [b.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
