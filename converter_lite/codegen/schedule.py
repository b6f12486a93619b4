"""Scheduling the stages of a kernel on one thread or on libgomp's team.

``<sym>.run(bufs, tid, nthreads)`` is what each thread executes:
* one thread: every stage over its whole partition axis, in order;
* several threads (kernels compiled as parallel): each stage's partition axis is cut into at most CHUNKS chunks
  that the threads take from an atomic counter (a preempted thread does not stall the others), with a
  GOMP_barrier between stages;
* row-stitched kernels (``row_chunking``: softmax, layer norm, any chain whose reductions keep axis 0 and read
  only their own rows): chunks of rows run every stage back to back while the rows are in cache, with no
  barrier at all.
"""
from __future__ import annotations

from llvmlite import ir

from .index import INDEX_MAPS, _numel
from .loops import for_range
from .lower import KernelPlan, MapStage
from .reduce import REDUCE_OPS, ReduceStage
from .types import BYTE_PTR_PTR, I64, VOID, storage_type


def emit_run(module: ir.Module, plan: KernelPlan, sym: str, stage_fns: list[ir.Function], parallel: bool) -> ir.Function:
    """Emits ``<sym>.run(i8** bufs, i64 tid, i64 nthreads)``, which calls the stages in order; returns it.

    With one thread, each stage is called once over its whole partition axis.  With ``parallel`` and several
    threads, a stage's partition axis is cut into at most CHUNKS chunks that the threads take in turn from an
    atomic counter (``bufs[len(buffers)]`` points at one i64 counter per stage, zeroed by the caller), so a
    thread that the OS preempts on a busy machine does not hold the others up; a barrier separates stages."""
    run = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64, I64]), f"{sym}.run")
    run.linkage = "internal"
    bufs, _tid, nt = run.args
    b = ir.IRBuilder(run.append_basic_block("entry"))
    ptrs = [b.bitcast(b.load(b.gep(bufs, [ir.Constant(I64, i)])), storage_type(buf.dtype).as_pointer())
            for i, buf in enumerate(plan.buffers)]
    counters = None
    if parallel:
        counters = b.bitcast(b.load(b.gep(bufs, [ir.Constant(I64, len(plan.buffers))])), I64.as_pointer())
    rows = row_chunking(plan)
    if rows is not None:
        _emit_row_chunks(b, plan, stage_fns, ptrs, rows, counters, nt)
        b.ret_void()
        return run
    barrier = _declare(module, "GOMP_barrier", ir.FunctionType(VOID, [])) if parallel else None
    for k, (st, fn) in enumerate(zip(plan.stages, stage_fns)):
        if k and barrier is not None:
            with b.if_then(b.icmp_signed(">", nt, ir.Constant(I64, 1))):
                b.call(barrier, [])
        if st.part_extent == 0:
            continue
        whole = [ir.Constant(I64, 0), ir.Constant(I64, st.part_extent)]
        if counters is None:
            b.call(fn, ptrs + whole)
            continue
        with b.if_else(b.icmp_signed(">", nt, ir.Constant(I64, 1))) as (many, one):
            with many:
                _dynamic_chunks(b, fn, ptrs, st, b.gep(counters, [ir.Constant(I64, k)]))
            with one:
                b.call(fn, ptrs + whole)
    b.ret_void()
    return run


CHUNKS = 64          # a parallel stage is cut into at most this many pieces
ROW_CHUNK_ELEMS = 8192   # row-stitched kernels work on about this many elements per stage per chunk (L1/L2)


