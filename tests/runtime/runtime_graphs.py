"""Small IR graphs shared by the runtime and benchmark tests (built directly with converter_lite.ir)."""
from __future__ import annotations

import numpy as np

from converter_lite.ir import DType, Graph, Node, TensorType, Value
from converter_lite.ops.builder import GraphBuilder


def f32(name, *shape):
    return Value(name, TensorType(DType.float32, tuple(shape)))


def chain_graph() -> Graph:
    """x:f32[2,3], n:i64[3] -> relu(x * 2 + 1) -> out, (x * 2 + 1) -> mid, n + 1 -> n1."""
    x = f32("x", 2, 3)
    n = Value("n", TensorType(DType.int64, (3,)))
    g = Graph("chain", [x, n])
    b = GraphBuilder(g)
    mid = b.wrap(x) * 2.0 + 1.0
    out = b.op("Relu", mid.v)
    n1 = b.wrap(n) + 1
    out.v.name, mid.v.name, n1.v.name = "out", "mid", "n1"
    g.outputs = [out.v, mid.v, n1.v]
    return g


def fused_graph() -> Graph:
    """x:f32[4,8], y:f32[4,8] -> GraphKernel(sub: relu(x*y + c) and x - y, with a nested GraphKernel) -> Tanh.

    Outputs: "t" = tanh(relu(x*y + c)), "d" = x - y, "w" = a constant.
    """
    ia, ib = f32("ia", 4, 8), f32("ib", 4, 8)
    inner = Graph("inner", [ia], [ib], [Node("Relu", [ia], [ib], name="relu0")])
    sx, sy, c = f32("sx", 4, 8), f32("sy", 4, 8), Value("c", const=np.full((8,), 0.5, np.float32))
    m, a, r, d = f32("m", 4, 8), f32("a", 4, 8), f32("r", 4, 8), f32("dd", 4, 8)
    sub = Graph("sub", [sx, sy], [r, d], [
        Node("Mul", [sx, sy], [m], name="mul0"),
        Node("Add", [m, c], [a], name="add0"),
        Node("GraphKernel", [a], [r], {"graph": inner, "kernel_name": "Fused_Relu_1",
                                       "source_nodes": ("relu0",)}, name="gk_inner"),
        Node("Sub", [sx, sy], [d], name="sub0"),
    ])
    x, y, k, dd, t = f32("x", 4, 8), f32("y", 4, 8), f32("k", 4, 8), f32("d", 4, 8), f32("t", 4, 8)
    w = Value("w", const=np.arange(3, dtype=np.float32))
    g = Graph("fused", [x, y], [t, dd, w], [
        Node("GraphKernel", [x, y], [k, dd], {"graph": sub, "kernel_name": "Fused_Mul_Add_Relu_Sub_0",
                                              "source_nodes": ("mul0", "add0", "relu0", "sub0")}, name="gk0"),
        Node("Tanh", [k], [t], name="tanh0"),
    ])
    return g


def fused_reference(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    return {"t": np.tanh(np.maximum(x * y + np.float32(0.5), 0)), "d": x - y, "w": np.arange(3, dtype=np.float32)}


def single_node_graph(op, inputs, attrs=None, consts=(), n_outputs=1, name="node"):
    """A graph of one ``op`` node and its feeds.  ``inputs``: arrays (None = omitted); the indices in ``consts``
    become constants, the other arrays graph inputs.  Returns (graph, feeds in graph-input order)."""
    from converter_lite.ops.registry import infer_types

    graph_inputs, values = [], []
    for i, a in enumerate(inputs):
        if a is None:
            values.append(None)
        elif i in consts:
            values.append(Value(f"c{i}", const=np.asarray(a)))
        else:
            v = Value(f"x{i}", TensorType(DType.from_np(a.dtype), tuple(a.shape)))
            values.append(v)
            graph_inputs.append((v, a))
    outs = [Value(f"y{k}") if n_outputs > 1 else Value("y") for k in range(n_outputs)]
    node = Node(op, values, outs, attrs or {}, name=name)
    for o, t in zip(outs, infer_types(node)):
        o.type = t
    return Graph("case", [v for v, _ in graph_inputs], outs, [node]), [a for _, a in graph_inputs]
