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
SHORT_LOOP = {"llvm.loop.vectorize.enable": True, "llvm.loop.vectorize.predicate.enable": True,
              "llvm.loop.unroll.disable": None}
# the innermost loop of a nest: 4 vectors per iteration, so long dependency chains in the body (a 7x7 depthwise
# convolution sums 49 taps) of different vectors overlap instead of waiting on each other
LONG_LOOP = {"llvm.loop.interleave.count": 4}
SHORT_LOOP_STRIDED = {"llvm.loop.vectorize.enable": True, "llvm.loop.unroll.disable": None}


class _LoopID(ir.values.MDValue):
    """A distinct, self-referencing loop metadata node (``distinct !{!N, !hint...}``)."""
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    def descr(self, buf):
        buf.append("distinct ")
        super().descr(buf)


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
    if hints:
        latch.set_metadata("llvm.loop", loop_id(b.module, hints))
    b.position_at_end(exit_)


@contextlib.contextmanager
def loop_nest(b: ir.IRBuilder, extents: Sequence[tuple[ir.Value | int, ir.Value | int]],
              name: str = "d", inner_hints: dict | None = None) -> Iterator[list[ir.Value]]:
    """Nested loops, outermost first; ``extents[k] = (start, stop)`` of dimension k. Yields the coordinates.
    ``inner_hints``: loop metadata of the innermost loop."""
    last = len(extents) - 1
    with contextlib.ExitStack() as stack:
        coords = [stack.enter_context(for_range(b, lo, hi, f"{name}{k}", inner_hints if k == last else None))
                  for k, (lo, hi) in enumerate(extents)]
        yield coords
