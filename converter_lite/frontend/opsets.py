"""Opset versions at import: the model's default-domain opset, the version of an op's schema in force, and
the check of an opset newer than onnx knows (``_check_future_opsets``)."""
from __future__ import annotations

import logging

import onnx
import onnx.checker
import onnx.defs

from ..errors import RET_GRAPH_FILE_ERR, ConverterError

log = logging.getLogger("converter_lite")


def _opset_version(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


def _since_version(op: str, opset: int) -> int:
    try:
        return onnx.defs.get_schema(op, opset, "").since_version
    except Exception:   # op newer than the model's opset, or unknown
        return opset


def _default_domain_nodes(graph: onnx.GraphProto):
    """The default-domain nodes of ``graph`` and of its nodes' sub-graphs (If branches), depth first."""
    for n in graph.node:
        if n.domain in ("", "ai.onnx"):
            yield n
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for sub in subs:
                yield from _default_domain_nodes(sub)


def _check_future_opsets(proto: onnx.ModelProto, where: str) -> None:
    """A model declaring a default-domain opset newer than onnx's newest known one (``onnx_opset_version()``) can
    use op forms this converter does not know.  What that opset defines is unknowable here, so the model is
    accepted (with a warning) only when every node it holds matches its operator's newest known schema
    (onnx.checker: attribute names and types, required attributes, input and output counts); else -200 naming
    the domain, the versions and the nodes that do not.  Other domains: the importer converts no op of
    'ai.onnx.ml' or 'com.microsoft' (they are unsupported, -300), so their opset versions do not matter."""
    newest = onnx.defs.onnx_opset_version()
    declared = _opset_version(proto)
    if declared <= newest:
        return
    ctx = onnx.checker.C.CheckerContext()
    ctx.ir_version = min(int(proto.ir_version) or onnx.IR_VERSION, onnx.IR_VERSION)
    ctx.opset_imports = {"": newest}
    bad, seen = [], set()
    for n in _default_domain_nodes(proto.graph):
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            continue        # If: its branches' nodes are checked themselves
        plain = onnx.NodeProto()
        plain.CopyFrom(n)
        plain.domain = ""
        try:
            onnx.checker.check_node(plain, ctx)
        except onnx.checker.ValidationError as e:
            key = (n.op_type, str(e).splitlines()[0])
            if key not in seen:
                seen.add(key)
                bad.append(f"{n.op_type} node {n.name or n.op_type!r}: {str(e).splitlines()[0]}")
    if bad:
        raise ConverterError(RET_GRAPH_FILE_ERR,
                             f"{where}: declares opset {declared} for domain 'ai.onnx', newer than the newest this "
                             f"converter knows ({newest}, onnx {onnx.__version__}), and {len(bad)} node(s) do not "
                             f"match their opset-{newest} definitions: {'; '.join(bad[:4])}"
                             f"{' ...' if len(bad) > 4 else ''}; export the model with opset {newest} or older")
    log.warning("%s declares ai.onnx opset %d, newer than the newest this converter knows (%d, onnx %s); every "
                "node matches its opset-%d definition, so the model is converted with those", where, declared,
                newest, onnx.__version__, newest)
