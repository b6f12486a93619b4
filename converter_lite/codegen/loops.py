"""Loop context managers (numba cgutils style) over i64 induction variables.

    with for_range(b, start, stop) as i:      # for (i = start; i < stop; ++i)
        ...                                   # the builder is positioned inside the body

Loops are emitted in the canonical form LLVM's loop passes expect (preheader, header with the phi and the exit
test, body, latch), so the loop vectorizer can widen the innermost loop.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from llvmlite import ir

from .types import I64


@contextlib.contextmanager
def for_range(b: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int, name: str = "i") -> Iterator[ir.Value]:
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
    b.branch(header)
    b.position_at_end(exit_)


@contextlib.contextmanager
def loop_nest(b: ir.IRBuilder, extents: Sequence[tuple[ir.Value | int, ir.Value | int]],
              name: str = "d") -> Iterator[list[ir.Value]]:
    """Nested loops, outermost first; ``extents[k] = (start, stop)`` of dimension k. Yields the coordinates."""
    with contextlib.ExitStack() as stack:
        coords = [stack.enter_context(for_range(b, lo, hi, f"{name}{k}")) for k, (lo, hi) in enumerate(extents)]
        yield coords
