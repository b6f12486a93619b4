"""Nearest Resize of the last two axes through the native driver (kernels/resize_nearest/,
runtime/fast/resize.py): coordinate and nearest modes, up- and down-scaling, scales or sizes, the last axis
alone, leading axes of any rank, float32 and int32, against onnxruntime on 1 and 2 threads; NaN payloads and
infinities moved bit for bit; the declined cases; and a model with a dynamic image size, whose Resize the
driver runs at every size (the upsampling of FPN necks: YOLO, PP-OCR's detector)."""
from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from helpers import make_model, run_ort, single_op_model, tensor_info

import converter_lite
from converter_lite.frontend.onnx_import import import_model
from converter_lite.kernels.resize_nearest import abi as nearest
from converter_lite.ops.interpret import eval_graph

FLAGS = "--opt_level=2"


def _model(x, scales=None, sizes=None, **attrs):
    ins = {"x": x, "roi": None, "scales": None if scales is None else np.asarray(scales, np.float32)}
    if sizes is not None:
        ins["sizes"] = np.asarray(sizes, np.int64)
    return single_op_model("Resize", ins, opset=19, const_inputs=("scales", "sizes"), mode="nearest", **attrs)


def _converted(tmp_path, model, nt):
    path = tmp_path / "rs.onnx"
    path.write_bytes(model.SerializeToString())
    return converter_lite.load(converter_lite.convert(str(path), str(tmp_path / "rs"), graph_kernel_flags=FLAGS),
                               num_threads=nt, adaptive_threads=False)


def _on_driver(m, nt, feeds=None) -> bool:
    plan = m.plan if feeds is None else m._plan_for(m.check_feeds(feeds))
    descs = [getattr(c, "conv_desc", None) for c in plan.acquire().calls(nt)]
    return any(d is not None and len(d) == len(nearest.FIELDS) + nearest.EXTRA for d in descs)


CASES = [
    dict(shape=(1, 8, 12, 16), sizes=[1, 8, 23, 37]),                                    # odd up-scaling
    dict(shape=(2, 3, 9, 7), scales=[1, 1, 1.5, 2.5], nearest_mode="floor",
         coordinate_transformation_mode="asymmetric"),
    dict(shape=(1, 4, 20, 30), sizes=[1, 4, 7, 11], nearest_mode="round_prefer_ceil"),  # down
    dict(shape=(1, 4, 5, 6), sizes=[1, 4, 9, 13], coordinate_transformation_mode="align_corners",
         nearest_mode="ceil"),
    dict(shape=(3, 10, 4), sizes=[3, 17, 9], coordinate_transformation_mode="pytorch_half_pixel"),   # rank 3
    dict(shape=(2, 2, 3, 5, 6), sizes=[2, 2, 3, 10, 1]),
    dict(shape=(1, 2, 6, 8), scales=[2.5], axes=[3]),                                  # the last axis alone
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()).replace(" ", ""))
@pytest.mark.parametrize("nt", [1, 2])
def test_matches_onnxruntime(tmp_path, rng, case, nt):
    case = dict(case)
    x = rng.standard_normal(case.pop("shape")).astype(np.float32)
    model = _model(x, **case)
    m = _converted(tmp_path, model, nt)
    assert _on_driver(m, nt)
    np.testing.assert_array_equal(m.run({"x": x})["out0"], run_ort(model, {"x": x})[0])


def test_int32_and_nan_bits_move_unchanged(tmp_path, rng):
    x = rng.integers(-2**31, 2**31 - 1, (1, 2, 6, 7), dtype=np.int64).astype(np.int32)
    model = _model(x, sizes=[1, 2, 13, 9])
    m = _converted(tmp_path, model, 2)
    assert _on_driver(m, 2)
    np.testing.assert_array_equal(m.run({"x": x})["out0"], run_ort(model, {"x": x})[0])
    bits = rng.integers(0, 2**32, (1, 2, 6, 7), dtype=np.uint64).astype(np.uint32)
    bits[0, 0, 0, :] = [0x7FC01234, 0xFF800000, 0x80000000, 0x7F800001, 0x7F800000, 0xFFC00000, 0]
    xf = bits.view(np.float32)
    model = _model(xf, sizes=[1, 2, 13, 9])
    got = _converted(tmp_path, model, 2).run({"x": xf})["out0"]
    want = eval_graph(import_model(model), {"x": xf})[0]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


DECLINED = [
    dict(sizes=[1, 4, 12, 14]),                                                 # channels resized
    dict(sizes=[1, 2, 12, 14], coordinate_transformation_mode="tf_crop_and_resize"),
]


@pytest.mark.parametrize("case", DECLINED, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_declined_cases_keep_the_reference(tmp_path, rng, case):
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    if case.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        model = single_op_model("Resize", {"x": x, "roi": np.array([0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8], np.float32),
                                           "scales": None, "sizes": np.asarray(case["sizes"], np.int64)},
                                opset=19, const_inputs=("roi", "sizes"), mode="nearest",
                                coordinate_transformation_mode="tf_crop_and_resize")
    else:
        model = _model(x, **case)
    m = _converted(tmp_path, model, 2)
    assert not _on_driver(m, 2)
    np.testing.assert_array_equal(m.run({"x": x})["out0"], eval_graph(import_model(model), {"x": x})[0])


def test_dynamic_image_size_runs_on_the_driver(tmp_path, rng):
    """An FPN-style neck with a dynamic height and width: Conv -> Resize x2 (nearest) -> Add with the skip
    path, converted without input shapes; every size runs the Resize on the driver and matches onnxruntime."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             oh.make_node("Resize", ["c", "", "s"], ["u"], mode="nearest"),
             oh.make_node("Conv", ["x", "w"], ["skip"], pads=[1, 1, 1, 1]),
             oh.make_node("Add", ["u", "skip"], ["y"])]
    model = make_model(nodes, [tensor_info("x", np.float32, [1, 3, "h", "w"])],
                       [tensor_info("y", np.float32, None)],
                       {"w": w, "s": np.array([1, 1, 2, 2], np.float32)}, opset=17)
    m = _converted(tmp_path, model, 2)
    for hw in ((16, 16), (8, 24), (32, 10), (16, 16)):
        x = rng.standard_normal((1, 3, *hw)).astype(np.float32)
        assert _on_driver(m, 2, {"x": x})
        np.testing.assert_allclose(m.run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
