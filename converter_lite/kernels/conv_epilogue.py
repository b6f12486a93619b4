"""Epilogue fusion of the native convolution drivers (conv_tiles, conv_direct, conv_pointwise,
conv_depthwise): a fused kernel right after the Conv, sole reader of its output, that is an optional
``Add(conv, r)`` (``r`` computed before, same shape and dtype) followed by clamps (``Relu``, ``Max``/``Min`` with
a constant, ``Clip`` with constant bounds) or by a *gate* ``v * min(max(v * a + b, 0), 1)`` (HardSwish, as the
op or as the Mul/Add/Max/Min or Add/Clip/Div chains exporters write; conv_direct, conv_pointwise and
conv_depthwise only) runs in the driver's epilogue instead; ``r`` becomes an extra last input of the step.  The
driver records carry ``residual``, ``clamp`` (MODE_NONE/MODE_CLAMP/MODE_GATE), ``lo`` and ``hi`` (the clamp's
bounds, or the gate's a and b) for it.  HardSwish after a Conv was a kernel of its own, one more pass over the
activations: 25-40% of a PP-LCNet text-orientation classifier's time at 2 threads."""
from __future__ import annotations

import math

import numpy as np

from .native_call import float_bits

MODE_NONE, MODE_CLAMP, MODE_GATE = 0, 1, 2         # codegen/vector.py has the same values (the driver side)
EPILOGUE_ATTR = "conv_epilogue"    # on a fused kernel the converter folded into the Conv before it (passes/)


class EpilogueHook:
    """The ``Impl.epilogue`` hook of the native convolution drivers (conv_tiles, conv_direct, conv_pointwise,
    conv_depthwise): ``clamp`` ((lo, hi) or None), ``gate`` ((a, b) or None) and ``residual`` (an extra last
    input) are applied in the driver's epilogue.  ``GATE``: whether the driver computes gates."""
    clamp, residual, gate = None, False, None
    GATE = True

    def epilogue(self, clamp, residual, gate=None) -> tuple | None:
        """Takes over the fused kernel the converter recorded as this Conv's epilogue: ``clamp`` (lo, hi) or
        None, ``gate`` (a, b) or None, ``residual`` the value id added before them or None; returns the extra
        inputs of the step, or None when it cannot (an epilogue taken already, a gate it does not compute)."""
        if self.clamp is not None or self.residual or self.gate is not None:
            return None
        if gate is not None and (not self.GATE or clamp is not None):
            return None
        self.clamp = None if clamp is None else (float(clamp[0]), float(clamp[1]))
        self.gate = None if gate is None else (float(gate[0]), float(gate[1]))
        self.residual = residual is not None
        return () if residual is None else (residual,)

    def epilogue_words(self) -> dict:
        """The record words ``clamp``, ``lo`` and ``hi``."""
        mode, (lo, hi) = ((MODE_GATE, self.gate) if self.gate is not None else
                          (MODE_CLAMP, self.clamp) if self.clamp is not None else (MODE_NONE, (0.0, 0.0)))
        return {"clamp": mode, "lo": float_bits(lo), "hi": float_bits(hi)}


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
    """``(clamp, residual, gate)`` when fused sub-graph ``graph`` is an optional ``Add(x, r)`` of its input
    ``host`` (the Conv's output) and another input ``r`` (``residual_ok(position)`` says whether it may be read
    by the driver: computed, same shape and dtype) followed by clamps (Relu, Max/Min with a constant, Clip with
    constant bounds) or by a gate (``_gate``), at least one node; ``clamp`` is (lo, hi) or None, ``residual``
    r's input position or None, ``gate`` (a, b) or None.  Else None."""
    if graph is None or len(graph.outputs) != 1 or not graph.nodes or not 0 <= host < len(graph.inputs):
        return None
    pos = {id(v): i for i, v in enumerate(graph.inputs)}
    cur, residual, bounds = graph.inputs[host], None, None
    nodes = list(graph.nodes)
    for k, n in enumerate(nodes):
        if len(n.outputs) != 1:
            return None
        others = [v for v in n.inputs if v is not cur]
        if n.op == "Add" and k == 0 and len(n.inputs) == 2 and len(others) == 1 and id(others[0]) in pos:
            r = pos[id(others[0])]
            if r == host or not residual_ok(r):
                return None
            residual = r
        else:
            nb = _bound(n, cur, *(bounds or (-np.inf, np.inf)))
            if nb is None:
                if bounds is not None:
                    return None
                gate = _gate(nodes[k:], cur, graph.outputs[0])
                return None if gate is None else (None, residual, gate)
            bounds = nb
        cur = n.outputs[0]
    return (bounds, residual, None) if cur is graph.outputs[0] else None


