"""``--inputDataFormat=NHWC``: the converted model takes its 4-D image inputs channels-last.

MindSpore's converter changes the graph's input format; here the change is made on the ONNX graph before it
is imported, so the optimizer sees it: each 4-D input gets the NHWC shape and is followed by one
``Transpose(perm=[0, 3, 1, 2])`` back to the NCHW the rest of the graph was written for.  Graph-kernel fusion
(opt_level >= 1) then treats that Transpose like any other op (absorbs it into the first fused kernel where
the clusterer can).  Inputs that are not 4-D are left unchanged (they have no image layout to change).
"""
from __future__ import annotations

import onnx
import onnx.helper as oh

NHWC_TO_NCHW = (0, 3, 1, 2)


def _rank(value_info: onnx.ValueInfoProto) -> int | None:
    t = value_info.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return len(t.tensor_type.shape.dim)


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Every use of ``old`` in ``graph`` (and in the sub-graphs of its nodes, which may capture it) reads ``new``."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for attr in node.attribute:
            subs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
            for sub in subs:
                if not any(v.name == old for v in list(sub.input) + list(sub.initializer)):
                    _rename_uses(sub, old, new)
    for out in graph.output:
        if out.name == old:                     # an input passed straight through: keep it NCHW
            out.name = new


def to_nhwc_inputs(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``proto`` whose 4-D graph inputs take NHWC data; returns it and the names of the inputs changed."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    changed: list[str] = []
    new_nodes = []
    for vi in graph.input:
        if vi.name in initializers or _rank(vi) != 4:
            continue
        nchw = f"{vi.name}__nchw"
        _rename_uses(graph, vi.name, nchw)
        dims = vi.type.tensor_type.shape.dim
        old = [onnx.TensorShapeProto.Dimension() for _ in range(4)]
        for d_old, d in zip(old, dims):
            d_old.CopyFrom(d)
        for i, src in enumerate((0, 2, 3, 1)):
            dims[i].CopyFrom(old[src])
        new_nodes.append(oh.make_node("Transpose", [vi.name], [nchw], name=f"{vi.name}__to_nchw",
                                      perm=list(NHWC_TO_NCHW)))
        changed.append(vi.name)
    if new_nodes:
        nodes = new_nodes + list(graph.node)
        del graph.node[:]
        graph.node.extend(nodes)
    return model, changed


def save_with_nhwc_inputs(model_file: str, path: str) -> None:
    """Writes ``model_file`` with NHWC inputs (``to_nhwc_inputs``) to ``path``: the onnxruntime reference for
    ``--infer`` with ``--inputDataFormat=NHWC``, which must take the same inputs as the converted model."""
    from .protos import load_onnx
    onnx.save(to_nhwc_inputs(load_onnx(model_file))[0], path)
