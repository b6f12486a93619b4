"""The graph IR: typed SSA values, nodes with typed attributes, graphs.

* ``TensorType`` is a dtype plus a static shape (every dim a non-negative int; the importer fixes dynamic
  dims before anything else sees the graph).  Its ``kind`` says what the value is at run time: a tensor, a
  sequence of tensors of that dtype (a Python list), an optional tensor or sequence (the value or None);
  values of the other kinds have no shape, so every pass treats them like dynamic tensors.
* ``Value`` is produced by exactly one node, or is a graph input, or is a constant (``value.const`` holds
  its numpy data).  ``value.uses`` lists ``(node, input_index)`` pairs and is kept up to date by ``Node``.
* ``Node.op`` names the operation.  Op semantics are those of the newest ONNX opset for that op type (the
  importer upgrades older forms), plus the converter's own ops (``GraphKernel`` and friends) registered in
  ``converter_lite.ops``.  Attributes are plain typed Python values: int, float, str, tuple of those,
  numpy arrays, or a nested ``Graph``: a fused kernel's sub-graph, or a control-flow body (If/Loop/Scan/
  SequenceMap, see ``Graph.bodies``).  A body reads outer values only through its node's inputs (the importer
  makes every outer-scope reference an explicit input), so each body is a self-contained graph.
* ``Graph.nodes`` is kept in topological order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from .dtype import DType


@dataclass(frozen=True)
class TensorType:
    """dtype + static shape.  ``shape`` is None only for a *dynamic* value: one whose shape depends on data
    known at run time (e.g. Reshape to a shape fed as a graph input).  Dynamic values are run by the reference
    kernels and never fused; everything else in the IR is static."""
    dtype: DType
    shape: tuple[int, ...] | None
    kind: str = "tensor"        # one of KINDS

    @property
    def is_static(self) -> bool:
        return self.shape is not None

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        if self.shape is None:
            raise ValueError("size of a dynamic-shape value is not known before run time")
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        if self.kind != "tensor":
            return f"{self.kind}({self.dtype.short})"
        if self.shape is None:
            return f"{self.dtype.short}[?]"
        return f"{self.dtype.short}[{','.join(map(str, self.shape))}]"

    @staticmethod
    def of(array: np.ndarray) -> "TensorType":
        return TensorType(DType.from_np(array.dtype), tuple(int(d) for d in array.shape))


# run-time kinds of values: a tensor (ndarray), a sequence (list of ndarrays), an optional tensor/sequence
KINDS = ("tensor", "sequence", "optional", "optional_sequence")


def sequence_of(dtype: DType) -> TensorType:
    return TensorType(dtype, None, "sequence")


class Value:
    __slots__ = ("name", "type", "producer", "index", "uses", "const")

    def __init__(self, name: str, type: TensorType | None = None, const: np.ndarray | None = None):
        self.name = name
        self.type = type if type is not None or const is None else TensorType.of(const)
        self.producer: Node | None = None
        self.index = 0
        self.uses: list[tuple[Node, int]] = []
        self.const = const

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    def __repr__(self) -> str:
        return f"%{self.name}:{self.type}"


class Node:
    __slots__ = ("op", "name", "inputs", "outputs", "attrs")

    def __init__(self, op: str, inputs: Iterable[Value | None], outputs: Iterable[Value], attrs: dict | None = None,
                 name: str = ""):
        self.op = op
        self.name = name
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.inputs: list[Value | None] = list(inputs)
        self.outputs: list[Value] = list(outputs)
        for i, o in enumerate(self.outputs):
            o.producer, o.index = self, i
        for i, v in enumerate(self.inputs):              # (add_input's work, without a call per input)
            if v is not None:
                v.uses.append((self, i))

    def add_input(self, v: Value | None) -> None:
        self.inputs.append(v)
        if v is not None:
            v.uses.append((self, len(self.inputs) - 1))

    def set_input(self, i: int, v: Value | None) -> None:
        old = self.inputs[i]
        if old is not None:
            old.uses.remove((self, i))
        self.inputs[i] = v
        if v is not None:
            v.uses.append((self, i))

    def detach(self) -> None:
        """Drops this node's uses of its inputs (call when removing the node)."""
        for i, v in enumerate(self.inputs):
            if v is not None:
                v.uses.remove((self, i))
        self.inputs = [None] * len(self.inputs)

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    @property
    def output(self) -> Value:
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.name!r})"


class Graph:
    """An ordered list of nodes with named inputs and outputs."""

    def __init__(self, name: str = "main", inputs: list[Value] | None = None, outputs: list[Value] | None = None,
                 nodes: list[Node] | None = None):
        self.name = name
        self.inputs: list[Value] = list(inputs or [])
        self.outputs: list[Value] = list(outputs or [])
        self.nodes: list[Node] = list(nodes or [])
        self.metadata: dict[str, str] = {}

    # -- queries -----------------------------------------------------------------------------------------
    def constants(self) -> list[Value]:
        """Constant values used by nodes or returned as outputs, in first-use order (deduplicated)."""
        seen: dict[int, Value] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v is not None and v.is_const and id(v) not in seen:
                    seen[id(v)] = v
        for v in self.outputs:
            if v.is_const and id(v) not in seen:
                seen[id(v)] = v
        return list(seen.values())

    def values(self) -> list[Value]:
        out = list(self.inputs) + self.constants()
        for n in self.nodes:
            out.extend(n.outputs)
        return out

    def bodies(self) -> list["Graph"]:
        """The control-flow bodies of this graph's nodes (If branches, Loop/Scan/SequenceMap bodies), not nested
        further and not fused kernels' sub-graphs."""
        return [a for n in self.nodes if n.op != "GraphKernel" for a in n.attrs.values() if isinstance(a, Graph)]

    def all_graphs(self) -> list["Graph"]:
        """This graph and every control-flow body below it, outermost first."""
        out, todo = [], [self]
        while todo:
            g = todo.pop(0)
            out.append(g)
            todo.extend(g.bodies())
        return out

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    # -- edits -------------------------------------------------------------------------------------------
    def replace_all_uses(self, old: Value, new: Value) -> None:
        for node, i in list(old.uses):
            node.set_input(i, new)
        self.outputs = [new if o is old else o for o in self.outputs]

    def remove_node(self, node: Node) -> None:
        node.detach()
        self.nodes.remove(node)

    def toposort(self) -> None:
        """Re-orders nodes topologically (stable for an already ordered graph).  Raises on a cycle."""
        produced_by = {id(o): n for n in self.nodes for o in n.outputs}
        order: list[Node] = []
        state: dict[int, int] = {}
        for root in self.nodes:
            if id(root) in state:
                continue
            stack = [(root, 0)]
            while stack:
                node, i = stack.pop()
                if i == 0:
                    if state.get(id(node)) == 2:
                        continue
                    state[id(node)] = 1
                deps = [produced_by.get(id(v)) for v in node.inputs if v is not None]
                deps = [d for d in deps if d is not None]
                if i < len(deps):
                    stack.append((node, i + 1))
                    d = deps[i]
                    s = state.get(id(d))
                    if s == 1:
                        raise ValueError(f"graph {self.name!r} has a cycle through node {d.name!r} ({d.op})")
                    if s is None:
                        stack.append((d, 0))
                else:
                    state[id(node)] = 2
                    order.append(node)
        self.nodes = order
