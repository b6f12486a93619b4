"""tools/bench_quant.py (make bench's quantization section): the table's arithmetic on made-up rows, and a quick
measurement of one model of each table.  No timing assertions: numbers are only checked to be numbers."""
from __future__ import annotations

import os

import pytest

from tools import bench_quant


def test_lines_compute_ratios_and_show_errors():
    result = {"weight": [{"model": "m", "float_mb": 4.0, "quant_mb": 1.0, "onnx_mb": 5.0, "cosine": 0.9999,
                          "float_ms": 1.0, "quant_ms": 1.1}, {"model": "bad", "error": "ValueError: x"}],
              "qdq": [{"model": "c", "ours_ms": 1.0, "ort_ms": 2.0, "cosine": 0.999}],
              "dynamic": [{"model": "d", "ours_ms": 3.0, "ort_ms": 2.0, "cosine": 1.0}]}
    text = "\n".join(bench_quant.lines(result))
    assert "| m | 4.00 | 1.00 | 0.25 | 0.20 | 0.999900 | 1.000 | 1.100 |" in text
    assert "| bad | ValueError: x |" in text
    assert "| c | 1.000 | 2.000 | 0.50 | 0.999000 |" in text
    assert "| d | 3.000 | 2.000 | 1.50 | 1.000000 |" in text and "quantize_dynamic" in text


def test_bf16_table():
    result = {"bf16": [{"model": "b", "float_mb": 2.0, "quant_mb": 1.2, "onnx_mb": 2.4, "cosine": 0.99999,
                        "float_ms": 1.0, "quant_ms": 0.7}, {"model": "refused", "error": "ConverterError: --bf16=on"}]}
    text = "\n".join(bench_quant.lines(result))
    assert "| model | float .ms MB | bf16 .ms MB |" in text and "vdpbf16ps" in text
    assert "| b | 2.00 | 1.20 | 0.60 | 0.50 | 0.999990 | 1.000 | 0.700 | 0.70 |" in text
    assert "| refused | ConverterError: --bf16=on |" in text


@pytest.mark.skipif(not os.path.exists(os.path.join(bench_quant.SHARED_MODELS, "resnet_mini.onnx")),
                    reason="../shared/models not present")
def test_quick_measurement(monkeypatch):
    monkeypatch.setattr(bench_quant, "WEIGHT_MODELS", ("resnet_mini",))
    monkeypatch.setattr(bench_quant, "QDQ_MODELS", ("resnet_mini",))
    monkeypatch.setattr(bench_quant, "DYNAMIC_MODELS", (("resnet_mini", ["Conv"]),))
    monkeypatch.setattr(bench_quant, "WILD_MODELS", ())
    monkeypatch.setattr(bench_quant, "_sources", lambda: [("resnet_mini", os.path.join(
        bench_quant.SHARED_MODELS, "resnet_mini.onnx"), {})])
    r = bench_quant.measure(threads=2, quick=True)
    (w,), (q,), (d,) = r["weight"], r["qdq"], r["dynamic"]
    assert "error" not in w and w["quant_mb"] < 0.35 * w["float_mb"] and w["cosine"] > 0.999
    assert "error" not in q and q["ours_ms"] > 0 and q["ort_ms"] > 0 and q["cosine"] > 0.99
    assert "error" not in d and d["ours_ms"] > 0 and d["ort_ms"] > 0 and d["cosine"] > 0.9999