def row_chunking(plan: KernelPlan) -> tuple[int, int] | None:
    """(rows N, rows per chunk) when the stages can run row chunk by row chunk ("stitched"), else None.

    Holds when every stage iterates over N rows on axis 0 (reductions keep axis 0), the graph has no index
    maps, and every value computed from a reduction that another node reads has the stages' rank, so row r of
    any stage reads only row r of earlier stages' buffers.  Then a chunk of rows runs all stages back to back
    while its data is in cache, and threads need no barrier between stages."""
    stages = plan.stages
    if len(stages) < 2:
        return None
    spaces = [st.in_shape if isinstance(st, ReduceStage) else st.shape for st in stages]
    rank = len(spaces[0])
    n = spaces[0][0] if rank else 0
    if n < 2 or any(len(sp) != rank or sp[0] != n for sp in spaces):
        return None
    if any(isinstance(st, ReduceStage) and 0 in st.axes for st in stages):
        return None
    if any(node.op in INDEX_MAPS for node in plan.graph.nodes):
        return None
    dependent: set[int] = set()                      # values computed from a reduction
    for node in plan.graph.nodes:
        ins = [v for v in node.inputs if v is not None]
        if node.op in REDUCE_OPS or any(id(v) in dependent for v in ins):
            for o in node.outputs:
                dependent.add(id(o))
        for v in ins:
            if id(v) in dependent and (len(v.shape) != rank or v.shape[0] != n):
                return None
    row = max(st.work // n for st in stages)
    return n, max(1, ROW_CHUNK_ELEMS // max(row, 1))


def _emit_row_chunks(b: ir.IRBuilder, plan: KernelPlan, stage_fns: list, ptrs: list, rows: tuple[int, int],
                     counters, nt) -> None:
    """for each chunk of rows (taken from an atomic counter by several threads): run every stage on it."""
    n, chunk = rows
    nchunks = -(-n // chunk)

    def run_chunk(c):
        lo = b.mul(c, ir.Constant(I64, chunk))
        hi = b.add(lo, ir.Constant(I64, chunk))
        hi = b.select(b.icmp_signed("<", hi, ir.Constant(I64, n)), hi, ir.Constant(I64, n))
        for st, fn in zip(plan.stages, stage_fns):
            if isinstance(st, MapStage) and st.flat:      # flat stages count elements, not rows
                per_row = ir.Constant(I64, _numel(st.shape) // n)
                b.call(fn, ptrs + [b.mul(lo, per_row), b.mul(hi, per_row)])
            else:
                b.call(fn, ptrs + [lo, hi])

    def serial():
        with for_range(b, 0, nchunks, "chunk") as c:
            run_chunk(c)

    if counters is None:
        serial()
        return
    with b.if_else(b.icmp_signed(">", nt, ir.Constant(I64, 1))) as (many, one):
        with many:
            head = b.append_basic_block("rows.head")
            body = b.append_basic_block("rows.body")
            done = b.append_basic_block("rows.done")
            b.branch(head)
            b.position_at_end(head)
            c = b.atomic_rmw("add", counters, ir.Constant(I64, 1), "monotonic")
            b.cbranch(b.icmp_signed("<", c, ir.Constant(I64, nchunks)), body, done)
            b.position_at_end(body)
            run_chunk(c)
            b.branch(head)
            b.position_at_end(done)
        with one:
            serial()


def _dynamic_chunks(b: ir.IRBuilder, fn: ir.Function, ptrs: list, st, counter: ir.Value) -> None:
    """while ((c = counter++) < n) fn(ptrs, c*chunk, min((c+1)*chunk, extent))"""
    extent, align = st.part_extent, st.part_align
    chunk = -(-extent // CHUNKS)
    chunk = -(-chunk // align) * align
    n = -(-extent // chunk)
    head = b.append_basic_block("chunk.head")
    body = b.append_basic_block("chunk.body")
    done = b.append_basic_block("chunk.done")
    b.branch(head)
    b.position_at_end(head)
    c = b.atomic_rmw("add", counter, ir.Constant(I64, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", c, ir.Constant(I64, n)), body, done)
    b.position_at_end(body)
    lo = b.mul(c, ir.Constant(I64, chunk))
    hi = b.add(lo, ir.Constant(I64, chunk))
    hi = b.select(b.icmp_signed("<", hi, ir.Constant(I64, extent)), hi, ir.Constant(I64, extent))
    b.call(fn, ptrs + [lo, hi])
    b.branch(head)
    b.position_at_end(done)


def _declare(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, fnty, name)

