"""Control-flow nodes (If, Loop, Scan, SequenceMap) with their bodies imported as IR graphs.

A body is imported by a child importer whose name scope (``Scope``) falls back to the enclosing scopes: an
outer constant is copied in as a constant, any other outer value becomes a new body input (a *capture*,
MindSpore Lite's converter does the same), and the node gets the outer value as an extra input (the count
is ``attrs["captures"]``, ops/control_flow.py).  Every body is then a self-contained graph that each pass
optimizes on its own and the runtime plans on its own.

Body input types come from the node: a Loop's iteration number and condition are scalars, its carried values
start with the initial values' types; a Scan's scan elements are its inputs without the scan axis.  A carried
value whose type the body changes (a growing sequence, a tensor that changes shape) is imported again with
a dynamic shape.  An If on a constant condition inlines the taken branch (static shapes make most exported
conditions constant).  Errors name the node and the body (-200 for a broken body, -500 for inference).
"""
from __future__ import annotations

import logging

import numpy as np
import onnx.defs

from ..errors import RET_GRAPH_FILE_ERR, RET_INFER_ERR, ConverterError
from ..ir.core import Graph, TensorType, Value
from ..ir.dtype import DType
from ..ops.control_flow import merge_types
from ..ops.registry import KernelError
from .protos import tensor_to_array, value_info_kind

CONTROL_FLOW_OPS = ("If", "Loop", "Scan", "SequenceMap")
log = logging.getLogger("converter_lite")
_SCALAR_I64 = TensorType(DType.int64, ())
_SCALAR_BOOL = TensorType(DType.bool, ())


class Scope(dict):
    """A body's name -> Value table; a name it lacks is looked up in ``parent`` (and captured).  With
    ``dynamic``, captured values are typed with unknown shapes (see ``import_body``)."""

    def __init__(self, parent: dict, dynamic: bool = False):
        super().__init__()
        self.parent = parent
        self.dynamic = dynamic
        self.captures: list[tuple[Value, Value]] = []     # (outer value, body input)

    def __missing__(self, name: str) -> Value:
        outer = self.parent[name]                          # KeyError: no scope defines it
        if outer.const is not None:
            inner = Value(name, outer.type, const=outer.const)
        else:
            inner = Value(name, _unknown_shape(outer.type) if self.dynamic else outer.type)
            self.captures.append((outer, inner))
        self[name] = inner
        return inner

    def visible(self) -> set[str]:
        return set(self) | visible_names(self.parent)


def visible_names(env: dict) -> set[str]:
    return env.visible() if isinstance(env, Scope) else set(env)


def lookup(env: dict, name: str) -> Value | None:
    try:
        return env[name]
    except KeyError:
        return None


def _unknown_shape(t: TensorType) -> TensorType:
    return TensorType(t.dtype, None, t.kind)


def import_body(importer, gproto, input_types: list[TensorType], where: str) -> tuple[Graph, list[tuple]]:
    """Imports body ``gproto`` with its inputs typed ``input_types``; returns the graph (captures not yet added
    as inputs) and its captures.

    A body whose shape inference fails for the shapes the node gives it (a branch written for another input
    size: a voice-activity detector's 8 kHz branch sees the 16 kHz frame it never runs on) is imported again
    with its inputs' and captures' shapes unknown: it then runs with shapes known at run time, and fails there,
    naming its node, only if it is taken with inputs it cannot handle (onnxruntime infers branches lazily too)."""
    try:
        return _import_body(importer, gproto, input_types, where, dynamic=False)
    except ConverterError as e:
        if e.code != RET_INFER_ERR:
            raise
        log.warning("%s: shape inference fails for the shapes it is given (%s); it runs with shapes known at "
                    "run time", where, e.message.removeprefix(f"{where}: "))
        return _import_body(importer, gproto, [_unknown_shape(t) for t in input_types], where, dynamic=True)


