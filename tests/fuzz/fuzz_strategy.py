"""``fuzz_cases()``: the hypothesis strategy of random valid ONNX graphs (with their inputs) for the
differential fuzz test.

A case starts from one to three graph inputs (the first one float32), applies 1..``max_steps`` emitters drawn
from ``TABLE`` (the most frequent first, so failures shrink towards simple arithmetic), and declares as outputs
every result no node reads (so no node is dead) plus possibly one intermediate result that is also read inside
the graph.  Operands are drawn from every tensor made so far, which produces shared subexpressions
and diamonds; ``duplicate`` re-emits an existing node verbatim (common subexpressions for CSE).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import fuzz_ops as ops
import fuzz_shape_ops as shape_ops
import numpy as np
import onnx
import onnx.printer
from fuzz_graph import ALL, GraphMaker
from hypothesis import strategies as st

# (emitter, weight); order matters for shrinking: hypothesis shrinks sampled_from towards the first entry
WEIGHTS = [
    (ops.arith, 6), (ops.unary_float, 6), (ops.reduce, 3), (shape_ops.reshape, 2), (shape_ops.transpose, 2),
    (ops.cast, 3), (ops.where, 2), (ops.compare, 2), (ops.div, 2), (shape_ops.slice_, 2), (shape_ops.concat, 2),
    (shape_ops.expand, 2), (shape_ops.squeeze, 1), (shape_ops.unsqueeze, 2), (ops.softmax, 2),
    (ops.layer_norm, 2), (ops.clip, 2), (ops.pow_, 1), (ops.mod, 1), (ops.unary_int, 1), (ops.bitwise, 1),
    (ops.logical, 1), (ops.halve, 1), (GraphMaker.duplicate, 1),
]
TABLE = [fn for fn, w in WEIGHTS for _ in range(w)]


@dataclass
class FuzzCase:
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    loose: dict[str, bool] = field(default_factory=dict)      # output name -> compare with float16 tolerances

    @property
    def text(self) -> str:
        return onnx.printer.to_text(self.model)

    def __repr__(self) -> str:
        feeds = ", ".join(f"{k}: {v.dtype}{list(v.shape)}" for k, v in self.feeds.items())
        return f"FuzzCase(\n{self.text}\nfeeds: {feeds})"


@st.composite
def fuzz_cases(draw, max_steps: int = 10) -> FuzzCase:
    g = GraphMaker(draw, allow_empty=draw(st.integers(0, 11)) == 0)
    first = g.input("float32", g.shape(), exact=g.flag())
    for _ in range(draw(st.integers(0, 2))):
        shape = g.partner_shape(first.shape) if g.flag() else g.shape()
        g.input(g.choice(ALL), shape, exact=g.flag())
    for _ in range(draw(st.integers(1, max_steps))):
        draw(st.sampled_from(TABLE))(g)
    if not g.nodes:
        g.emit("Abs", [first], first.dtype, first.shape, first.bound, first.grid)
    used = {name for n in g.nodes for name in n.input}
    sinks = [t for t in g.node_outputs if t.name not in used]        # every node contributes to an output
    inner = [t for t in g.node_outputs if t.name in used]
    extra = draw(st.lists(st.sampled_from(inner), max_size=1)) if inner else []
    outputs = sinks + extra
    return FuzzCase(g.model(outputs), g.feeds(draw(st.integers(0, 2**32 - 1))),
                    {t.name: t.loose for t in outputs})
