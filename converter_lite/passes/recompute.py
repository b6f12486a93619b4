"""``graph_kernel_recompute``: a cheap producer kernel is recomputed inside each consumer kernel, so its
result never has to be written to memory and read back (MindSpore GraphKernelRecompute / the split model's
recompute step).

A GraphKernel P is recomputed into its consumers when:

1. its sub-graph has at most ``MAX_RECOMPUTE_OPS`` ops, all elementwise or broadcast;
2. it reads one non-constant value and produces one output, which is not a graph output;
3. every user of that output is a GraphKernel;
4. the value it reads is not bigger than the value it writes (recomputing must not add memory traffic);
5. no consumer pads it (a window kernel, fuse/window.py, would recompute it for every tap).

Each consumer C becomes a kernel computing P's ops followed by C's; P is then dead and removed.
"""
from __future__ import annotations

from ..ir.core import Graph, Node
from ..ir.dce import remove_dead_nodes
from ..ops.registry import OPS, OpKind
from .base import Pass, PassContext
from .fuse.parallel_fusion import is_kernel, merge_kernels
from .registry import register_pass

MAX_RECOMPUTE_OPS = 10           # MindSpore recomputes elementwise chains of at most 10 ops


def recompute_users(graph: Graph, p: Node) -> list[Node]:
    """The consumer kernels P can be recomputed into (empty if P does not qualify)."""
    if not is_kernel(p) or len(p.outputs) != 1:
        return []
    sub = p.attrs["graph"]
    if not 0 < len(sub.nodes) <= MAX_RECOMPUTE_OPS:
        return []
    if any(n.op not in OPS or OPS[n.op].kind > OpKind.BROADCAST for n in sub.nodes):
        return []
    reads = {id(v): v for v in p.inputs if v is not None and not v.is_const}
    out = p.outputs[0]
    if len(reads) != 1 or not out.uses or any(o is out for o in graph.outputs):
        return []
    if next(iter(reads.values())).type.nbytes > out.type.nbytes:
        return []
    users = list(dict.fromkeys(u for u, _ in out.uses))
    if not all(is_kernel(u) for u in users) or any(_pads(u, out) for u in users):
        return []
    return users


def _pads(user: Node, v) -> bool:
    """The kernel ``user`` pads ``v`` (a window read: P would be recomputed for every tap)."""
    sub = user.attrs["graph"]
    return any(x is v and any(n.op == "Pad" for n, _ in sv.uses)
               for x, sv in zip(user.inputs, sub.inputs))


@register_pass
class GraphKernelRecomputePass(Pass):
    name = "graph_kernel_recompute"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        count = 0
        while True:
            found = next(((p, users) for p in graph.nodes if (users := recompute_users(graph, p))), None)
            if found is None:
                break
            p, users = found
            for c in users:
                node, _ = merge_kernels(graph, [c], duplicate=[p], kind="recompute")
                ctx.record("graph_kernel_recompute.txt",
                           f"{p.attrs['kernel_name']} recomputed in {node.attrs['kernel_name']}")
            remove_dead_nodes(graph, recursive=False)
            count += 1
        if count:
            ctx.count(self.name, count)
        return count > 0