HARD_SIGMOID = (0.2, 0.5)                    # ONNX HardSigmoid's default alpha, beta
HARD_SWISH = (1.0 / 6.0, 0.5)                # ONNX HardSwish's fixed alpha, beta


def _gate(nodes, x, out) -> tuple[float, float] | None:
    """(a, b) when ``nodes`` compute ``out = x * min(max(x * a + b, 0), 1)`` and nothing else: ``HardSwish(x)``;
    ``Mul(x, HardSigmoid(x))``; or ``Mul(x, g)`` where g is x through scalar Mul/Add/Sub/Div, then clamps
    (Relu, Max/Min, Clip), then scalar Mul/Div that map the clamp's range onto [0, 1] (x * relu6(x + 3) / 6,
    x * min(max(x / 6 + 0.5, 0), 1))."""
    if len(nodes) == 1 and nodes[0].op == "HardSwish" and list(nodes[0].inputs) == [x] and nodes[0].outputs[0] is out:
        return HARD_SWISH
    last = nodes[-1]
    if last.op != "Mul" or last.outputs[0] is not out or len(last.inputs) != 2 or sum(v is x for v in last.inputs) != 1:
        return None
    g_out = last.inputs[1] if last.inputs[0] is x else last.inputs[0]
    chain = nodes[:-1]
    if len(chain) == 1 and chain[0].op == "HardSigmoid" and list(chain[0].inputs) == [x] \
            and chain[0].outputs[0] is g_out:
        return (float(chain[0].attrs.get("alpha", HARD_SIGMOID[0])), float(chain[0].attrs.get("beta", HARD_SIGMOID[1])))
    a, b = 1.0, 0.0                          # cur = a * x + b before the clamps
    lo = hi = None
    s = 1.0                                  # g = s * clamp(cur) after them
    cur = x
    for n in chain:
        if len(n.outputs) != 1 or cur not in n.inputs:
            return None
        if lo is None:
            affine = _affine(n, cur)
            if affine is not None:
                m, c = affine
                a, b = a * m, b * m + c
                cur = n.outputs[0]
                continue
            nb = _bound(n, cur, -np.inf, np.inf)
            if nb is None:
                return None
            lo, hi = nb
        elif s == 1.0 and (nb := _bound(n, cur, lo, hi)) is not None:
            lo, hi = nb
        else:
            affine = _affine(n, cur)
            if affine is None or affine[1] != 0.0:
                return None
            s *= affine[0]
        cur = n.outputs[0]
    if cur is not g_out or lo is None or not (math.isfinite(lo) and math.isfinite(hi)) or s <= 0 or hi <= lo:
        return None
    # g = s * clamp(a x + b, lo, hi) = clamp(s a x + s b, s lo, s hi): the gate needs s lo = 0 and s hi = 1
    if abs(s * lo) > 1e-7 or abs(s * hi - 1.0) > 1e-6:
        return None
    return (s * a, s * b)


def _affine(node, cur) -> tuple[float, float] | None:
    """(m, c) when ``node`` is ``cur * m + c`` with a scalar constant (Mul, Add, Sub with cur first, Div by it)."""
    if node.op not in ("Mul", "Add", "Sub", "Div") or len(node.inputs) != 2 or \
            sum(v is cur for v in node.inputs) != 1:
        return None
    other = node.inputs[1] if node.inputs[0] is cur else node.inputs[0]
    c = _scalar(other)
    if c is None or not math.isfinite(c):
        return None
    if node.op == "Mul":
        return (c, 0.0)
    if node.op == "Add":
        return (1.0, c)
    if node.op == "Sub" and node.inputs[0] is cur:
        return (1.0, -c)
    if node.op == "Div" and node.inputs[0] is cur and c != 0.0:
        return (1.0 / c, 0.0)
    return None
