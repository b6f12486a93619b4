"""Helpers for the simplify-pass tests: small float32 graphs built with GraphBuilder, evaluated before and
after a pass."""
from __future__ import annotations

import copy

import numpy as np

import converter_lite.ops
import converter_lite.passes.pipeline  # noqa: F401  (registers every pass)
from converter_lite.config import GraphKernelConfig
from converter_lite.ops.builder import GraphBuilder
from converter_lite.ir.core import Graph, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.verify import verify
from converter_lite.passes.base import PassContext
from converter_lite.passes.registry import PASSES

F32 = DType.float32


def make_graph(build, shapes=((2, 3),) * 4, dtype=F32, name="g") -> Graph:
    """``build(b, *inputs) -> BValue | list``; inputs are named x, y, z, w."""
    g = Graph(name)
    ins = [Value(n, TensorType(dtype, s)) for n, s in zip("xyzw", shapes)]
    g.inputs = ins
    b = GraphBuilder(g, name_prefix="n")
    out = build(b, *[b.wrap(v) for v in ins])
    outs = out if isinstance(out, (list, tuple)) else [out]
    g.outputs = [getattr(o, "v", o) for o in outs]
    verify(g)
    return g


def feeds_for(graph: Graph, seed: int = 0, low: float = 0.5, high: float = 2.0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for v in graph.inputs:
        if v.type.dtype.np.kind == "f":
            out[v.name] = rng.uniform(low, high, v.type.shape).astype(v.type.dtype.np)
        else:
            out[v.name] = rng.integers(1, 5, v.type.shape).astype(v.type.dtype.np)
    return out


def ops(graph: Graph) -> list[str]:
    return sorted(n.op for n in graph.nodes)


def structure(graph: Graph) -> list:
    """A comparable description of the graph (ops, wiring by name, constants by value)."""
    def ref(v):
        if v is None:
            return None
        return ("const", v.const.tolist()) if v.is_const else v.name
    return [(n.op, [ref(v) for v in n.inputs], [o.name for o in n.outputs], sorted(n.attrs))
            for n in graph.nodes] + [[ref(v) for v in graph.outputs]]


def run_pass(name: str, graph: Graph, config: GraphKernelConfig | None = None, **config_kw) -> tuple[bool, PassContext]:
    ctx = PassContext(config=config or GraphKernelConfig(opt_level=3, **config_kw))
    changed = PASSES[name]().run(graph, ctx)
    verify(graph)
    return changed, ctx


def check_numerics(before: Graph, after: Graph, feeds: dict, rtol=1e-5, atol=1e-6) -> None:
    want = eval_graph(before, feeds)
    got = eval_graph(after, feeds)
    assert len(want) == len(got)
    for a, e in zip(got, want):
        assert a.dtype == e.dtype and a.shape == e.shape
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


def clone(graph: Graph) -> Graph:
    return copy.deepcopy(graph)
