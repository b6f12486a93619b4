"""Epilogue fusion of the native convolution drivers (conv_tiles, conv_direct, conv_pointwise,
conv_depthwise): a fused kernel right after the Conv, sole reader of its output, that is an optional
``Add(conv, r)`` (``r`` computed before, same shape and dtype) followed by clamps (``Relu``, ``Max``/``Min`` with
a constant, ``Clip`` with constant bounds) runs in the driver's epilogue instead; ``r`` becomes an extra last
input of the step.  The driver records carry ``residual``, ``clamp``, ``lo`` and ``hi`` for it."""
from __future__ import annotations

import math

import numpy as np

EPILOGUE_ATTR = "conv_epilogue"    # on a fused kernel the converter folded into the Conv before it (passes/)


class EpilogueHook:
    """The ``Impl.epilogue`` hook of the native convolution drivers (conv_tiles, conv_direct, conv_pointwise,
    conv_depthwise): ``clamp`` ((lo, hi) or None) and ``residual`` (an extra last input) are applied in the
    driver's epilogue."""
    clamp, residual = None, False

    def epilogue(self, clamp, residual) -> tuple | None:
        """Takes over the fused kernel the converter recorded as this Conv's epilogue: ``clamp`` (lo, hi) or
        None, ``residual`` the value id added before it or None; returns the extra inputs of the step, or None
        when an epilogue was taken already."""
        if self.clamp is not None or self.residual:
            return None
        self.clamp = None if clamp is None else (float(clamp[0]), float(clamp[1]))
        self.residual = residual is not None
        return () if residual is None else (residual,)


def _scalar(v):
    """The float value of a one-element constant, else None."""
    if v is None or v.const is None or np.size(v.const) != 1:
        return None
    return float(np.asarray(v.const).reshape(-1)[0])


def _bound(node, cur, lo: float, hi: float):
    """(lo, hi) after applying ``node`` (Relu, Max/Min with a constant, Clip with constant bounds) to the value
    ``cur`` clamped to [lo, hi]; None for any other node.  ``min(max(., lo), hi)`` composes with max/min."""
    ins = list(node.inputs)
    if node.op == "Relu" and len(ins) == 1 and ins[0] is cur:
        return max(lo, 0.0), max(hi, 0.0)
    if node.op in ("Max", "Min") and len(ins) == 2 and (ins[0] is cur) != (ins[1] is cur):
        c = _scalar(ins[1] if ins[0] is cur else ins[0])
        if c is None or math.isnan(c):
            return None
        return (max(lo, c), max(hi, c)) if node.op == "Max" else (lo, min(hi, c))
    if node.op == "Clip" and ins and ins[0] is cur and not (set(node.attrs) & {"min", "max"}):
        cl = [_scalar(v) if v is not None else None for v in (ins + [None, None])[1:3]]
        if any(v is not None and v.const is None for v in ins[1:]) or any(x is not None and math.isnan(x) for x in cl):
            return None
        lo, hi = (lo, hi) if cl[0] is None else (max(lo, cl[0]), max(hi, cl[0]))
        return (lo, hi) if cl[1] is None else (lo, min(hi, cl[1]))
    return None


def match_epilogue(graph, host: int, residual_ok) -> tuple | None:
    """``(clamp, residual)`` when fused sub-graph ``graph`` is an optional ``Add(x, r)`` of its input ``host``
    (the Conv's output) and another input ``r`` (``residual_ok(position)`` says whether it may be read by the
    driver: computed, same shape and dtype) followed by clamps (Relu, Max/Min with a constant, Clip with
    constant bounds), at least one node; ``clamp`` is (lo, hi) or None, ``residual`` r's input position or None.
    Else None."""
    if graph is None or len(graph.outputs) != 1 or not graph.nodes or not 0 <= host < len(graph.inputs):
        return None
    pos = {id(v): i for i, v in enumerate(graph.inputs)}
    cur, residual, bounds = graph.inputs[host], None, None
    for k, n in enumerate(graph.nodes):
        if len(n.outputs) != 1:
            return None
        others = [v for v in n.inputs if v is not cur]
        if n.op == "Add" and k == 0 and len(n.inputs) == 2 and len(others) == 1 and id(others[0]) in pos:
            r = pos[id(others[0])]
            if r == host or not residual_ok(r):
                return None
            residual = r
        else:
            bounds = _bound(n, cur, *(bounds or (-np.inf, np.inf)))
            if bounds is None:
                return None
        cur = n.outputs[0]
    return (bounds, residual) if cur is graph.outputs[0] else None
