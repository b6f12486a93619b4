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
REDUCE = {"ReduceSum": np.sum, "ReduceMean": np.sum, "ReduceMax": np.max, "ReduceMin": np.min}


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
        kw = {"dtype": x.dtype} if fn is np.sum else {"initial": -np.inf if fn is np.max else np.inf}

        def bind(ins, outs, ws, nt=1):
            xi, o = ins[0], outs[0].reshape(keep)
            if op == "ReduceMean":
                def run():
                    fn(xi, axis=ax, keepdims=True, out=o, **kw)
                    np.divide(o, n, out=o)
            else:
                def run():
                    fn(xi, axis=ax, keepdims=True, out=o, **kw)
            return run
        return Impl(bind=bind)
    return factory


REDUCE_FAST = {op: _reduce(op) for op in REDUCE}
