"""ReduceSum, ReduceMean, ReduceMax and ReduceMin on float32/float64 writing into the plan's buffers, with the
reference kernels' numpy calls (``ops/reduce.py``: ``np.sum``/``np.max``/``np.min`` with keepdims, then the
division by the count for a mean), so results are bit-identical.

A static model fuses its reductions into native kernels; these run the ones left as nodes: in a model with
dynamic dims planned per shape (its If branches included), where the reference kernel's axis checks and
reshapes cost more than the reduction (openWakeWord's silero VAD: three ReduceMeans of 64-129 values a call).
"""
from __future__ import annotations

import math

import numpy as np

from ...ops.reduce import reduce_axes, reduced_shape
from ...ops.registry import KernelError
from ..program import Impl, NodeCtx

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# the ufunc reductions np.sum/np.max/np.min call, without their Python wrappers (~1.5 us a call)
REDUCE = {"ReduceSum": np.add.reduce, "ReduceMean": np.add.reduce, "ReduceMax": np.maximum.reduce,
          "ReduceMin": np.minimum.reduce}


def _reduce(op: str):
    fn = REDUCE[op]

    def factory(ctx: NodeCtx):
        x = ctx.value(0)
        if x is None or x.dtype not in FLOATS or ctx.out().dtype != x.dtype or 0 in x.shape:
            return None
        if ctx.value(1) is not None and ctx.const(1) is None:
            return None                                # axes computed at run time
        try:
            ax = reduce_axes(len(x.shape), ctx.const(1) if ctx.value(1) is not None else None,
                             ctx.attrs.get("noop_with_empty_axes", 0))
        except KernelError:
            return None
        keep = tuple(1 if i in ax else d for i, d in enumerate(x.shape))
        if not ax or ctx.out().shape != reduced_shape(x.shape, ax, ctx.attrs.get("keepdims", 1)):
            return None
        n = max(math.prod(x.shape[a] for a in ax), 1)
        summing = op in ("ReduceSum", "ReduceMean")
        initial = None if summing else (-np.inf if op == "ReduceMax" else np.inf)
        count = np.array(n, x.dtype)           # the reference divides by the int n: the same float division

        def bind(ins, outs, ws, nt=1):
            xi, o = ins[0], outs[0].reshape(keep)
            divide = np.divide
            if op == "ReduceMean":
                def run():
                    fn(xi, ax, x.dtype, o, True)
                    divide(o, count, o)
            elif summing:
                def run():
                    fn(xi, ax, x.dtype, o, True)
            else:
                def run():
                    fn(xi, ax, None, o, True, initial)
            return run
        return Impl(bind=bind)
    return factory


REDUCE_FAST = {op: _reduce(op) for op in REDUCE}
