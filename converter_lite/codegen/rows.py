"""Row-polymorphic kernels: one compiled kernel for every number of rows (a model with dynamic dims).

A fused kernel of a model with dynamic input dims (passes/dynamic_fusion.py) is lowered from a sub-graph whose
values all have the shape ``[nominal, *tail]``: a leading *row* axis standing for the dynamic dims flattened
(their number known only at run time) and a static tail; static operands broadcast over the tail only.  In
row-major layout nothing about a row depends on how many rows there are, so the usual lowering (lower.py)
applies unchanged as long as every stage splits the row axis: a map stage over ``[R, *tail]`` (partition axis
0), a flat stage over ``R * k`` elements, a reduction over tail axes (its kept axis 0).  ``lower_row_kernel``
checks that, and emits its own entry point, which takes ``R`` at run time:

    void <symbol>(void **args, int64_t num_threads);   // args: inputs, outputs, then R (an integer)

The rows are walked in stitched chunks (schedule.py's row-stitched form): every stage runs on a chunk of rows
(``[r0 * k, r1 * k)`` of its partition axis) before the next chunk, while they are in cache; with enough work the
thread pool takes groups of chunks (sized from ``R`` at run time), one dispatch for all the stages.  Temporaries
(reduction results) are allocated for ``R`` rows.  What is lost against a kernel specialized to its shape: the
non-temporal stores of very large outputs, and row-chunk sizes tuned to the exact shape.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.core import Graph
from .errors import UnsupportedOpError
from .loops import for_range
from .lower import MapStage, emit_stages, plan_kernel
from .schedule import CHUNKS, ROW_CHUNK_ELEMS, _ptrs
from .threadpool import declare_pool
from .types import BYTE_PTR, BYTE_PTR_PTR, I64, VOID, storage_type

TEMP_ALIGN = 64


def row_multipliers(graph: Graph, nominal: int, kernel: str = "") -> tuple[object, list[int], list[int]]:
    """(plan, per stage the partition extent per row, per temp its bytes per row); UnsupportedOpError when a
    stage or temporary is not split along the row axis."""
    plan = plan_kernel(graph)
    mults = []
    for st in plan.stages:
        ext = st.part_extent
        flat = isinstance(st, MapStage) and st.flat
        if not flat and st.part_axis != 0:
            raise UnsupportedOpError("GraphKernel", kernel, "a stage of this dynamic-shape kernel is not split "
                                                            "along its rows")
        if ext % nominal:
            raise UnsupportedOpError("GraphKernel", kernel, f"a stage extent {ext} is not a whole number of rows")
        mults.append(ext // nominal)
    per_row = []
    for t in plan.temps:
        if not t.shape or t.shape[0] != nominal or t.nbytes % nominal:
            raise UnsupportedOpError("GraphKernel", kernel, "a temporary of this dynamic-shape kernel is not "
                                                            "per row")
        per_row.append(t.nbytes // nominal)
    return plan, mults, per_row


def lower_row_kernel(graph: Graph, sym: str, nominal: int, *, threshold: int = 1 << 15, kernel: str = "",
                     features: frozenset[str] = frozenset()) -> ir.Module:
    """The module defining ``void sym(void** args, int64 nthreads)`` for the row kernel ``graph`` (see the
    module docstring)."""
    plan, mults, per_row = row_multipliers(graph, nominal, kernel)
    module = ir.Module(name=sym)
    stage_fns = emit_stages(module, plan, sym, kernel, features)
    nb = len(plan.buffers)
    n_io = len(graph.inputs) + len(graph.outputs)
    # the buffer table the pool body reads: buffers, then R, then the rows of one pool chunk
    table = ir.ArrayType(BYTE_PTR, nb + 2)
    # rows per stitched chunk: every stage runs on them in turn while they are in cache (schedule.py's form)
    stitch = max(1, ROW_CHUNK_ELEMS // max(max(mults, default=1), 1))

    def word(b, bufs, i):
        return b.ptrtoint(b.load(b.gep(bufs, [ir.Constant(I64, i)])), I64)

    # void sym.span(T* bufs..., i64 lo, i64 hi): every stage over rows [lo, hi), a stitched chunk at a time
    span = ir.Function(module, ir.FunctionType(VOID, [storage_type(bf.dtype).as_pointer() for bf in plan.buffers]
                                               + [I64, I64]), f"{sym}.span")
    span.linkage = "internal"
    for arg in span.args[:nb]:
        arg.add_attribute("noalias")
    sb = ir.IRBuilder(span.append_basic_block("entry"))
    sptrs, (slo, shi) = list(span.args[:nb]), span.args[nb:]
    n = sb.sdiv(sb.add(sb.sub(shi, slo), ir.Constant(I64, stitch - 1)), ir.Constant(I64, stitch))
    with for_range(sb, ir.Constant(I64, 0), n, "chunk") as j:
        r0 = sb.add(slo, sb.mul(j, ir.Constant(I64, stitch)))
        r1 = sb.add(r0, ir.Constant(I64, stitch))
        r1 = sb.select(sb.icmp_signed("<", r1, shi), r1, shi)
        for fn, mult in zip(stage_fns, mults):
            m = ir.Constant(I64, mult)
            sb.call(fn, sptrs + [sb.mul(r0, m), sb.mul(r1, m)])
    sb.ret_void()

    body = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), f"{sym}.rc")
    body.linkage = "internal"
    bb = ir.IRBuilder(body.append_basic_block("entry"))
    bufs_b, c = body.args
    total = word(bb, bufs_b, nb)
    chunk = word(bb, bufs_b, nb + 1)
    lo = bb.mul(c, chunk)
    hi = bb.add(lo, chunk)
    hi = bb.select(bb.icmp_signed("<", hi, total), hi, total)
    bb.call(span, _ptrs(bb, plan, bufs_b) + [lo, hi])
    bb.ret_void()

    entry = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), sym)
    args, nthreads = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    rows = b.ptrtoint(b.load(b.gep(args, [ir.Constant(I64, n_io)])), I64)
    mem = b.alloca(table)
    bufs = b.bitcast(mem, BYTE_PTR_PTR)
    for i in range(n_io):
        b.store(b.load(b.gep(args, [ir.Constant(I64, i)])), b.gep(bufs, [ir.Constant(I64, i)]))
    b.store(b.inttoptr(rows, BYTE_PTR), b.gep(bufs, [ir.Constant(I64, nb)]))
    heap = []
    if plan.temps:
        malloc = ir.Function(module, ir.FunctionType(BYTE_PTR, [I64]), "malloc")
        for t, nbytes in zip(plan.temps, per_row):
            size = b.add(b.mul(rows, ir.Constant(I64, nbytes)), ir.Constant(I64, TEMP_ALIGN))
            p = b.call(malloc, [size])
            heap.append(p)
            b.store(p, b.gep(bufs, [ir.Constant(I64, t.slot)]))
    ptrs = _ptrs(b, plan, bufs)
    pool = declare_pool(module)
    per_row_work = sum(max(st.work // max(st.part_extent, 1), 1) * mult for st, mult in zip(plan.stages, mults))
    work = b.mul(rows, ir.Constant(I64, per_row_work))
    big = b.and_(b.icmp_signed(">", nthreads, ir.Constant(I64, 1)),
                 b.icmp_signed(">=", work, ir.Constant(I64, threshold)))
    with b.if_else(big) as (then, otherwise):
        with then:
            # pool chunks of whole stitched chunks, at most CHUNKS of them
            per = b.sdiv(b.add(rows, ir.Constant(I64, CHUNKS - 1)), ir.Constant(I64, CHUNKS))
            st = ir.Constant(I64, stitch)
            per = b.mul(b.sdiv(b.add(per, ir.Constant(I64, stitch - 1)), st), st)
            b.store(b.inttoptr(per, BYTE_PTR), b.gep(bufs, [ir.Constant(I64, nb + 1)]))
            nchunks = b.sdiv(b.add(rows, b.sub(per, ir.Constant(I64, 1))), per)
            b.call(pool, [body, bufs, nchunks, nthreads])
        with otherwise:
            b.call(span, ptrs + [ir.Constant(I64, 0), rows])
    if heap:
        free = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR]), "free")
        for p in heap:
            b.call(free, [p])
    b.ret_void()
    return module
