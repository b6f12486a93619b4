"""Concats written in place: the steps computing a Concat's inputs write straight into its output.

A Concat step copies its inputs into its output.  When the output holds every input as one contiguous block
(the dims before the concat axis multiply to 1: NCHW at batch 1 along channels, or any axis with only 1s before
it), each input's buffer can instead be a *view* of the output at its block's byte offset: the steps that
compute the inputs then write the concatenated result, and the Concat step is dropped.  A model converted with
fixed input shapes has its Concats fused by the converter into the kernels computing their inputs; a model
with dynamic dims knows its shapes only when a plan is made for them (shape_plans.py), so this is done on the
lowered program, before ``arena.plan_memory`` (YOLOv8n at 1x3x256x416: 18 of its 19 Concats go, 0.6 ms of
copies in a 14 ms run; the one left joins [1, 82, HW] maps along the last axis).

The rule, per Concat step, last step first (so the output of an inner Concat that feeds an outer one becomes a
view of the outer one's output before its own inputs become views of it).  The step's inputs and output are
static, of one dtype and consistent shapes, and the output has bytes.  Inputs of no bytes are skipped.  The
others are placed by their root buffer ``R`` (``Program.root``): the inputs of root ``R`` are consecutive and
cover ``R`` exactly, in order (``R`` itself, a whole-size view of it - a Reshape, the output a Conv computes
its epilogue into - or the parts of a contiguous Split of it, as in YOLO's C2f blocks), and ``R`` is

* a buffer that exactly one step writes (not a graph input, constant, dynamic value, or the output of a Concat
  already made in place, which no step writes any more);
* not a graph output, nor seen through a view that is one: zero-copy I/O (plan.py ``Executor._io_direct``)
  may point the step that writes an output at the caller's array, which would leave the Concat's block unwritten;
* used by no other Concat made in place (one owner) and once in this one;
* without a reserved tail (``PValue.tail``: bytes after it that a reader fills; inside the output they are
  the next input's).

Otherwise the copy stays.  ``R`` becomes a view of the output at its block's offset: every value read
through ``R`` now reads the output's bytes, and the arena gives the output one lifetime, from the first step
writing any of its views to the last step reading any of them (``arena.plan_memory``), so no other buffer
takes those bytes while a block is written or read.  The steps writing the blocks write disjoint bytes.
The arena's in-place rule, decided afterwards, never moves an input's producer elsewhere (a view is not a
buffer it may take over) and lets a reader overwrite a block only when nothing reads the output later.
A step writing into a block gets a C-contiguous array at an element-aligned address, not necessarily a
64-byte aligned one (as with a caller's array under zero-copy I/O, or a Slice view as an input).

Plans of control-flow bodies keep their copies (``Plan(inner=True)``): their outputs and inputs are buffers
the caller reuses between body runs.
"""
from __future__ import annotations

import math

from ..ops.registry import KernelError, normalize_axis
from .program import Program, drop_unused_kernels


def concat_views(prog: Program) -> int:
    """Makes the inputs of every Concat step that qualifies (see the module doc) views of its output and drops
    the step; returns how many were dropped."""
    writers: dict[int, int] = {}
    for st in prog.steps:
        for o in st.outputs:
            writers[o] = writers.get(o, 0) + 1
    # roots the graph's inputs and outputs see (taken before any change: an output's root stays protected
    # when it becomes a view)
    fixed = {prog.root(v) for v in prog.inputs} | {prog.root(v) for v in prog.outputs}
    dropped = set()
    for k in range(len(prog.steps) - 1, -1, -1):
        st = prog.steps[k]
        if st.node.op != "Concat" or len(st.outputs) != 1:
            continue
        blocks = _blocks(prog, st)
        if blocks is None:
            continue
        out = prog.root(st.outputs[0])
        # an input another Concat already owns resolves to that Concat's output, which no step writes any more
        if any(r == out or r in fixed or writers.get(r, 0) != 1 or prog.values[r].tail for r, _ in blocks):
            continue
        for r, off in blocks:
            prog.make_view(r, st.outputs[0], off)
        writers[st.outputs[0]] -= 1
        dropped.add(k)
    if dropped:
        prog.steps = [st for k, st in enumerate(prog.steps) if k not in dropped]
        drop_unused_kernels(prog)
    return len(dropped)


def _blocks(prog: Program, st) -> list[tuple[int, int]] | None:
    """(root buffer, byte offset in the output) per block of the Concat step ``st``'s inputs, when the output
    holds each input contiguously and each block is one root covered exactly by consecutive inputs; else None."""
    values = prog.values
    out = values[st.outputs[0]]
    ins = [v for v in st.inputs if v is not None]
    if not ins or out.dynamic or out.const is not None or not out.nbytes or "axis" not in st.node.attrs:
        return None
    try:
        axis = normalize_axis(st.node.attrs["axis"], len(out.shape), "Concat axis")
    except KernelError:
        return None
    if math.prod(out.shape[:axis]) != 1:
        return None
    total = 0
    for v in ins:
        x = values[v]
        if x.dynamic or x.dtype != out.dtype or len(x.shape) != len(out.shape) or \
                any(a != b for j, (a, b) in enumerate(zip(x.shape, out.shape)) if j != axis):
            return None
        total += x.shape[axis]
    if total != out.shape[axis]:
        return None
    blocks: list[tuple[int, int]] = []            # (root, its block's offset in the output)
    covered = 0                                    # bytes of the last block's root its inputs covered so far
    at = 0                                         # byte offset of the next input in the output
    for v in ins:
        x = values[v]
        if not x.nbytes:
            continue
        r = prog.root(v)
        if r is None:                              # a constant (or a view of one)
            return None
        if blocks and blocks[-1][0] == r and prog.root_offset(v) == covered:
            covered += x.nbytes                    # the next part of the same root (a Split's next output)
        else:
            if blocks and covered != values[blocks[-1][0]].nbytes or prog.root_offset(v) != 0 or \
                    any(b == r for b, _ in blocks):
                return None
            blocks.append((r, at))
            covered = x.nbytes
        at += x.nbytes
    if blocks and covered != values[blocks[-1][0]].nbytes:
        return None
    return blocks