def _import_body(importer, gproto, input_types: list[TensorType], where: str,
                 dynamic: bool) -> tuple[Graph, list[tuple]]:
    if len(gproto.input) != len(input_types):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: the body has {len(gproto.input)} inputs, the node "
                                                 f"gives it {len(input_types)}")
    child = importer.child(where, gproto.name or "body", dynamic)
    for t in gproto.initializer:
        child.env[t.name] = Value(t.name, const=tensor_to_array(t, where))
    for vi, t in zip(gproto.input, input_types):
        declared_kind = value_info_kind(vi, where) if vi.type.WhichOneof("value") else t.kind
        if declared_kind != t.kind:
            raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: body input {vi.name!r} is declared a "
                                                     f"{declared_kind}, the node gives it a {t.kind}")
        v = Value(vi.name, t)
        child.env[vi.name] = v
        child.graph.inputs.append(v)
    for n in child._toposorted(gproto):
        child._node(n)
    outputs = []
    for vi in gproto.output:
        v = lookup(child.env, vi.name)
        if v is None:
            raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: body output {vi.name!r} is not produced by any "
                                                     "node of the body or an enclosing graph")
        outputs.append(v)
    child.graph.outputs = outputs
    return child.graph, list(child.env.captures)


def _add_captures(bodies: list[tuple[Graph, list]]) -> list[Value]:
    """Makes the union of the bodies' captures the trailing inputs of every body; returns the outer values."""
    outer: dict[int, Value] = {}
    for _, caps in bodies:
        for o, _ in caps:
            outer.setdefault(id(o), o)
    for g, caps in bodies:
        mine = {id(o): inner for o, inner in caps}
        for oid, o in outer.items():
            g.inputs.append(mine.get(oid) or Value(o.name, o.type))
    return list(outer.values())


def import_control_flow(importer, n, attrs: dict, name: str, where: str) -> list[Value] | None:
    """Emits the node for control-flow NodeProto ``n`` (``attrs`` holds its GraphProto attributes); returns its
    outputs, or None when a constant If was inlined (the importer's env then holds the outputs)."""
    inputs = [lookup(importer.env, i) if i else None for i in n.input]
    for i, (nm, v) in enumerate(zip(n.input, inputs)):
        if nm and v is None:
            raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: input {nm!r} is not produced by any node, "
                                                     "initializer or graph input")
    op = n.op_type
    if op == "If":
        return _if(importer, n, inputs, attrs, name, where)
    if op == "Loop":
        return _loop(importer, n, inputs, attrs, name, where)
    if op == "Scan":
        return _scan(importer, n, inputs, attrs, name, where)
    return _sequence_map(importer, n, inputs, attrs, name, where)


def _emit(importer, op, n, ins, attrs, name, where):
    try:
        return importer.em.emit(op, ins, attrs, len(n.output), name=name,
                                out_names=[o or f"{name}_unused{i}" for i, o in enumerate(n.output)])
    except ConverterError:
        raise
    except (KernelError, ValueError, KeyError, IndexError, TypeError) as e:
        raise ConverterError(RET_INFER_ERR, f"{where}: {e}") from None


def _if(importer, n, inputs, attrs, name, where):
    cond = inputs[0] if inputs else None
    if cond is None:
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: If needs a condition input")
    if cond.const is not None:
        branch = attrs["then_branch"] if bool(np.asarray(cond.const).reshape(-1)[0]) else attrs["else_branch"]
        for t in branch.initializer:
            importer.env[t.name] = Value(t.name, const=tensor_to_array(t, where))
        for node in importer._toposorted(branch):
            importer._node(node)
        for out, vi in zip(n.output, branch.output):
            if out:
                importer.env[out] = importer.env[vi.name]
        return None
    bodies = []
    for key in ("then_branch", "else_branch"):
        g = attrs[key]
        if len(g.output) != len(n.output):
            raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: {key} returns {len(g.output)} values, the node "
                                                     f"has {len(n.output)} outputs")
        bodies.append(import_body(importer, g, [], f"{where} {key}"))
    outer = _add_captures(bodies)
    node_attrs = {k: v for k, v in attrs.items() if k not in ("then_branch", "else_branch")}
    node_attrs.update(then_branch=bodies[0][0], else_branch=bodies[1][0], captures=len(outer))
    return _emit(importer, "If", n, [cond, *outer], node_attrs, name, where)


