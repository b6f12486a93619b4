"""Control-flow steps: If, Loop, Scan and SequenceMap run their bodies as plans of their own.

Each body becomes a ``Plan`` when the model loads (its own arena, native kernels, fast kernels), made by the
``subplan`` factory the plan hands down, so a body's fused kernels run native code like the main graph's.
The semantics (which branch, trip count and condition, scan axes and directions, stacking) are those of
``ops.control_flow``, written once for the reference kernels and this runtime; here a body run is one call
of its plan on an executor the node holds for the whole call (``Executor.run_in_place``): a Loop's captured
values are copied into the body's buffers once, not every iteration, and a carried value goes from the body's
output buffer straight into its input buffer (one copy); what the node returns is copied out at the end.

A Loop whose body has static shapes runs its iterations on the body's buffers directly (``_FixedLoop``): the
iteration number and condition written into their input buffers, each carried value copied from its output
buffer into its input buffer, the body's bound calls run, the scan outputs copied out; the same semantics as
``ops.control_flow.run_loop`` (whose helpers it shares) without a body run's generic feeding.  A 20-step greedy
decoder (tiny GEMMs, an ArgMax) took 14.7 us an iteration through ``run_in_place``, onnxruntime 6.5 us.
A carried value whose output buffer overlaps another input's buffer (a value passed on as another: the arena
gives an Identity's output its input's buffer) is read out before any is copied in.  An If branch of static
shapes runs the same way (``_FixedBody``): its inputs copied into its buffers, its calls, its outputs copied out.

A failure inside a body names the control-flow node and the body's node; a Loop with no trip count stops
with an error after ``max_iterations`` iterations.  Either way the model stays usable for the next call.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable

import numpy as np

from ..errors import ConverterError
from ..ir.core import Graph, Node
from ..ops.control_flow import (
    BODY_ATTRS,
    DEFAULT_MAX_ITERATIONS,
    RUNNERS,
    body_condition,
    if_branch,
    loop_bound_error,
    loop_start,
)
from .program import Impl

CONTROL_FLOW = frozenset(RUNNERS)


def control_flow_impl(node: Node, subplan: Callable[[Graph], object],
                      max_iterations: int = DEFAULT_MAX_ITERATIONS) -> Impl:
    """The step running control-flow ``node``; ``subplan(graph)`` builds a body's plan."""
    plans = {key: subplan(node.attrs[key]) for key in BODY_ATTRS[node.op]}
    runner, attrs = RUNNERS[node.op], node.attrs
    extra = {"max_iterations": max_iterations} if node.op == "Loop" else {}
    ncap = int(attrs.get("captures", 0))
    # body executor -> its _FixedLoop or _FixedBody, or None when its buffers are not all fixed
    fixed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def call(ins: list) -> list:
        if node.op == "If":
            key = if_branch(ins[0])
            branch = plans[key]
            ex = branch.acquire()
            try:
                body = fixed.get(ex, False)
                if body is False:
                    body = fixed[ex] = _FixedBody.of(ex, len(ins) - 1, branch.run_threads)
                if body is not None:
                    return body.run(ex, ins, 1)
            except ConverterError as e:
                raise ConverterError(e.code, f"If node {node.name!r}, body {key!r}: {e.message}") from None
            finally:
                branch.release(ex)
        elif node.op == "Loop":
            body = plans["body"]
            ex = body.acquire()
            try:
                ins = list(ins) + [None] * max(0, 2 - len(ins))
                n, k, limit, cond = loop_start(ins, attrs["body"], ncap)
                loop = fixed.get(ex, False)
                if loop is False:
                    loop = fixed[ex] = _FixedLoop.of(ex, len(ins), n, k, body.run_threads)
                if loop is not None:
                    return loop.run(ex, ins, limit, cond, max_iterations)
            except ConverterError as e:
                raise ConverterError(e.code, f"Loop node {node.name!r}, body 'body': {e.message}") from None
            finally:
                body.release(ex)
        held: dict = {}

        def run(key: str, body_ins: list, invariant: int = 0) -> list:
            ex = held.get(key)
            if ex is None:
                ex = held[key] = plans[key].acquire()
                invariant = 0                      # a fresh executor has none of the inputs yet
            try:
                return ex.run_in_place(body_ins, plans[key].run_threads, invariant)
            except ConverterError as e:
                raise ConverterError(e.code, f"{node.op} node {node.name!r}, body {key!r}: {e.message}") from None
        try:
            return [_owned(v) for v in runner(attrs, list(ins), run, **extra)]
        finally:
            for key, ex in held.items():
                plans[key].release(ex)
    return Impl(call=call, bodies=plans)


class _FixedBody:
    """An If branch run on one executor's own buffers (a body of static shapes): the inputs it reads copied into
    their buffers, its bound calls run, its outputs copied out; what ``Executor.run_in_place`` does, without the
    generic run's feeding and its checks for outputs fed back (an If feeds none).  The If step of vad_streaming
    (one branch: 14 native steps in one call, 20.6 us) took 23.9 us through the generic run."""

    def __init__(self, inb: list, outb: list, calls: list, first: list):
        self.feeds = [(pos, buf) for pos, buf in enumerate(inb) if buf is not None]
        self.outs, self.calls, self.first = outb, calls, first

    @classmethod
    def of(cls, ex, nins: int, nt: int) -> _FixedBody | None:
        """The branch on executor ``ex`` (``nins`` inputs), or None when its buffers are not all fixed."""
        bufs = ex.fixed_buffers()
        if bufs is None or len(bufs[0]) != nins:
            return None
        return cls(*bufs, *ex.merged_calls(nt))

    def run(self, ex, ins: list, skip: int) -> list:
        """The branch's outputs (the caller's own arrays) for the step inputs ``ins`` (the body's from ``skip``)."""
        for pos, buf in self.feeds:
            buf[...] = ins[skip + pos]
        ex._restore()
        ex._call(self.calls, self.first)
        return [a.copy() for a in self.outs]


