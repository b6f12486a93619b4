"""Work splits at many threads: every model runs bit for bit the same at 3, 8 and 16 threads as at one.

CI has 2 cores, so more threads than cores here means an oversubscribed team: the point is the split logic, not
speed.  Each native kernel cuts its rows, channels, pixel tiles or heads into ``num_threads`` parts (kernels/
parallel.py and the drivers' own splits); a part count above the work items, a last part shorter than the
others, or a per-thread scratch slot past the arena would change or corrupt values only at thread counts CI never
reaches with ``num_threads=2``.  The splits never divide a sum, so the results are identical, not merely close.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, tensor_info
from quant_models import _feeds, float_cnn, mobile_cnn, ort_qdq, residual_cnn
from test_runtime_real_models import _path

import converter_lite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["bert_tiny", "gpt2_tiny", "vit_mini", "resnet_mini", "mobilenet_v2_half", "convnext_mini",
          "attention_block", "conv_net", "mlp_block", "vad_streaming", "greedy_decoder"]
THREADS = (3, 8, 16)
F32 = np.float32


def _feeds_of(model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, t in zip(model.input_names, model.input_types):
        if t.dtype.np.kind in "iu":
            feeds[name] = rng.integers(0, 50, t.shape).astype(t.dtype.np)
        else:
            feeds[name] = rng.standard_normal(t.shape).astype(t.dtype.np)
    return feeds


def _same_at_many_threads(ms: str, feeds: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Runs ``ms`` twice on 1 thread and twice on each of ``THREADS``: run k at n threads must equal run k on one.
    (Run by run: a model with dynamic dims runs a shape's first call on its generic plan, then on the plan
    specialized for the shape, whose kernels may round differently.)"""
    one = converter_lite.load(ms, num_threads=1, adaptive_threads=False)
    feeds = feeds if feeds is not None else _feeds_of(one)
    want = [one.run(feeds) for _ in range(2)]
    for nt in THREADS:
        model = converter_lite.load(ms, num_threads=nt, adaptive_threads=False)
        for k, expected in enumerate(want):      # the second run reuses the pooled executor and its arena
            got = model.run(feeds)
            for name in expected:
                np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{ms} at {nt} threads, run {k}")
    return want[-1]


@pytest.mark.parametrize("name", [n for n in MODELS if _path(n)])
def test_models_at_many_threads(tmp_path, name):
    ms = converter_lite.convert(_path(name), str(tmp_path / name), graph_kernel_flags="--opt_level=2")
    _same_at_many_threads(ms)


def test_int8_convolutions_at_many_threads(tmp_path):
    """onnxruntime's QDQ models of the odd chain, the residual block and the MobileNetV2 blocks: the int8 dense
    and depthwise drivers (pixel tiles and channel blocks per thread) at 3-16 threads."""
    for name, model in (("odd", float_cnn("odd")), ("residual", residual_cnn("silu")), ("mobile", mobile_cnn())):
        path = str(tmp_path / f"{name}.onnx")
        qdq = ort_qdq(model, path)
        ms = converter_lite.convert(path, str(tmp_path / name), graph_kernel_flags="--opt_level=2")
        got = _same_at_many_threads(ms, _feeds(qdq, 1))
        want = run_ort(qdq, _feeds(qdq, 1))[0]
        assert np.abs(next(iter(got.values())) - want).max() <= 0.05 * np.abs(want).max()


def _small_work_model() -> onnx.ModelProto:
    """Ops whose work is smaller than the team: a 3x5 @ 5x7 product, a 1-channel 3x3 convolution on a 2x3 image,
    a softmax over 7, a layer norm of 3 rows, a 2-element reduction and an elementwise chain of 5 values."""
    rng = np.random.default_rng(3)
    inits = {"w": rng.standard_normal((5, 7)).astype(F32), "k": rng.standard_normal((1, 1, 3, 3)).astype(F32),
             "g": rng.standard_normal(7).astype(F32), "b": rng.standard_normal(7).astype(F32),
             "two": np.array([2.0], F32)}
    nodes = [oh.make_node("MatMul", ["a", "w"], ["m"]),
             oh.make_node("Softmax", ["m"], ["s"], axis=-1),
             oh.make_node("LayerNormalization", ["m", "g", "b"], ["ln"], axis=-1),
             oh.make_node("Add", ["s", "ln"], ["y"]),
             oh.make_node("Conv", ["img", "k"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("ReduceSum", ["c"], ["r"], keepdims=0),
             oh.make_node("Mul", ["v", "two"], ["v2"]),
             oh.make_node("Tanh", ["v2"], ["t"])]
    return make_model(nodes, [tensor_info("a", F32, [3, 5]), tensor_info("img", F32, [1, 1, 2, 3]),
                              tensor_info("v", F32, [5])],
                      [tensor_info("y", F32, None), tensor_info("r", F32, None), tensor_info("t", F32, None)], inits)


def test_work_smaller_than_the_team(tmp_path):
    src = str(tmp_path / "small.onnx")
    model = _small_work_model()
    onnx.save(model, src)
    ms = converter_lite.convert(src, str(tmp_path / "small"), graph_kernel_flags="--opt_level=2")
    rng = np.random.default_rng(1)
    feeds = {"a": rng.standard_normal((3, 5)).astype(F32), "img": rng.standard_normal((1, 1, 2, 3)).astype(F32),
             "v": rng.standard_normal(5).astype(F32)}
    got = _same_at_many_threads(ms, feeds)
    for g, o in zip(got.values(), run_ort(model, feeds)):
        np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-6)


def test_dynamic_shapes_at_many_threads(tmp_path):
    """A model converted without input shapes, planned per shape: odd sequence lengths at 3-16 threads."""
    path = os.path.join(ROOT, "models", "bert_dynamic.onnx")
    ms = converter_lite.convert(path, str(tmp_path / "bert"), graph_kernel_flags="--opt_level=2")
    one = converter_lite.load(ms, num_threads=1, adaptive_threads=False)
    rng = np.random.default_rng(2)
    for batch, seq in ((1, 1), (2, 13), (3, 37)):
        feeds = {}
        for name, t in zip(one.input_names, one.input_types):
            feeds[name] = rng.integers(0, 50, (batch, seq)).astype(t.dtype.np)
        _same_at_many_threads(ms, feeds)
