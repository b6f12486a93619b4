"""QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear (quantize.py) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, data

from converter_lite.ir.dtype import DType

QTYPES = [np.uint8, np.int8, np.uint16, np.int16]


def params(shape, qtype, seed=0):
    rng = np.random.default_rng(seed)
    info = np.iinfo(qtype)
    scale = (rng.random(shape) * 0.2 + 0.01).astype(np.float32)
    zp = rng.integers(info.min // 4, info.max // 4 + 1, size=shape).astype(qtype)
    return scale, zp


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("shape,pshape,axis,block", [((2, 3, 4), (), 1, 0), ((2, 3, 4), (3,), 1, 0),
                                                     ((2, 3, 4), (4,), -1, 0), ((6, 4), (2, 4), 0, 3),
                                                     ((5, 4), (2, 4), 0, 3), ((2, 0, 3), (), 1, 0)])
def test_quantize_linear(shape, pshape, axis, block, qtype):
    scale, zp = params(pshape, qtype)
    x = data(shape) * 3   # saturates in the narrow types
    attrs = {"axis": axis} | ({"block_size": block} if block else {})
    check("QuantizeLinear", {"x": x, "s": scale, "z": zp}, **attrs)
    check("DequantizeLinear", {"x": data(shape, qtype) if qtype in (np.uint8, np.int8)
                               else np.asarray(np.random.default_rng(1).integers(-99, 99, shape)).astype(qtype),
                               "s": scale, "z": zp}, **attrs)


def test_quantize_defaults_and_output_dtype():
    x = data((3, 4))
    check("QuantizeLinear", {"x": x, "s": np.float32(0.05)})                  # uint8, no zero point
    check("QuantizeLinear", {"x": x, "s": np.float32(0.05)}, output_dtype=int(DType.int8))
    check("QuantizeLinear", {"x": x.astype(np.float16), "s": np.float16(0.05), "z": np.int8(3)})
    check("QuantizeLinear", {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300], np.float32), "s": np.float32(1)})


def test_dequantize_int32_and_float16():
    check("DequantizeLinear", {"x": np.array([-5, 0, 1 << 20], np.int32), "s": np.float32(0.5)})
    check("DequantizeLinear", {"x": np.arange(-4, 4, dtype=np.int8), "s": np.float16(0.25), "z": np.int8(1)},
          rtol=1e-3)


def test_quantize_rejects_bad_scale_shape():
    check_rejects("QuantizeLinear", {"x": data((2, 3)), "s": np.ones(2, np.float32)}, infer=False)
    check_rejects("QuantizeLinear", {"x": data((2, 3)), "s": np.float32(1)}, output_dtype=int(DType.float32))


@pytest.mark.parametrize("shape,scale", [((3, 4), 1.0), ((2, 5), 100.0), ((6,), 0.01), ((0, 3), 1.0)])
def test_dynamic_quantize_linear(shape, scale):
    x = data(shape) * scale
    check("DynamicQuantizeLinear", {"x": x}, n_outputs=3)
    check("DynamicQuantizeLinear", {"x": np.abs(x) + 1}, n_outputs=3)
    check("DynamicQuantizeLinear", {"x": -np.abs(x)}, n_outputs=3)