class _FixedLoop:
    """A Loop's iterations on one body executor's own buffers (module doc), with everything those buffers imply
    worked out once per executor, not every call (they never move): which inputs a call feeds, which output
    buffer goes back into which input buffer and whether it must be read out first, the bound calls.  Worked
    out every call, that was 7 of the 21 us a call of the greedy decoder took (two iterations, 3 us each).

    Scan outputs are written into one block per scan output as the iterations go (``SCAN_START`` rows, doubled
    when full; the trip count's worth when that fits in ``SCAN_BYTES``), instead of a copy per iteration and
    ``np.stack`` at the end (3.4 us for two one-element rows)."""

    def __init__(self, inb: list, outb: list, n: int, k: int, calls: list, first: list):
        self.it, self.cd = inb[0], inb[1]
        self.feeds = [(pos, buf) for pos, buf in enumerate(inb) if pos >= 2 and buf is not None]
        self.cond_out, self.carried, self.scan_out = outb[0], outb[1:1 + n], outb[1 + n:]
        self.n = n
        # (output buffer, input buffer, whether the output is read out first: it overlaps another input's
        # buffer, which a copy before it could overwrite - a carried value passed on as another, a -> b)
        pairs = [(outb[1 + j], inb[2 + j], any(dst is not None and pos != 2 + j and
                                                np.may_share_memory(outb[1 + j], dst) for pos, dst in enumerate(inb)))
                 for j in range(n) if inb[2 + j] is not None and outb[1 + j] is not inb[2 + j]]
        self.snapshot = any(p[2] for p in pairs)
        self.pairs = pairs if self.snapshot else [(src, dst) for src, dst, _ in pairs]
        self.calls, self.first = calls, first

    @classmethod
    def of(cls, ex, nins: int, n: int, k: int, nt: int) -> _FixedLoop | None:
        """The loop on executor ``ex`` (a Loop of ``nins`` inputs, ``n`` carried values, ``k`` scan outputs), or
        None when the body's buffers are not all fixed (the generic run then)."""
        bufs = ex.fixed_buffers()
        if bufs is None or len(bufs[0]) != nins or len(bufs[1]) != 1 + n + k:
            return None
        return cls(*bufs, n, k, *ex.merged_calls(nt))

    def run(self, ex, ins: list, limit: int | None, cond: bool, max_iterations: int) -> list:
        for pos, buf in self.feeds:                     # the first carried values and the captured ones
            buf[...] = ins[pos]
        it, cond_out, pairs, calls, first, scan_out = (self.it, self.cond_out, self.pairs, self.calls, self.first,
                                                       self.scan_out)
        if cond and self.cd is not None:
            self.cd.fill(True)                          # (no step writes a body input: it stays true)
        blocks = [_scan_block(a, limit) for a in scan_out]
        ex._restore()
        stop = max_iterations if limit is None else limit
        i = 0
        while cond and i < stop:
            if it is not None:
                it.fill(i)
            if i:
                if self.snapshot:
                    for src, dst in [(src.copy() if first_out else src, dst) for src, dst, first_out in pairs]:
                        dst[...] = src
                else:
                    for src, dst in pairs:
                        dst[...] = src                 # (half np.copyto's call cost on a small array)
            ex._call(calls, first)
            cond = bool(cond_out) if cond_out.size == 1 else body_condition(cond_out)
            for j, a in enumerate(scan_out):
                if i == len(blocks[j]):
                    blocks[j] = _grown(blocks[j], limit)
                blocks[j][i] = a
            i += 1
        if cond and limit is None:
            raise loop_bound_error(max_iterations)
        carried = [a.copy() for a in self.carried] if i else [_owned(v) for v in ins[2:2 + self.n]]
        return carried + [b if i == len(b) else b[:i].copy() for b in blocks]


SCAN_START = 16                 # rows a scan output's block starts with when the trip count's do not fit ...
SCAN_BYTES = 1 << 20            # ... in this many bytes


def _scan_block(a: np.ndarray, limit: int | None) -> np.ndarray:
    """The block a Loop's scan output (body buffer ``a``) is written into: the trip count's rows when they fit in
    ``SCAN_BYTES``, else ``SCAN_START`` (at most the trip count)."""
    rows = SCAN_START if limit is None else limit if limit * a.nbytes <= SCAN_BYTES else min(limit, SCAN_START)
    return np.empty((max(rows, 0), *a.shape), a.dtype)


def _grown(block: np.ndarray, limit: int | None) -> np.ndarray:
    """``block`` with room for twice its rows (at most the trip count), its rows kept."""
    rows = max(1, 2 * len(block))
    out = np.empty((rows if limit is None else min(rows, limit), *block.shape[1:]), block.dtype)
    out[:len(block)] = block
    return out


def _owned(v):
    """``v`` as the caller's own value (a body's output buffer is copied; lists hold owned arrays already)."""
    if isinstance(v, np.ndarray) and not v.flags.owndata:
        return v.copy()
    return v


__all__ = ["CONTROL_FLOW", "control_flow_impl"]
