"""The op table: one entry per op type, holding its numpy reference kernel, its fusion kind and its
shape/dtype inference.

The reference kernels are the living specification of the IR: every pass and every native kernel is tested
against them.  Semantics are those of the newest ONNX opset for the op (the importer upgrades older forms).

Kernel signature: ``fn(attrs: dict, *inputs) -> ndarray | tuple[ndarray, ...]`` where ``inputs`` has one entry
per node input (``None`` for an omitted optional input).  A kernel may return more outputs than the node has;
the extra ones are dropped.

Inference signature: ``fn(node) -> list[TensorType]``; it may read ``node.inputs[i].type`` and, for inputs
that must be constant (shapes, axes, ...), ``node.inputs[i].const``.  Ops without an inference function are
inferred by evaluating the kernel on zero-filled inputs of the right shapes (constants keep their values).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from ..tables import registrar


class OpKind(enum.IntEnum):
    """Fusion lattice (TVM numbering): lower kinds fuse more freely."""
    ELEMWISE = 0      # one output element from the same-index input elements
    BROADCAST = 1     # elementwise with implicit broadcasting of some inputs
    INJECTIVE = 2     # pure index maps: Reshape, Transpose, Slice, Expand, Concat, ...
    REDUCE = 3        # reductions over some axes
    OPAQUE = 8        # everything else (MatMul, Conv, Gather, ...): never inside a fused kernel


@dataclass
class OpDef:
    name: str
    compute: Callable
    kind: OpKind = OpKind.OPAQUE
    infer: Callable[[Node], list[TensorType]] | None = None
    # False for ops whose result is not a pure function of the inputs (random generators)
    deterministic: bool = True
    # indices of inputs that must be constants for static shapes (Reshape's shape, Slice's starts, ...)
    static_inputs: tuple[int, ...] = ()
    # True when ``infer`` handles inputs of unknown shape and non-tensor kinds itself (control flow,
    # sequences, optionals); other ops' outputs become dynamic tensors when an input is dynamic
    any_shape: bool = False


OPS: dict[str, OpDef] = {}


class KernelError(ValueError):
    """A reference kernel rejected its inputs (bad attribute, shape or value); the message says why."""


class DynamicShapeError(KernelError):
    """The output shape depends on data only known at run time (see ``infer_dynamic``)."""


def _op_def(name: str, fn: Callable, kind: OpKind = OpKind.OPAQUE, infer: Callable | None = None,
            deterministic: bool = True, static_inputs: tuple[int, ...] = (), any_shape: bool = False) -> OpDef:
    return OpDef(name, fn, kind, infer, deterministic, static_inputs, any_shape)


# ``@reference(*names, kind=..., infer=..., deterministic=..., static_inputs=...)``: registers ``fn`` as the
# reference kernel of each op type in ``names``
reference = registrar(OPS, "op", make=_op_def)


def shape_fn(*names: str):
    """Registers an inference function for already-registered op types."""
    def deco(fn):
        for name in names:
            OPS[name].infer = fn
        return fn
    return deco


def evaluate(op: str, attrs: dict, inputs: list, n_outputs: int = 1) -> list[np.ndarray]:
    """Runs the reference kernel of ``op``; always returns a list of ``n_outputs`` arrays."""
    out = OPS[op].compute(attrs, *inputs)
    if isinstance(out, (tuple, list)):
        out = list(out)[:n_outputs]
    else:
        out = [out]
    # a list is a sequence value and None an empty optional (ops/sequence.py); anything else is a tensor
    return [o if o is None or isinstance(o, list) else np.asarray(o) for o in out]


def evaluate_node(node: Node, inputs: list) -> list[np.ndarray]:
    outs = evaluate(node.op, node.attrs, inputs, len(node.outputs))
    if len(outs) < len(node.outputs):
        raise KernelError(f"{node.op} node {node.name!r} produced {len(outs)} outputs, expected {len(node.outputs)}")
    return outs


def infer_types(node: Node) -> list[TensorType]:
    """Output types of ``node`` from its input types (and constant inputs)."""
    d = OPS[node.op]
    if d.any_shape:
        return d.infer(node)
    if any(v is not None and v.type.shape is None for v in node.inputs):
        raise DynamicShapeError(f"{node.op} node {node.name!r} has an input of dynamic shape")
    for i in d.static_inputs:
        if i < len(node.inputs) and node.inputs[i] is not None and node.inputs[i].const is None:
            raise DynamicShapeError(f"input {i} ({node.inputs[i].name!r}) of {node.op} node {node.name!r} is "
                                    "computed at run time, so its output shape is only known at run time")
    if d.infer is not None:
        return d.infer(node)
    inputs = []
    for v in node.inputs:
        if v is None:
            inputs.append(None)
        elif v.const is not None:
            inputs.append(v.const)
        else:
            inputs.append(np.zeros(v.type.shape, v.type.dtype.np))
    with np.errstate(all="ignore"):
        outs = evaluate_node(node, inputs)
    return [TensorType.of(o) for o in outs]


# -- helpers shared by the inference functions -------------------------------------------------------------
def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    if len(shapes) == 2 and (shapes[0] == shapes[1] or not shapes[1]):
        return tuple(int(d) for d in shapes[0])           # (most calls: 0.6 us, numpy's 1.6)
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError as e:
        why = " broadcast to a shape too large for any tensor" if "too large" in str(e) else " cannot be broadcast"
        raise KernelError("shapes " + ", ".join(str(list(s)) for s in shapes) + why) from None


def infer_same(node: Node) -> list[TensorType]:
    """Unary elementwise: output type equals the first input's."""
    return [node.inputs[0].type]


