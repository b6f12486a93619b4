"""The zoo (models/zoo: popular `transformers` architectures as users export them) converts at opt_level 2, runs
with native kernels and matches onnxruntime within 1e-4 relative (the held-out models' criterion)."""
import os

import numpy as np
import onnxruntime as ort
import pytest

import converter_lite
from converter_lite.cli.inputs import random_inputs

ZOO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "models", "zoo")
STATIC = ["albert", "deberta_v2", "llama", "poolformer", "regnet", "swin", "t5_encoder", "wav2vec2"]


def _feeds(model, shapes=None):
    rng = np.random.default_rng(1)
    feeds = {}
    for name, t in zip(model.input_names, model.input_types):
        shape = (shapes or {}).get(name, t.shape)
        if name == "input_ids":
            feeds[name] = rng.integers(0, 400, shape).astype(t.dtype.np)
        elif name == "attention_mask":
            feeds[name] = np.ones(shape, t.dtype.np)
            feeds[name][..., -3:] = 0                      # padded tail
        else:
            feeds[name] = rng.standard_normal(shape).astype(t.dtype.np)
    return feeds if shapes else {**random_inputs(model, seed=1), **{k: v for k, v in feeds.items()
                                                                    if k in ("input_ids", "attention_mask")}}


def _rel_err(ours, ref):
    return max(float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(b))), 1e-30) for a, b in zip(ours, ref))


@pytest.fixture(scope="module")
def session_options():
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return so


@pytest.mark.parametrize("name", STATIC)
def test_zoo_model_matches_onnxruntime(name, tmp_path, session_options):
    src = os.path.join(ZOO, f"{name}.onnx")
    m = converter_lite.load(converter_lite.convert(src, str(tmp_path / name), graph_kernel_flags="--opt_level=2"))
    assert sum(k.native for k in m.kernels) > 0
    feeds = _feeds(m)
    ref = ort.InferenceSession(src, session_options, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert _rel_err(list(m.run(feeds).values()), ref) <= 1e-4


def test_dynamic_axes_model_runs_at_the_shapes_fed(tmp_path, session_options):
    src = os.path.join(ZOO, "distilbert_dyn.onnx")
    m = converter_lite.load(converter_lite.convert(src, str(tmp_path / "d"), graph_kernel_flags="--opt_level=2"))
    sess = ort.InferenceSession(src, session_options, providers=["CPUExecutionProvider"])
    for shape in ((2, 16), (1, 40)):
        feeds = _feeds(m, {"input_ids": shape, "attention_mask": shape})
        out = m.run(feeds)["last_hidden_state"]
        assert out.shape == (*shape, 64)
        assert _rel_err([out], sess.run(None, feeds)) <= 1e-4
