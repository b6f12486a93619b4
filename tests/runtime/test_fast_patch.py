"""runtime/fast/patch.py: patch-embedding Convs (kernel = stride, no padding) and framing Convs (an STFT as a
Conv: overlapping windows along one row) as one GEMM on the native tile driver, checked against the reference
kernel (and onnxruntime) on 1 and 2 threads: batches, bias or not, non-square patches, inputs whose size is not a
multiple of the patch or hop, several input channels and rows, float64; Convs it does not take (padding,
dilation, groups, stride != kernel, small patches, hops under 64 bytes, too many frames, a kernel shorter than
the input's height, no native code) keep the other paths."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx
from helpers import record_drivers
import onnx.helper as oh
import pytest

from converter_lite.api import convert, load
from converter_lite.ops.interpret import eval_graph
from converter_lite.kernels.blas import gemm_entry
from converter_lite.runtime.plan import Plan
from tests.helpers import make_model, run_ort, tensor_info
from tests.runtime.runtime_graphs import single_node_graph

pytestmark = pytest.mark.skipif(gemm_entry(np.float32) is None, reason="numpy's BLAS exposes no CBLAS gemm")

CASES = [  # x shape, w shape, attrs
    ((1, 3, 32, 32), (24, 3, 16, 16), {"strides": (16, 16)}),
    ((2, 3, 36, 50), (16, 3, 16, 16), {"strides": (16, 16)}),                   # remainder rows/columns
    ((1, 5, 12, 64), (7, 5, 4, 16), {"strides": (4, 16), "kernel_shape": (4, 16)}),
    ((1, 3, 64, 64), (48, 3, 16, 16), {"strides": (16, 16), "pads": (0, 0, 0, 0), "auto_pad": "VALID"}),
    # frames: openWakeWord's mel front end (8 frames of 512 at hop 160), silero VAD's STFT (4 of 256 at hop 128)
    ((1, 1, 1, 1760), (257, 1, 1, 512), {"strides": (1, 160)}),
    ((1, 1, 1, 640), (258, 1, 1, 256), {"strides": (1, 128)}),
    ((3, 2, 1, 1000), (40, 2, 1, 100), {"strides": (1, 30)}),       # batch, 2 channels, samples past the last frame
    ((2, 2, 3, 700), (33, 2, 3, 64), {"strides": (5, 16)}),         # the kernel spans all 3 rows: one output row
    ((1, 1, 1, 64 * 63 + 256), (17, 1, 1, 256), {"strides": (1, 64)}),  # 64 frames, the most taken
]


def _run(resolver, x, w, b, attrs, patched=True):
    g, feeds = single_node_graph("Conv", [x, w, b], attrs, consts=(1, 2), name="conv")
    want = eval_graph(g, feeds)[0]
    plan = Plan(record_drivers(g), resolver, num_threads=2, adaptive=False)
    tol = 1e-4 if x.dtype == np.float32 else 1e-12
    for nt in (1, 2):
        for _ in range(2):                                      # a second run reuses the bound steps
            got = plan.execute(feeds, num_threads=nt)[0]
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        calls = plan._free[-1].calls(nt)
        assert (getattr(calls[0], "tiles", None) is not None) == patched
    return want


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("bias", [True, False])
def test_against_reference(resolver, case, bias):
    xs, ws, attrs = CASES[case]
    rng = np.random.default_rng(case)
    x, w = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32) if bias else None
    _run(resolver, x, w, b, attrs)


def test_float64_and_onnxruntime(resolver):
    rng = np.random.default_rng(7)
    x, w, b = rng.standard_normal((2, 3, 40, 40)), rng.standard_normal((8, 3, 8, 8)), rng.standard_normal(8)
    _run(resolver, x, w, b, {"strides": (8, 8)})                  # float64: rows of 8 elements are 64 bytes
    x32, w32, b32 = (a.astype(np.float32) for a in (x, w, b))
    _run(resolver, x32, w32, b32, {"strides": (8, 8)}, patched=False)   # float32: 32-byte rows, fast_conv's
    x32, w32 = rng.standard_normal((2, 3, 40, 40), dtype=np.float32), rng.standard_normal((8, 3, 16, 16), dtype=np.float32)
    got = _run(resolver, x32, w32, b32, {"strides": (16, 16)})
    model = make_model([oh.make_node("Conv", ["x", "w", "b"], ["y"], strides=[16, 16])],
                       [tensor_info("x", np.float32, list(x.shape))], [tensor_info("y", np.float32, None)],
                       {"w": w32, "b": b32})
    np.testing.assert_allclose(got, run_ort(model, {"x": x32})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, attrs", [
    (16, {"strides": (16, 16), "pads": (1, 1, 1, 1)}),
    (16, {"strides": (8, 8)}),                              # stride != kernel
    (16, {"strides": (16, 16), "dilations": (2, 2)}),
    (16, {"strides": (16, 16), "group": 3}),
    (4, {"strides": (4, 4)}),                               # small patches (Swin): fast_conv's im2col tiles
    (2, {"strides": (2, 2)}),
])
def test_other_convs_keep_their_paths(resolver, k, attrs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 48, 48), dtype=np.float32)
    w = rng.standard_normal((6, 1 if "group" in attrs else 3, k, k), dtype=np.float32)
    _run(resolver, x, w, None, attrs, patched=False)


@pytest.mark.parametrize("xs, ws, attrs", [
    ((1, 1, 1, 1760), (257, 1, 1, 512), {"strides": (1, 8)}),            # hop of 32 bytes: a temporal Conv
    ((1, 1, 1, 64 * 64 + 256), (17, 1, 1, 256), {"strides": (1, 64)}),  # 65 frames
    ((1, 1, 2, 1760), (57, 1, 1, 512), {"strides": (1, 160)}),           # two output rows
    ((1, 1, 1, 1760), (57, 1, 1, 512), {"strides": (1, 160), "pads": (0, 8, 0, 8)}),
])
def test_other_frame_convs_keep_their_paths(resolver, xs, ws, attrs):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(xs, dtype=np.float32), rng.standard_normal(ws, dtype=np.float32)
    _run(resolver, x, w, None, attrs, patched=False)


def test_frames_against_onnxruntime(resolver):
    """A 1-D STFT Conv as exporters write it (3-D input, 1-D kernel): converted whole, against onnxruntime."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 1, 1760), dtype=np.float32)
    w, b = rng.standard_normal((257, 1, 512), dtype=np.float32), rng.standard_normal(257, dtype=np.float32)
    model = make_model([oh.make_node("Conv", ["x", "w", "b"], ["y"], strides=[160])],
                       [tensor_info("x", np.float32, [1, 1, 1760])], [tensor_info("y", np.float32, None)],
                       {"w": w, "b": b})
    with tempfile.TemporaryDirectory() as d:
        onnx.save(model, os.path.join(d, "stft.onnx"))
        ms = convert(os.path.join(d, "stft.onnx"), os.path.join(d, "stft"), graph_kernel_flags="--opt_level=2")
        m = load(ms, num_threads=2)
        got = m.run({"x": x})["y"]
        calls = m.plan._free[-1].calls(2)
        assert any(getattr(c, "tiles", None) is not None for c in calls)     # the frame GEMM ran
    np.testing.assert_allclose(got, run_ort(model, {"x": x})[0], rtol=1e-4, atol=2e-3)


def test_without_native_code():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 3, 32, 32), dtype=np.float32), rng.standard_normal((6, 3, 16, 16), dtype=np.float32)
    g, feeds = single_node_graph("Conv", [x, w], {"strides": (16, 16)}, consts=(1,), name="conv")
    got = Plan(g, None, num_threads=2, adaptive=False).execute(feeds)[0]
    np.testing.assert_allclose(got, eval_graph(g, feeds)[0], rtol=1e-4, atol=1e-4)
