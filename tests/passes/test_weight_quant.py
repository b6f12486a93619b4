"""[common_quant_param] quant_type=WEIGHT_QUANT (passes/weight_quant.py, model/quantized.py): per-channel weights
of 1-16 bits stored as integers and scales (packed below 8 bits), dequantized at load; the file shrinks, the
outputs stay close to the float model's, the thresholds and skip list are honoured, and the loaded weights are
exactly the ones the converter computed with.  Mixed bits (bit_num=0): each weight with the fewest bits within
init_scale, or init_scale searched (auto_tune) for an output cosine of 0.995."""
from __future__ import annotations

import csv
import os

import numpy as np
import pytest

import converter_lite
from converter_lite.quant_config import WeightQuantConfig
from converter_lite.model.format import load_model
from converter_lite.model.quantized import dequantize, mixed_bits, pack_bits, quantize, relative_error, unpack_bits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(ROOT, "..", "shared", "models")
CONV_NET = os.path.join(ROOT, "models", "conv_net.onnx")
ATTENTION = os.path.join(ROOT, "models", "attention_block.onnx")


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 12, 16])
def test_per_channel_error_is_half_a_step(rng, bits):
    w = (rng.standard_normal((24, 5, 3, 3)) * np.linspace(0.01, 3, 24)[:, None, None, None]).astype(np.float32)
    w[3] = 0.0                                                   # an all-zero channel
    qw = quantize(w, bits, 0)
    assert qw.q.dtype == (np.int8 if bits <= 8 else np.int16) and qw.scale.shape == (24,)
    deq = qw.dequantize()
    assert deq.dtype == np.float32 and (deq[3] == 0).all()
    if bits > 1:
        qmax = 2 ** (bits - 1) - 1
        assert np.abs(qw.q).max() <= qmax
        assert np.all(np.abs(deq - w) <= qw.scale[:, None, None, None] * 0.5 * (1 + 1e-6))
    else:
        assert set(np.unique(qw.q)) <= {-1, 1}
    np.testing.assert_array_equal(dequantize(qw.q, qw.scale, 0, np.float32), deq)


def test_axis_is_the_channel_axis(rng):
    w = (rng.standard_normal((7, 40)) * np.arange(1, 41)).astype(np.float32)        # columns of growing size
    qw = quantize(w, 8, -1)
    assert qw.axis == 1 and qw.scale.shape == (40,)
    np.testing.assert_allclose(qw.scale, np.abs(w).max(axis=0) / 127, rtol=1e-6)


