"""Element types of the IR and their numpy counterparts.

The names are the lower-case ONNX names; the enum values are ONNX ``TensorProto`` data-type codes, so that the
importer can map them without a table and the ``.ms`` file stores a stable integer.
"""
from __future__ import annotations

import enum

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

    @property
    def np(self) -> np.dtype:
        return _TO_NP[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.float16, DType.float32, DType.float64)

    @property
    def is_int(self) -> bool:
        return self in _INTS

    @property
    def is_signed(self) -> bool:
        return self in (DType.int8, DType.int16, DType.int32, DType.int64) or self.is_float

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
    DType.uint64: np.dtype(np.uint64),
}
_FROM_NP = {v: k for k, v in _TO_NP.items() if k is not DType.string}
_INTS = (DType.uint8, DType.int8, DType.uint16, DType.int16, DType.int32, DType.int64, DType.uint32, DType.uint64)
_SHORT = {
    DType.float32: "f32", DType.uint8: "u8", DType.int8: "i8", DType.uint16: "u16", DType.int16: "i16",
    DType.int32: "i32", DType.int64: "i64", DType.string: "str", DType.bool: "bool", DType.float16: "f16",
    DType.float64: "f64", DType.uint32: "u32", DType.uint64: "u64",
}
