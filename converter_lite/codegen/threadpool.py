"""The thread pool of parallel kernels, emitted as LLVM IR (so the JIT path needs no C compiler either).

    void cl_pool_parallel_for(void (*body)(i8** bufs, i64 chunk), i8** bufs, i64 nchunks, i64 nthreads)

runs ``body(bufs, c)`` for every ``c`` in ``[0, nchunks)`` and returns when all have finished.  The calling
thread never waits for a worker that has not started: chunks are claimed one at a time from an atomic counter,
the caller claims them too, and once none is left it waits only for chunks that workers already claimed.  A
worker that the OS schedules late finds no work and goes back to waiting, so on a busy machine a kernel costs
at worst what it costs on one thread.  libgomp's ``GOMP_parallel`` instead joins the whole team at the end of
every region (measured here: 7.5 ms for a 0.5 ms kernel when the second core was busy).

Protocol (one job at a time per pool; a caller that finds the pool busy, e.g. a concurrent ``Model.run``, runs
its chunks itself):
* ``ctr`` = generation << 32 | next chunk.  Publishing a job first sets the next chunk to 0xffffffff (no work),
  then writes the job (body, bufs, nchunks) and zeroes ``done``, then releases ``ctr = gen << 32``.  A claim is
  a compare-and-swap of the whole word read before the job fields, so a claim succeeds only for the job whose
  fields it read (generations never repeat).
* ``done`` counts finished chunks; the caller returns when it reaches nchunks.
* Idle workers spin on ``seq`` (bumped per job) for SPIN_TICKS of the time-stamp counter (~1 ms, enough to
  stay awake between the kernels of a run and between runs called back to back), calling sched_yield every
  YIELD_TICKS so that a spinning worker never keeps a core from a thread that waits for it (the caller, or
  another process), then sleep on it with futex(2); the caller wakes them only if some sleep.  Workers
  (nthreads - 1 of them, created on first use) never exit.
* After fork() the child has no workers: the caller simply runs every chunk.
Linux x86-64 only (futex syscall number, pause instruction), like the rest of the native code path.
"""
from __future__ import annotations

from llvmlite import ir

from .loops import for_range
from .types import BYTE_PTR, BYTE_PTR_PTR, I32, I64, VOID

POOL_SYMBOL = "cl_pool_parallel_for"
# time-stamp-counter ticks an idle worker spins (pause instructions) before it sleeps: ~0.6-1 ms at the 2-3.5 GHz
# of the counter.  It was 4000 pauses (~0.1 ms here, where a pause takes 26 ns), and a worker that slept
# between runs came back too late to help for many runs: on this 2-vCPU VM, after 50 ms idle, eight 2-thread runs
# of a PP-LCNet classifier took the 1-thread time (4.0-4.3 ms against 2.2-2.9 warm), and the thread chooser,
# seeing 2-thread runs that slow, kept the model on one thread (4.2 ms where onnxruntime takes 2.4).  Counting
# ticks instead of pauses keeps the window the same on CPUs whose pause takes 10 ns or 140 cycles.
SPIN_TICKS = 1 << 21
# time-stamp-counter ticks between the sched_yield calls of a spinning worker (~20-30 us; the first comes as it
# starts to spin).  A pause loop never gives its core away: on this 2-vCPU VM with the other core taken, the
# worker spun on the caller's core while the caller, runnable, waited out the worker's time slice (resnet_mini
# at 2 threads: the slow runs, 5-7 ms against 2.5, had the caller waiting in the run queue exactly as long as
# the worker ran, 3-4 ms, three times its share of the work).  Yielding, fixed 2 threads, old and new pool
# alternating in one process: median 6.1 -> 2.5 ms at load 3.6 and 9.3 -> 6.4 at load 7.4, the worker's CPU
# time 1.8-2.1 -> 0.3-0.45 ms a run (yielding every 2^20 ticks instead: 7.2 ms).  sched_yield returns at once when
# nothing else waits for the core, so an idle machine keeps the spin's wake-up latency.
YIELD_TICKS = 1 << 16
WAIT_SPINS = 2000             # pause instructions the caller spins on unfinished chunks before each sched_yield
MAX_WORKERS = 63
SYS_FUTEX, FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 202, 128, 129
NO_WORK = 0xFFFFFFFF

BODY_TYPE = ir.FunctionType(VOID, [BYTE_PTR_PTR, I64])
POOL_TYPE = ir.FunctionType(VOID, [BODY_TYPE.as_pointer(), BYTE_PTR_PTR, I64, I64])


