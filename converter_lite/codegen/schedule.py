"""Scheduling the stages of a kernel on one thread or on the thread pool (pool.py).

* one thread: ``<sym>.run(bufs)`` runs every stage over its whole partition axis, in order;
* several threads (kernels compiled as parallel): each stage's partition axis is cut into at most CHUNKS chunks,
  run through the pool one stage after the other (the pool returns when a stage's chunks are done: the
  barrier between stages);
* row-stitched kernels (``row_chunking``: softmax, layer norm, any chain whose reductions keep axis 0 and read
  only their own rows): chunks of rows run every stage back to back while the rows are in cache, in one pool
  call, on one thread or several; a pool chunk is a group of consecutive row chunks (at most ROW_POOL_CHUNKS
  groups), so claiming work costs little next to doing it.
"""
from __future__ import annotations

from llvmlite import ir

from .index import INDEX_MAPS, _numel
from .loops import for_range
from .lower import KernelPlan, MapStage
from .reduce import REDUCE_OPS, ReduceStage
from .types import BYTE_PTR_PTR, I64, VOID, storage_type


def emit_run(module: ir.Module, plan: KernelPlan, sym: str, stage_fns: list[ir.Function]) -> ir.Function:
    """Emits ``<sym>.run(i8** bufs)``: every stage over its whole partition axis, in order, on this thread
    (row-stitched kernels: every stage on one chunk of rows, chunk after chunk, while the rows are in cache)."""
    run = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR]), f"{sym}.run")
    run.linkage = "internal"
    b = ir.IRBuilder(run.append_basic_block("entry"))
    ptrs = _ptrs(b, plan, run.args[0])
    rows = row_chunking(plan)
    if rows is not None:
        n, chunk = rows
        with for_range(b, 0, -(-n // chunk), "chunk") as c:
            _run_row_chunk(b, plan, stage_fns, ptrs, rows, c)
    else:
        for st, fn in zip(plan.stages, stage_fns):
            if st.part_extent:
                b.call(fn, ptrs + [ir.Constant(I64, 0), ir.Constant(I64, st.part_extent)])
    b.ret_void()
    return run


def emit_chunk_bodies(module: ir.Module, plan: KernelPlan, sym: str,
                      stage_fns: list[ir.Function]) -> list[tuple[ir.Function, int]]:
    """The parallel form: [(``<sym>.cK(i8** bufs, i64 chunk)``, number of chunks)] to run one after the other,
    each through the thread pool (pool.py).  Row-stitched kernels have one body, which runs every stage on a
    chunk of rows (no barrier between stages); other kernels have one body per stage, a stage's partition
    axis cut into at most CHUNKS chunks.  A row body runs a group of consecutive row chunks (at most
    ROW_POOL_CHUNKS groups)."""
    rows = row_chunking(plan)
    out = []
    if rows is not None:
        n_row_chunks = -(-rows[0] // rows[1])
        group = -(-n_row_chunks // ROW_POOL_CHUNKS)
        fn, b, ptrs, c = _chunk_function(module, plan, f"{sym}.rows")
        first = b.mul(c, ir.Constant(I64, group))
        last = b.add(first, ir.Constant(I64, group))
        last = b.select(b.icmp_signed("<", last, ir.Constant(I64, n_row_chunks)), last,
                        ir.Constant(I64, n_row_chunks))
        with for_range(b, first, last, "chunk") as rc:
            _run_row_chunk(b, plan, stage_fns, ptrs, rows, rc)
        b.ret_void()
        return [(fn, -(-n_row_chunks // group))]
    for k, (st, sfn) in enumerate(zip(plan.stages, stage_fns)):
        extent, align = st.part_extent, st.part_align
        if extent == 0:
            continue
        chunk = -(-extent // CHUNKS)
        chunk = -(-chunk // align) * align
        fn, b, ptrs, c = _chunk_function(module, plan, f"{sym}.c{k}")
        lo = b.mul(c, ir.Constant(I64, chunk))
        hi = b.add(lo, ir.Constant(I64, chunk))
        hi = b.select(b.icmp_signed("<", hi, ir.Constant(I64, extent)), hi, ir.Constant(I64, extent))
        b.call(sfn, ptrs + [lo, hi])
        b.ret_void()
        out.append((fn, -(-extent // chunk)))
    return out


def _ptrs(b: ir.IRBuilder, plan: KernelPlan, bufs: ir.Value) -> list[ir.Value]:
    return [b.bitcast(b.load(b.gep(bufs, [ir.Constant(I64, i)])), storage_type(buf.dtype).as_pointer())
            for i, buf in enumerate(plan.buffers)]


def _chunk_function(module: ir.Module, plan: KernelPlan, name: str):
    fn = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), name)
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    return fn, b, _ptrs(b, plan, fn.args[0]), fn.args[1]


CHUNKS = 64          # a parallel stage is cut into at most this many pieces
# row-stitched kernels work on about this many elements per stage per chunk: 512 measured best on a Zen 5
# core for Softmax over [8192, 128] (179 us vs 194 at 2048, 217 at 256; one thread, three runs each) and
# LayerNorm over [2048, 512] (120 us vs 133)
ROW_CHUNK_ELEMS = 512
# a pool chunk of a row-stitched kernel runs consecutive row chunks: at most this many pool chunks per call, so
# the pool's two atomic updates per chunk (shared between the cores) stay rare next to the work
ROW_POOL_CHUNKS = 16


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


def _run_row_chunk(b: ir.IRBuilder, plan: KernelPlan, stage_fns: list, ptrs: list, rows: tuple[int, int],
                   c: ir.Value) -> None:
    """Every stage on rows [c*chunk, min((c+1)*chunk, n))."""
    n, chunk = rows
    lo = b.mul(c, ir.Constant(I64, chunk))
    hi = b.add(lo, ir.Constant(I64, chunk))
    hi = b.select(b.icmp_signed("<", hi, ir.Constant(I64, n)), hi, ir.Constant(I64, n))
    for st, fn in zip(plan.stages, stage_fns):
        if isinstance(st, MapStage) and st.flat:      # flat stages count elements, not rows
            per_row = ir.Constant(I64, _numel(st.shape) // n)
            b.call(fn, ptrs + [b.mul(lo, per_row), b.mul(hi, per_row)])
        else:
            b.call(fn, ptrs + [lo, hi])
