"""Constant Pad writing into the plan's output buffer with few numpy calls.

Let ``k`` be the innermost axis with any padding.  In the input, each index over the axes before ``k`` owns one
contiguous *run* (its slice along ``k`` and every inner axis); in the output that run is contiguous too, at a
fixed stride.  The interior is copied run by run (runs.py: one memcpy per run instead of one numpy
inner-loop call per row of the innermost axis).  The padding is the slabs outside the interior along each padded axis, one ``fill`` each
(a void fill broadcasting one item is slower than numpy's strided fill); every run refills them (the output's
bytes may hold other values between runs: the arena shares them).
All-zero pads are a view (no step); other Pad modes are precomputed gathers (fast_gather.py).
"""
from __future__ import annotations

from ..ops.registry import KernelError
from ..ops.tensor_pad import pad_amounts
from .fast_gather import PAD_GATHER
from .lowering import Impl, NodeCtx, ViewOf
from .runs import run_copy


def constant_pad(ctx: NodeCtx):
    x, y = ctx.value(0), ctx.out()
    if ctx.attrs.get("mode", "constant") != "constant":
        return PAD_GATHER(ctx)
    if ctx.const(1) is None or y.dtype != x.dtype:
        return None
    if (ctx.value(2) is not None and ctx.const(2) is None) or (ctx.value(3) is not None and ctx.const(3) is None):
        return None
    try:
        amounts = pad_amounts(len(x.shape), ctx.const(1), ctx.const(3))
    except KernelError:
        return None
    if min(min(a) for a in amounts) < 0:
        return None
    if all(a == (0, 0) for a in amounts):
        return ViewOf(((0, 0),))
    cv = ctx.const(2)
    value = 0 if cv is None or cv.size == 0 else cv.reshape(-1)[0].item()
    if y.dtype.kind in "OUSV" or tuple(d + b + e for d, (b, e) in zip(x.shape, amounts)) != y.shape:
        return None
    k = max(ax for ax, a in enumerate(amounts) if a != (0, 0))
    inner = tuple(slice(b, b + d) for (b, _), d in zip(amounts, x.shape))

    def bind(ins, outs, ws, nt=1):
        o = outs[0]
        copy = run_copy(o[inner], ins[0])
        fills = []
        for ax, (b, e) in enumerate(amounts[:k + 1]):   # slabs outside the interior along each padded axis
            pre = inner[:ax]
            if b:
                fills.append(o[pre + (slice(0, b),)])
            if e:
                fills.append(o[pre + (slice(o.shape[ax] - e, None),)])

        def run():
            for s in fills:
                s.fill(value)
            copy()
        return run
    return Impl(bind=bind)

