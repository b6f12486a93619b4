"""tools/bench_convert.py: cold/warm conversion timing in fresh processes, parsed from the converter's own line,
and its Markdown section in bench/RESULTS.md."""
import os

from tools import bench_convert
from tools.bench_report import results_markdown

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "models")


def test_converter_line_is_parsed():
    text = "Converted models/a.onnx -> out/a.ms: 23 nodes, 13 fused kernels (opt_level 2), 0.35 s\nCONVERT RESULT"
    assert bench_convert._CONVERTED.search(text).group(1) == "0.35"


def test_cold_then_warm_conversion_of_a_sample_model():
    r = bench_convert.measure(os.path.join(MODELS, "mynet.onnx"), opt_level=2)
    assert r["model"] == "mynet.onnx" and r["cold_s"] > 0 and r["warm_s"] > 0 and r["speedup"] > 0
    section = bench_convert.lines(r)
    assert any(line.startswith("| cold") for line in section) and section[-1].startswith("Second conversion")
    md = results_markdown(["t"], ["s"], ["m"], ["machine"], ["method"], ["target"], section)
    assert "## Conversion time" in md and md.index("## Conversion time") < md.index("## Method")
    assert "## Conversion time" not in results_markdown(["t"], ["s"], ["m"], ["machine"], ["method"])
    assert bench_convert.lines(None) == ["(not run)"]
