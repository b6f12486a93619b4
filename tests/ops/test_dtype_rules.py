"""The dtype-only inference of run-time-shape values (``infer_dynamic``, ``_DTYPE_RULES`` in registry.py) agrees
with the static inference for every op whose output dtype is not simply its first input's."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import ir_node

import converter_lite.ops  # noqa: F401  (registers every op)
from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import infer_dynamic, infer_types

f32, f16, u8, i8, i64 = np.float32, np.float16, np.uint8, np.int8, np.int64


def z(shape, dtype):
    return np.zeros(shape, dtype)


def s(v, dtype=f32):
    return np.array(v, dtype)


# (op, inputs, names of constant inputs, attrs, number of outputs)
SAMPLES = [
    ("QuantizeLinear", {"x": z((2, 3), f32), "s": s(0.1), "zp": s(3, i8)}, (), {}, 1),
    ("QuantizeLinear", {"x": z((2, 3), f32), "s": s(0.1)}, (), {}, 1),
    ("QuantizeLinear", {"x": z((2, 3), f16), "s": s(0.1, f16)}, (), {"output_dtype": int(DType.int16)}, 1),
    ("QuantizeLinear", {"x": z((2, 3), f32), "s": s(0.1), "zp": s(3, u8)}, (), {"output_dtype": 0}, 1),
    ("DequantizeLinear", {"x": z((2, 3), i8), "s": s(0.1, f16)}, (), {}, 1),
    ("DequantizeLinear", {"x": z((2, 3), u8), "s": s(0.1), "zp": s(1, u8)}, (), {"output_dtype": int(DType.float16)}, 1),
    ("DynamicQuantizeLinear", {"x": z((2, 3), f32)}, (), {}, 3),
    ("ConvInteger", {"x": z((1, 1, 4, 4), u8), "w": z((2, 1, 2, 2), u8)}, (), {}, 1),
    ("QLinearConv", {"x": z((1, 1, 4, 4), u8), "xs": s(0.1), "xz": s(0, u8), "w": z((2, 1, 2, 2), i8),
                     "ws": s(0.1), "wz": s(0, i8), "ys": s(0.2), "yz": s(0, i8)}, (), {}, 1),
    ("QLinearMatMul", {"a": z((2, 3), u8), "as": s(0.1), "az": s(0, u8), "b": z((3, 4), u8), "bs": s(0.1),
                       "bz": s(0, u8), "ys": s(0.2), "yz": s(0, u8)}, (), {}, 1),
    ("MatMulInteger", {"a": z((2, 3), i8), "b": z((3, 4), i8)}, (), {}, 1),
    ("HannWindow", {"n": s(8, i64)}, ("n",), {"output_datatype": int(DType.float64)}, 1),
    ("HammingWindow", {"n": s(8, i64)}, ("n",), {}, 1),
    ("BlackmanWindow", {"n": s(8, i64)}, ("n",), {"output_datatype": int(DType.float16)}, 1),
    ("MelWeightMatrix", {"bins": s(4, i64), "dft": s(16, i64), "rate": s(8000, i64), "lo": s(0.0), "hi": s(4000.0)},
     ("bins", "dft", "rate", "lo", "hi"), {"output_datatype": int(DType.float64)}, 1),
    ("Where", {"c": z((2, 3), np.bool_), "x": z((2, 3), i64), "y": z((2, 3), i64)}, (), {}, 1),
    ("BitCast", {"x": z((2, 3), f32)}, (), {"to": int(DType.int32)}, 1),
    ("RandomNormal", {}, (), {"shape": (2, 3), "dtype": int(DType.float64)}, 1),
    ("RandomUniform", {}, (), {"shape": (2, 3)}, 1),
    ("BatchNormalization", {"x": z((2, 3, 4), f16), "sc": z(3, f16), "b": z(3, f16), "m": z(3, f32),
                            "v": z(3, f32)}, (), {"training_mode": 1}, 3),
    ("Attention", {"q": z((1, 2, 3, 4), f16), "k": z((1, 2, 5, 4), f16), "v": z((1, 2, 5, 6), f16)}, (), {}, 4),
    ("StringSplit", {"x": np.array(["a b", "c"], object)}, ("x",), {}, 2),
    ("TfIdfVectorizer", {"x": z((2, 5), i64)}, (), {"mode": "TF", "pool_int64s": (1, 2), "ngram_counts": (0,),
                                                    "ngram_indexes": (0, 1), "min_gram_length": 1,
                                                    "max_gram_length": 1}, 1),
    ("Unique", {"x": z((2, 5), i8)}, ("x",), {}, 4),
    ("LayerNormalization", {"x": z((2, 3), f16), "s": z(3, f16)}, (), {}, 3),
    ("TopK", {"x": z((2, 5), f16), "k": s([2], i64)}, ("k",), {}, 2),
    ("Cast", {"x": z((2, 3), f32)}, (), {"to": int(DType.uint8)}, 1),
    ("Shape", {"x": z((2, 3), f32)}, (), {}, 1),
    ("Equal", {"a": z((2, 3), f32), "b": z((2, 3), f32)}, (), {}, 1),
    ("RegexFullMatch", {"x": np.array(["a"], object)}, (), {"pattern": "a"}, 1),
]


@pytest.mark.parametrize("op,inputs,const,attrs,n", SAMPLES, ids=[f"{s[0]}-{i}" for i, s in enumerate(SAMPLES)])
def test_dtype_rule_matches_static_inference(op, inputs, const, attrs, n):
    node = ir_node(op, inputs, n, const, attrs)
    static = [t.dtype for t in infer_types(node)]
    dynamic = infer_dynamic(node)
    assert [t.dtype for t in dynamic] == static
    assert all(t.shape is None for t in dynamic)
