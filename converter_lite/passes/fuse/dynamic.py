"""``dynamic_fusion``: fused kernels for a model with dynamic dims, one per cluster, valid at every shape.

A model converted with its dynamic dims left dynamic has ``shape=None`` on every value computed from them
(frontend/onnx_import.py), so the static clustering (cluster.py) fuses none of it.  This pass:

1. **Probes the shapes** (dynamic_probes.py): the graph made static at two probe shapes tells which dims are
   dynamic and which are the same symbol (``signatures``); a model only some sizes fit gets them searched.
2. **Clusters** connected ops of fusible kinds (elementwise, broadcast, reductions, and composites the expander
   rewrites into those: Softmax, LayerNormalization, ...) whose values share their *rows*: the leading dims up
   to the last dynamic one (``row_form``), so a value is ``R`` rows of a static *tail*.  Static operands may
   broadcast over the tail only; reductions and normalizations act on tail axes only.  Nodes join clusters in
   graph order, never closing a cycle through a node outside.
3. **Outlines** each cluster as a row kernel (``GraphKernel`` with ``attrs["rows"]``, ops/graph_kernel.py):
   its sub-graph has the values at ``[nominal, *tail]`` with axes rewritten from the end, composites expanded,
   and it is kept only if the code generator lowers it as a row kernel (codegen/rows.py).

Probing only steers the choice of clusters; correctness does not rest on it: at run time each shape's plan
checks that a row kernel's arguments hold whole rows of its tails (ops/graph_kernel.py ``_infer``) and fails
with a clear error otherwise.  What stays unfused: ops whose dynamic dims are not leading (a per-channel scale
of an NCHW tensor with a dynamic height; attention scores over a dynamic key axis are rows of a dynamic tail).
"""
from __future__ import annotations

import json

import numpy as np

from ...ir.core import Graph, Node, TensorType, Value
from ...ir.input_dims import METADATA_KEY, WARM_KEY, InputDims
from ...ops.registry import OPS, OpKind, infer_types, normalize_axis
from ..base import Pass, PassContext
from ..expand.expand_pass import ExpandOpsPass
from ..registry import register_pass
from .dynamic_probes import (
    fit_signatures,
    probe_shapes,
    signatures,
    warm_shapes,
    with_if_branches,
)

NOMINAL_ROWS = (1021, 1031, 1033, 1039)      # primes: the row count the sub-graphs are written with
AXIS_OPS = {"Softmax": "axis", "LogSoftmax": "axis", "LayerNormalization": "axis", "RMSNormalization": "axis"}
# opaque ops the expander rewrites into fusible ones along the axis above (the tail)
COMPOSITES = frozenset(AXIS_OPS) | {"BatchNormalization"}
PER_CHANNEL = frozenset({"BatchNormalization"})      # parameters [C] along axis 1 (not numpy broadcasting)
REDUCE_LAST = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1",
                         "ReduceL2", "ReduceProd"})




def row_form(sig: tuple) -> tuple[int, tuple, tuple]:
    """(p, prefix, tail): p = one past the last dynamic dim."""
    p = 0
    for i, d in enumerate(sig):
        if isinstance(d, tuple):
            p = i + 1
    return p, sig[:p], sig[p:]


def _fusible(node: Node) -> bool:
    d = OPS.get(node.op)
    if d is None or not d.deterministic or node.op == "GraphKernel":
        return False
    return d.kind in (OpKind.ELEMWISE, OpKind.BROADCAST, OpKind.REDUCE) or node.op in COMPOSITES


