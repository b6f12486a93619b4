"""BitCast (ops/bitcast.py) against onnxruntime (opset 26)."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, ours

from converter_lite.ir.dtype import DType

OPSET = 26
SAME_WIDTH = [(np.float32, np.int32), (np.int32, np.float32), (np.uint32, np.int32), (np.float64, np.int64),
              (np.int64, np.float64), (np.uint64, np.float64), (np.int16, np.float16), (np.float16, np.uint16),
              (np.int8, np.uint8), (np.uint8, np.int8)]


def raw(shape, dtype, seed=0):
    """Arbitrary bit patterns of ``dtype`` (floats from integer bits, so NaN payloads and infinities occur)."""
    dt = np.dtype(dtype)
    bits = np.random.default_rng(seed).integers(0, 256, size=tuple(shape) + (dt.itemsize,), dtype=np.uint8)
    return np.ascontiguousarray(bits).view(dt).reshape(shape)


@pytest.mark.parametrize("src,dst", SAME_WIDTH)
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 0, 3)])
def test_bitcast_round_trips_bits(src, dst, shape):
    x = raw(shape, src)
    y = check("BitCast", {"x": x}, opset=OPSET, to=int(DType.from_np(dst)))[0]
    assert y.tobytes() == x.tobytes()


def test_bitcast_of_a_strided_view():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
    y = ours("BitCast", {"x": x}, to=int(DType.int32))[0]
    assert y.shape == (4, 3) and y.tolist() == np.ascontiguousarray(x).view(np.int32).tolist()


def test_bitcast_bool():
    """onnxruntime has no bool BitCast: a uint8 -> bool cast keeps 0/1 and maps any other byte to true."""
    y = ours("BitCast", {"x": np.array([0, 1, 7, 255], np.uint8)}, to=int(DType.bool))[0]
    assert y.dtype == np.bool_ and y.tolist() == [False, True, True, True]
    assert ours("BitCast", {"x": np.array([True, False])}, to=int(DType.uint8))[0].tolist() == [1, 0]


def test_bitcast_rejects():
    check_rejects("BitCast", {"x": np.zeros(3, np.float32)}, to=int(DType.float64))
    check_rejects("BitCast", {"x": np.zeros(3, np.float32)}, to=int(DType.string))
    check_rejects("BitCast", {"x": np.array(["a"], object)}, to=int(DType.int64))
    check_rejects("BitCast", {"x": np.zeros(3, np.float32)})
