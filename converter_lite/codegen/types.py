"""IR dtypes -> LLVM types, and the storage <-> register conversions of scalars.

Every IR dtype has two LLVM types:

* the *storage* type, what a buffer holds (``bool`` is one byte, ``float16`` is ``half``);
* the *compute* type, what a scalar is while a kernel works on it (``bool`` is ``i1``, ``float16`` is
  ``float``: half-precision math runs in single precision and is rounded back after every op, as numpy does).
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.dtype import DType

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
VOID = ir.VoidType()
BYTE_PTR = I8.as_pointer()
BYTE_PTR_PTR = BYTE_PTR.as_pointer()

_STORAGE = {
    DType.float16: F16, DType.float32: F32, DType.float64: F64, DType.bool: I8,
    DType.int8: I8, DType.uint8: I8, DType.int16: ir.IntType(16), DType.uint16: ir.IntType(16),
    DType.int32: I32, DType.uint32: I32, DType.int64: I64, DType.uint64: I64,
}


class UnsupportedDTypeError(TypeError):
    """A dtype (string) that native kernels cannot hold."""


def storage_type(dtype: DType) -> ir.Type:
    try:
        return _STORAGE[dtype]
    except KeyError:
        raise UnsupportedDTypeError(f"dtype {dtype.name} has no native representation") from None


def compute_type(dtype: DType) -> ir.Type:
    if dtype is DType.float16:
        return F32
    if dtype is DType.bool:
        return I1
    return storage_type(dtype)


def is_float(dtype: DType) -> bool:
    return dtype.is_float


def is_unsigned(dtype: DType) -> bool:
    return dtype in (DType.uint8, DType.uint16, DType.uint32, DType.uint64)


def to_compute(b: ir.IRBuilder, v: ir.Value, dtype: DType) -> ir.Value:
    """A loaded storage scalar -> compute scalar."""
    if dtype is DType.float16:
        return b.fpext(v, F32)
    if dtype is DType.bool:
        return b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
    return v


def to_storage(b: ir.IRBuilder, v: ir.Value, dtype: DType) -> ir.Value:
    """A compute scalar -> the value to store."""
    if dtype is DType.float16:
        return b.fptrunc(v, F16)
    if dtype is DType.bool:
        return b.zext(v, I8)
    return v


def round_to_dtype(b: ir.IRBuilder, v: ir.Value, dtype: DType) -> ir.Value:
    """Rounds a compute scalar to its dtype's precision (float16 results are rounded after each op)."""
    if dtype is DType.float16:
        return b.fpext(b.fptrunc(v, F16), F32)
    return v


def constant(dtype: DType, value) -> ir.Constant:
    """A compute-typed constant of ``dtype`` (numpy scalar or Python number)."""
    ty = compute_type(dtype)
    if dtype is DType.bool:
        return ir.Constant(I1, int(bool(value)))
    if dtype.is_float:
        if dtype is DType.float16:
            import numpy as np
            value = float(np.float16(value))
        return ir.Constant(ty, float(value))
    bits = ty.width
    v = int(value) & ((1 << bits) - 1)
    return ir.Constant(ty, v)


def storage_constant(dtype: DType, value) -> ir.Constant:
    """A storage-typed constant (for constant tables in memory)."""
    if dtype is DType.bool:
        return ir.Constant(I8, int(bool(value)))
    if dtype is DType.float16:
        return ir.Constant(F16, float(value))
    return constant(dtype, value)