class _Clusterer:
    def __init__(self, graph: Graph, sigs: dict[int, tuple]):
        self.graph, self.sigs = graph, sigs

    def node_key(self, node: Node) -> tuple | None:
        """The kernel ``node`` can join: ("rows", prefix) for a row kernel, ("cols", shape) for a column kernel
        (its last dim dynamic: codegen/columns.py), or None."""
        if not _fusible(node) or not node.outputs:
            return None
        sig = self.sigs.get(id(node.outputs[0]))
        if sig and isinstance(sig[-1], tuple):
            key = self.node_cols(node)
            if key is not None:
                return "cols", key
        rows = self.node_rows(node)
        return None if rows is None else ("rows", rows)

    def node_cols(self, node: Node) -> tuple | None:
        """The full shape pattern of a column kernel ``node`` can join (its last dim dynamic), else None: every
        dynamic operand of the same rank, each dim equal to the kernel's or 1; constants broadcasting over
        static dims; reductions and normalizations over the last axis only."""
        if node.op in PER_CHANNEL:
            return self._per_channel_cols(node)
        if node.op not in ("Softmax", "LogSoftmax") and OPS[node.op].kind not in (OpKind.ELEMWISE, OpKind.BROADCAST,
                                                                                   OpKind.REDUCE):
            return None
        x = node.inputs[0]
        key = self.sigs.get(id(x if OPS[node.op].kind == OpKind.REDUCE else node.outputs[0]))
        if key is None or not isinstance(key[-1], tuple) or len(node.outputs) != 1:
            return None
        rank = len(key)
        if node.op in AXIS_OPS and normalize_axis(node.attrs.get(AXIS_OPS[node.op], -1), rank) != rank - 1:
            return None
        if OPS[node.op].kind == OpKind.REDUCE:
            axes = _reduce_axes(node)
            if node.op not in REDUCE_LAST or not node.attrs.get("keepdims", 1) or axes is None or \
                    {normalize_axis(a, rank) for a in axes} != {rank - 1}:
                return None
        axes_input = node.inputs[1] if OPS[node.op].kind == OpKind.REDUCE and len(node.inputs) > 1 else None
        for v in [*node.inputs, *node.outputs]:
            if v is None or v is axes_input:
                continue
            shape = tuple(v.const.shape) if v.const is not None else self.sigs.get(id(v))
            if shape is None or (v.const is None and len(shape) != rank) or len(shape) > rank:
                return None
            if any(d != 1 and d != k for d, k in zip(shape, key[rank - len(shape):])):
                return None
            if v.const is not None and any(isinstance(k, tuple) and d != 1
                                           for d, k in zip(shape, key[rank - len(shape):])):
                return None
        return key

    def _per_channel_cols(self, node: Node) -> tuple | None:
        """An inference BatchNormalization over a dynamic last axis: constant [C] parameters, C static."""
        key = self.sigs.get(id(node.inputs[0]))
        if key is None or len(key) < 3 or not isinstance(key[-1], tuple) or isinstance(key[1], tuple) \
                or len(node.outputs) != 1 or self.sigs.get(id(node.outputs[0])) != key:
            return None
        if any(v is None or v.const is None or v.const.shape != (key[1],) for v in node.inputs[1:]):
            return None
        return key

    def node_rows(self, node: Node) -> tuple | None:
        """The rows (prefix) ``node`` computes over when it can join a row kernel, else None."""
        prefix, tail, rank = None, None, None
        for o in node.outputs:
            sig = self.sigs.get(id(o))
            if sig is None or o.type is None or not o.type.is_tensor:
                return None
            p, pre, t = row_form(sig)
            if p == 0 or (prefix is not None and (pre != prefix or len(sig) != rank)):
                return None
            prefix, tail, rank = pre, t, len(sig)
        for v in node.inputs:
            if v is None:
                continue
            if v.const is not None:
                shape = tuple(v.const.shape)
            else:
                sig = self.sigs.get(id(v))
                if sig is None:
                    return None
                p, pre, t = row_form(sig)
                if p:
                    if pre != prefix or len(sig) != rank + self._dropped(node, len(sig), p):
                        return None
                    continue
                shape = sig
            if len(shape) > len(tail) and (v.const is None or any(d != 1 for d in shape[:len(shape) - len(tail)])):
                return None                              # a static operand broadcasting over the rows too
            # (a constant's leading 1s over the rows broadcast trivially: outline drops them, e.g. a bias
            # [1, 1, 64] added to [batch, 2048, 64])
        if node.op in PER_CHANNEL and (len(prefix) != 1 or len(node.outputs) != 1):
            return None
        x = node.inputs[0] if node.inputs else None
        if OPS[node.op].kind == OpKind.REDUCE and x is not None and self.sigs.get(id(x)) is not None:
            rank = len(self.sigs[id(x)])                  # a reduction's axes count in its input
        if not self._axes_in_tail(node, rank, len(prefix)):
            return None
        return prefix

    @staticmethod
    def _dropped(node: Node, rank: int, p: int) -> int:
        """How many axes of its rank-``rank`` input a reduction without keepdims drops (all in the tail, past
        the ``p`` row axes: ``_axes_in_tail`` checks them); 0 for any other node."""
        if OPS[node.op].kind != OpKind.REDUCE or node.attrs.get("keepdims", 1) or node.op not in REDUCE_LAST:
            return 0
        axes = _reduce_axes(node)
        if axes is None:
            return -1                                 # (all axes, rows included: never fits)
        try:
            return len({normalize_axis(a, rank) for a in axes})
        except Exception:   # noqa: BLE001  (a malformed axis: leave the node unfused, its kernel reports it)
            return -1

    @staticmethod
    def _axes_in_tail(node: Node, rank: int, p: int) -> bool:
        try:
            if node.op in AXIS_OPS:
                return normalize_axis(node.attrs.get(AXIS_OPS[node.op], -1), rank) >= p
            if OPS[node.op].kind == OpKind.REDUCE:
                axes = _reduce_axes(node)
                if axes is None:                            # all axes (or computed at run time)
                    return False
                return all(normalize_axis(a, rank) >= p for a in axes)
        except Exception:   # noqa: BLE001  (a malformed axis: leave the node unfused, its kernel reports it)
            return False
        return True

    def clusters(self) -> list[list[Node]]:
        owner: dict[int, int] = {}                 # id(node) -> cluster index
        reach: dict[int, frozenset] = {}           # id(node) -> clusters it depends on (through any path)
        rows_of: list[tuple] = []             # each cluster's key (node_key)
        members: list[list[Node]] = []
        producer = {}
        for n in self.graph.nodes:
            for o in n.outputs:
                producer[id(o)] = n
        for n in self.graph.nodes:
            preds = [producer[id(v)] for v in n.inputs if v is not None and id(v) in producer]
            deps = frozenset().union(*(reach[id(q)] | ({owner[id(q)]} if id(q) in owner else set())
                                       for q in preds)) if preds else frozenset()
            reach[id(n)] = deps
            rows = self.node_key(n)
            if rows is None:
                continue
            joined = None
            for q in preds:
                c = owner.get(id(q))
                if c is None or rows_of[c] != rows:
                    continue
                # joining c closes no cycle: no input comes from outside c through a path starting in c
                if all(owner.get(id(r)) == c or c not in reach[id(r)] for r in preds):
                    joined = c
                    break
            if joined is None:
                joined = len(members)
                members.append([])
                rows_of.append(rows)
            owner[id(n)] = joined
            members[joined].append(n)
        return [(rows_of[c], m) for c, m in enumerate(members)]


