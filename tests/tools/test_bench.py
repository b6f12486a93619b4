"""`make bench` (tools/bench.py): a --quick run on one small sample model, format checks only.

No timing assertions: the machine is shared and noisy.  Numbers are only checked to be numbers.
"""
from __future__ import annotations

import re

import pytest

from tools import bench

NUM = r"\d+\.\d+"
TIME = rf"{NUM} \({NUM}\)"
ROW = re.compile(rf"^\| mynet \| {TIME} \| {TIME} \| {TIME} \| {NUM} \| {NUM} \| {NUM} \| {NUM}, {NUM}, {NUM} \| {NUM}, {NUM} \| "
                 rf"{NUM}, {NUM} \| \d\.\de[+-]\d\d, \d\.\de[+-]\d\d \|$", re.MULTILINE)
HEADER = ("| model | ORT ms (p90) | O0 ms (p90) | O2 ms (p90) | O2/ORT | O0/ORT | O0/O2 | p99/median (O2, ORT, fixed work) | "
          "load ms (O2, ORT) | peak MB (O2, ORT) | max rel err (O0, O2) |")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    out = tmp / "RESULTS.md"
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = bench.main(["--quick", "--only", "mynet", "--models-dir", str(tmp / "none"), "--out", str(out),
                             "--work-dir", str(tmp / "work")])
    return status, buf.getvalue(), out.read_text()


@pytest.mark.needs_cc
def test_quick_stdout(quick_run):
    status, stdout, _ = quick_run
    assert status == 0, stdout
    assert "running the sample models only" in stdout
    assert re.search(r"^mynet: onnxruntime \d+\.\d\d ms, O0 \d+\.\d\d ms, O2 \d+\.\d\d ms  \(O2/ORT \d+\.\d\dx\), "
                     r"\d+ rounds$", stdout, re.MULTILINE), stdout
    assert HEADER in stdout
    assert ROW.search(stdout), stdout
    assert re.search(rf"^Geometric mean O2/ORT over all models \(1\): {NUM}   \(O0/ORT {NUM}, O0/O2 speed-up "
                     rf"{NUM}\)$", stdout, re.MULTILINE)
    assert "wrote " in stdout


@pytest.mark.needs_cc
def test_quick_results_file(quick_run):
    _, _, text = quick_run
    sections = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert sections == ["Machine", "Models", "Targets (issue 5)", "Fused elementwise micro-benchmark", "Method"]
    targets = text.split("## Targets (issue 5)\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(targets) == 5 and all(re.match(r"- \[[x ]\] ", line) for line in targets), targets
    assert re.search(r"^- CPU: .+ \(\d+ logical cores", text, re.MULTILINE)
    assert re.search(r"^- versions: python [\d.]+, numpy [\w.]+, onnxruntime [\w.]+", text, re.MULTILINE)
    assert re.search(r"^- date: \d{4}-\d\d-\d\dT", text, re.MULTILINE)
    assert re.search(r"^- load average when the suite started: [\d.]+ [\d.]+ [\d.]+ ", text, re.MULTILINE)
    assert HEADER in text and ROW.search(text)
    assert "Geometric mean O2/ORT over all models (1)" in text
    for kernel in ("chain", "tanh_gelu"):
        assert re.search(rf"^\| {kernel} \| {TIME} \| {TIME} \| {TIME} \| {NUM} \| {NUM} \|$", text, re.MULTILINE), text


def test_discover_filters_and_orders(tmp_path):
    (tmp_path / "b_real.onnx").write_bytes(b"")
    (tmp_path / "a_real.onnx").write_bytes(b"")
    found = bench.discover(str(tmp_path), None)
    assert [(p.rsplit("/", 1)[1], g) for p, g in found[:2]] == [("a_real.onnx", "real"), ("b_real.onnx", "real")]
    groups = [g for _, g in found[2:]]
    assert groups == sorted(groups, key=("sample", "zoo").index) and set(groups) == {"sample", "zoo"}
    assert any(p.endswith("mynet.onnx") for p, _ in found) and any(p.endswith("zoo/llama.onnx") for p, _ in found)
    assert not any(p.endswith("distilbert_dyn.onnx") for p, _ in found)          # dynamic axes: not timed
    assert all(g != "zoo" for _, g in bench.discover(str(tmp_path), None, zoo=False))
    assert bench.discover(str(tmp_path), {"b_real"}) == [(str(tmp_path / "b_real.onnx"), "real")]
