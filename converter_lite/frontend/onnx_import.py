"""ONNX ModelProto -> IR Graph.

Steps, in order:
 1. load the file with its external data (ConverterError -200 on anything unreadable);
 2. inline model-local functions (ONNX FunctionProto: the "custom combination operators" of the seeds);
 3. list every op the converter cannot handle, all at once (UnsupportedOpsError, code -300);
 4. input shapes: ``input_shapes`` (``--inputShape``) fixes dynamic dims; dims left dynamic (not given, or given
    a range) make the input dynamic: ``shape=None`` in the IR, its symbolic dims in the graph's ``input_dims``
    metadata (ir/input_dims.py), and every value computed from it has its shape known at run time only;
 5. build IR nodes in topological order, upgrading older op versions (``legacy.py``), inferring types
    (-500 naming the node on failure) and folding nodes whose inputs are all constants;
 6. drop nodes nothing depends on.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx.checker
import onnx.defs
import onnx.inliner

from ..errors import (
    RET_GRAPH_FILE_ERR,
    RET_INFER_ERR,
    RET_INPUT_PARAM_INVALID,
    RET_NOT_FIND_OP,
    ConverterError,
)
from ..ir.core import Graph, Node, TensorType, Value
from ..ir.dce import remove_dead_nodes
from ..ir.input_dims import METADATA_KEY as INPUT_DIMS_KEY
from ..ir.input_dims import Dim, InputDims
from ..ops.builder import fresh_name
from ..ops.qlinear_ms import MS_QUANT_OPS
from ..ops.registry import (
    OPS,
    DynamicShapeError,
    KernelError,
    evaluate_node,
    infer_dynamic,
    infer_types,
)
from .input_shapes import (
    _dims_text,
    _fixed_dim,
    _where_of,
    is_range,
)
from .input_values import fix_input_values
from .legacy import LEGACY, constant_node_value
from .opsets import _check_future_opsets, _opset_version, _since_version
from .protos import (
    attribute_value,
    c_array,
    kind_of_type,
    load_onnx,
    tensor_to_array,
    value_info_kind,
    value_info_type,
)
from .subgraph import CONTROL_FLOW_OPS, Scope, import_control_flow, visible_names

log = logging.getLogger("converter_lite")

# ops the importer resolves itself (they never reach the IR)
_IMPORTER_OPS = {"Constant", "Upsample", "Scatter"}
# fold a node with all-constant inputs only if its outputs stay small relative to the inputs
_FOLD_GROWTH = 4
_FOLD_SLACK_BYTES = 1 << 16


class UnsupportedOpsError(ConverterError):
    def __init__(self, ops: list[tuple[str, str]], path: str):
        self.ops = ops
        listing = ", ".join(f"{t} ({n})" for t, n in ops[:8]) + (" ..." if len(ops) > 8 else "")
        super().__init__(RET_NOT_FIND_OP, f"{path}: {len(ops)} unsupported operator(s): {listing}")


@dataclass
class PendingNode:
    op: str
    name: str
    inputs: list
    attrs: dict
    n_outputs: int
    version: int
    out_names: list = field(default_factory=list)


class _Emitter:
    """Creates IR nodes with inferred types, folding all-constant nodes on the fly."""

    def __init__(self, graph: Graph, where: str, fold: bool = True):
        self.graph, self.where, self.fold = graph, where, fold
        self.dynamic: list[str] = []     # nodes whose output shapes are only known at run time

    def const(self, array: np.ndarray, name: str | None = None) -> Value:
        return Value(name or fresh_name("const"), const=c_array(array))

    def emit(self, op: str, inputs: list, attrs: dict, n_outputs: int = 1, name: str | None = None,
             out_names: list[str] | None = None) -> list[Value]:
        name = name or fresh_name(op)
        names = out_names or [fresh_name(f"{name}_out") for _ in range(n_outputs)]
        outs = [Value(n) for n in names]
        node = Node(op, inputs, outs, attrs, name=name)
        try:
            types = infer_types(node)
        except DynamicShapeError as e:
            types = infer_dynamic(node)
            self.dynamic.append(f"{op} node {name!r}: {e}")
        except (KernelError, ValueError, IndexError, TypeError) as e:
            node.detach()
            raise ConverterError(RET_INFER_ERR, f"{self.where}: shape inference failed for {op} node {name!r}: "
                                 f"{e}") from None
        for o, t in zip(outs, types):
            o.type = t
        if op in ("Shape", "Size") and inputs[0].type.shape is not None:
            # in a static graph the shape of any value is a constant, whatever its data
            node.detach()
            stand_in = np.broadcast_to(np.zeros((), inputs[0].type.dtype.np), inputs[0].type.shape)
            outs[0].const = evaluate_node(node, [stand_in])[0]
            outs[0].type = TensorType.of(outs[0].const)
            return outs
        if self.fold and self._foldable(node):
            try:
                with np.errstate(all="ignore"):
                    arrays = evaluate_node(node, [None if v is None else v.const for v in node.inputs])
            except (KernelError, ValueError, IndexError, TypeError) as e:
                node.detach()
                raise ConverterError(RET_INFER_ERR, f"{self.where}: {op} node {name!r} fails on its constant "
                                     f"inputs: {e}") from None
            node.detach()
            for o, a in zip(outs, arrays):
                o.const = c_array(a.astype(o.type.dtype.np, copy=False))
                o.type = TensorType(o.type.dtype, tuple(o.const.shape))
                o.producer = None
            return outs
        self.graph.nodes.append(node)
        return outs

    @staticmethod
    def _foldable(node: Node) -> bool:
        if not OPS[node.op].deterministic or node.op == "GraphKernel" or node.op in CONTROL_FLOW_OPS:
            return False
        if any(not o.type.is_tensor for o in node.outputs):
            return False
        ins = [v for v in node.inputs if v is not None]
        if not all(v.const is not None for v in ins):
            return False
        if any(o.type.shape is None for o in node.outputs):
            return True
        in_bytes = sum(v.const.nbytes for v in ins)
        out_bytes = sum(o.type.nbytes for o in node.outputs)
        return out_bytes <= _FOLD_GROWTH * in_bytes + _FOLD_SLACK_BYTES


def _inline_functions(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Inlines model-local functions.  onnx's inliner skips a function whose default-domain opset differs from
    the model's; such a body is imported under the model's opset (the importer upgrades old op forms anyway)."""
    model_opset = _opset_version(proto)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for f in copy.functions:
        for o in f.opset_import:
            if o.domain in ("", "ai.onnx") and o.version != model_opset:
                o.version = model_opset
    return onnx.inliner.inline_local_functions(copy)


