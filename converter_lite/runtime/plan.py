"""A flat execution plan: graph walking, kernel choice and memory layout happen once, at load time.

``Plan(graph, resolve=None, num_threads=1, adaptive=True)``:

1. ``program.lower`` numbers the values and turns the nodes into steps (constant nodes folded, fast kernels
   from ``fast.table.FAST`` where they apply, native kernels from ``resolve``, reference kernels otherwise,
   zero-copy views for reshapes);
2. ``concat_views.concat_views`` makes the inputs of a Concat whose output holds them as contiguous blocks
   views of that output, so their steps write the result and the copy step goes (not in control-flow bodies);
   and ``transpose_views.transpose_views`` lets batched MatMuls read a Transpose's input through a strided
   view instead of a copy;
3. ``arena.plan_memory`` decides in-place reuse and gives every buffer an offset in one arena, buffers whose
   lifetimes do not intersect sharing bytes;
4. an ``Executor`` allocates the arena and one scratch area, makes every value's array (a view into the arena,
   or the constant) and *binds* each step to its arrays: a list of zero-argument callables.  A run copies the
   inputs into their buffers, calls the list in order and copies the outputs out, so it allocates nothing
   else (only reference kernels and dynamic-shape values allocate their results).  Consecutive steps that
   only call native code run as one foreign call (runlist.py: the model's step runner walks their records),
   except in profiled runs, which time every step.

Threads: steps are bound for a thread count (native kernels' OpenMP team, the runtime's splitting of large
GEMMs/convolutions); an executor keeps one bound list per count it has run with, over the same arena.  With
``num_threads > 1`` and ``adaptive``, ``threads.ThreadChooser`` picks 1 or ``num_threads`` per run from the
measured run times (a second thread loses when the cores are busy); a plan with at most ``TINY_PLAN_BYTES`` of
buffers and no product (``product_work``) of ``TINY_PRODUCT`` multiply-adds or more always runs on one thread.
numpy's BLAS stays at one thread (``threads.blas_enter``) in runs whose steps may call it (``needs_blas``).  A
run silences numpy's floating-point warnings (``np.errstate``) unless every step is bound to native code or only
moves values (``Plan.quiet``).

Thread safety: a Plan is immutable after construction (but for the chooser's statistics, behind a lock, and
the ``quiet`` answers it caches, the same whichever run finds them);
executors (arena + bound steps) are pooled: a run takes a free one (``list.pop``, atomic) or makes a new one,
and gives it back at the end (about ``MAX_IDLE_EXECUTORS`` are kept), so concurrent runs never share buffers.

Cost: a step is one call of a pre-bound callable, about 0.3 us on top of its kernel (measured with 1000
chained elementwise steps on 4 elements: 1.05 us per step against 0.72 us for the bare ufunc call); a run
adds ~1 us when every input and output has a fixed buffer (executor pool, input/output copies: mynet's one
native kernel runs in 1.5 us through ``Model.run``, 0.3 us of them the foreign call), up to ~3 us otherwise
(thread choice and its timing, BLAS limit when a BLAS op is present, dynamic values).
"""
from __future__ import annotations

import functools
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import RET_OP_EXECUTE_FAILURE, ConverterError
from ..ir.core import Graph, Node
from ..kernels.runlist.abi import RUN_SYMBOL
from ..kernels.runlist.bind import batch
from .arena import ALIGN, plan_memory
from .concat_views import concat_views
from .direct_io import (
    POOLED_OUTPUTS,
    ZERO_COPY_BYTES,
    DirectIO,
    fresh,
    into,
    readable_in_place,
)
from .generic_step import generic_step
from .program import KernelEntry, Program, lower
from .shared_arena import SharedArena
from .step_needs import BLAS_OPS, TINY_PRODUCT, product_work, step_blas_free, step_quiet
from .threads import ThreadChooser, blas_enter, blas_exit
from .transpose_views import transpose_views

MAX_IDLE_EXECUTORS = 4
TINY_PLAN_BYTES = 1 << 16
SHOWN_SOURCES = 4               # original ONNX node names a fused kernel's run-time error lists
@dataclass(frozen=True)
class Step:
    """One executed step (for tables and tests): its node, whether it runs native code, its kernel index."""
    node: Node
    native: bool
    kernel: int
    inputs: tuple
    outputs: tuple