def infer_broadcast(node: Node) -> list[TensorType]:
    """Broadcasting elementwise op whose result has the first input's dtype."""
    shapes = [v.type.shape for v in node.inputs if v is not None]
    return [TensorType(node.inputs[0].type.dtype, broadcast_shapes(*shapes))]


def infer_broadcast_bool(node: Node) -> list[TensorType]:
    """Broadcasting comparison/logic op: bool result."""
    shapes = [v.type.shape for v in node.inputs if v is not None]
    return [TensorType(DType.bool, broadcast_shapes(*shapes))]


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise KernelError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


# -- dtype-only inference for dynamic-shape values ----------------------------------------------------------------
_BOOL_OPS = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN",
             "IsInf", "RegexFullMatch"}
_INT64_OPS = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero", "NonMaxSuppression"}


def _first_input_dtype(node: Node) -> DType:
    for v in node.inputs:
        if v is not None:
            return v.type.dtype
    return DType.float32


def _attr_dtype(node: Node, key: str, default: DType) -> DType:
    v = node.attrs.get(key)
    return DType(v) if v is not None else default


def _code_dtype(node: Node, key: str, default: DType) -> DType:
    """A type-code attribute where 0 (UNDEFINED) means unset, as QuantizeLinear's ``output_dtype``."""
    v = node.attrs.get(key, 0)
    return DType(v) if v else default


def _input_dtype(node: Node, i: int, default: DType) -> DType:
    """The dtype of input ``i``, or ``default`` when the input is omitted."""
    v = node.inputs[i] if i < len(node.inputs) else None
    return v.type.dtype if v is not None else default


