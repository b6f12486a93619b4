"""Resize that only repeats elements -> Reshape/Expand/Reshape (passes/expand/resize.py), against onnxruntime;
other resizes keep the op."""
import numpy as np
import onnx.helper as oh
import pytest
from differential import LEVELS, run_converted
from helpers import assert_close, make_model, run_ort, single_op_model, tensor_info

from converter_lite.frontend.onnx_import import import_model

from .expand_testing import expand_and_compare, run_expander


def _x(rng, shape, dtype=np.float32):
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if x.dtype.kind == "f" and x.size >= 3:
        x.flat[:3] = [np.nan, np.inf, -np.inf]
    return x


def _model(x, scales=None, sizes=None, opset=19, **attrs):
    ins = {"x": x, "roi": None, "scales": None if scales is None else np.asarray(scales, np.float32)}
    if sizes is not None:
        ins["sizes"] = np.asarray(sizes, np.int64)
    return single_op_model("Resize", ins, opset=opset, const_inputs=("scales", "sizes"), **attrs)


REPEATS = [
    dict(shape=(2, 3, 4, 5), scales=[1, 1, 2, 2], coordinate_transformation_mode="asymmetric",
         nearest_mode="floor"),
    dict(shape=(2, 3, 4, 5), scales=[1, 1, 3, 2]),                      # half_pixel, round_prefer_floor
    dict(shape=(1, 3, 4, 5), sizes=[1, 3, 8, 15]),
    dict(shape=(2, 4, 3), scales=[1, 2, 2], coordinate_transformation_mode="pytorch_half_pixel"),
    dict(shape=(1, 2, 3, 3), scales=[1, 1, 2, 2], nearest_mode="round_prefer_ceil"),   # half_pixel: no ties
    dict(shape=(1, 2, 4, 3), scales=[1, 1, 2, 1], coordinate_transformation_mode="align_corners"),  # 4 -> 8
    dict(shape=(1, 2, 3, 3), scales=[1, 1, 1, 4], coordinate_transformation_mode="asymmetric",
         nearest_mode="floor", dtype=np.int32),
    dict(shape=(1, 2, 3, 4), scales=[2, 2], axes=[2, 3]),               # opset 18 axes
    dict(shape=(1, 2, 3, 4), sizes=[6, 12], axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
]


@pytest.mark.parametrize("case", REPEATS, ids=lambda c: "-".join(f"{v}" for v in c.values()).replace(" ", ""))
def test_whole_repeats_become_index_maps(rng, case):
    case = dict(case)
    x = _x(rng, case.pop("shape"), case.pop("dtype", np.float32))
    model = _model(x, **case)
    graph = expand_and_compare(model, {"x": x}, gone=["Resize"])
    assert graph.op_counts().get("Expand") == 1


DECLINED = [
    dict(scales=[1, 1, 2, 2], mode="linear"),
    dict(scales=[1, 1, 2, 2], coordinate_transformation_mode="asymmetric", nearest_mode="round_prefer_ceil"),
    dict(scales=[1, 1, 1.5, 2]),
    dict(scales=[1, 1, 0.5, 1]),
    dict(scales=[1, 1, 2, 2], nearest_mode="floor"),           # half_pixel + floor: o = 2 reads index 0
]


@pytest.mark.parametrize("case", DECLINED, ids=lambda c: "-".join(f"{v}" for v in c.values()).replace(" ", ""))
def test_other_resizes_keep_the_op(rng, case):
    x = _x(rng, (1, 2, 4, 4))
    graph = import_model(_model(x, **case))
    run_expander(graph)
    assert graph.op_counts().get("Resize") == 1


def test_scales_from_an_input_keep_the_op(rng):
    x = _x(rng, (1, 2, 4, 4))
    model = single_op_model("Resize", {"x": x, "roi": None, "scales": np.asarray([1, 1, 2, 2], np.float32)},
                            opset=19)
    graph = import_model(model)
    run_expander(graph)
    assert graph.op_counts().get("Resize") == 1


def test_legacy_upsample_is_a_repeat(rng):
    x = _x(rng, (1, 2, 3, 4))
    node = oh.make_node("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])
    model = make_model([node], [tensor_info("x", x.dtype, list(x.shape))],
                       [tensor_info("y", x.dtype, [1, 2, 6, 12])], {}, opset=7)
    graph = import_model(model)
    assert run_expander(graph) and "Resize" not in graph.op_counts()


def test_native_kernel_with_a_skip_connection(rng, tmp_path):
    """Upsample x2 + Add + Relu as one converted model at every opt_level (native fused kernel) vs onnxruntime."""
    lo = _x(rng, (1, 8, 5, 7))
    skip = (rng.standard_normal((1, 8, 10, 14))).astype(np.float32)
    nodes = [oh.make_node("Resize", ["lo", "", "scales"], ["up"], mode="nearest"),
             oh.make_node("Add", ["up", "skip"], ["s"]), oh.make_node("Relu", ["s"], ["y"])]
    model = make_model(nodes, [tensor_info("lo", lo.dtype, list(lo.shape)),
                               tensor_info("skip", skip.dtype, list(skip.shape))],
                       [tensor_info("y", np.float32, [1, 8, 10, 14])],
                       {"scales": np.asarray([1, 1, 2, 2], np.float32)}, opset=19)
    feeds = {"lo": lo, "skip": skip}
    want = run_ort(model, feeds)[0]
    for level in LEVELS:
        assert_close(run_converted(model, feeds, level, str(tmp_path))["y"], want, what=f"opt_level {level}")
