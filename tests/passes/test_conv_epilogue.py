"""passes/conv_epilogue.py: the converter records which fused kernels a convolution driver computes in its
epilogue; the runtime only follows the record."""
from __future__ import annotations

import math

import numpy as np
import onnx
import onnx.helper as oh
from helpers import make_model, run_ort, tensor_info

from converter_lite.api import convert, load
from converter_lite.model.format import load_model

RNG = np.random.default_rng(5)


def _convert(tmp_path, nodes, outputs, level=2):
    inits = {f"w{i}": RNG.standard_normal((4, 4, 3, 3)).astype(np.float32) for i in range(3)}
    inits |= {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)}
    model = make_model(nodes, [tensor_info("x", np.float32, [1, 4, 9, 9])],
                       [tensor_info(o, np.float32, None) for o in outputs], initializers=inits)
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    return model, convert(str(src), str(tmp_path / "m"), graph_kernel_flags=f"--opt_level={level}")


def _conv(i, src, out):
    return oh.make_node("Conv", [src, f"w{i}"], [out], pads=[1, 1, 1, 1], name=f"conv{i}")


def _records(ms):
    g = load_model(ms).graph
    return [(n, n.attrs.get("conv_epilogue")) for n in g.nodes if n.op == "GraphKernel"], g


def test_relu6_and_residual_are_recorded_next_to_their_conv(tmp_path):
    nodes = [_conv(0, "x", "c0"), oh.make_node("Clip", ["c0", "lo", "hi"], ["r0"]),
             _conv(1, "r0", "c1"), oh.make_node("Add", ["c1", "x"], ["y"])]
    model, ms = _convert(tmp_path, nodes, ["y"])
    recs, g = _records(ms)
    specs = [s for _, s in recs]
    assert {"host": "conv0", "input": 0, "clamp": (0.0, 6.0), "residual": None} in specs          # lists decode as tuples
    res = [s for s in specs if s and s["host"] == "conv1"]
    assert len(res) == 1 and res[0]["clamp"] is None and res[0]["residual"] is not None
    for kernel, spec in recs:                                  # each Conv sits right before its epilogue
        if spec:
            assert g.nodes[g.nodes.index(kernel) - 1].name == spec["host"]
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    m = load(ms)
    assert len(m.plan.steps) == 2                              # the two kernels run in the Convs' epilogues
    np.testing.assert_allclose(m.run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_a_conv_read_twice_keeps_its_kernel(tmp_path):
    nodes = [_conv(0, "x", "c0"), oh.make_node("Relu", ["c0"], ["r0"]), oh.make_node("Add", ["c0", "r0"], ["y"])]
    _, ms = _convert(tmp_path, nodes, ["y"])
    assert all(spec is None for _, spec in _records(ms)[0])


def test_relu_bounds_are_infinite_above(tmp_path):
    _, ms = _convert(tmp_path, [_conv(0, "x", "c0"), oh.make_node("Relu", ["c0"], ["y"])], ["y"])
    (_, spec), = _records(ms)[0]
    assert spec["clamp"][0] == 0.0 and math.isinf(spec["clamp"][1])


def test_without_native_code_nothing_is_recorded(tmp_path):
    _, ms = _convert(tmp_path, [_conv(0, "x", "c0"), oh.make_node("Relu", ["c0"], ["y"])], ["y"], level=0)
    assert not any("conv_epilogue" in n.attrs for n in load_model(ms).graph.nodes)
