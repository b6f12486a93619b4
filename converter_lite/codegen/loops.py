"""Loop context managers (numba cgutils style) over i64 induction variables.

    with for_range(b, start, stop) as i:      # for (i = start; i < stop; ++i)
        ...                                   # the builder is positioned inside the body

Loops are emitted in the canonical form LLVM's loop passes expect (preheader, header with the phi and the exit
test, body, latch), so the loop vectorizer can widen the innermost loop.  ``hints`` attach loop metadata to the
latch (``llvm.loop.*`` names: True/False/int values, None for a flag without value), e.g. ``SHORT_LOOP``.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from llvmlite import ir

from .types import I64

# a short innermost loop (fewer iterations than a vector or a few vectors): widened with the tail done by masked
# loads/stores instead of being fully unrolled (which lets LLVM widen the outer loop with gathers/scatters)
SHORT_LOOP = {"llvm.loop.vectorize.predicate.enable": True, "llvm.loop.unroll.disable": None}
# the innermost loop of a nest: 4 vectors per iteration, so long dependency chains in the body (a 7x7 depthwise
# convolution sums 49 taps) of different vectors overlap instead of waiting on each other
LONG_LOOP = {"llvm.loop.interleave.count": 4}
MASKED_TAIL = 32         # contiguous loops shorter than this get a masked tail (SHORT_LOOP), longer a scalar one
# a loop the vectorizer must widen (the hand-written drivers' element loops; LLVM's cost model may leave it scalar)
VECTORIZE = {"llvm.loop.vectorize.enable": True}
# a loop of a few vectors: not fully unrolled (LLVM widens it with a scalar tail)
MID_LOOP = {"llvm.loop.unroll.disable": None}
# a short loop with stride-2 accesses (strided slices): widened even though the cost model would not
STRIDED_LOOP = {"llvm.loop.vectorize.enable": True, "llvm.loop.unroll.disable": None}


# the contiguous interior of a window (codegen/interior.py): 8 lanes with the tail masked.  Measured on
# mobilenet-sized depthwise rows (38 interior columns of 40): unmasked lanes with a scalar remainder were
# 1.3-1.6x slower; rows of at least WIDE_INTERIOR columns take 16 lanes (mobilenet_v2_half's 80-column
# windows: run -1.5%, same process)
INTERIOR_LOOP = {"llvm.loop.vectorize.enable": True, "llvm.loop.vectorize.width": 8,
                 "llvm.loop.vectorize.predicate.enable": True, "llvm.loop.unroll.disable": None}
WIDE_INTERIOR = 64
WIDE_INTERIOR_LOOP = dict(INTERIOR_LOOP, **{"llvm.loop.vectorize.width": 16})


class _LoopID(ir.values.MDValue):
    """A distinct, self-referencing loop metadata node (``distinct !{!N, !hint...}``)."""
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    def descr(self, buf):
        buf.append("distinct ")
        super().descr(buf)


def access_hints(extent: int, short: int, reduction: bool = False):
    """Hints for an innermost loop of ``extent`` iterations, chosen from the strides of its memory accesses
    along the induction variable (known once the body is emitted): all unit or zero stride -> SHORT_LOOP below
    MASKED_TAIL iterations, MID_LOOP below ``short``, LONG_LOOP from there; stride 2 (strided slices)
    in a straight-line map loop -> STRIDED_LOOP below ``short`` (forced: LLVM's cost model leaves such short
    loops scalar, and only loops sure to vectorize are forced, since a forced loop that is not vectorized makes
    LLVM print warnings); anything else (transposes: gathers either way) -> None, LLVM's own choice."""
    def choose(blocks, iv):
        strides = access_strides(blocks, iv)
        if strides <= {0, 1}:
            return SHORT_LOOP if extent < MASKED_TAIL else MID_LOOP if extent < short else LONG_LOOP
        if None not in strides and max(abs(x) for x in strides) <= 2 and extent < short and not reduction \
                and len(blocks) == 1:
            return STRIDED_LOOP
        return None
    return choose


def interior_hints(extent: int, short: int):
    """Hints of the interior loop of a window: INTERIOR_LOOP (WIDE_INTERIOR_LOOP from WIDE_INTERIOR
    iterations) when every access is unit or zero stride, else ``access_hints`` (strided: STRIDED_LOOP)."""
    other = access_hints(extent, short)
    mine = WIDE_INTERIOR_LOOP if extent >= WIDE_INTERIOR else INTERIOR_LOOP

    def choose(blocks, iv):
        return mine if access_strides(blocks, iv) <= {0, 1} else other(blocks, iv)
    return choose


