"""Linear Resize of the last two axes through the native driver (kernels/resize_linear/, runtime/fast/resize.py):
every coordinate mode, up- and down-scaling, scales or sizes, the last axis alone, leading axes of any rank,
against onnxruntime on 1 and 2 threads; infinities and NaN as the reference kernel; the declined cases."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import run_ort, single_op_model

import converter_lite
from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph
from converter_lite.kernels.resize_linear import abi as fast_resize

FLAGS = "--opt_level=2"


def _model(x, scales=None, sizes=None, opset=19, **attrs):
    ins = {"x": x, "roi": None, "scales": None if scales is None else np.asarray(scales, np.float32)}
    if sizes is not None:
        ins["sizes"] = np.asarray(sizes, np.int64)
    return single_op_model("Resize", ins, opset=opset, const_inputs=("scales", "sizes"), mode="linear", **attrs)


def _converted(tmp_path, model, nt):
    path = tmp_path / "rs.onnx"
    path.write_bytes(model.SerializeToString())
    return converter_lite.load(converter_lite.convert(str(path), str(tmp_path / "rs"), graph_kernel_flags=FLAGS),
                               num_threads=nt, adaptive_threads=False)


CASES = [
    dict(shape=(1, 8, 12, 16), sizes=[1, 8, 24, 32], coordinate_transformation_mode="half_pixel"),
    dict(shape=(1, 8, 12, 16), sizes=[1, 8, 23, 37], coordinate_transformation_mode="align_corners"),
    dict(shape=(2, 3, 9, 7), scales=[1, 1, 2, 3], coordinate_transformation_mode="pytorch_half_pixel"),
    dict(shape=(1, 4, 20, 30), sizes=[1, 4, 7, 11], coordinate_transformation_mode="half_pixel"),   # down
    dict(shape=(1, 4, 5, 6), scales=[1, 1, 2.5, 1.5], coordinate_transformation_mode="asymmetric"),
    dict(shape=(3, 10, 4), sizes=[3, 17, 9], coordinate_transformation_mode="half_pixel"),          # rank 3
    dict(shape=(2, 2, 3, 5, 6), sizes=[2, 2, 3, 10, 1], coordinate_transformation_mode="half_pixel"),
    dict(shape=(1, 2, 6, 8), scales=[2.0], axes=[3]),                                # the last axis alone
    dict(shape=(1, 3, 1, 1), sizes=[1, 3, 4, 5], coordinate_transformation_mode="align_corners"),  # 1 pixel
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()).replace(" ", ""))
@pytest.mark.parametrize("nt", [1, 2])
def test_matches_onnxruntime(tmp_path, rng, case, nt):
    case = dict(case)
    x = rng.standard_normal(case.pop("shape")).astype(np.float32)
    model = _model(x, **case)
    m = _converted(tmp_path, model, nt)
    m.run({"x": x})
    descs = [getattr(c, "conv_desc", None) for c in m.plan._free[-1].calls(nt)]
    assert any(d is not None and len(d) == len(fast_resize.FIELDS) + fast_resize.EXTRA for d in descs)
    np.testing.assert_allclose(m.run({"x": x})["out0"], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_infinities_and_nan_as_the_reference(tmp_path, rng):
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    x[0, 0, 2, 3], x[0, 1, 0, 0], x[0, 1, 5, 6] = np.nan, np.inf, -np.inf
    model = _model(x, sizes=[1, 2, 13, 9], coordinate_transformation_mode="half_pixel")
    want = eval_graph(import_model(model), {"x": x})[0]
    got = _converted(tmp_path, model, 2).run({"x": x})["out0"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5)


DECLINED = [
    dict(sizes=[1, 2, 4, 3], antialias=1),                                 # down-scaling with antialias
    dict(sizes=[1, 4, 12, 14], coordinate_transformation_mode="half_pixel"),           # channels resized
    dict(sizes=[1, 2, 12, 14], coordinate_transformation_mode="tf_crop_and_resize"),
]


@pytest.mark.parametrize("case", DECLINED, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_declined_cases_keep_the_reference(tmp_path, rng, case):
    x = rng.standard_normal((1, 2, 6, 7)).astype(np.float32)
    extra = {"roi": np.array([0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8], np.float32)} \
        if case.get("coordinate_transformation_mode") == "tf_crop_and_resize" else {}
    model = _model(x, **case) if not extra else single_op_model(
        "Resize", {"x": x, "roi": extra["roi"], "scales": None, "sizes": np.asarray(case["sizes"], np.int64)},
        opset=19, const_inputs=("roi", "sizes"), mode="linear", coordinate_transformation_mode="tf_crop_and_resize")
    m = _converted(tmp_path, model, 2)
    got = m.run({"x": x})["out0"]
    descs = [getattr(c, "conv_desc", None) for c in m.plan._free[-1].calls(2)]
    assert not any(d is not None and len(d) == len(fast_resize.FIELDS) + fast_resize.EXTRA for d in descs)
    want = eval_graph(import_model(model), {"x": x})[0]         # onnxruntime refuses a linear channel resize
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