def _convert(tmp_path, src, name, cfg_lines):
    cfg = tmp_path / f"{name}.cfg"
    cfg.write_text("[common_quant_param]\nquant_type=WEIGHT_QUANT\n" + "".join(f"{line}\n" for line in cfg_lines))
    return converter_lite.convert(src, str(tmp_path / name), config_file=str(cfg),
                                  graph_kernel_flags="--opt_level=2")


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("model, limit", [("resnet_mini", 0.30), ("bert_tiny", 0.37)])
def test_eight_bit_file_and_outputs(tmp_path, model, limit):
    src = os.path.join(SHARED, f"{model}.onnx")
    if not os.path.exists(src):
        pytest.skip(f"{src} not present")
    from tools.bench_engines import make_feeds
    f = converter_lite.convert(src, str(tmp_path / "f"), graph_kernel_flags="--opt_level=2")
    q = _convert(tmp_path, src, "q", ["bit_num=8", f"debug_info_save_path={tmp_path / 'dbg'}"])
    assert os.path.getsize(q) <= limit * os.path.getsize(f)
    feeds = make_feeds(f, (0, 500))
    ref = list(converter_lite.load(f).run(feeds).values())[0]
    got = list(converter_lite.load(q).run(feeds).values())[0]
    assert _cosine(ref, got) >= 0.999
    with open(tmp_path / "dbg" / "q_weight_quant.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(float(r["cosine"]) > 0.9999 and r["bits"] == "8" for r in rows)
    assert load_model(q).metadata["weight_quant"] == {"bit_num": 8, "weights": len(rows)}


def test_loaded_weights_are_the_ones_the_converter_used(tmp_path):
    from converter_lite.api import convert
    from converter_lite.passes.weight_quant import quantize_weights

    q = _convert(tmp_path, CONV_NET, "q", ["bit_num=6", "min_quant_weight_channel=1"])
    loaded = [n.inputs[1].const for n in load_model(q).graph.nodes if n.op == "Conv"]
    assert len(loaded) == 5
    for w in loaded:                                                  # 6-bit grid: at most 63 levels a channel
        assert max(len(np.unique(w[c])) for c in range(w.shape[0])) <= 63
    # the float model's graph, quantized the same way, holds the same numbers
    f = convert(CONV_NET, str(tmp_path / "f"), graph_kernel_flags="--opt_level=2")
    g = load_model(f).graph
    quantize_weights(g, WeightQuantConfig(bit_num=6, min_quant_weight_channel=1))
    for w, n in zip(loaded, [n for n in g.nodes if n.op == "Conv"]):
        np.testing.assert_array_equal(n.inputs[1].const, w)


def test_thresholds_and_skip_list(tmp_path):
    def quantized_names(lines):
        q = _convert(tmp_path, CONV_NET, f"q{len(os.listdir(tmp_path))}", lines + [f"debug_info_save_path={tmp_path}"])
        stem = os.path.splitext(os.path.basename(q))[0]
        path = tmp_path / f"{stem}_weight_quant.csv"
        if not path.exists():
            return set()
        with open(path) as f:
            return {r["node"] for r in csv.DictReader(f)}

    every = quantized_names(["min_quant_weight_channel=1"])
    assert len(every) >= 5                                            # the Convs and the Gemm
    assert quantized_names(["min_quant_weight_channel=17"]) < every   # conv_net's 16-channel convs stay float
    assert quantized_names(["min_quant_weight_channel=1", "min_quant_weight_size=10000000"]) == set()
    assert "fc" in every                                              # node names of the converted graph
    kept = quantized_names(["min_quant_weight_channel=1", "skip_quant_node=fc, nothing_by_that_name"])
    assert "fc" not in kept and len(kept) == len(every) - 1


def test_fp16_and_weight_quant_are_exclusive(tmp_path):
    cfg = tmp_path / "q.cfg"
    cfg.write_text("[common_quant_param]\nquant_type=WEIGHT_QUANT\n")
    with pytest.raises(converter_lite.ConverterError) as e:
        converter_lite.convert(ATTENTION, str(tmp_path / "q"), config_file=str(cfg), fp16=True)
    assert e.value.code == -600 and "use one of them" in str(e.value)
    assert not (tmp_path / "q.ms").exists()


@pytest.mark.parametrize("bits", range(1, 8))
@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 61])
def test_packed_integers_round_trip(rng, bits, count):
    q = quantize(rng.standard_normal((count, 1)).astype(np.float32) * 3, bits, 1).q.reshape(-1)
    if count >= 8 and bits > 1:
        q[:2] = [-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1]              # both ends of the range
    packed = pack_bits(q, bits)
    assert packed.dtype == np.uint8 and packed.size == -(-count // 8) * bits
    np.testing.assert_array_equal(unpack_bits(packed, bits, count), q)
    with pytest.raises(ValueError):
        unpack_bits(packed[:-1] if packed.size else np.zeros(1, np.uint8), bits, count)


def test_mixed_bits_take_the_fewest_bits_within_the_scale(rng):
    w = rng.standard_normal((32, 64)).astype(np.float32)
    for scale in (0.3, 0.05, 0.02, 0.004):
        qw = mixed_bits(w, 0, scale)
        assert relative_error(w, qw) <= scale
        assert relative_error(w, quantize(w, qw.bits - 1, 0)) > scale
    assert mixed_bits(w, 0, 0.02).bits == 7             # MindSpore: the default "comparable to 6-7 fixed bits"
    assert mixed_bits(np.zeros((4, 4), np.float32), 0, 0.02).bits == 2


def test_per_layer_scale(rng):
    w = (rng.standard_normal((8, 16)) * np.arange(1, 9)[:, None]).astype(np.float32)
    qw = quantize(w, 8, 0, per_channel=False)
    np.testing.assert_allclose(qw.scale, np.full(8, np.abs(w).max() / 127, np.float32), rtol=1e-6)
    assert np.abs(qw.dequantize() - w).max() <= qw.scale[0] * 0.5 * (1 + 1e-6)


def test_low_bits_are_stored_packed(tmp_path):
    f8 = _convert(tmp_path, CONV_NET, "q8", ["bit_num=8", "min_quant_weight_channel=1"])
    f4 = _convert(tmp_path, CONV_NET, "q4", ["bit_num=4", "min_quant_weight_channel=1"])
    f1 = _convert(tmp_path, CONV_NET, "q1", ["bit_num=1", "min_quant_weight_channel=1"])
    weights = sum(n.inputs[1].const.size for n in load_model(f8).graph.nodes if n.op in ("Conv", "Gemm"))
    # 4 bits save half a byte a weight, 1 bit seven eighths (scales and alignment aside)
    assert os.path.getsize(f8) - os.path.getsize(f4) >= 0.45 * weights
    assert os.path.getsize(f8) - os.path.getsize(f1) >= 0.8 * weights
    for path, bits in ((f4, 4), (f1, 1)):
        for n in load_model(path).graph.nodes:
            if n.op == "Conv":
                w = n.inputs[1].const
                assert max(len(np.unique(w[c])) for c in range(w.shape[0])) <= max(2, 2 ** bits - 1)


def test_mixed_bits_model(tmp_path):
    q = _convert(tmp_path, CONV_NET, "m", ["bit_num=0", "min_quant_weight_channel=1",
                                           f"debug_info_save_path={tmp_path}", "[mixed_bit_weight_quant_param]",
                                           "init_scale=0.05"])
    meta = load_model(q).metadata["weight_quant"]
    with open(tmp_path / "m_weight_quant.csv") as f:
        rows = list(csv.DictReader(f))
    assert meta["bit_num"] == 0 and meta["init_scale"] == 0.05 and not meta["auto_tune"]
    assert meta["bits"] == [int(r["bits"]) for r in rows] and len(rows) == meta["weights"] >= 5
    assert all(2 <= b <= 16 for b in meta["bits"])


def test_auto_tune_finds_the_scale_for_an_output_cosine_of_0_995(tmp_path):
    from converter_lite.passes.weight_quant import TUNE_COSINE

    f = converter_lite.convert(CONV_NET, str(tmp_path / "f"), graph_kernel_flags="--opt_level=2")
    q = _convert(tmp_path, CONV_NET, "a", ["bit_num=0", "min_quant_weight_channel=1",
                                           "[mixed_bit_weight_quant_param]", "auto_tune=true"])
    meta = load_model(q).metadata["weight_quant"]
    assert meta["auto_tune"] and meta["init_scale"] > 0.02           # conv_net tolerates more than the default
    x = {"x": np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    ref = list(converter_lite.load(f).run(x).values())[0]
    got = list(converter_lite.load(q).run(x).values())[0]
    assert _cosine(ref, got) >= TUNE_COSINE - 0.01                     # (tuned on another seeded input)
    assert os.path.getsize(q) < os.path.getsize(_convert(tmp_path, CONV_NET, "d", ["bit_num=0",
                                                                                   "min_quant_weight_channel=1"]))