def access_strides(blocks: list[ir.Block], iv: ir.Value) -> set:
    """Element strides along ``iv`` of the addresses of every load and store in ``blocks`` (None: not affine)."""
    inside = {id(blk) for blk in blocks}
    memo: dict[int, int | None] = {}

    def stride(v) -> int | None:
        if v is iv:
            return 1
        if not isinstance(v, ir.Instruction) or id(v.parent) not in inside:
            return 0                                           # constants, arguments, loop-invariant values
        if id(v) in memo:
            return memo[id(v)]
        memo[id(v)] = None
        ops = [stride(o) for o in v.operands]
        op = v.opname
        r = None
        if None in ops:
            r = None
        elif op == "add":
            r = ops[0] + ops[1]
        elif op == "sub":
            r = ops[0] - ops[1]
        elif op == "mul" and 0 in ops:
            k = 0 if ops[0] == 0 else 1                      # the factor that does not vary
            c = v.operands[k]
            r = 0 if ops == [0, 0] else (ops[1 - k] * c.constant if isinstance(c, ir.Constant) else None)
        elif op in ("sext", "zext", "trunc"):
            r = ops[0]
        elif all(x == 0 for x in ops) and op != "phi" and op != "load":
            r = 0
        memo[id(v)] = r
        return r

    out = set()
    for blk in blocks:
        for ins in blk.instructions:
            if ins.opname not in ("load", "store"):
                continue
            ptr = ins.operands[0 if ins.opname == "load" else 1]
            if isinstance(ptr, ir.Argument):
                out.add(0)
            elif isinstance(ptr, ir.GEPInstr):
                out.add(stride(ptr.indices[-1]) if all(stride(i) == 0 for i in ptr.indices[:-1]) else None)
            else:
                out.add(None if id(getattr(ptr, "parent", None)) in inside else 0)
    return out


def loop_id(module: ir.Module, hints: dict) -> ir.values.MDValue:
    """The ``llvm.loop`` metadata node of one loop carrying ``hints``."""
    ops = []
    for k, v in hints.items():
        vals = [ir.MetaDataString(module, k)]
        if v is not None:
            vals.append(ir.Constant(ir.IntType(1) if isinstance(v, bool) else ir.IntType(32), int(v)))
        ops.append(module.add_metadata(vals))
    node = _LoopID(module, ops, name=str(len(module.metadata)))
    node.operands = (node,) + node.operands
    return node


@contextlib.contextmanager
def for_range(b: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int, name: str = "i",
              hints: dict | None = None) -> Iterator[ir.Value]:
    start = ir.Constant(I64, start) if isinstance(start, int) else start
    stop = ir.Constant(I64, stop) if isinstance(stop, int) else stop
    pre = b.block
    header = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    exit_ = b.append_basic_block(f"{name}.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(I64, name=name)
    iv.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", iv, stop), body, exit_)
    b.position_at_end(body)
    yield iv
    nxt = b.add(iv, ir.Constant(I64, 1), name=f"{name}.next", flags=("nsw", "nuw"))
    iv.add_incoming(nxt, b.block)
    latch = b.branch(header)
    if callable(hints):
        blocks = b.function.blocks
        hints = hints([body] + blocks[blocks.index(exit_) + 1:], iv)
    if hints:
        latch.set_metadata("llvm.loop", loop_id(b.module, hints))
    b.position_at_end(exit_)


@contextlib.contextmanager
def loop_nest(b: ir.IRBuilder, extents: Sequence[tuple[ir.Value | int, ir.Value | int]],
              name: str = "d", inner_hints: dict | None = None) -> Iterator[list[ir.Value]]:
    """Nested loops, outermost first; ``extents[k] = (start, stop)`` of dimension k. Yields the coordinates.
    ``inner_hints``: loop metadata of the innermost loop (or a function of the loop's blocks and induction
    variable giving it, e.g. ``access_hints``)."""
    last = len(extents) - 1
    with contextlib.ExitStack() as stack:
        coords = [stack.enter_context(for_range(b, lo, hi, f"{name}{k}", inner_hints if k == last else None))
                  for k, (lo, hi) in enumerate(extents)]
        yield coords
