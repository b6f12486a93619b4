"""The C ABI of a native kernel and its entry point.

    void <symbol>(void **args, int64_t num_threads);

``args`` holds the data pointers of the kernel's inputs then its outputs, in the order of the sub-graph's
inputs and outputs; every buffer is C-contiguous with the static dtype and shape recorded in the KernelSpec
(native/target.json).  Outputs must not overlap inputs.  ``num_threads`` <= 1 runs on the calling thread;
above that, a kernel compiled as parallel (enough work, see ``lower_kernel``) runs its stages through the
thread pool of pool.py (chunks claimed from an atomic counter by the caller and up to num_threads - 1 workers;
the caller never waits for a worker that has not started); schedule.py cuts the stages into chunks.
Temporaries (reduction results) live on the stack when small, else in malloc'ed memory freed before return.

Symbols are ``cl_<kernel name with non-identifier characters replaced by _>`` so they never collide with libc.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from llvmlite import ir

from ..ir.core import Graph
from .coalesce import coalesce_leading
from .lower import KernelPlan, emit_stages, plan_kernel
from .schedule import emit_chunk_bodies, emit_run
from .threadpool import declare_pool
from .types import BYTE_PTR, BYTE_PTR_PTR, I64, VOID

STACK_TEMP_LIMIT = 64 * 1024          # temporaries up to this size are stack allocated
TEMP_ALIGN = 64


def symbol_for(name: str) -> str:
    return "cl_" + re.sub(r"[^0-9A-Za-z_]", "_", name)


@dataclass
class KernelSpec:
    """What the runtime needs to call a kernel: its symbol and argument dtypes/shapes."""
    name: str
    symbol: str
    inputs: list[tuple[str, tuple[int, ...]]]
    outputs: list[tuple[str, tuple[int, ...]]]
    parallel: bool
    rows: int | None = None          # a row-polymorphic kernel (rows.py): the nominal rows of the shapes above
    cols: int | None = None          # a column kernel (columns.py): its rank; the shapes above are patterns

    @property
    def num_args(self) -> int:
        return len(self.inputs) + len(self.outputs)

    def to_json(self) -> dict:
        d = {"name": self.name, "symbol": self.symbol, "num_args": self.num_args, "parallel": self.parallel,
             "inputs": [{"dtype": d, "shape": list(s)} for d, s in self.inputs],
             "outputs": [{"dtype": d, "shape": list(s)} for d, s in self.outputs]}
        if self.rows:
            d["rows"] = self.rows
        if self.cols:
            d["cols"] = self.cols
        return d


def kernel_spec(name: str, graph: Graph, parallel: bool, rows: int | None = None,
                cols: int | None = None) -> KernelSpec:
    return KernelSpec(name, symbol_for(name), [(v.dtype.name, tuple(v.shape)) for v in graph.inputs],
                      [(v.dtype.name, tuple(v.shape)) for v in graph.outputs], parallel, rows, cols)


def is_parallel(plan: KernelPlan, threads: int, threshold: int) -> bool:
    """Multi-threaded only when there is enough work to pay the pool dispatch (a few us)."""
    return threads > 1 and plan.work >= threshold and any(s.part_extent > 1 for s in plan.stages)


def lower_kernel(graph: Graph, sym: str, parallel: bool | None = None, *, threads: int = 2,
                 threshold: int = 1 << 15, kernel: str = "",
                 features: frozenset[str] = frozenset()) -> tuple[ir.Module, bool]:
    """The module defining ``void sym(void** args, int64 nthreads)`` for ``graph``; returns (module,
    parallel).  ``parallel=None`` decides by ``is_parallel(plan, threads, threshold)``; ``features``: the
    target's CPU features the code may use (``TargetSpec.usable``)."""
    module = ir.Module(name=sym)
    plan = plan_kernel(coalesce_leading(graph))
    if parallel is None:
        parallel = is_parallel(plan, threads, threshold)
    stage_fns = emit_stages(module, plan, sym, kernel, features)
    run = emit_run(module, plan, sym, stage_fns)
    bodies = emit_chunk_bodies(module, plan, sym, stage_fns) if parallel else []
    entry = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), sym)
    args, nthreads = entry.args
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    n_io = len(graph.inputs) + len(graph.outputs)
    temps = plan.temps
    heap = []
    if temps:
        bufs = b.bitcast(b.alloca(ir.ArrayType(BYTE_PTR, len(plan.buffers))), BYTE_PTR_PTR)
        for i in range(n_io):
            b.store(b.load(b.gep(args, [ir.Constant(I64, i)])), b.gep(bufs, [ir.Constant(I64, i)]))
        malloc = ir.Function(module, ir.FunctionType(BYTE_PTR, [I64]), "malloc")
        for t in temps:
            nbytes = max(t.nbytes, 1)
            if nbytes <= STACK_TEMP_LIMIT:
                mem = b.alloca(ir.ArrayType(ir.IntType(8), nbytes))
                mem.align = TEMP_ALIGN
                p = b.bitcast(mem, BYTE_PTR)
            else:
                p = b.call(malloc, [ir.Constant(I64, nbytes)])
                heap.append(p)
            b.store(p, b.gep(bufs, [ir.Constant(I64, t.slot)]))
    else:
        bufs = args
    if bodies:
        pool = declare_pool(module)
        with b.if_else(b.icmp_signed(">", nthreads, ir.Constant(I64, 1))) as (then, otherwise):
            with then:
                for body, nchunks in bodies:
                    b.call(pool, [body, bufs, ir.Constant(I64, nchunks), nthreads])
            with otherwise:
                b.call(run, [bufs])
    else:
        b.call(run, [bufs])
    if heap:
        free = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR]), "free")
        for p in heap:
            b.call(free, [p])
    b.ret_void()
    return module, parallel


def export_wrappers(exports: list[tuple[str, str]]) -> ir.Module:
    """A module of ``void symbol(void**, int64) { tail call canonical(...) }`` for (symbol, canonical) pairs:
    kernels with identical bodies share one compiled function.  The thread pool and the support functions the
    kernels call are in the support module (support.support_module), linked into the same shared object."""
    module = ir.Module(name="exports")
    fnty = ir.FunctionType(VOID, [BYTE_PTR_PTR, I64])
    declared: dict[str, ir.Function] = {}
    for symbol, canon in exports:
        target = declared.get(canon) or ir.Function(module, fnty, canon)
        declared[canon] = target
        fn = ir.Function(module, fnty, symbol)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.call(target, list(fn.args), tail=True)
        b.ret_void()
    return module