def _all_nodes(graph: onnx.GraphProto):
    """Every node of ``graph`` and of the sub-graphs of its nodes' attributes, outermost first."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_nodes(g)


def _collect_unsupported(model: onnx.ModelProto) -> list[tuple[str, str]]:
    missing = []
    for i, n in enumerate(_all_nodes(model.graph)):
        dom = n.domain if n.domain not in ("ai.onnx",) else ""
        if dom == "com.microsoft" and n.op_type in MS_QUANT_OPS:
            continue                            # onnxruntime's quantized contrib ops (ops/qlinear_ms.py)
        if dom != "" or (n.op_type not in OPS and n.op_type not in _IMPORTER_OPS):
            label = n.op_type if not dom else f"{dom}::{n.op_type}"
            missing.append((label, n.name or f"{n.op_type}_{i}"))
    return missing


def import_model(model, input_shapes: dict[str, tuple[int, ...]] | None = None, fold: bool = True,
                 input_values: dict[str, tuple] | None = None) -> Graph:
    """Imports an ONNX model (path or ModelProto) into a static-shape IR Graph; ``input_values`` fixes inputs'
    values (frontend/input_values.py)."""
    where = _where_of(model)
    proto = load_onnx(model)
    if proto.functions:
        try:
            proto = _inline_functions(proto)
        except Exception as e:
            raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: cannot inline model-local functions: {e}") from None
    missing = _collect_unsupported(proto)
    if missing:
        raise UnsupportedOpsError(missing, where)
    return _GraphImporter(proto, where, input_shapes or {}, fold, input_values or {}).run()


def _check_given_shape(name: str, dims: list, given: tuple, where: str) -> None:
    if len(dims) != len(given):
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputShape gives {name!r} rank {len(given)}, the model "
                                                      f"declares rank {len(dims)}")
    for i, (d, s) in enumerate(zip(dims, given)):
        if _fixed_dim(d) and (is_range(s) or d != s):
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{where}: --inputShape gives {name!r} shape {_dims_text(list(given))}, but the "
                                 f"model fixes its dim {i} to {d} (declared {_dims_text(dims)}; only the others may "
                                 "be set)")


def _symbolic_dims(name: str, dims: list, given: tuple | None) -> list:
    """An input's dims for ``InputDims``: fixed ints stay, dynamic ones become ``Dim`` symbols (the ONNX dim_param,
    else ``<input>_d<axis>``), bounded by a range ``--inputShape`` gives; a given int fixes its dim."""
    out = []
    for i, d in enumerate(dims):
        g = given[i] if given is not None else None
        if _fixed_dim(d):
            out.append(d)
        elif isinstance(g, int):
            out.append(g)
        else:
            sym = d if isinstance(d, str) and d.strip("?") else f"{name}_d{i}"
            out.append(Dim(sym, *g) if g is not None else Dim(sym))
    return out


def source_bytes(model) -> bytes:
    """The serialized ONNX model (path or ModelProto) with its external data inlined: what a ``.ms`` of a model
    with dynamic input dims embeds so the runtime can specialize it again for other shapes."""
    proto = load_onnx(model)
    try:
        return proto.SerializeToString()
    except ValueError as e:         # > 2 GB: protobuf cannot hold it
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{model if isinstance(model, str) else 'model'}: cannot "
                                                 f"embed the source model for re-specialization: {e}") from None


class _GraphImporter:
    def __init__(self, proto: onnx.ModelProto, where: str, input_shapes: dict, fold: bool,
                 input_values: dict | None = None):
        self.proto, self.where = proto, where
        self.input_values = dict(input_values or {})
        self.opset = _opset_version(proto)
        _check_future_opsets(proto, where)
        self.input_shapes = dict(input_shapes)
        self.graph = Graph(proto.graph.name or "main")
        self.em = _Emitter(self.graph, where, fold)
        self.env: dict[str, Value] = {}
        self.dynamic_axes: dict[str, list[int]] = {}    # input -> axes the source model leaves dynamic
        self.input_dims: dict[str, list] = {}           # dynamic inputs -> their dims (ir/input_dims.py)

    def run(self) -> Graph:
        g = self.proto.graph
        for t in g.initializer:
            self.env[t.name] = Value(t.name, const=tensor_to_array(t, self.where))
        for t in g.sparse_initializer:
            self.env[t.values.name] = Value(t.values.name, const=attribute_value(
                onnx.helper.make_attribute("v", t), self.where))
        self._inputs(g)
        if self.input_values:
            fix_input_values(self.graph, self.env, self.input_values, self.where)
        for node in self._toposorted(g):
            self._node(node)
        outputs = []
        for vi in g.output:
            if vi.name not in self.env:
                raise ConverterError(RET_GRAPH_FILE_ERR, f"{self.where}: graph output {vi.name!r} is not produced "
                                                         "by any node")
            v = self.env[vi.name]
            if v.name != vi.name and v.producer is not None and v not in outputs:
                v.name = vi.name            # a value that an inlined If branch produced keeps the output's name
            outputs.append(v)
        self.graph.outputs = outputs
        _check_declared_outputs(g, outputs, self.where)
        self.graph.metadata["onnx_opset"] = str(self.opset)
        self.graph.metadata["producer"] = f"{self.proto.producer_name} {self.proto.producer_version}".strip()
        if self.dynamic_axes:
            self.graph.metadata["dynamic_inputs"] = json.dumps(self.dynamic_axes)
        remove_dead_nodes(self.graph)
        _check_sizes(self.graph, self.where)
        if self.em.dynamic:
            (log.info if self.input_dims else log.warning)("%s: %d node(s) have shapes known only at run time (they run unfused): %s%s", self.where,
                        len(self.em.dynamic), "; ".join(self.em.dynamic[:3]), " ..." if len(self.em.dynamic) > 3
                        else "")
            self.graph.metadata["dynamic_nodes"] = str(len(self.em.dynamic))
        return self.graph

    def _inputs(self, g) -> None:
        unknown = set(self.input_shapes) - {vi.name for vi in g.input}
        if unknown:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"--inputShape names {', '.join(sorted(unknown))}, which is not an input of "
                                 f"{self.where} (inputs: {', '.join(vi.name for vi in g.input) or 'none'})")
        for vi in g.input:
            if vi.name in self.env and vi.name not in self.input_shapes:
                continue     # IR < 4 lists initializers as inputs too: they stay constants
            dtype, dims = value_info_type(vi, self.where)
            kind = value_info_kind(vi, self.where)
            if kind != "tensor":                # a sequence or optional input: no shape to fix
                self.env[vi.name] = v = Value(vi.name, TensorType(dtype, None, kind))
                self.graph.inputs.append(v)
                continue
            if dims is None:
                if vi.name not in self.input_shapes:
                    raise ConverterError(RET_INFER_ERR, f"{self.where}: input {vi.name!r} has no shape; give it "
                                                        "with --inputShape")
                dims = [None] * len(self.input_shapes[vi.name])
            given = self.input_shapes.get(vi.name)
            if given is not None:
                _check_given_shape(vi.name, dims, given, self.where)
            if given is not None and not any(is_range(d) for d in given):
                axes = [i for i, d in enumerate(dims) if not _fixed_dim(d)]
                if axes:                    # the source's dynamic dims, fixed here: runtime/respecialize.py
                    self.dynamic_axes[vi.name] = axes
                shape = tuple(given)
            else:
                sym = _symbolic_dims(vi.name, dims, given)
                shape = tuple(sym) if all(isinstance(d, int) for d in sym) else None
                if shape is None:
                    self.input_dims[vi.name] = sym
            v = Value(vi.name, TensorType(dtype, shape))
            self.env[vi.name] = v
            self.graph.inputs.append(v)
        if self.input_dims:
            self.graph.metadata[INPUT_DIMS_KEY] = InputDims(self.input_dims).to_metadata()

    def _toposorted(self, g) -> list:
        """ONNX requires topological order, but not every exporter complies: sort (and detect cycles)."""
        known = visible_names(self.env)
        produced: dict[str, int] = {}
        for i, n in enumerate(g.node):          # SSA: each tensor has one producer
            for o in n.output:
                if not o:
                    continue
                if o in produced or o in known:
                    first = (f"node {g.node[produced[o]].name or g.node[produced[o]].op_type!r}" if o in produced
                             else "a graph input or initializer")
                    raise ConverterError(RET_GRAPH_FILE_ERR, f"{self.where}: tensor {o!r} is produced twice: by "
                                                             f"{first} and by node {n.name or n.op_type!r}")
                produced[o] = i
        order, state = [], {}
        for root in range(len(g.node)):
            stack = [(root, False)]
            while stack:
                i, done = stack.pop()
                if done:
                    state[i] = 2
                    order.append(g.node[i])
                    continue
                if state.get(i) == 2:
                    continue
                if state.get(i) == 1:
                    raise ConverterError(RET_GRAPH_FILE_ERR, f"{self.where}: the graph has a cycle through node "
                                                             f"{g.node[i].name or g.node[i].op_type!r}")
                state[i] = 1
                stack.append((i, True))
                for name in g.node[i].input:
                    if not name or name in known:
                        continue
                    if name not in produced:
                        n = g.node[i]
                        raise ConverterError(RET_GRAPH_FILE_ERR, f"{self.where}: input {name!r} of node "
                                             f"{n.name or n.op_type!r} is not produced by any node, initializer "
                                             "or graph input")
                    j = produced[name]
                    if state.get(j) == 1:
                        raise ConverterError(RET_GRAPH_FILE_ERR, f"{self.where}: the graph has a cycle through node"
                                                                 f" {g.node[j].name or g.node[j].op_type!r}")
                    if state.get(j) is None:
                        stack.append((j, False))
        return order

    def child(self, where: str, name: str, dynamic: bool = False) -> _GraphImporter:
        """An importer for a control-flow body nested in this graph (frontend/subgraph.py): same model and
        opset, its own graph, a scope that falls back to this one."""
        child = object.__new__(_GraphImporter)
        child.proto, child.where, child.opset = self.proto, where, self.opset
        child.input_shapes, child.dynamic_axes = {}, {}
        child.graph = Graph(name)
        child.em = _Emitter(child.graph, where, self.em.fold)
        child.env = Scope(self.env, dynamic)
        return child

    def _node(self, n: onnx.NodeProto) -> None:
        name = n.name or fresh_name(n.op_type)
        where = f"{self.where}: node {name!r} ({n.op_type})"
        attrs = {}
        for a in n.attribute:
            v = attribute_value(a, where)
            if isinstance(v, onnx.GraphProto) and n.op_type not in CONTROL_FLOW_OPS:
                raise ConverterError(RET_NOT_FIND_OP, f"{where}: a graph attribute on a {n.op_type} node is not "
                                                      "supported")
            if isinstance(v, onnx.TypeProto):
                if n.op_type == "Optional" and a.name == "type":
                    kind, dtype = kind_of_type(v, a.name, where)
                    attrs["elem_kind"], attrs["dtype"] = kind, int(dtype)
                continue
            if v is not None:
                attrs[a.name] = v
        if n.op_type in CONTROL_FLOW_OPS:
            outs = import_control_flow(self, n, attrs, name, where)
            for o, v in zip(n.output, outs or ()):
                if o:
                    self.env[o] = v
            return
        if n.op_type == "Constant":
            self.env[n.output[0]] = Value(n.output[0], const=c_array(constant_node_value(attrs)))
            return
        inputs = [self.env[i] if i else None for i in n.input]
        while inputs and inputs[-1] is None:
            inputs.pop()
        outs = [o for o in n.output]
        p = PendingNode(n.op_type, name, inputs, attrs, len(outs), _since_version(n.op_type, self.opset))
        result = None
        fix = LEGACY.get(n.op_type)
        try:
            if fix is not None:
                result = fix(p, self.em)
            if result is None:
                result = self.em.emit(p.op, p.inputs, p.attrs, p.n_outputs, name=p.name,
                                      out_names=[o or fresh_name(f"{name}_unused") for o in outs])
        except ConverterError:
            raise
        except (KernelError, ValueError, KeyError, IndexError, TypeError) as e:
            raise ConverterError(RET_INFER_ERR, f"{where}: cannot convert: {e}") from None
        for o, v in zip(outs, result):
            if o:
                if v.name != o and v.name not in self.env:
                    v.name = o      # values emitted by an upgrade keep the ONNX tensor name
                self.env[o] = v


MAX_TENSOR_BYTES = 2**63 - 1        # numpy's (and the native kernels' int64 offsets') limit


def _check_sizes(graph: Graph, where: str) -> None:
    """A tensor no machine can hold (e.g. declared dims of 2**40 x 2**40) fails here (-500), not at run time."""
    values = [(v, "input") for v in graph.inputs]
    values += [(o, f"output of node {n.name!r}") for n in graph.nodes for o in n.outputs if o is not None]
    for v, what in values:
        if v.type is None or not v.type.is_static:
            continue
        nbytes = int(np.prod(v.type.shape, dtype=object)) * v.type.dtype.np.itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise ConverterError(RET_INFER_ERR, f"{where}: tensor {v.name!r} ({what}) has shape {list(v.type.shape)}:"
                                                f" {nbytes} bytes, more than any tensor can hold (2**63 bytes)")


def _check_declared_outputs(g, outputs: list[Value], where: str) -> None:
    """A graph output whose declared element type or static dims contradict what its node computes is a broken
    model (-500): converting it would silently change the model's interface."""
    for vi, v in zip(g.output, outputs):
        if v.type is None or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if tt.elem_type and tt.elem_type != int(v.type.dtype):
            raise ConverterError(RET_INFER_ERR, f"{where}: graph output {vi.name!r} is declared as element type "
                                                f"{tt.elem_type}, but it is computed as {v.type.dtype.name}")
        if not tt.HasField("shape") or not v.type.is_static:
            continue
        # a dim_value of 0 or -1 is how older exporters write an unknown dim, as for inputs (_fixed_dim)
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim]
        shape = list(v.type.shape)
        if len(dims) != len(shape) or any(d is not None and d != s for d, s in zip(dims, shape)):
            declared = [d if d is not None else "?" for d in dims]
            raise ConverterError(RET_INFER_ERR, f"{where}: graph output {vi.name!r} is declared with shape "
                                                f"{declared}, but it is computed with shape {shape}")