_DTYPE_RULES: dict[str, Callable[[Node], list[DType]]] = {
    "Cast": lambda n: [DType(n.attrs["to"])],
    "CastLike": lambda n: [n.inputs[1].type.dtype],
    "ConstantOfShape": lambda n: [DType.from_np(n.attrs["value"].dtype) if "value" in n.attrs else DType.float32],
    "TopK": lambda n: [n.inputs[0].type.dtype, DType.int64],
    "Unique": lambda n: [n.inputs[0].type.dtype] + [DType.int64] * 3,
    "MaxPool": lambda n: [n.inputs[0].type.dtype, DType.int64],
    "Dropout": lambda n: [n.inputs[0].type.dtype, DType.bool],
    "EyeLike": lambda n: [_attr_dtype(n, "dtype", n.inputs[0].type.dtype)],
    "Range": lambda n: [n.inputs[0].type.dtype],
    "OneHot": lambda n: [n.inputs[2].type.dtype],
    "RandomNormalLike": lambda n: [_attr_dtype(n, "dtype", n.inputs[0].type.dtype)],
    "RandomUniformLike": lambda n: [_attr_dtype(n, "dtype", n.inputs[0].type.dtype)],
    "Bernoulli": lambda n: [_attr_dtype(n, "dtype", n.inputs[0].type.dtype)],
    "Multinomial": lambda n: [_attr_dtype(n, "dtype", DType.int32)],
    "MatMulInteger": lambda n: [DType.int32],
    "LayerNormalization": lambda n: [n.inputs[0].type.dtype] + [
        DType.float32 if n.attrs.get("stash_type", 1) == 1 else n.inputs[0].type.dtype] * 2,
    "RandomNormal": lambda n: [_attr_dtype(n, "dtype", DType.float32)],
    "RandomUniform": lambda n: [_attr_dtype(n, "dtype", DType.float32)],
    "Where": lambda n: [n.inputs[1].type.dtype],
    "BitCast": lambda n: [DType(n.attrs["to"])],
    "QuantizeLinear": lambda n: [_input_dtype(n, 2, _code_dtype(n, "output_dtype", DType.uint8))],
    "DequantizeLinear": lambda n: [_code_dtype(n, "output_dtype", n.inputs[1].type.dtype)],
    "DynamicQuantizeLinear": lambda n: [DType.uint8, DType.float32, DType.uint8],
    "ConvInteger": lambda n: [DType.int32],
    "QLinearConv": lambda n: [_input_dtype(n, 7, DType.uint8)],
    "QLinearMatMul": lambda n: [_input_dtype(n, 7, DType.uint8)],
    "HannWindow": lambda n: [_attr_dtype(n, "output_datatype", DType.float32)],
    "HammingWindow": lambda n: [_attr_dtype(n, "output_datatype", DType.float32)],
    "BlackmanWindow": lambda n: [_attr_dtype(n, "output_datatype", DType.float32)],
    "MelWeightMatrix": lambda n: [_attr_dtype(n, "output_datatype", DType.float32)],
    "BatchNormalization": lambda n: [n.inputs[0].type.dtype, n.inputs[3].type.dtype, n.inputs[4].type.dtype],
    "Attention": lambda n: [n.inputs[0].type.dtype, n.inputs[1].type.dtype, n.inputs[2].type.dtype,
                            n.inputs[0].type.dtype],
    "StringSplit": lambda n: [DType.string, DType.int64],
    "TfIdfVectorizer": lambda n: [DType.float32],
}


def infer_dynamic(node: Node) -> list[TensorType]:
    """Output types with unknown shapes (``shape=None``) for a node whose shapes depend on run-time data."""
    if node.op == "Identity":               # passes any kind through
        return [node.inputs[0].type if not node.inputs[0].type.is_tensor else TensorType(node.inputs[0].type.dtype,
                                                                                             None)]
    rule = _DTYPE_RULES.get(node.op)
    if rule is not None:
        dtypes = rule(node)
    elif node.op in _BOOL_OPS:
        dtypes = [DType.bool]
    elif node.op in _INT64_OPS:
        dtypes = [DType.int64]
    else:
        dtypes = [_first_input_dtype(node)]
    dtypes = dtypes + [dtypes[-1]] * (len(node.outputs) - len(dtypes))
    return [TensorType(dt, None) for dt in dtypes[:len(node.outputs)]]
