"""``GraphKernel``: a fused kernel.  ``attrs["graph"]`` is its sub-graph of basic ops (inputs and outputs in the
node's order), ``attrs["kernel_name"]`` its symbol and ``attrs["source_nodes"]`` the original ONNX node names.

Its reference semantics are the interpretation of the sub-graph, so every opt_level runs without native code.
"""
from __future__ import annotations

from ..ops.interpret import eval_graph
from .registry import reference


def _infer(node):
    return [v.type for v in node.attrs["graph"].outputs]


@reference("GraphKernel", infer=_infer)
def graph_kernel(attrs, *inputs):
    return tuple(eval_graph(attrs["graph"], list(inputs)))
