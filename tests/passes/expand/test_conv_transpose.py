"""ConvTranspose expander: kernel == stride becomes a 1x1 Conv and a depth-to-space rearrangement; numerics
against onnxruntime (bias or not, pads, non-square kernels, NaN/inf, an epilogue the rearrangement fuses into),
and the declines (overlapping windows, groups, output_padding) that keep the reference kernel."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.model.format import load_model


def _model(rng, c, m, hw, k, strides, pads=(0, 0, 0, 0), bias=True, group=1, relu=False, output_padding=None):
    (h, w), (kh, kw) = hw, k
    inits = {"w": rng.standard_normal((c, m // group, kh, kw)).astype(np.float32)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rng.standard_normal(m).astype(np.float32)
        ins.append("b")
    attrs = dict(kernel_shape=[kh, kw], strides=list(strides), pads=list(pads), group=group)
    if output_padding:
        attrs["output_padding"] = list(output_padding)
    nodes = [oh.make_node("ConvTranspose", ins, ["y0" if relu else "y"], **attrs)]
    if relu:
        nodes.append(oh.make_node("Relu", ["y0"], ["y"]))
    return make_model(nodes, [tensor_info("x", np.float32, [1, c, h, w])], [tensor_info("y", np.float32, None)],
                      initializers=inits)


def _check(tmp_path, model, rng, expanded: bool):
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    ms = converter_lite.convert(str(src), str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    ops = {n.op for n in load_model(ms).graph.nodes}
    assert ("ConvTranspose" not in ops) == expanded, ops
    c, h, w = model.graph.input[0].type.tensor_type.shape.dim[1:]
    x = rng.standard_normal((1, c.dim_value, h.dim_value, w.dim_value)).astype(np.float32) * 2
    x[0, 0, 1, 1], x[0, -1, 0, 2] = np.nan, np.inf
    ref = run_ort(model, {"x": x})[0]
    for threads in (1, 2):
        assert_close(converter_lite.load(ms, num_threads=threads).run({"x": x})["y"], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [
    dict(c=16, m=8, hw=(10, 12), k=(2, 2), strides=(2, 2)),                       # the DB-head upsampling
    dict(c=8, m=5, hw=(7, 9), k=(2, 2), strides=(2, 2), bias=False),
    dict(c=6, m=4, hw=(5, 6), k=(3, 2), strides=(3, 2)),                          # non-square
    dict(c=8, m=8, hw=(6, 6), k=(2, 2), strides=(2, 2), pads=(1, 0, 1, 1)),       # cropped
    dict(c=8, m=4, hw=(6, 7), k=(4, 4), strides=(4, 4), relu=True),               # an epilogue fused after it
])
def test_kernel_equal_to_stride_is_a_pointwise_conv(tmp_path, rng, case):
    _check(tmp_path, _model(rng, **case), rng, expanded=True)


@pytest.mark.parametrize("case", [
    dict(c=8, m=4, hw=(6, 6), k=(3, 3), strides=(2, 2)),                          # overlapping windows
    dict(c=8, m=8, hw=(6, 6), k=(2, 2), strides=(2, 2), group=2),
    dict(c=8, m=4, hw=(6, 6), k=(2, 2), strides=(2, 2), output_padding=(1, 1)),
])
def test_other_conv_transposes_keep_the_reference_kernel(tmp_path, rng, case):
    _check(tmp_path, _model(rng, **case), rng, expanded=False)
