"""Ops whose output is fixed by shapes and constants: Shape, Size, ConstantOfShape, Range, EyeLike.

In the static-shape IR they always fold to constants (their data inputs are static or only their shapes
matter), so they are OPAQUE: a fused kernel never has to compute them.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, reference
from .tensor import as_ints, const_input, typed


# -- Shape / Size --------------------------------------------------------------------------------------------
def _shape_range(rank: int, attrs) -> tuple[int, int]:
    """[start, end) of Shape: negative values count from the end, both are clamped to [0, rank]."""
    start, end = attrs.get("start", 0), attrs.get("end", rank)
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    return start, max(start, end)


def _shape_infer(node):
    start, end = _shape_range(node.inputs[0].type.rank, node.attrs)
    return [TensorType(DType.int64, (end - start,))]


@reference("Shape", infer=_shape_infer)
def shape(attrs, x):
    start, end = _shape_range(x.ndim, attrs)
    return np.array(x.shape[start:end], dtype=np.int64)


@reference("Size", infer=lambda n: [TensorType(DType.int64, ())])
def size(attrs, x):
    return np.array(x.size, dtype=np.int64)


# -- ConstantOfShape -----------------------------------------------------------------------------------------
def _fill_value(attrs) -> np.ndarray:
    value = attrs.get("value")
    if value is None:
        return np.zeros((), np.float32)
    value = np.asarray(value)
    if value.size != 1:
        raise KernelError(f"ConstantOfShape value must hold one element, got shape {list(value.shape)}")
    return value.reshape(())


def _constant_of_shape_shape(shape) -> tuple[int, ...]:
    dims = as_ints(shape, "ConstantOfShape input")
    if any(d < 0 for d in dims):
        raise KernelError(f"ConstantOfShape shape {dims} has a negative dim")
    return tuple(dims)


@reference("ConstantOfShape", static_inputs=(0,), infer=lambda n: [
    typed(_fill_value(n.attrs).dtype, _constant_of_shape_shape(const_input(n, 0)))])
def constant_of_shape(attrs, shape):
    return np.full(_constant_of_shape_shape(shape), _fill_value(attrs))


# -- Range ---------------------------------------------------------------------------------------------------
def _scalar(v, what):
    a = np.asarray(v)
    if a.size != 1:
        raise KernelError(f"Range {what} must be a scalar, got shape {list(a.shape)}")
    return a.reshape(())


def range_count(start, limit, delta) -> int:
    """max(ceil((limit - start) / delta), 0), with the difference taken in the input dtype as onnxruntime does."""
    if delta == 0:
        raise KernelError("Range delta is 0")
    if start.dtype.kind in "iu":
        return max(-((int(start) - int(limit)) // int(delta)), 0)
    with np.errstate(all="ignore"):
        diff = np.float64(limit - start)
    return max(math.ceil(diff / np.float64(delta)), 0)


def _range_args(start, limit, delta):
    start, limit, delta = (_scalar(v, w) for v, w in ((start, "start"), (limit, "limit"), (delta, "delta")))
    if not start.dtype == limit.dtype == delta.dtype:
        raise KernelError(f"Range inputs have different dtypes {start.dtype}, {limit.dtype}, {delta.dtype}")
    return start, limit, delta


def _range_infer(node):
    start, limit, delta = _range_args(*(const_input(node, i) for i in range(3)))
    return [typed(start.dtype, (range_count(start, limit, delta),))]


@reference("Range", static_inputs=(0, 1, 2), infer=_range_infer)
def range_(attrs, start, limit, delta):
    start, limit, delta = _range_args(start, limit, delta)
    n = range_count(start, limit, delta)
    if start.dtype.kind == "f":
        # start + i * delta in the input dtype, element by element like the ONNX definition
        return (start + np.arange(n).astype(start.dtype) * delta).astype(start.dtype)
    return (int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(start.dtype)


# -- EyeLike -------------------------------------------------------------------------------------------------
def _eye_dtype(attrs, in_dtype: DType) -> DType:
    return DType(attrs["dtype"]) if attrs.get("dtype") is not None else in_dtype


def _eye_infer(node):
    t = node.inputs[0].type
    if t.rank != 2:
        raise KernelError(f"EyeLike input must be 2-D, got rank {t.rank}")
    return [TensorType(_eye_dtype(node.attrs, t.dtype), t.shape)]


@reference("EyeLike", infer=_eye_infer)
def eye_like(attrs, x):
    if x.ndim != 2:
        raise KernelError(f"EyeLike input must be 2-D, got rank {x.ndim}")
    dtype = _eye_dtype(attrs, DType.from_np(x.dtype))
    return np.eye(x.shape[0], x.shape[1], attrs.get("k", 0), dtype=dtype.np)
