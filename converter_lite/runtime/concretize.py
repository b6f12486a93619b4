"""A dynamic-shape graph made static for one set of input shapes: the run-time half of shape resolution.

``concretize(graph, shapes)`` copies ``graph`` (a model converted with dynamic input dims: values computed from
a dynamic input have ``shape=None``) with the given input shapes and, node by node in order:
* infers the output types from the now-known input types (``ops.registry.infer_types``; a node whose shapes
  still depend on data keeps ``shape=None`` and runs with its shapes known at run time, as at conversion);
* folds what became shape arithmetic: ``Shape``/``Size`` of a value of known shape, then every deterministic
  node whose inputs are all constants and whose outputs are small (``FOLD_ELEMENTS``) - so an exporter's
  Shape -> Gather -> Concat -> Reshape chain becomes a Reshape to a constant shape, and what follows it static;
* inlines the branch an ``If`` takes when shape arithmetic made its condition a constant (silero VAD decides
  on its frame size), the branch's nodes made static the same way;
* re-selects the native drivers of nodes that now have static shapes, among those the converter linked for
  them (kernels/registry.py ``select``, passes/select_drivers.py records the candidates of a dynamic node).

Nothing is compiled: the copy runs on the kernels the model already has (its native drivers and fused kernels,
the runtime's fast kernels, the reference kernels).  Constants are shared with ``graph`` (read-only arrays);
control-flow bodies and fused sub-graphs are shared too (they are not changed).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
from ..ir.core import Graph, Node, TensorType, Value
from ..kernels.node_facts import selecting
from ..kernels.registry import DRIVERS, DRIVERS_ATTR
from ..ops.registry import (
    OPS,
    DynamicShapeError,
    KernelError,
    evaluate_node,
    infer_dynamic,
    infer_types,
)

FOLD_ELEMENTS = 1 << 16          # a node of constant inputs is evaluated here when its outputs are this small
SMALL_CONST = 64                 # ... and before its types are inferred when its inputs are this small
# ops that can make a large output of small inputs: folded only once their output types are known
GENERATORS = frozenset({"ConstantOfShape", "Range", "Expand", "Tile", "EyeLike", "OneHot", "Resize", "Upsample",
                        "Pad", "CenterCropPad", "Col2Im", "MelWeightMatrix", "HannWindow", "HammingWindow",
                        "BlackmanWindow"})
CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def concretize(graph: Graph, shapes: Mapping[str, tuple[int, ...]], vmap: dict | None = None,
               facts: dict | None = None) -> Graph:
    """A copy of ``graph`` whose inputs named in ``shapes`` have those shapes (see the module doc).  ``vmap``,
    when given, receives id(value of ``graph``) -> its copy (folded values included, as constants).  ``facts``,
    when given, holds what ``_node_facts`` found of ``graph``'s nodes (filled on first use): a caller that
    concretizes the same graph for many shapes (shape_plans.py) keeps it, so each plan skips that work."""
    vmap = {} if vmap is None else vmap
    facts = {} if facts is None else facts
    vget = vmap.get

    def mapped(v: Value | None) -> Value | None:
        if v is None:
            return None
        got = vget(id(v))
        if got is None:                                   # a constant (or an outer value): shared data
            got = vmap[id(v)] = Value(v.name, v.type, v.const) if v.const is not None else v
        return got

    inputs = []
    for v in graph.inputs:
        t = v.type
        if v.name in shapes and t.is_tensor:
            t = TensorType(t.dtype, tuple(int(d) for d in shapes[v.name]), t.kind)
        nv = vmap[id(v)] = Value(v.name, t)
        inputs.append(nv)
    out = Graph(graph.name, inputs)
    out.metadata = dict(graph.metadata)
    nodes = out.nodes

    def visit(node: Node) -> None:
        f = facts.get(id(node))
        if f is None:
            f = facts[id(node)] = _node_facts(node)
        ins = [None if i is None else (vget(id(i)) or mapped(i)) for i in node.inputs]
        if f.branches:
            body = _taken_branch(node, ins)
            if body is not None:                      # an If on what is now a constant: its branch, inlined
                for bv, v in zip(body.inputs, ins[1:]):
                    if v is not None:
                        vmap[id(bv)] = v
                for bn in body.nodes:
                    visit(bn)
                for o, bo in zip(node.outputs, body.outputs):
                    vmap[id(o)] = mapped(bo)
                return
        outs = []
        for o in node.outputs:
            no = vmap[id(o)] = Value(o.name, o.type)
            outs.append(no)
        new = Node(node.op, ins, outs, node.attrs, node.name)        # (Node copies the attributes)
        if f.static:                                  # nothing dynamic: as converted
            nodes.append(new)
            return
        if f.branches:                                # an If on a value computed at run time: static branches
            _concretize_branches(new, vmap, facts)
        # an input computed at run time: no folding (most nodes: no call of the fold functions for them)
        computed = any(v is not None and v.const is None for v in ins)
        try:
            if (f.early == 1 or (f.early and not computed)) and _fold_early(new, f.early):
                return
            types = infer_types(new)
        except DynamicShapeError:
            types = infer_dynamic(new)
        except (KernelError, ValueError, IndexError, TypeError) as e:
            raise _shape_error(node, shapes, e) from None
        for o, t in zip(outs, types):
            o.type = t
        try:
            if f.foldable and not computed and _fold(new):
                return
        except (KernelError, ValueError, IndexError, TypeError) as e:
            raise _shape_error(node, shapes, e) from None
        if f.among and all(o.type.is_static for o in outs):
            new.attrs[DRIVERS_ATTR] = list(f.select(new))
        nodes.append(new)

    for node in graph.nodes:
        visit(node)
    out.outputs = [mapped(v) for v in graph.outputs]
    return out


class _Facts:
    """What concretizing a node needs to know of it whatever the input shapes (``_node_facts``)."""
    __slots__ = ("among", "branches", "drivers", "early", "foldable", "node", "static")

    def select(self, node: Node) -> tuple[str, ...]:
        """``kernels.registry.select(node, among)`` with the drivers to ask found once, not per plan."""
        selecting(node)
        try:
            return tuple(s for d in self.drivers for s in d.select(node) if s in self.among)
        finally:
            selecting(None)


def _node_facts(node: Node) -> _Facts:
    """The facts of ``node`` (of the graph being concretized) that do not depend on the input shapes: whether
    its outputs are all static (copied as converted), whether it may be an If to inline, whether ``_fold_early``
    (1: Shape/Size; 2: constant inputs) and ``_fold`` can apply to its op, and the drivers a static copy of it
    re-selects among."""
    f = _Facts()
    f.node = node                                     # (keeps the node, and so its id, alive with the facts)
    op, od = node.op, OPS.get(node.op)
    f.static = not node.outputs or all(o.type is not None and o.type.is_static for o in node.outputs)
    f.branches = op == "If"
    deterministic = od is not None and od.deterministic
    if op in ("Shape", "Size"):
        f.early = 1
    elif (op in GENERATORS or op in CONTROL_FLOW or op == "GraphKernel" or not node.outputs or not deterministic
          or any(o.type is None or not o.type.is_tensor for o in node.outputs)):
        f.early = 0
    else:
        f.early = 2
    f.foldable = op not in CONTROL_FLOW and op != "GraphKernel" and deterministic
    among = node.attrs.get(DRIVERS_ATTR)
    f.among = frozenset(among or ())
    f.drivers = tuple(d for d in DRIVERS if op in d.ops and any(s in f.among for s in d.abi.SYMBOLS)) \
        if among else ()
    return f


def _taken_branch(node: Node, ins: list) -> Graph | None:
    """The branch an If takes when its condition is a constant (shape arithmetic made it one), else None."""
    if node.op != "If" or not ins or ins[0] is None or ins[0].const is None or ins[0].const.size != 1:
        return None
    body = node.attrs.get("then_branch" if bool(ins[0].const.reshape(-1)[0]) else "else_branch")
    if not isinstance(body, Graph) or len(body.inputs) != len(ins) - 1 or len(body.outputs) != len(node.outputs):
        return None
    return body


def _concretize_branches(node: Node, vmap: dict, facts: dict) -> None:
    """Replaces the branches of ``node`` (an If whose condition is computed at run time, its inputs copied)
    with copies made static for the shapes of the values they capture (the If's inputs after the condition),
    when those are all known: each branch then runs as a plan of static shapes, on its native drivers and fused
    kernels, instead of a generic plan whose convolutions and recurrences run on numpy (openWakeWord's copy of
    silero VAD, converted without --inputShape: 5.3 ms a call against 67 us).  A branch that rejects those
    shapes is left as converted: it may be the branch the data never takes.  ``vmap`` receives the branches'
    values too (the dynamic fusion pass reads their shapes at its probe shapes)."""
    for key in ("then_branch", "else_branch"):
        body = node.attrs.get(key)
        if not isinstance(body, Graph) or len(body.inputs) != len(node.inputs) - 1:
            return
        for bv, v in zip(body.inputs, node.inputs[1:]):
            if v is None or v.type is None or not v.type.is_tensor or not v.type.is_static:
                return
    for key in ("then_branch", "else_branch"):
        body = node.attrs[key]
        shapes = {bv.name: v.type.shape for bv, v in zip(body.inputs, node.inputs[1:])}
        if all(bv.type is not None and bv.type.is_static for bv in body.inputs):
            continue                                  # static already: as converted
        try:
            node.attrs[key] = concretize(body, shapes, vmap, facts)
        except ConverterError:
            continue


def _shape_error(node: Node, shapes: Mapping, e: Exception) -> ConverterError:
    """-600: the input shapes fed are ones the model's nodes reject (the node and the shapes named)."""
    given = ", ".join(f"{n} {list(s)}" for n, s in shapes.items())
    return ConverterError(RET_INPUT_PARAM_INVALID, f"input shapes {given}: {node.op} node {node.name!r} cannot take "
                                                   f"them: {e}")


def _fold_early(node: Node, kind: int) -> bool:
    """Folds shape arithmetic before type inference (which evaluating it makes redundant): ``Shape``/``Size`` of
    a value of known shape, and a deterministic node whose inputs are all constants of at most ``SMALL_CONST``
    elements (an exporter's Gather/Concat/Cast/Slice/Unsqueeze chains on shape vectors) and whose op cannot
    make a large output of small inputs (``GENERATORS``).  ``kind``: ``_node_facts``' ``early`` (1: Shape/Size,
    2: an op that may fold).  True when it did."""
    if kind == 1:
        src = node.inputs[0].type if node.inputs and node.inputs[0] is not None else None
        if src is None or not src.is_tensor or not src.is_static:
            return False
        arrays = evaluate_node(node, [np.broadcast_to(np.zeros((), src.dtype.np), src.shape)])
    else:
        if (any(v is not None and (v.const is None or v.const.size > SMALL_CONST) for v in node.inputs)
                or all(v is None for v in node.inputs)):
            return False
        with np.errstate(all="ignore"):
            arrays = evaluate_node(node, [None if v is None else v.const for v in node.inputs])
        if any(np.size(a) > FOLD_ELEMENTS for a in arrays[:len(node.outputs)]):
            return False
    _set_constants(node, arrays)
    return True


def _fold(node: Node) -> bool:
    """Evaluates ``node`` (its output types inferred) into constants on its outputs when it is shape
    arithmetic: every input a constant, outputs of at most ``FOLD_ELEMENTS``; True when it did.  (The caller
    checked the op: ``_node_facts``' ``foldable``.)"""
    if (any(v is not None and v.const is None for v in node.inputs)
            or any(not o.type.is_tensor or not o.type.is_static or o.type.size > FOLD_ELEMENTS
                   for o in node.outputs)):
        return False
    with np.errstate(all="ignore"):
        arrays = evaluate_node(node, [None if v is None else v.const for v in node.inputs])
    _set_constants(node, arrays)
    return True


def _set_constants(node: Node, arrays: list) -> None:
    node.detach()
    for o, a in zip(node.outputs, arrays):
        o.const = np.array(a, dtype=o.type.dtype.np, order="C")          # (ascontiguousarray makes 0-d 1-d)
        o.const.setflags(write=False)
        o.type = TensorType.of(o.const)
        o.producer = None