def declare_pool(module: ir.Module) -> ir.Function:
    fn = module.globals.get(POOL_SYMBOL)
    return fn if fn is not None else ir.Function(module, POOL_TYPE, POOL_SYMBOL)


def _global(module: ir.Module, name: str, ty: ir.Type, init=0) -> ir.GlobalVariable:
    g = ir.GlobalVariable(module, ty, f"cl_pool.{name}")
    g.linkage = "internal"
    g.initializer = ir.Constant(ty, None if init is None else init)
    g.align = 64
    return g


def emit_pool(module: ir.Module) -> ir.Function:
    """Defines ``cl_pool_parallel_for`` (and its internal state and worker) in ``module``."""
    G = {name: _global(module, name, ty, init) for name, ty, init in (
        ("ctr", I64, 0), ("done", I64, 0), ("n", I64, 0), ("seq", I32, 0), ("sleepers", I32, 0),
        ("busy", I32, 0), ("workers", I64, 0), ("body", BYTE_PTR, None), ("bufs", BYTE_PTR, None))}
    pause = ir.Function(module, ir.FunctionType(VOID, []), "llvm.x86.sse2.pause")
    syscall = ir.Function(module, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
    sched_yield = ir.Function(module, ir.FunctionType(I32, []), "sched_yield")
    worker_ty = ir.FunctionType(BYTE_PTR, [BYTE_PTR])
    pthread_create = ir.Function(module, ir.FunctionType(I32, [I64.as_pointer(), BYTE_PTR, worker_ty.as_pointer(),
                                                               BYTE_PTR]), "pthread_create")
    c64 = lambda v: ir.Constant(I64, v)  # noqa: E731
    c32 = lambda v: ir.Constant(I32, v)  # noqa: E731

    def futex(b, op, val):
        b.call(syscall, [c64(SYS_FUTEX), G["seq"], c64(op), val, ir.Constant(BYTE_PTR, None),
                         ir.Constant(BYTE_PTR, None), c64(0)])

    # -- claim: take chunks until none is left ----------------------------------------------------------------
    claim = ir.Function(module, ir.FunctionType(VOID, []), "cl_pool.claim")
    claim.linkage = "internal"
    b = ir.IRBuilder(claim.append_basic_block("entry"))
    head, take, done_ = (claim.append_basic_block(n) for n in ("head", "take", "done"))
    b.branch(head)
    b.position_at_end(head)
    v = b.load_atomic(G["ctr"], "acquire", 8)
    i = b.and_(v, c64(NO_WORK))
    n = b.load_atomic(G["n"], "monotonic", 8)
    b.cbranch(b.icmp_unsigned("<", i, n), take, done_)
    b.position_at_end(take)
    body = b.bitcast(b.load_atomic(G["body"], "monotonic", 8), BODY_TYPE.as_pointer())
    bufs = b.bitcast(b.load_atomic(G["bufs"], "monotonic", 8), BYTE_PTR_PTR)
    res = b.cmpxchg(G["ctr"], v, b.add(v, c64(1)), "acq_rel", "monotonic")
    with b.if_then(b.extract_value(res, 1)):
        b.call(body, [bufs, i])
        b.atomic_rmw("add", G["done"], c64(1), "release")
    b.branch(head)
    b.position_at_end(done_)
    b.ret_void()

    # -- worker: wait for a new job (spin, then futex), claim, repeat ------------------------------------------
    worker = ir.Function(module, worker_ty, "cl_pool.worker")
    worker.linkage = "internal"
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    last = b.alloca(I32)
    since = b.alloca(I64)
    next_yield = b.alloca(I64)
    tsc = ir.Function(module, ir.FunctionType(I64, []), "llvm.readcyclecounter")
    b.store(b.trunc(b.ptrtoint(worker.args[0], I64), I32), last)
    outer, wait, spin, got = (worker.append_basic_block(n) for n in ("outer", "wait", "spin", "got"))
    b.branch(outer)
    b.position_at_end(outer)
    start = b.call(tsc, [])
    b.store(start, since)
    b.store(start, next_yield)                 # yield first: the caller may be waiting for this very core
    b.branch(wait)
    b.position_at_end(wait)
    s = b.load_atomic(G["seq"], "acquire", 4)
    b.cbranch(b.icmp_unsigned("!=", s, b.load(last)), got, spin)
    b.position_at_end(spin)
    now = b.call(tsc, [])
    spun = b.sub(now, b.load(since))
    with b.if_else(b.icmp_unsigned("<", spun, c64(SPIN_TICKS))) as (then, other):
        with then, b.if_else(b.icmp_unsigned(">=", now, b.load(next_yield))) as (yield_, pause_):
            with yield_:
                b.call(sched_yield, [])
                b.store(b.add(b.call(tsc, []), c64(YIELD_TICKS)), next_yield)
            with pause_:
                b.call(pause, [])
        with other:
            b.atomic_rmw("add", G["sleepers"], c32(1), "seq_cst")
            futex(b, FUTEX_WAIT_PRIVATE, b.zext(b.load(last), I64))
            b.atomic_rmw("sub", G["sleepers"], c32(1), "seq_cst")
    b.branch(wait)
    b.position_at_end(got)
    b.store(s, last)
    b.call(claim, [])
    b.branch(outer)

    # -- the entry point ---------------------------------------------------------------------------------------
    fn = ir.Function(module, POOL_TYPE, POOL_SYMBOL)
    body_arg, bufs_arg, nchunks, nthreads = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    serial_bb, pool_bb, try_bb = (fn.append_basic_block(n) for n in ("serial", "pool", "try"))
    b.cbranch(b.and_(b.icmp_signed(">", nthreads, c64(1)), b.icmp_signed(">", nchunks, c64(1))), try_bb, serial_bb)
    b.position_at_end(serial_bb)
    with for_range(b, 0, nchunks, "c") as c:
        b.call(body_arg, [bufs_arg, c])
    b.ret_void()
    b.position_at_end(try_bb)
    got_pool = b.extract_value(b.cmpxchg(G["busy"], c32(0), c32(1), "acquire", "monotonic"), 1)
    b.cbranch(got_pool, pool_bb, serial_bb)
    b.position_at_end(pool_bb)
    # workers: nthreads - 1, started on first use with the current seq as the one they have seen
    want = b.sub(nthreads, c64(1))
    want = b.select(b.icmp_signed("<", want, c64(MAX_WORKERS)), want, c64(MAX_WORKERS))
    seq0 = b.load_atomic(G["seq"], "acquire", 4)
    tid = b.alloca(I64)
    with for_range(b, b.load(G["workers"]), want, "w"):
        rc = b.call(pthread_create, [tid, ir.Constant(BYTE_PTR, None), worker,
                                     b.inttoptr(b.zext(seq0, I64), BYTE_PTR)])
        with b.if_then(b.icmp_signed("==", rc, c32(0))):
            b.store(b.add(b.load(G["workers"]), c64(1)), G["workers"])
    # publish: no work under the new generation, the job, then work from chunk 0
    gen = b.add(b.lshr(b.load_atomic(G["ctr"], "monotonic", 8), c64(32)), c64(1))
    gen = b.shl(b.and_(gen, c64(NO_WORK)), c64(32))
    b.store_atomic(b.or_(gen, c64(NO_WORK)), G["ctr"], "seq_cst", 8)
    b.store_atomic(b.bitcast(body_arg, BYTE_PTR), G["body"], "monotonic", 8)
    b.store_atomic(b.bitcast(bufs_arg, BYTE_PTR), G["bufs"], "monotonic", 8)
    b.store_atomic(nchunks, G["n"], "monotonic", 8)
    b.store_atomic(c64(0), G["done"], "monotonic", 8)
    b.store_atomic(gen, G["ctr"], "release", 8)
    b.atomic_rmw("add", G["seq"], c32(1), "seq_cst")
    with b.if_then(b.icmp_signed(">", b.load_atomic(G["sleepers"], "seq_cst", 4), c32(0))):
        futex(b, FUTEX_WAKE_PRIVATE, c64(0x7FFFFFFF))
    b.call(claim, [])
    # wait for the chunks the workers claimed
    whead, wbody, wexit = (fn.append_basic_block(n) for n in ("w.head", "w.body", "w.exit"))
    count = b.alloca(I32)
    b.store(c32(0), count)
    b.branch(whead)
    b.position_at_end(whead)
    b.cbranch(b.icmp_signed("<", b.load_atomic(G["done"], "acquire", 8), nchunks), wbody, wexit)
    b.position_at_end(wbody)
    k = b.add(b.load(count), c32(1))
    b.store(k, count)
    with b.if_else(b.icmp_unsigned("<", k, c32(WAIT_SPINS))) as (then, other):
        with then:
            b.call(pause, [])
        with other:
            b.call(sched_yield, [])
            b.store(c32(0), count)
    b.branch(whead)
    b.position_at_end(wexit)
    b.store_atomic(c32(0), G["busy"], "release", 4)
    b.ret_void()
    return fn
