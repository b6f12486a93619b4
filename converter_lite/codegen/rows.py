"""Row-polymorphic kernels: one compiled kernel for every number of rows (a model with dynamic dims).

A fused kernel of a model with dynamic input dims (passes/dynamic_fusion.py) is lowered from a sub-graph whose
values all have the shape ``[nominal, *tail]``: a leading *row* axis standing for the dynamic dims flattened
(their number known only at run time) and a static tail; static operands broadcast over the tail only.  In
row-major layout nothing about a row depends on how many rows there are, so the usual lowering (lower.py)
applies unchanged as long as every stage splits the row axis: a map stage over ``[R, *tail]`` (partition axis
0), a flat stage over ``R * k`` elements, a reduction over tail axes (its kept axis 0).  ``lower_row_kernel``
checks that, and emits its own entry point, which takes ``R`` at run time:

    void <symbol>(void **args, int64_t num_threads);   // args: inputs, outputs, then R (an integer)

Each stage runs over ``[0, R * k)`` of its partition axis, through the thread pool (pool chunks sized from
``R`` at run time) when it has enough work; temporaries (reduction results) are allocated for ``R`` rows.  What
is lost against a kernel specialized to its shape: the row-stitched schedule (schedule.py: every stage on a
chunk of rows while they are in cache) and the non-temporal stores of very large outputs.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.core import Graph
from .errors import UnsupportedOpError
from .lower import MapStage, emit_stages, plan_kernel
from .schedule import CHUNKS
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
    # the buffer table the stage bodies read: buffers, then R, then each stage's chunk size
    table = ir.ArrayType(BYTE_PTR, nb + 1 + len(plan.stages))

    def ptrs_of(b, bufs):
        return [b.bitcast(b.load(b.gep(bufs, [ir.Constant(I64, i)])), storage_type(buf.dtype).as_pointer())
                for i, buf in enumerate(plan.buffers)]

    def word(b, bufs, i):
        return b.ptrtoint(b.load(b.gep(bufs, [ir.Constant(I64, i)])), I64)

    bodies = []
    for k, (fn, mult) in enumerate(zip(stage_fns, mults)):
        body = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), f"{sym}.rc{k}")
        body.linkage = "internal"
        b = ir.IRBuilder(body.append_basic_block("entry"))
        bufs, c = body.args
        ext = b.mul(word(b, bufs, nb), ir.Constant(I64, mult))
        chunk = word(b, bufs, nb + 1 + k)
        lo = b.mul(c, chunk)
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, ext), hi, ext)
        b.call(fn, ptrs_of(b, bufs) + [lo, hi])
        b.ret_void()
        bodies.append(body)

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
    ptrs = ptrs_of(b, bufs)
    pool = declare_pool(module)
    parallel_ok = b.icmp_signed(">", nthreads, ir.Constant(I64, 1))
    for k, (st, fn, mult, body) in enumerate(zip(plan.stages, stage_fns, mults, bodies)):
        ext = b.mul(rows, ir.Constant(I64, mult))
        per_unit = max(st.work // max(st.part_extent, 1), 1)
        work = b.mul(ext, ir.Constant(I64, per_unit))
        big = b.and_(parallel_ok, b.icmp_signed(">=", work, ir.Constant(I64, threshold)))
        with b.if_else(big) as (then, otherwise):
            with then:
                align = ir.Constant(I64, st.part_align)
                chunk = b.sdiv(b.add(ext, ir.Constant(I64, CHUNKS - 1)), ir.Constant(I64, CHUNKS))
                chunk = b.mul(b.sdiv(b.add(chunk, b.sub(align, ir.Constant(I64, 1))), align), align)
                b.store(b.inttoptr(chunk, BYTE_PTR), b.gep(bufs, [ir.Constant(I64, nb + 1 + k)]))
                nchunks = b.sdiv(b.add(ext, b.sub(chunk, ir.Constant(I64, 1))), chunk)
                b.call(pool, [body, bufs, nchunks, nthreads])
            with otherwise:
                b.call(fn, ptrs + [ir.Constant(I64, 0), ext])
    if heap:
        free = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR]), "free")
        for p in heap:
            b.call(free, [p])
    b.ret_void()
    return module
