"""Which hand-written native driver each node may run on: decided here, at conversion, and recorded in the
graph the ``.ms`` stores (node attribute ``native_drivers``: driver symbols).  The runtime binds a node only to
drivers recorded on it (runtime/program.py ``NodeCtx.native``), and the build links exactly the union of the
recorded drivers (plus those every native model needs, the step runner), so a ``.ms`` carries only the driver
code its graph uses.

The choice is each driver's ``select(node)`` in kernels/*/abi.py (kernels/registry.py): op, dtypes, shapes,
constant weights, attributes.  Where the better of two drivers depends on the host (the pointwise or the direct
convolution, by vector width), both are recorded and the binder picks at load.  Nodes inside fused kernels are
visited too: a fused kernel the code generator cannot lower runs its sub-graph node by node.  A node whose shapes
are known only at run time (a model with dynamic input dims) records every driver that serves its op
(``candidates``); the runtime selects among them once the shapes are known (runtime/concretize.py).
"""
from __future__ import annotations

from ..ir.core import Graph
from ..kernels.registry import ALWAYS, DRIVERS_ATTR, candidates, select


def select_drivers(graph: Graph) -> set[str]:
    """Records the drivers of every node of ``graph`` (and of its fused kernels' sub-graphs); returns their
    union (empty when no node can use one)."""
    used: set[str] = set()
    for node in graph.nodes:
        symbols = candidates(node) if _dynamic(node) else select(node)
        if symbols:
            node.attrs[DRIVERS_ATTR] = list(symbols)
            used.update(symbols)
        else:
            node.attrs.pop(DRIVERS_ATTR, None)
        sub = node.attrs.get("graph")
        if isinstance(sub, Graph):
            used |= select_drivers(sub)
    return used


def _dynamic(node) -> bool:
    return any(v is not None and v.type.is_tensor and v.type.shape is None for v in [*node.inputs, *node.outputs])


def recorded_drivers(graph: Graph) -> list[str]:
    """The drivers a converted graph's native code links: those its nodes (and its bodies' nodes) recorded,
    plus ``ALWAYS`` when there are any native kernels or drivers at all."""
    graphs = graph.all_graphs()                 # control-flow bodies link into the same shared object
    used = {d for g in graphs for d in _recorded(g)}
    if used or any(n.op == "GraphKernel" for g in graphs for n in g.nodes):
        used |= set(ALWAYS)
    return sorted(used)


def _recorded(graph: Graph):
    for node in graph.nodes:
        yield from node.attrs.get(DRIVERS_ATTR, ())
        sub = node.attrs.get("graph")
        if isinstance(sub, Graph):
            yield from _recorded(sub)