def _reduce_axes(node: Node) -> list[int] | None:
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        if node.inputs[1].const is None:
            return None
        return [int(a) for a in np.asarray(node.inputs[1].const).reshape(-1)] or None
    axes = node.attrs.get("axes")
    return None if axes is None else [int(a) for a in axes]


def _nominal(rows: int, sig: tuple) -> tuple[int, ...]:
    p, _, tail = row_form(sig)
    return (rows,) + tuple(tail) if p else tuple(sig)


def _col_nominal(sig: tuple) -> tuple[int, ...]:
    """A column kernel's shape pattern: only which dims are 1 matters, and a dynamic dim never is (the larger
    probe, at least 2: a probe may have given it 1, e.g. a width pooled down)."""
    return tuple(max(d[1], d[2], 2) if isinstance(d, tuple) else d for d in sig)


def outline(graph: Graph, key: tuple, nodes: list[Node], sigs: dict[int, tuple], index: int,
            ctx: PassContext) -> bool:
    """Replaces ``nodes`` by one row kernel (``key[0] == "rows"``) or column kernel ("cols"); False (graph
    unchanged) when it cannot be lowered as one."""
    inside = {id(n) for n in nodes}
    produced = {id(o) for n in nodes for o in n.outputs}
    if _closes_a_cycle(graph, nodes, inside):
        return False
    if key[0] == "rows":
        tails = {d for n in nodes for o in n.outputs for d in row_form(sigs[id(o)])[2]}
        rows = next(r for r in NOMINAL_ROWS if r not in tails)

        def nominal(sig):
            return _nominal(rows, sig)
    else:
        nominal = _col_nominal
    mapping: dict[int, Value] = {}
    ext_in: list[Value] = []
    sub = Graph(f"dyn_{index}")
    for n in nodes:
        for v in n.inputs:
            if v is None or id(v) in produced or id(v) in mapping:
                continue
            if v.const is not None:
                c = v.const
                if key[0] == "rows" and OPS[n.op].kind in (OpKind.ELEMWISE, OpKind.BROADCAST):
                    tail = len(row_form(sigs[id(n.outputs[0])])[2])
                    while c.ndim > tail and c.shape[0] == 1:      # leading 1s over the rows (node_rows)
                        c = c.reshape(c.shape[1:])
                mapping[id(v)] = Value(v.name, TensorType.of(c) if c is not v.const else v.type, c)
                continue
            nv = Value(v.name, TensorType(v.type.dtype, nominal(sigs[id(v)])))
            mapping[id(v)] = nv
            ext_in.append(v)
            sub.inputs.append(nv)
    for n in nodes:
        outs = [Value(o.name, TensorType(o.type.dtype, nominal(sigs[id(o)]))) for o in n.outputs]
        attrs = dict(n.attrs)
        ins = [None if v is None else mapping[id(v)] for v in n.inputs]
        rank = len(sigs[id(n.inputs[0] if OPS[n.op].kind == OpKind.REDUCE else n.outputs[0])])
        if n.op in AXIS_OPS:
            attrs[AXIS_OPS[n.op]] = normalize_axis(attrs.get(AXIS_OPS[n.op], -1), rank) - rank
        elif OPS[n.op].kind == OpKind.REDUCE:
            axes = [normalize_axis(a, rank) - rank for a in _reduce_axes(n)]
            if len(ins) > 1 and ins[1] is not None:
                ins[1] = Value(ins[1].name + "_neg", const=np.asarray(axes, np.int64))
            else:
                attrs["axes"] = tuple(axes)
        node = Node(n.op, ins, outs, attrs, n.name)
        try:
            types = infer_types(node)
        except Exception:   # noqa: BLE001  (the nominal sub-graph does not type: leave the cluster unfused)
            return False
        if [t.shape for t in types] != [o.type.shape for o in outs]:
            return False
        sub.nodes.append(node)
        for o, no in zip(n.outputs, outs):
            mapping[id(o)] = no
    outputs = [o for n in nodes for o in n.outputs
               if any(id(u) not in inside for u, _ in o.uses) or any(o is g for g in graph.outputs)]
    sub.outputs = [mapping[id(o)] for o in outputs]
    ExpandOpsPass().run(sub, ctx)
    name = f"DynFused_{'_'.join(n.op for n in nodes[:4])}_{index}"
    reason = _unlowerable(sub, name, key[0], rows if key[0] == "rows" else None)
    if reason:
        ctx.log.info("dynamic_fusion: %s stays unfused: %s", name, reason)
        return False
    if key[0] == "rows":
        ref = next(i for i, v in enumerate(ext_in) if row_form(sigs[id(v)])[0])
        lead = row_form(sigs[id(ext_in[ref])])[0]
        kind = {"rows": {"nominal": rows, "lead": lead, "ref": ref,
                         "inputs": [bool(row_form(sigs[id(v)])[0]) for v in ext_in]}}
    else:
        kind = {"cols": {"rank": len(key[1])}}
    kernel = Node("GraphKernel", ext_in, [], {
        "graph": sub, "kernel_name": name, "source_nodes": tuple(n.name for n in nodes), **kind}, name=name)
    for n in nodes:
        for o in n.outputs:
            o.producer = None
        n.detach()
        graph.nodes.remove(n)
    kernel.outputs = outputs
    for i, o in enumerate(outputs):
        o.producer, o.index = kernel, i
    graph.nodes.append(kernel)
    graph.toposort()
    return True