def _loop(importer, n, inputs, attrs, name, where):
    body_proto = attrs["body"]
    inputs = inputs + [None] * max(0, 2 - len(inputs))
    trip, cond, init = inputs[0], inputs[1], inputs[2:]
    for what, v, want in (("trip count M", trip, DType.int64), ("condition", cond, DType.bool)):
        if v is None:
            continue
        if v.type.is_tensor and v.type.shape is not None and int(np.prod(v.type.shape)) != 1:
            raise ConverterError(RET_INFER_ERR, f"{where}: Loop {what} must be a scalar, got {v.type}")
        if v.type.dtype != want:
            raise ConverterError(RET_INFER_ERR, f"{where}: Loop {what} must be {want.name}, got {v.type}")
        if what.startswith("trip") and v.const is not None and int(np.asarray(v.const).reshape(-1)[0]) < 0:
            raise ConverterError(RET_INFER_ERR, f"{where}: Loop trip count M is negative "
                                                f"({int(np.asarray(v.const).reshape(-1)[0])})")
    if len(body_proto.input) != 2 + len(init):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: the Loop body has {len(body_proto.input)} inputs; "
                                                 f"it needs 2 + {len(init)} (iteration, condition, carried)")
    if len(body_proto.output) != 1 + len(n.output):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: the Loop body returns {len(body_proto.output)} "
                                                 f"values; the node has {len(n.output)} outputs and the body must "
                                                 "return the condition first, then one value per output")
    if len(n.output) < len(init):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: Loop has {len(init)} carried values but "
                                                 f"{len(n.output)} outputs")
    if any(v is None for v in init):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: a Loop-carried initial value is missing")
    types = [_SCALAR_I64, _SCALAR_BOOL] + [v.type for v in init]
    for _ in range(4):                                  # carried types the body changes become dynamic
        body, caps = import_body(importer, body_proto, types, f"{where} body")
        changed = False
        for j, v in enumerate(init):
            t_in, t_out = types[2 + j], body.outputs[1 + j].type
            try:
                merged = merge_types(t_in, t_out)
            except KernelError as e:
                raise ConverterError(RET_INFER_ERR, f"{where} body: carried value {j} ({v.name!r}): {e}") from None
            if merged != t_in:
                types[2 + j], changed = merged, True
        if not changed:
            break
    outer = _add_captures([(body, caps)])
    node_attrs = {k: v for k, v in attrs.items() if k != "body"}
    node_attrs.update(body=body, captures=len(outer))
    return _emit(importer, "Loop", n, [trip, cond, *init, *outer], node_attrs, name, where)


def _scan(importer, n, inputs, attrs, name, where):
    body_proto = attrs["body"]
    legacy = onnx.defs.get_schema("Scan", importer.opset, "").since_version < 9
    m = int(attrs.get("num_scan_inputs", 0))
    ins = inputs[1:] if legacy else inputs
    if m <= 0 or m > len(ins):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: num_scan_inputs={m} does not fit {len(ins)} inputs")
    n_states = len(ins) - m
    if any(v is None for v in ins):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: a Scan input is missing")
    drop = 2 if legacy else 1
    axes = [0] * m if legacy else list(attrs.get("scan_input_axes") or [0] * m)
    types = []
    for v in ins[:n_states]:
        t = v.type
        types.append(TensorType(t.dtype, t.shape[1:]) if legacy and t.shape is not None else t)
    for v, a in zip(ins[n_states:], axes):
        t = v.type
        if t.shape is None:
            types.append(TensorType(t.dtype, None))
            continue
        r = len(t.shape)
        if not -r <= a < r or r < drop:
            raise ConverterError(RET_INFER_ERR, f"{where}: scan axis {a} is out of range for input "
                                                f"{v.name!r} of rank {r}")
        a = a + r if a < 0 else a
        shape = list(t.shape[2:]) if legacy else [d for i, d in enumerate(t.shape) if i != a]
        types.append(TensorType(t.dtype, tuple(shape)))
    body, caps = import_body(importer, body_proto, types, f"{where} body")
    outer = _add_captures([(body, caps)])
    node_attrs = {k: v for k, v in attrs.items() if k != "body"}
    node_attrs.update(body=body, captures=len(outer))
    if legacy:
        node_attrs["legacy_batch"] = 1
    return _emit(importer, "Scan", n, [*inputs, *outer], node_attrs, name, where)


def _sequence_map(importer, n, inputs, attrs, name, where):
    if not inputs or inputs[0] is None or inputs[0].type.kind != "sequence":
        raise ConverterError(RET_INFER_ERR, f"{where}: SequenceMap input 0 must be a sequence")
    types = [TensorType(v.type.dtype, None) if v.type.kind == "sequence" else v.type for v in inputs]
    body, caps = import_body(importer, attrs["body"], types, f"{where} body")
    outer = _add_captures([(body, caps)])
    node_attrs = {k: v for k, v in attrs.items() if k != "body"}
    node_attrs.update(body=body, captures=len(outer))
    return _emit(importer, "SequenceMap", n, [*inputs, *outer], node_attrs, name, where)