class Plan:
    """Executable form of ``graph``; see the module docstring."""

    def __init__(self, graph: Graph, resolve=None, num_threads: int = 1, fast: bool = True,
                 adaptive: bool = True, max_loop_iterations: int | None = None, inner: bool = False,
                 shared: SharedArena | None = None):
        from .fast.table import FAST
        self.graph = graph
        self.shared = shared                          # memory shared with the model's other plans (shared_arena.py)
        self.num_threads = num_threads
        from .control_flow import control_flow_impl
        bound = {} if max_loop_iterations is None else {"max_iterations": max_loop_iterations}

        def body_plan(body: Graph) -> Plan:
            return Plan(body, resolve, num_threads, fast, adaptive=False, max_loop_iterations=max_loop_iterations,
                        inner=True)
        self.program: Program = lower(graph, resolve, FAST if fast else {}, num_threads,
                                      lambda node: control_flow_impl(node, body_plan, **bound))
        if not inner:
            concat_views(self.program)
            transpose_views(self.program)
        self.memory = plan_memory(self.program, keep_inputs=inner)
        self.kernels: list[KernelEntry] = self.program.kernels
        self.workspace = max((s.impl.workspace for s in self.program.steps), default=0)
        self._free: list[Executor] = []
        # a body plan (``inner``) runs inside its parent's run, which limits numpy's BLAS for its bodies too
        self.blas_inside = any(s.node.op in BLAS_OPS for s in self.program.steps) or \
            any(p.blas_inside for p in self.body_plans())
        self.uses_blas = self.blas_inside and not inner
        # a plan whose buffers all fit in TINY_PLAN_BYTES and whose BLAS products are all below TINY_PRODUCT
        # multiply-adds runs on one thread (adaptive only): its kernels are too small for a second thread to pay
        # (products that small are never split), and the choice itself costs ~2 us a run
        tiny = self.memory.arena_bytes + self.workspace <= TINY_PLAN_BYTES and all(
            s.node.op not in BLAS_OPS or product_work(s.node) < TINY_PRODUCT for s in self.program.steps)
        self.run_threads = 1 if adaptive and tiny else num_threads
        self.chooser = ThreadChooser((1, num_threads)) if adaptive and num_threads > 1 and not tiny else None
        support = getattr(getattr(resolve, "library", None), "support", None)
        self.runner = support(RUN_SYMBOL) if support is not None else None
        self._needs: dict[int, tuple[bool, bool]] = {}  # per thread count: (``quiet``, ``needs_blas``)

    def acquire(self) -> Executor:
        """An executor of this plan for a caller's exclusive use (a Loop holds one for all its iterations)."""
        try:
            ex = self._free.pop()
        except IndexError:
            ex = None
        return ex if ex is not None and ex.lock is None else Executor(self, private=True)

    def release(self, ex: Executor) -> None:
        if len(self._free) < MAX_IDLE_EXECUTORS:
            self._free.append(ex)

    def prepare(self) -> None:
        """Makes an executor now, its steps bound for the thread counts runs start with, and pools it, so the
        first run does not pay for it (a dynamic model's generic plan, at load: 0.8 ms of distilbert's first
        run at a new shape)."""
        ex = Executor(self)
        for nt in (self.chooser.options if self.chooser is not None else (self.run_threads,)):
            ex.merged_calls(nt)
        self.release(ex)

    def body_plans(self) -> list[Plan]:
        """The plans of this plan's control-flow bodies, and of theirs, outermost first."""
        out = []
        for s in self.program.steps:
            for p in (s.impl.bodies or {}).values():
                out += [p, *p.body_plans()]
        return out

    @functools.cached_property
    def steps(self) -> list[Step]:
        """The executed steps (for tables and tests): made when first asked, not with every plan (a dynamic
        model's plan for a new shape never needs them)."""
        return [Step(s.node, s.impl.native, s.kernel, s.inputs, s.outputs) for s in self.program.steps]

    @property
    def arena_bytes(self) -> int:
        return self.memory.arena_bytes

    def execute(self, inputs: Sequence[np.ndarray], timings: list[float] | None = None,
                num_threads: int | None = None, outputs: Sequence | None = None) -> list[np.ndarray]:
        """Runs the plan on ``inputs`` (graph-input order).  With ``timings`` (one float per kernel, see
        ``kernels``), adds each kernel's wall time in seconds to it.  ``num_threads`` overrides the thread
        count of this run (default: the chooser's choice, or the plan's).  ``outputs`` (one array or None per
        graph output, checked by the caller) are written into and returned (IO binding).  Returns new arrays.
        Floating-point warnings are values here (ONNX semantics): a run is wrapped in ``np.errstate`` unless
        no step can raise one (``quiet``).

        Zero-copy I/O (``Executor._io_direct``): a large input only fused native kernels read is read in place
        when it is C-contiguous, aligned and of the declared dtype and shape; a large output one native
        kernel writes is written straight into the array returned.  An output is never an input's or a
        constant's memory, nor a buffer a later run reuses."""
        chooser = None
        if num_threads is not None:
            nt = num_threads
        elif self.chooser is None:
            nt = self.run_threads
        elif timings is not None:
            nt = self.chooser.best()                   # a profiled run takes the current choice, untimed
        else:
            nt, sample = self.chooser.choose()
            chooser = self.chooser if sample else None
        free = self._free
        try:
            ex = free.pop()                            # list.pop/append are atomic: no lock needed
        except IndexError:
            ex = Executor(self)
        lock = ex.lock
        if lock is not None:                           # on the shared block: one run at a time
            if self.shared.stale(ex.generation):       # bound to a block since replaced: rebind on the new one
                ex = Executor(self)
                lock = ex.lock
            if not lock.acquire(blocking=False):       # another run holds the block: memory of its own
                ex, lock = Executor(self, private=True), None
        try:
            quiet, blas = self._needs.get(nt) or self._run_needs(nt, ex)
            if quiet:
                return self._run(ex, inputs, timings, nt, outputs, chooser, blas)
            with np.errstate(all="ignore"):            # ONNX semantics: inf/nan results are values, not warnings
                return self._run(ex, inputs, timings, nt, outputs, chooser, blas)
        finally:
            if lock is not None:
                lock.release()
            if len(free) < MAX_IDLE_EXECUTORS:         # a burst of concurrent runs leaves no trail
                free.append(ex)

    def _run(self, ex: Executor, inputs: Sequence, timings: list[float] | None, nt: int, outputs: Sequence | None,
             chooser: ThreadChooser | None, blas: bool) -> list:
        """``ex.run`` with numpy's BLAS limited when ``blas`` (``needs_blas``), timed for ``chooser`` when given."""
        t0 = time.perf_counter() if chooser is not None else 0.0
        if blas:
            blas_enter(nt)
        try:
            out = ex.run(inputs, timings, nt, outputs)
        finally:
            if blas:
                blas_exit()
        if chooser is not None:
            chooser.record(nt, time.perf_counter() - t0)
        return out

    def _run_needs(self, nt: int, ex: Executor | None = None) -> tuple[bool, bool]:
        """(``quiet``, ``needs_blas``) for runs on ``nt`` threads, from one look at the steps bound for ``nt``:
        ``ex``'s (a run's executor), else an executor of the pool's (a control-flow body's plan, never on a shared
        block); the same for every executor of the plan, so found once."""
        got = self._needs.get(nt)
        if got is None:
            held = ex is None
            if held:
                ex = self.acquire()
            try:
                pairs = list(zip(self.program.steps, ex.calls(nt)))
            finally:
                if held:
                    self.release(ex)
            got = self._needs[nt] = (all(step_quiet(st, f) for st, f in pairs),
                                     self.uses_blas and not all(step_blas_free(st, f) for st, f in pairs))
        return got

    def quiet(self, nt: int, ex: Executor | None = None) -> bool:
        """Whether no step of a run on ``nt`` threads can raise a numpy floating-point warning
        (``step_needs.step_quiet``), so that the run needs no ``np.errstate`` around it (0.9 us a run: a tenth of
        a two-iteration greedy decoder's own cost beside its kernels).  Known once the steps are bound."""
        return self._run_needs(nt, ex)[0]

    def needs_blas(self, nt: int, ex: Executor | None = None) -> bool:
        """Whether a run on ``nt`` threads may call numpy's BLAS, so that it limits BLAS's threads
        (``threads.blas_enter``): the plan has BLAS ops (``uses_blas``) and some step of one is bound to code other
        than native calls (``step_needs.step_blas_free``).  Known once the steps are bound, like ``quiet``."""
        return self._run_needs(nt, ex)[1]