def _closes_a_cycle(graph: Graph, nodes: list[Node], inside: set) -> bool:
    """Whether a path leaves ``nodes`` and comes back into them through other nodes of ``graph`` as it is now
    (kernels outlined before included): one kernel of them would then depend on itself.  The clustering keeps
    each cluster clear of outside paths back into it, but two clusters can still feed each other (a node of one
    joined after a node of the other had read it); the later of the two stays unfused."""
    stack = [u for n in nodes for o in n.outputs for u, _ in o.uses if id(u) not in inside]
    seen: set = set()
    while stack:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        for o in u.outputs:
            for w, _ in o.uses:
                if id(w) in inside:
                    return True
                stack.append(w)
    return False


def _unlowerable(sub: Graph, name: str, kind: str, rows: int | None) -> str | None:
    """Why the code generator cannot lower ``sub`` as a row or column kernel, or None."""
    from ... import codegen  # llvmlite only when the model is actually built
    from ...codegen.columns import check_columns
    from ...codegen.errors import UnsupportedOpError
    from ...codegen.rows import row_multipliers
    reason = codegen.unsupported_reason(sub, name)
    if reason is None:
        try:
            if kind == "rows":
                row_multipliers(sub, rows, name)
            else:
                check_columns(sub, name)
        except UnsupportedOpError as e:
            reason = e.message
    return reason


