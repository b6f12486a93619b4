"""Whole models through the fast plan: the real-architecture exports (../shared/models, when present) and the
sample models, at opt_level 0 and 2, against the reference path (reference kernels only, no native code) and
against onnxruntime; and the heavy ops of each model must take the fast path."""
from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import run_ort

import converter_lite
from converter_lite.runtime.plan import Plan

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "models")
REAL = ["bert_tiny", "gpt2_tiny", "vit_mini", "resnet_mini", "mobilenet_v2_half", "convnext_mini"]
SAMPLES = ["mlp_block", "attention_block", "conv_net", "legacy_opset9"]
HEAVY = {"Conv", "MatMul", "Gemm", "Transpose", "Gather", "MaxPool", "Softmax", "LayerNormalization", "Concat"}


def _path(name: str) -> str | None:
    for d in (SHARED, os.path.join(ROOT, "models")):
        p = os.path.join(d, f"{name}.onnx")
        if os.path.exists(p):
            return p
    return None


CASES = [(n, lvl) for n in REAL + SAMPLES for lvl in (0, 2) if _path(n)]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("ms")
    cache: dict = {}

    def get(name: str, level: int) -> str:
        key = (name, level)
        if key not in cache:
            cache[key] = converter_lite.convert(_path(name), str(d / f"{name}_O{level}"),
                                                graph_kernel_flags=f"--opt_level={level}")
        return cache[key]
    return get


def _feeds(model, rng):
    feeds = {}
    for name, t in zip(model.input_names, model.input_types):
        if t.dtype.np.kind in "iu":
            feeds[name] = rng.integers(0, 500, t.shape).astype(t.dtype.np)
        else:
            feeds[name] = rng.standard_normal(t.shape).astype(t.dtype.np)
    return feeds


def _rel(a, b) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))


@pytest.mark.parametrize("name,level", CASES)
def test_model_matches_reference_path_and_onnxruntime(converted, name, level, rng):
    import onnx

    model = converter_lite.load(converted(name, level), num_threads=2)
    feeds = _feeds(model, rng)
    got = model.run(feeds)
    reference = Plan(model.graph, fast=False).execute(list(feeds.values()))
    ort = run_ort(onnx.load(_path(name)), feeds, optimize=True)
    for (out_name, g), r, o in zip(got.items(), reference, ort):
        assert g.shape == r.shape == o.shape, out_name
        assert _rel(g, r) < 1e-4, f"{name} O{level} {out_name}: fast vs reference {_rel(g, r):.2e}"
        assert _rel(g, o) < 1e-4, f"{name} O{level} {out_name}: vs onnxruntime {_rel(g, o):.2e}"
    for _ in range(3):                           # the pooled executor reused, on 1 and on 2 threads
        again = model.run(feeds)
        for k in got:
            assert _rel(again[k], got[k]) < 1e-5, f"{name} O{level}: runs differ"
    slow = [s.node.op for s in model.plan.program.steps if s.node.op in HEAVY and s.impl.bind is None]
    assert not slow, f"{name} O{level}: reference kernels for {slow}"
