"""Sequences and optionals as run-time values: a sequence is a Python list of ndarrays, an optional is its
value or None.  Their IR types are ``TensorType`` of kind ``sequence`` / ``optional`` / ``optional_sequence``
(no shape: the elements' shapes may differ).

Ops (opset 11-18 semantics): SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
SequenceLength, SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement.
Positions may be negative (counted from the end); one out of range is a KernelError naming the range.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .registry import KernelError, reference


def _seq(x, op: str, i: int = 0) -> list:
    if not isinstance(x, list):
        raise KernelError(f"{op}: input {i} must be a sequence, got {type(x).__name__}")
    return x


def _position(pos, n: int, op: str, allow_end: bool) -> int:
    p = int(np.asarray(pos).reshape(-1)[0])
    hi = n if allow_end else n - 1
    if not -n <= p <= hi:
        raise KernelError(f"{op}: position {p} is out of range [{-n}, {hi}] for a sequence of {n} elements")
    return p + n if p < 0 else p


def _check_dtype(seq: list, t: np.ndarray, op: str) -> None:
    if seq and np.asarray(seq[0]).dtype != t.dtype:
        raise KernelError(f"{op}: tensor of dtype {t.dtype} does not match the sequence's {np.asarray(seq[0]).dtype}")


# -- kernels ---------------------------------------------------------------------------------------------
def _sequence_empty(attrs):
    return ([],)


def _sequence_construct(attrs, *xs):
    seq = [np.asarray(x) for x in xs]
    if len({a.dtype for a in seq}) > 1:
        raise KernelError("SequenceConstruct: inputs have different element types")
    return (seq,)


def _sequence_insert(attrs, seq, tensor, position=None):
    seq = list(_seq(seq, "SequenceInsert"))
    t = np.asarray(tensor)
    _check_dtype(seq, t, "SequenceInsert")
    p = len(seq) if position is None else _position(position, len(seq), "SequenceInsert", True)
    seq.insert(p, t)
    return (seq,)


def _sequence_at(attrs, seq, position):
    seq = _seq(seq, "SequenceAt")
    return seq[_position(position, len(seq), "SequenceAt", False)]


def _sequence_erase(attrs, seq, position=None):
    seq = list(_seq(seq, "SequenceErase"))
    if not seq:
        raise KernelError("SequenceErase: the sequence is empty")
    p = len(seq) - 1 if position is None else _position(position, len(seq), "SequenceErase", False)
    del seq[p]
    return (seq,)


def _sequence_length(attrs, seq):
    return np.array(len(_seq(seq, "SequenceLength")), np.int64)


def _split_to_sequence(attrs, x, split=None):
    x = np.asarray(x)
    axis = int(attrs.get("axis", 0))
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise KernelError(f"SplitToSequence: axis {axis} is out of range for rank {x.ndim}")
    axis %= max(x.ndim, 1)
    n = x.shape[axis]
    if split is None:
        parts = [np.take(x, [i], axis=axis) for i in range(n)]
        if int(attrs.get("keepdims", 1)) == 0:
            parts = [np.squeeze(p, axis=axis) for p in parts]
        return (parts,)
    s = np.asarray(split).astype(np.int64)
    if s.ndim == 0:
        size = int(s)
        if size <= 0:
            raise KernelError(f"SplitToSequence: split size {size} must be positive")
        lengths = [size] * (n // size) + ([n % size] if n % size else [])
    else:
        lengths = [int(v) for v in s]
        if sum(lengths) != n or any(v < 0 for v in lengths):
            raise KernelError(f"SplitToSequence: split {lengths} does not add up to dim {n} of axis {axis}")
    bounds = np.cumsum([0] + lengths)
    return ([np.take(x, range(bounds[i], bounds[i + 1]), axis=axis) for i in range(len(lengths))],)


def _concat_from_sequence(attrs, seq):
    seq = [np.asarray(a) for a in _seq(seq, "ConcatFromSequence")]
    if not seq:
        raise KernelError("ConcatFromSequence: the sequence is empty")
    axis, new = int(attrs["axis"]), int(attrs.get("new_axis", 0))
    rank = seq[0].ndim + (1 if new else 0)
    if not -rank <= axis < rank:
        raise KernelError(f"ConcatFromSequence: axis {axis} is out of range for rank {rank}")
    try:
        return np.stack(seq, axis=axis) if new else np.concatenate(seq, axis=axis)
    except ValueError as e:
        raise KernelError(f"ConcatFromSequence: {e}") from None


def _optional(attrs, x=None):
    return (x,)


def _optional_has_element(attrs, x=None):
    return np.array(x is not None, np.bool_)


def _optional_get_element(attrs, x):
    if x is None:
        raise KernelError("OptionalGetElement: the optional is empty")
    return (x,) if isinstance(x, list) else x


# -- inference ---------------------------------------------------------------------------------------------
def _in(node: Node, i: int) -> TensorType | None:
    v = node.inputs[i] if i < len(node.inputs) else None
    return None if v is None else v.type


def _seq_type(node: Node) -> list[TensorType]:
    t = _in(node, 0)
    if t is None or t.kind != "sequence":
        raise KernelError(f"{node.op}: input 0 must be a sequence, got {t}")
    return [t]


def _elem_tensor(node: Node) -> list[TensorType]:
    return [TensorType(_seq_type(node)[0].dtype, None)]


def _infer_optional(node: Node) -> list[TensorType]:
    t = _in(node, 0)
    if t is None:
        kind = node.attrs.get("elem_kind", "tensor")
        return [TensorType(DType(node.attrs.get("dtype", int(DType.float32))), None,
                           "optional_sequence" if kind == "sequence" else "optional")]
    if t.kind.startswith("optional"):
        raise KernelError("Optional: input is already an optional")
    return [TensorType(t.dtype, None, "optional_sequence" if t.kind == "sequence" else "optional")]


def _infer_get_element(node: Node) -> list[TensorType]:
    t = _in(node, 0)
    if t is None:
        raise KernelError("OptionalGetElement needs an input")
    if t.kind == "optional":
        return [TensorType(t.dtype, None)]
    if t.kind == "optional_sequence":
        return [TensorType(t.dtype, None, "sequence")]
    return [t]


def _infer_construct(node: Node) -> list[TensorType]:
    dtypes = {v.type.dtype for v in node.inputs if v is not None}
    if len(dtypes) != 1:
        raise KernelError(f"SequenceConstruct: inputs must share one element type, got {sorted(map(str, dtypes))}")
    return [TensorType(dtypes.pop(), None, "sequence")]


def _infer_insert(node: Node) -> list[TensorType]:
    t = _seq_type(node)[0]
    if _in(node, 1) is not None and _in(node, 1).dtype != t.dtype:
        raise KernelError(f"SequenceInsert: tensor {_in(node, 1)} does not match {t}")
    return [t]


_SCALAR_INT64 = TensorType(DType.int64, ())
_INFER = {
    "SequenceEmpty": lambda n: [TensorType(DType(n.attrs.get("dtype", int(DType.float32))), None, "sequence")],
    "SequenceConstruct": _infer_construct,
    "SequenceInsert": _infer_insert,
    "SequenceAt": _elem_tensor,
    "SequenceErase": _seq_type,
    "SequenceLength": lambda n: [_SCALAR_INT64] if _seq_type(n) else [],
    "SplitToSequence": lambda n: [TensorType(_in(n, 0).dtype, None, "sequence")],
    "ConcatFromSequence": _elem_tensor,
    "Optional": _infer_optional,
    "OptionalHasElement": lambda n: [TensorType(DType.bool, ())],
    "OptionalGetElement": _infer_get_element,
}
_KERNELS = {
    "SequenceEmpty": _sequence_empty, "SequenceConstruct": _sequence_construct, "SequenceInsert": _sequence_insert,
    "SequenceAt": _sequence_at, "SequenceErase": _sequence_erase, "SequenceLength": _sequence_length,
    "SplitToSequence": _split_to_sequence, "ConcatFromSequence": _concat_from_sequence, "Optional": _optional,
    "OptionalHasElement": _optional_has_element, "OptionalGetElement": _optional_get_element,
}
for _op, _fn in _KERNELS.items():
    reference(_op, infer=_INFER[_op], any_shape=True)(_fn)

SEQUENCE_OPS = frozenset(_KERNELS)
