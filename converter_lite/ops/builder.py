"""GraphBuilder: appends nodes to a graph with inferred types, so expanders and rewrites read like math.

    b = GraphBuilder(graph, insert_before=node)     # or GraphBuilder(graph) to append
    y = b.op("Mul", x, b.const(0.5))                 # -> Value, type inferred from the op table
    y = x * 0.5 + 1.0                                # BValue arithmetic does the same
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..ir.core import Graph, Node, TensorType, Value
from ..ir.dtype import DType
from .registry import DynamicShapeError, infer_dynamic, infer_types

_counter = itertools.count()


def fresh_name(prefix: str) -> str:
    return f"{prefix}_{next(_counter)}"


class GraphBuilder:
    def __init__(self, graph: Graph, insert_before: Node | None = None, name_prefix: str = "b",
                 dynamic: bool = False):
        self.graph = graph
        self.prefix = name_prefix
        self.dynamic = dynamic        # nodes of dynamic-shape inputs get shape=None outputs instead of failing
        self.new_nodes: list[Node] = []
        self._pos = graph.nodes.index(insert_before) if insert_before is not None else None

    # -- values ------------------------------------------------------------------------------------------
    def const(self, value: Any, dtype: DType | np.dtype | None = None) -> Value:
        arr = np.asarray(value, dtype=dtype.np if isinstance(dtype, DType) else dtype)
        return Value(fresh_name(self.prefix + "_const"), const=arr)

    def const_like(self, value: Any, like: Value) -> Value:
        """A scalar constant with ``like``'s dtype (broadcasts against it)."""
        return self.const(value, like.type.dtype)

    # -- nodes -------------------------------------------------------------------------------------------
    def node(self, op: str, *inputs: Value | None, n_outputs: int = 1, name: str | None = None,
             **attrs: Any) -> Node:

        ins = [self._value(v) for v in inputs]
        outs = [Value(fresh_name(self.prefix)) for _ in range(n_outputs)]
        node = Node(op, ins, outs, attrs, name=name or fresh_name(f"{self.prefix}_{op}"))
        try:
            types = infer_types(node)
        except DynamicShapeError:
            if not self.dynamic:
                raise
            types = infer_dynamic(node)
        for o, t in zip(outs, types):
            o.type = t
        if self._pos is None:
            self.graph.nodes.append(node)
        else:
            self.graph.nodes.insert(self._pos, node)
            self._pos += 1
        self.new_nodes.append(node)
        return node

    def op(self, op: str, *inputs: Value | None, **attrs: Any) -> "BValue":
        return BValue.wrap(self, self.node(op, *inputs, **attrs).outputs[0])

    def _value(self, v):
        if v is None or isinstance(v, Value):
            return v
        if isinstance(v, BValue):
            return v.v
        return self.const(v)

    def wrap(self, v: Value) -> "BValue":
        return BValue.wrap(self, v)


class BValue:
    """A ``Value`` handle with arithmetic operators that emit nodes through its builder.

    Python scalars are turned into constants of the other operand's dtype.
    """
    __slots__ = ("b", "v")

    def __init__(self, b: GraphBuilder, v: Value):
        self.b, self.v = b, v

    @staticmethod
    def wrap(b: GraphBuilder, v: Value) -> "BValue":
        return BValue(b, v)

    @property
    def type(self) -> TensorType:
        return self.v.type

    @property
    def shape(self) -> tuple[int, ...]:
        return self.v.type.shape

    @property
    def dtype(self) -> DType:
        return self.v.type.dtype

    def _other(self, x) -> Value:
        if isinstance(x, BValue):
            return x.v
        if isinstance(x, Value):
            return x
        return self.b.const(x, self.v.type.dtype)

    def _bin(self, op, x, reverse=False):
        a, c = self.v, self._other(x)
        if reverse:
            a, c = c, a
        return self.b.op(op, a, c)

    def __add__(self, x): return self._bin("Add", x)
    def __radd__(self, x): return self._bin("Add", x, True)
    def __sub__(self, x): return self._bin("Sub", x)
    def __rsub__(self, x): return self._bin("Sub", x, True)
    def __mul__(self, x): return self._bin("Mul", x)
    def __rmul__(self, x): return self._bin("Mul", x, True)
    def __truediv__(self, x): return self._bin("Div", x)
    def __rtruediv__(self, x): return self._bin("Div", x, True)
    def __pow__(self, x): return self._bin("Pow", x)
    def __neg__(self): return self.b.op("Neg", self.v)


def unwrap(v) -> Value:
    return v.v if isinstance(v, BValue) else v
