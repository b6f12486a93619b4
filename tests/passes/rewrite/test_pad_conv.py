"""pad_conv_fusion: a zero Pad of the spatial axes in front of a Conv becomes the Conv's own pads."""
from __future__ import annotations

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

RNG = np.random.default_rng(3)
W = RNG.normal(size=(4, 3, 3, 3)).astype(np.float32)
INPUTS = {"x": (1, 3, 7, 9)}


def pad_conv(pads, value=None, axes=None, mode=None, conv_attrs=None, extra_use=False, inputs=INPUTS, w=W):
    inits = {"w": w, "pads": np.array(pads, np.int64)}
    pad_ins = ["x", "pads"]
    if value is not None or axes is not None:
        pad_ins.append("value" if value is not None else "")
        if value is not None:
            inits["value"] = np.array(value, np.float32)
    if axes is not None:
        pad_ins.append("axes")
        inits["axes"] = np.array(axes, np.int64)
    pad_attrs = {} if mode is None else {"mode": mode}
    nodes = [node("Pad", pad_ins, ["p"], **pad_attrs), node("Conv", ["p", "w"], ["y"], **(conv_attrs or {}))]
    outs = ["y"]
    if extra_use:
        nodes.append(node("Relu", ["p"], ["r"]))
        outs.append("r")
    return model(nodes, inputs, outs, inits)


@pytest.mark.parametrize("pads,conv_attrs,want", [
    ([0, 0, 1, 1, 0, 0, 1, 1], {}, (1, 1, 1, 1)),                                  # symmetric
    ([0, 0, 0, 2, 0, 0, 1, 0], {"pads": [1, 1, 1, 1]}, (1, 3, 2, 1)),             # asymmetric, added to own pads
    ([0, 0, 2, 0, 0, 0, 0, 3], {"strides": [2, 2], "dilations": [1, 2]}, (2, 0, 0, 3)),
    ([0, 0, 1, 1, 0, 0, 1, 1], {"auto_pad": "VALID"}, (1, 1, 1, 1)),
])
def test_fuses(pads, conv_attrs, want):
    g = check_fusion(pad_conv(pads, conv_attrs=conv_attrs), "pad_conv_fusion", feeds(INPUTS), ["Conv"])
    assert tuple(g.nodes[0].attrs["pads"]) == want and g.nodes[0].attrs["auto_pad"] == "NOTSET"


def test_explicit_zero_value_and_axes():
    m = pad_conv([1, 2, 1, 0], value=0.0, axes=[-2, -1])
    g = check_fusion(m, "pad_conv_fusion", feeds(INPUTS), ["Conv"])
    assert tuple(g.nodes[0].attrs["pads"]) == (1, 2, 1, 0)


def test_other_readers_keep_the_pad():
    g = check_fusion(pad_conv([0, 0, 1, 1, 0, 0, 1, 1], extra_use=True), "pad_conv_fusion", feeds(INPUTS),
                     ["Conv", "Pad", "Relu"])
    conv = next(n for n in g.nodes if n.op == "Conv")
    assert conv.inputs[0].name == "x"


def test_nan_and_inf_inputs_match():
    data = feeds(INPUTS)
    data["x"][0, 0, 0, 0], data["x"][0, 1, 3, 4], data["x"][0, 2, 6, 8] = np.nan, np.inf, -np.inf
    check_fusion(pad_conv([0, 0, 1, 1, 0, 0, 1, 1]), "pad_conv_fusion", data, ["Conv"])


@pytest.mark.parametrize("why,kwargs", [
    ("non-zero value", dict(pads=[0, 0, 1, 1, 0, 0, 1, 1], value=1.5)),
    ("reflect mode", dict(pads=[0, 0, 1, 1, 0, 0, 1, 1], mode="reflect")),
    ("channel axis padded", dict(pads=[0, 1, 1, 1, 0, 0, 1, 1], w=RNG.normal(size=(4, 4, 3, 3)).astype(np.float32))),
    ("negative amounts (a crop)", dict(pads=[0, 0, -1, 0, 0, 0, 0, 0])),
    ("SAME_UPPER conv", dict(pads=[0, 0, 1, 1, 0, 0, 1, 1], conv_attrs={"auto_pad": "SAME_UPPER"})),
])
def test_declined(why, kwargs):
    check_no_fusion(pad_conv(**kwargs), "pad_conv_fusion")


def test_converted_model_runs_pad_free_at_every_level(tmp_path):
    """Through the converter: opt_level >= 1 stores the Conv with the combined pads and no Pad; level 0 keeps
    the graph as imported; all match onnxruntime."""
    from helpers import run_ort

    from converter_lite.api import convert, load
    from converter_lite.model.format import load_model

    m = pad_conv([0, 0, 2, 1, 0, 0, 0, 1], conv_attrs={"pads": [0, 1, 0, 1]})
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    data = feeds(INPUTS)
    want = run_ort(m, data)[0]
    for level in (0, 1, 2):
        ms = convert(str(path), str(tmp_path / f"m{level}"), graph_kernel_flags=f"--opt_level={level}")
        ops = [n.op for n in load_model(ms).graph.nodes]
        assert ("Pad" in ops) == (level == 0), (level, ops)
        got = load(ms).run(data)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
