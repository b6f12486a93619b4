"""Which fused kernels the native convolution drivers compute in their epilogue: decided here, at conversion,
and recorded in the graph the ``.ms`` stores.

A fused kernel that reads a Conv's output and nothing computed after it, as an optional residual ``Add`` and
then clamps (Relu, Max/Min with a constant, Clip with constant bounds: kernels/conv_epilogue.py
``match_epilogue``), or a gate (HardSwish), is folded into the Conv's driver call when the Conv recorded an epilogue-capable driver
(``EPILOGUE`` in kernels/*/abi.py) and is the kernel's only reader.  The kernel node gets the attribute
``conv_epilogue`` = ``{"host": <Conv node>, "input": <position of the Conv's output>, "clamp": [lo, hi] or
None, "residual": <position of the added value> or None, "gate": [a, b] or None}`` and the Conv moves right before it, so the runtime,
which reads the attribute and matches nothing, finds the two adjacent.  The kernel keeps its native code: where
the Conv does not run on its driver (native code off) it runs as it is.
"""
from __future__ import annotations

from ..ir.core import Graph, Node
from ..kernels.conv_epilogue import EPILOGUE_ATTR, match_epilogue
from ..kernels.registry import DRIVERS_ATTR, WITH_EPILOGUE


def assign_conv_epilogues(graph: Graph) -> int:
    """Records every Conv epilogue of ``graph``; returns how many."""
    readers: dict[int, list[Node]] = {}
    for n in graph.nodes:
        for v in n.inputs:
            if v is not None:
                readers.setdefault(id(v), []).append(n)
    outputs = {id(v) for v in graph.outputs}
    count = 0
    for conv in [n for n in graph.nodes if n.op == "Conv"]:
        if not WITH_EPILOGUE & set(conv.attrs.get(DRIVERS_ATTR, ())) or len(conv.outputs) != 1:
            continue
        y = conv.outputs[0]
        users = readers.get(id(y), [])
        if id(y) in outputs or len(users) != 1 or users[0].op != "GraphKernel":
            continue
        kernel = users[0]
        sub = kernel.attrs.get("graph")
        slots = [i for i, v in enumerate(kernel.inputs) if v is y]
        if len(slots) != 1 or len(kernel.outputs) != 1 or not isinstance(sub, Graph) \
                or len(sub.inputs) != len(kernel.inputs) or EPILOGUE_ATTR in kernel.attrs:
            continue

        def residual_ok(pos: int, kernel=kernel, y=y) -> bool:
            r = kernel.inputs[pos]
            return r is not None and r is not y and r.const is None and r.type == y.type

        found = match_epilogue(sub, slots[0], residual_ok)
        if found is None:
            continue
        clamp, residual, gate = found
        kernel.attrs[EPILOGUE_ATTR] = {"host": conv.name, "input": slots[0],
                                       "clamp": None if clamp is None else [float(clamp[0]), float(clamp[1])],
                                       "residual": residual,
                                       "gate": None if gate is None else [float(gate[0]), float(gate[1])]}
        graph.nodes.remove(conv)
        graph.nodes.insert(graph.nodes.index(kernel), conv)
        count += 1
    return count
