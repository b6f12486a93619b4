"""Test-only helpers for the graph-kernel config/pass-manager/IR tests: tiny ops registered under unique
names (so these tests do not depend on the real op modules) and small graphs built with GraphBuilder."""
from __future__ import annotations

import numpy as np

import converter_lite.ops  # noqa: F401  (registers GraphKernel and the real ops)
from converter_lite.ops.builder import GraphBuilder
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import OPS, OpKind, infer_broadcast, infer_same, reference

F32 = DType.float32


def _register(name, fn, infer):
    if name not in OPS:
        reference(name, kind=OpKind.ELEMWISE, infer=infer)(fn)


_register("TestAdd", lambda attrs, a, b: np.add(a, b), infer_broadcast)
_register("TestMul", lambda attrs, a, b: np.multiply(a, b), infer_broadcast)
_register("TestRelu", lambda attrs, a: np.maximum(a, 0), infer_same)


def inputs(graph: Graph, *specs: tuple[str, tuple[int, ...]]) -> list[Value]:
    vals = [Value(name, TensorType(F32, shape)) for name, shape in specs]
    graph.inputs.extend(vals)
    return vals


def mul_add_relu(shape=(2, 3)) -> Graph:
    """y = TestRelu(TestAdd(TestMul(x, w), 1.0)), w constant."""
    g = Graph("mul_add_relu")
    (x,) = inputs(g, ("x", shape))
    b = GraphBuilder(g, name_prefix="t")
    w = b.const(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
    m = b.op("TestMul", x, w, name="mul")
    a = b.op("TestAdd", m, b.const(np.float32(1.0)), name="add")
    r = b.op("TestRelu", a, name="relu")
    g.outputs = [r.v]
    return g


def fuse_all(graph: Graph, kernel_name: str = "fused_0") -> Node:
    """Moves every node of ``graph`` into one GraphKernel node (test stand-in for the clusterer)."""
    sub = Graph(kernel_name)
    mapping: dict[int, Value] = {}
    outer_inputs = list(graph.inputs)
    for v in outer_inputs:
        mapping[id(v)] = Value(v.name + "_in", v.type)
        sub.inputs.append(mapping[id(v)])
    for n in graph.nodes:
        outs = [Value(o.name + "_in", o.type) for o in n.outputs]
        for o, new in zip(n.outputs, outs):
            mapping[id(o)] = new
        sub.nodes.append(Node(n.op, [mapping.get(id(v), v) if v is not None else None for v in n.inputs], outs,
                              n.attrs, n.name))
    sub.outputs = [mapping[id(v)] for v in graph.outputs]
    for n in list(graph.nodes):
        graph.remove_node(n)
    new_outs = [Value(f"{kernel_name}_out{i}", v.type) for i, v in enumerate(graph.outputs)]
    node = Node("GraphKernel", outer_inputs, new_outs,
                {"graph": sub, "kernel_name": kernel_name,
                 "source_nodes": tuple(n.name for n in sub.nodes)}, name=kernel_name)
    graph.nodes.append(node)
    graph.outputs = new_outs
    return node