BRANCHES = frozenset({"If", "Loop", "Scan"})


def _warn_run_time_branches(graph: Graph, ctx: PassContext) -> None:
    """Control flow deciding on the dynamic input shapes (silero VAD's Ifs on the frame size) stays control flow
    at run time, its bodies unfused, where a fixed shape folds it at conversion: say so, naming the flag.  An If
    deciding on an input's value (the sample rate) runs its branches as plans made per shape at run time, fused
    only where the probes found their shapes: say that ``--inputShape`` fuses them at conversion and
    ``--inputValue`` folds the If."""
    on_shapes, on_values = [], {}
    inputs = {id(v): v.name for v in graph.inputs}
    for node in graph.nodes:
        if node.op not in BRANCHES or not node.inputs or node.inputs[0] is None:
            continue
        stack, seen = [node.inputs[0]] + ([node.inputs[1]] if node.op == "Loop" and len(node.inputs) > 1 else []), set()
        read: list[str] = []
        while stack:
            v = stack.pop()
            if v is None or id(v) in seen:
                continue
            seen.add(id(v))
            if v.producer is None:
                if id(v) in inputs and v.const is None:
                    read.append(inputs[id(v)])
                continue
            if v.producer.op in ("Shape", "Size"):
                on_shapes.append(node.name or node.op)
                read = []
                break
            stack.extend(v.producer.inputs)
        if read:
            on_values[node.name or node.op] = sorted(set(read))
    if on_shapes:
        ctx.log.warning("%d control-flow node(s) decide on the dynamic input shapes (%s%s): they run as control "
                        "flow at every call, their bodies unfused; --inputShape fixing those dims folds them at "
                        "conversion (silero VAD: 41 us a call against 250-430 us)", len(on_shapes),
                        ", ".join(on_shapes[:3]), " ..." if len(on_shapes) > 3 else "")
        ctx.count("dynamic_fusion/shape_branches", len(on_shapes))
    if on_values:
        names = sorted({n for ns in on_values.values() for n in ns})
        first = next(iter(on_values))
        ctx.log.warning("%d control-flow node(s) decide on input values at run time (%s on %s%s): with the input "
                        "dims dynamic their bodies run as plans made for each shape at run time, partly fused; "
                        "--inputShape fixing the dims fuses them at conversion, and --inputValue=%s:<value> folds "
                        "the decision (openWakeWord's silero VAD: 0.055 ms a call dynamic, 0.031 ms with both)",
                        len(on_values), first, ", ".join(repr(n) for n in on_values[first]),
                        " ..." if len(on_values) > 1 else "", names[0])
        ctx.count("dynamic_fusion/value_branches", len(on_values))


@register_pass
class DynamicFusionPass(Pass):
    name = "dynamic_fusion"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        dims = InputDims.of_metadata(graph.metadata) if METADATA_KEY in graph.metadata else None
        if dims is None:
            return False
        _warn_run_time_branches(graph, ctx)
        sigs, note, known = signatures(graph, probe_shapes(graph, dims)), None, None
        if sigs is None:
            sigs, note, known = fit_signatures(graph, dims)
        if sigs is None:
            ctx.log.info("dynamic_fusion: no probe shape fits the model's dynamic dims, nor common sizes of any one "
                         "of them; it runs unfused (fix dims it constrains with --inputShape, ranges included)")
            return False
        count = 0
        for g in with_if_branches(graph):       # the branches' ops too (openWakeWord's silero VAD)
            for key, nodes in _Clusterer(g, sigs).clusters():
                if outline(g, key, nodes, sigs, count, ctx):
                    count += 1
        if count:
            ctx.count(self.name, count)
            warm = warm_shapes(graph, dims, known)
            if warm is not None:
                graph.metadata[WARM_KEY] = json.dumps(warm)
        if note:
            ctx.log.info("dynamic_fusion: %s", note(count))
            ctx.count("dynamic_fusion/sized_dims", 1)
        return count > 0