class Executor:
    """One arena, one scratch area and the steps bound to them (used by one run at a time)."""

    def __init__(self, plan: Plan, private: bool = False):
        prog, mem = plan.program, plan.memory
        self.lock, self.generation = None, 0
        if plan.shared is None or private:
            self.arena = _aligned(mem.arena_bytes)
            self.scratch = _aligned(plan.workspace)
        else:                                          # arena and scratch carved out of the shared block
            at = (mem.arena_bytes + ALIGN - 1) // ALIGN * ALIGN
            block, self.lock, self.generation = plan.shared.take(at + plan.workspace)
            self.arena, self.scratch = block[:mem.arena_bytes], block[at:at + plan.workspace]
        arrays: list = [None] * len(prog.values)
        for vid, v in enumerate(prog.values):
            if v.const is not None:
                arrays[vid] = v.const
            elif not v.dynamic:
                r = prog.root(vid)
                if r not in mem.offsets:               # written by no step (a dropped one)
                    continue
                if v.perm is not None:                 # (its base's array is made first: lower numbers it)
                    arrays[vid] = arrays[v.base].transpose(v.perm)
                    continue
                off = mem.offsets[r] + prog.root_offset(vid)
                arrays[vid] = self.arena[off:off + v.nbytes].view(v.dtype).reshape(v.shape)
        self.arrays = arrays
        self.dtypes = [v.dtype if v.kind == "tensor" else None for v in prog.values]
        self.env: list = [None] * len(prog.values)
        # a value some step or the graph reads or writes has no buffer (its shape known only at run time); values
        # no step touches (the outputs of steps dropped as unused) do not count: an If branch of openWakeWord's
        # silero VAD, made static per shape, kept one such value and ran on the generic path
        used = {v for st in prog.steps for v in st.inputs if v is not None}
        used.update(o for st in prog.steps for o in st.outputs)
        used.update(prog.inputs)
        used.update(prog.outputs)
        self.has_dynamic = any(arrays[v] is None for v in used)
        self.inputs = [(arrays[v], v) for v in prog.inputs]
        self.outputs = [(arrays[v], v) for v in prog.outputs]
        self.in_arrays = tuple(a for a, _ in self.inputs)
        self.out_arrays = tuple(a for a, _ in self.outputs)
        self.nodes = [s.node for s in prog.steps]
        self.kernel_of = [s.kernel for s in prog.steps]
        self.kernels = prog.kernels
        self.steps = prog.steps
        self.prog_root = prog.root
        self.prog = prog
        self.direct: dict[int, DirectIO | None] = {}   # per thread count: zero-copy I/O (``_io_direct``)
        self.patched: list = []                         # argument slots pointing at a caller's array now
        self.pools: dict[int, list] = {}                # output position -> blocks for fresh outputs
        self.plain: dict[int, bool] = {}                # per thread count: no zero-copy I/O (the short path)
        self.bound: dict[int, list] = {}
        self.runner = plan.runner
        self.merged: dict[int, tuple[list, list]] = {}

    def calls(self, nt: int) -> list:
        """The steps bound for ``nt`` threads (bound on first use)."""
        calls = self.bound.get(nt)
        if calls is None:
            calls = self.bound[nt] = [self._bind(s, nt) for s in self.steps]
        return calls

    def merged_calls(self, nt: int) -> tuple[list, list]:
        """``calls(nt)`` with runs of native steps merged (runlist.batch), and each one's first step index."""
        got = self.merged.get(nt)
        if got is None:
            got = self.merged[nt] = batch(self.calls(nt), self.runner)
        return got

    def _bind(self, st, nt: int):
        arrays, env = self.arrays, self.env
        ins = [None if v is None else arrays[v] for v in st.inputs]
        outs = [arrays[o] for o in st.outputs]
        static = all(v is None or arrays[v] is not None for v in st.inputs) and all(o is not None for o in outs)
        if static and st.impl.bind is not None:
            return st.impl.bind(ins, outs, self.scratch, nt)
        return generic_step(st, ins, outs, env, [self.dtypes[v] for v in st.outputs])

    def _call(self, calls: list, first: list) -> None:
        """Runs bound (merged) steps; a failure names the node of the step at fault (``first``: each call's first
        step index)."""
        try:
            for f in calls:
                f()
        except ConverterError:
            raise
        except Exception as e:
            raise self._step_error(first[calls.index(f)], e) from e

    def _step_error(self, step: int, e: Exception) -> ConverterError:
        """The error naming the node of step ``step`` (an index into the plan's steps), which raised ``e``."""
        return ConverterError(RET_OP_EXECUTE_FAILURE, f"{self._step_label(step)} failed: {type(e).__name__}: {e}")

    def _step_label(self, step: int) -> str:
        """``node 'n' (Op)``; for a step of a fused kernel (run natively, or one node of its inlined sub-graph)
        also the kernel and the original ONNX nodes it holds (``source_nodes``, the first ``SHOWN_SOURCES``)."""
        node = self.nodes[step]
        label = f"node {node.name!r} ({node.op})"
        entry = self.kernels[self.kernel_of[step]]
        if entry.node is not node:
            label += f" in fused kernel {entry.node.name!r}"
        sources = tuple(entry.source_nodes)
        if sources and sources != (node.name,):
            shown = ", ".join(repr(s) for s in sources[:SHOWN_SOURCES])
            more = f" and {len(sources) - SHOWN_SOURCES} more" if len(sources) > SHOWN_SOURCES else ""
            label += f" (from ONNX node{'s' if len(sources) > 1 else ''} {shown}{more})"
        return label

    def run(self, inputs: Sequence[np.ndarray], timings: list[float] | None, nt: int = 1,
            outputs: Sequence | None = None) -> list[np.ndarray]:
        """One run; ``outputs`` (per graph output: an array to write into, or None) is IO binding."""
        if timings is None and not self.has_dynamic:
            plain = self.plain.get(nt)              # no zero-copy input or output at this thread count
            if plain is None:
                plain = self.plain[nt] = self._io_direct(nt) is None
            if not plain or outputs is not None:
                return self._run_direct(self._io_direct(nt), inputs, nt, outputs)
            # the short path (every value has its buffer): no per-value checks, no loop for one input or one
            # output (mynet, one kernel: Model.run 2.0 -> 1.5 us)
            calls, first = self.merged_calls(nt)
            ia, oa = self.in_arrays, self.out_arrays
            if len(ia) == 1:
                ia[0][...] = inputs[0]
            else:
                for arr, a in zip(ia, inputs):
                    arr[...] = a
            self._call(calls, first)
            return [oa[0].copy()] if len(oa) == 1 else [a.copy() for a in oa]
        self._restore()
        env = self.env
        calls, first = self.merged_calls(nt) if timings is None else (self.calls(nt), None)
        for (arr, vid), a in zip(self.inputs, inputs):
            if arr is not None:
                arr[...] = a                           # numpy assignment casts unsafely, like copyto(unsafe)
            else:
                env[vid] = a
        k = -1
        try:
            if timings is None:
                for k, f in enumerate(calls):
                    f()
            else:
                clock, owner = time.perf_counter, self.kernel_of
                for k, f in enumerate(calls):
                    t0 = clock()
                    f()
                    timings[owner[k]] += clock() - t0
        except ConverterError:
            raise
        except Exception as e:
            raise self._step_error(k if first is None else first[k], e) from e
        out = [arr.copy() if arr is not None else fresh(env[vid]) for arr, vid in self.outputs]
        if self.has_dynamic:
            env[:] = [None] * len(env)
        if outputs is not None:
            out = [into(given, o) for given, o in zip(outputs, out)]
        return out

    # -- zero-copy I/O ------------------------------------------------------------------------------------
    def _io_direct(self, nt: int) -> DirectIO | None:
        """Which graph inputs native steps can read from the caller's array, and which outputs they can write
        straight into the array returned (see ``DirectIO``); None when none can (a plan of small values)."""
        if nt in self.direct:
            return self.direct[nt]
        prog, calls = self.prog, self.calls(nt)
        readers: dict[int, list | None] = {}
        writers: dict[int, list | None] = {}
        for st, f in zip(self.steps, calls):
            argv = getattr(f, "io_argv", None)
            ok = argv is not None and len(argv) == len(st.inputs) + len(st.outputs)
            for p, v in enumerate(st.inputs):
                if v is not None and readers.get(v, []) is not None:
                    readers[v] = readers.get(v, []) + [(argv, p)] if ok else None
            for k, o in enumerate(st.outputs):
                if writers.get(o, []) is not None:
                    writers[o] = writers.get(o, []) + [(argv, len(st.inputs) + k)] if ok else None
        aliased: set[int] = set()          # values whose bytes a view no step writes also reads (a Reshape)
        for vid, v in enumerate(prog.values):
            if v.base is not None and vid not in writers:
                b = v.base
                while b is not None:
                    aliased.add(b)
                    b = prog.values[b].base
        ins_pos = [vid for _, vid in self.inputs]
        outs_pos = [vid for _, vid in self.outputs]
        ins, outs = {}, {}
        for pos, (arr, vid) in enumerate(self.inputs):
            slots = readers.get(vid)
            if arr is not None and arr.nbytes >= ZERO_COPY_BYTES and slots and vid not in aliased \
                    and prog.is_buffer(vid) and ins_pos.count(vid) == 1 and vid not in outs_pos:
                ins[pos] = (tuple(slots), arr.ctypes.data)
        for pos, (arr, vid) in enumerate(self.outputs):
            w, r = writers.get(vid), readers.get(vid, [])
            if arr is not None and arr.nbytes >= ZERO_COPY_BYTES and w and len(w) == 1 and r is not None \
                    and vid not in aliased and outs_pos.count(vid) == 1 and vid not in ins_pos \
                    and prog.values[vid].const is None:
                outs[pos] = (tuple(w) + tuple(r), arr.ctypes.data)
        got = self.direct[nt] = DirectIO(ins, outs) if ins or outs else None
        return got

    def _fresh_output(self, pos: int, arr: np.ndarray) -> np.ndarray:
        """A new array for output ``pos``, 64-byte aligned: a block of this executor's pool that no caller holds
        any more (its pages are already mapped: writing fresh pages costs as much as the kernel), else a new
        one.  A returned array keeps its block alive (numpy's ``base``), so a block the caller still holds, or
        any view of it, is never handed out again."""
        pool = self.pools.setdefault(pos, [])
        for owner in pool:
            if sys.getrefcount(owner) == 3:             # the pool's list, this loop, getrefcount's argument
                break
        else:
            owner = np.empty(arr.nbytes + ALIGN, np.uint8)
            if len(pool) < POOLED_OUTPUTS:
                pool.append(owner)
        skip = (-owner.ctypes.data) % ALIGN
        return owner[skip:skip + arr.nbytes].view(arr.dtype).reshape(arr.shape)

    def _restore(self) -> None:
        """Points every argument slot a zero-copy run redirected back at its arena buffer."""
        for argv, i, addr in self.patched:
            argv[i] = addr
        self.patched = []

    def _run_direct(self, direct, inputs: Sequence, nt: int, outputs: Sequence | None) -> list:
        """The short path with zero-copy I/O: a C-contiguous, aligned input of the right dtype and shape is read
        where it is (others are copied into the arena), outputs are written straight into the
        arrays returned (fresh ones, or the caller's ``outputs``), so a run moves each byte once."""
        calls, first = self.merged_calls(nt)
        self._restore()
        patched = self.patched
        d_in = {} if direct is None else direct.ins
        d_out = {} if direct is None else direct.outs
        for pos, ((arr, _), a) in enumerate(zip(self.inputs, inputs)):
            got = d_in.get(pos)
            if got is not None and readable_in_place(a, arr):
                addr = a.ctypes.data
                for argv, i in got[0]:
                    argv[i] = addr
                    patched.append((argv, i, got[1]))
            else:
                arr[...] = a
        results: list = [None] * len(self.outputs)
        for pos, (arr, _) in enumerate(self.outputs):
            got = d_out.get(pos)
            if got is None:
                continue
            given = None if outputs is None else outputs[pos]
            if given is not None and not (readable_in_place(given, arr) and given.flags.writeable and
                                          not any(np.may_share_memory(given, a) for a in inputs
                                                  if isinstance(a, np.ndarray))):
                continue                                # written into the caller's array by a copy below
            o = given if given is not None else self._fresh_output(pos, arr)
            addr = o.ctypes.data
            for argv, i in got[0]:
                argv[i] = addr
                patched.append((argv, i, got[1]))
            results[pos] = o
        self._call(calls, first)
        out = []
        for pos, ((arr, _), r) in enumerate(zip(self.outputs, results)):
            given = None if outputs is None else outputs[pos]
            if r is None:
                r = arr.copy() if given is None else into(given, arr)
            out.append(r)
        return out


    def _output_index(self) -> dict[int, int]:
        got = getattr(self, "_out_ids", None)
        if got is None:
            got = self._out_ids = {id(a): k for k, a in enumerate(self.out_arrays) if a is not None}
            self._clobber: dict = {}
            read = {r for v in [v for st in self.steps for v in st.inputs] + [v for _, v in self.outputs]
                    if v is not None for r in (v, self.prog_root(v))}
            # the inputs a body run must feed: dynamic ones always (their cell is cleared after each run),
            # buffers only when some step or output reads them (a Loop body often ignores the iteration number)
            self._feeds = [(i, arr, vid) for i, (arr, vid) in enumerate(self.inputs) if arr is None or vid in read]
        return got

    def _clobbers(self, k: int, i: int, last: int) -> bool:
        """Whether copying output ``k`` into input ``i`` can read bytes that copying another input overwrites
        (the arena reuses an input's buffer for a later value): then output ``k`` is read out first."""
        hit = self._clobber.get((k, i, last))
        if hit is None:
            src = self.out_arrays[k]
            hit = any(arr is not None and np.may_share_memory(src, arr) and not (j == i and arr is src)
                      for j, (arr, _) in enumerate(self.inputs[:last]))
            self._clobber[(k, i, last)] = hit
        return hit

    def fixed_buffers(self) -> tuple[list, list] | None:
        """(the arena buffer of each graph input a step reads, None for one none reads; the buffer of each graph
        output) when every value has a fixed buffer (a body of static shapes), else None: a Loop then runs its
        iterations on them directly (runtime/control_flow.py)."""
        if self.has_dynamic or any(arr is None for arr, _ in self.outputs):
            return None
        self._output_index()
        fed = {i: arr for i, arr, _ in self._feeds}
        if any(arr is None for arr in fed.values()):
            return None
        return [fed.get(i) for i in range(len(self.inputs))], [arr for arr, _ in self.outputs]

    def run_in_place(self, inputs: Sequence, nt: int, keep: int = 0) -> list:
        """One body run for control flow (runtime/control_flow.py): like ``run`` but the last ``keep`` inputs
        are not copied again (the caller fed the same values to this executor's previous run: a Loop's captured
        values), and the outputs are this executor's own buffers, valid until its next run (the caller copies
        what it keeps: a Loop feeds carried values straight back in, one copy instead of two)."""
        self._restore()
        env = self.env
        calls, first = self.merged_calls(nt)
        last = len(self.inputs) - keep
        own = self._output_index()
        # an output fed back (a carried value) is read out first when the arena put it where another input is
        # copied (an output may be a view of an input buffer): all reads before any write
        for i, arr, _ in self._feeds:
            k = own.get(id(inputs[i]))
            if k is not None and arr is not None and i < last and self._clobbers(k, i, last):
                inputs = [x.copy() if id(x) in own else x for x in inputs]
                break
        for i, arr, vid in self._feeds:
            if arr is None:
                env[vid] = inputs[i]
            elif i < last:
                arr[...] = inputs[i]
        self._call(calls, first)
        out = [arr if arr is not None else env[vid] for arr, vid in self.outputs]
        if self.has_dynamic:
            env[:] = [None] * len(env)
        return out


def _aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + ALIGN, np.uint8)
    skip = (-raw.ctypes.data) % ALIGN
    return raw[skip:skip + nbytes]
