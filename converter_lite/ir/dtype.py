"""Element types of the IR and their numpy counterparts.

The names are the lower-case ONNX names; the enum values are ONNX ``TensorProto`` data-type codes, so that the
importer can map them without a table and the ``.ms`` file stores a stable integer.

The low-precision types (bfloat16, the four float8 types, float4e2m1, int4/uint4; ``is_low_precision``) have no
numpy type of their own: their arrays use ml_dtypes' (the package onnx itself reads them with), one element per
numpy element (int4/uint4/float4 unpacked, one byte each).  Only the reference kernels compute on them; the
native code generator has no storage type for them, so the fusion leaves their nodes unfused.
"""
from __future__ import annotations

import enum

import ml_dtypes
import numpy as np


class DType(enum.IntEnum):
    float32 = 1
    uint8 = 2
    int8 = 3
    uint16 = 4
    int16 = 5
    int32 = 6
    int64 = 7
    string = 8
    bool = 9
    float16 = 10
    float64 = 11
    uint32 = 12
    uint64 = 13
    bfloat16 = 16
    float8e4m3fn = 17
    float8e4m3fnuz = 18
    float8e5m2 = 19
    float8e5m2fnuz = 20
    uint4 = 21
    int4 = 22
    float4e2m1 = 23

    @property
    def np(self) -> np.dtype:
        return _TO_NP[self]

    @property
    def is_float(self) -> bool:
        return self in _FLOATS

    @property
    def is_int(self) -> bool:
        return self in _INTS

    @property
    def is_signed(self) -> bool:
        return self in (DType.int8, DType.int16, DType.int32, DType.int64, DType.int4) or self.is_float

    @property
    def is_low_precision(self) -> bool:
        """An ml_dtypes type (see the module docstring): reference kernels only, never native code."""
        return self in _LOW_PRECISION

    @property
    def itemsize(self) -> int:
        return _TO_NP[self].itemsize

    @property
    def short(self) -> str:
        return _SHORT[self]

    @staticmethod
    def from_np(dt) -> "DType":
        dt = np.dtype(dt)
        if dt.kind in ("U", "S", "O"):
            return DType.string
        try:
            return _FROM_NP[dt]
        except KeyError:
            raise TypeError(f"numpy dtype {dt} has no IR counterpart") from None


_TO_NP = {
    DType.float32: np.dtype(np.float32), DType.uint8: np.dtype(np.uint8), DType.int8: np.dtype(np.int8),
    DType.uint16: np.dtype(np.uint16), DType.int16: np.dtype(np.int16), DType.int32: np.dtype(np.int32),
    DType.int64: np.dtype(np.int64), DType.string: np.dtype(object), DType.bool: np.dtype(np.bool_),
    DType.float16: np.dtype(np.float16), DType.float64: np.dtype(np.float64), DType.uint32: np.dtype(np.uint32),
    DType.uint64: np.dtype(np.uint64), DType.bfloat16: np.dtype(ml_dtypes.bfloat16),
    DType.float8e4m3fn: np.dtype(ml_dtypes.float8_e4m3fn), DType.float8e4m3fnuz: np.dtype(ml_dtypes.float8_e4m3fnuz),
    DType.float8e5m2: np.dtype(ml_dtypes.float8_e5m2), DType.float8e5m2fnuz: np.dtype(ml_dtypes.float8_e5m2fnuz),
    DType.uint4: np.dtype(ml_dtypes.uint4), DType.int4: np.dtype(ml_dtypes.int4),
    DType.float4e2m1: np.dtype(ml_dtypes.float4_e2m1fn),
}
_FROM_NP = {v: k for k, v in _TO_NP.items() if k is not DType.string}
_INTS = (DType.uint8, DType.int8, DType.uint16, DType.int16, DType.int32, DType.int64, DType.uint32, DType.uint64,
         DType.uint4, DType.int4)
_FLOATS = (DType.float16, DType.float32, DType.float64, DType.bfloat16, DType.float8e4m3fn, DType.float8e4m3fnuz,
           DType.float8e5m2, DType.float8e5m2fnuz, DType.float4e2m1)
_LOW_PRECISION = (DType.bfloat16, DType.float8e4m3fn, DType.float8e4m3fnuz, DType.float8e5m2, DType.float8e5m2fnuz,
                  DType.uint4, DType.int4, DType.float4e2m1)
_SHORT = {
    DType.float32: "f32", DType.uint8: "u8", DType.int8: "i8", DType.uint16: "u16", DType.int16: "i16",
    DType.int32: "i32", DType.int64: "i64", DType.string: "str", DType.bool: "bool", DType.float16: "f16",
    DType.float64: "f64", DType.uint32: "u32", DType.uint64: "u64", DType.bfloat16: "bf16",
    DType.float8e4m3fn: "f8e4m3fn", DType.float8e4m3fnuz: "f8e4m3fnuz", DType.float8e5m2: "f8e5m2",
    DType.float8e5m2fnuz: "f8e5m2fnuz", DType.uint4: "u4", DType.int4: "i4", DType.float4e2m1: "f4e2m1",
}
