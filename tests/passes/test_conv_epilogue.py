"""passes/conv_epilogue.py: the converter records which fused kernels a convolution driver computes in its
epilogue; the runtime only follows the record."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
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
    assert {"host": "conv0", "input": 0, "clamp": (0.0, 6.0), "residual": None, "gate": None} in specs  # lists: tuples
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


def _gate_model(tmp_path, conv, act, c=8, seed=0):
    """x -> Conv -> activation chain (``act(src) -> nodes, output``) -> y; weights for a dense 3x3, a 1x1 or a
    depthwise 3x3 Conv over ``c`` channels."""
    rng = np.random.default_rng(seed)
    shapes = {"dense": (c, c, 3, 3), "pointwise": (c, c, 1, 1), "depthwise": (c, 1, 3, 3)}
    attrs = {"dense": dict(pads=[1, 1, 1, 1]), "pointwise": {}, "depthwise": dict(pads=[1, 1, 1, 1], group=c)}
    inits = {"w": rng.standard_normal(shapes[conv]).astype(np.float32) * 0.5,
             "b": rng.standard_normal(c).astype(np.float32),
             "k3": np.array(3, np.float32), "k6": np.array(6, np.float32), "k0": np.array(0, np.float32),
             "k1": np.array(1, np.float32), "k16": np.array(1 / 6, np.float32), "kh": np.array(0.5, np.float32)}
    nodes, out = act("c0")
    nodes = [oh.make_node("Conv", ["x", "w", "b"], ["c0"], name="conv0", **attrs[conv])] + nodes
    model = make_model(nodes, [tensor_info("x", np.float32, [1, c, 20, 24])], [tensor_info(out, np.float32, None)],
                       initializers=inits)
    src = tmp_path / f"{conv}.onnx"
    onnx.save(model, src)
    return model, convert(str(src), str(tmp_path / conv), graph_kernel_flags="--opt_level=2")


def _hardswish_op(src):
    return [oh.make_node("HardSwish", [src], ["y"])], "y"


def _paddle_chain(src):                     # x * min(max(x * 1/6 + 0.5, 0), 1), as paddle2onnx writes it
    return [oh.make_node("Mul", [src, "k16"], ["t0"]), oh.make_node("Add", ["t0", "kh"], ["t1"]),
            oh.make_node("Max", ["t1", "k0"], ["t2"]), oh.make_node("Min", ["t2", "k1"], ["t3"]),
            oh.make_node("Mul", [src, "t3"], ["y"])], "y"


def _torch_chain(src):                      # x * relu6(x + 3) / 6
    return [oh.make_node("Add", [src, "k3"], ["t0"]), oh.make_node("Clip", ["t0", "k0", "k6"], ["t1"]),
            oh.make_node("Div", ["t1", "k6"], ["t2"]), oh.make_node("Mul", [src, "t2"], ["y"])], "y"


def _not_a_gate(src):                       # x * relu6(x + 3) / 3: the gate's range is [0, 2], not [0, 1]
    return [oh.make_node("Add", [src, "k3"], ["t0"]), oh.make_node("Clip", ["t0", "k0", "k6"], ["t1"]),
            oh.make_node("Div", ["t1", "k3"], ["t2"]), oh.make_node("Mul", [src, "t2"], ["y"])], "y"


def _x_with_specials(c=8):
    x = RNG.standard_normal((1, c, 20, 24)).astype(np.float32) * 4
    x[0, 0, 5, 5], x[0, 1, 7, 3], x[0, 2, 0, 0] = np.nan, np.inf, -np.inf
    return x


@pytest.mark.parametrize("conv", ["dense", "pointwise", "depthwise"])
@pytest.mark.parametrize("act", [_hardswish_op, _paddle_chain, _torch_chain])
def test_hardswish_after_a_conv_runs_in_its_epilogue(tmp_path, conv, act):
    model, ms = _gate_model(tmp_path, conv, act)
    (_, spec), = _records(ms)[0]
    assert spec is not None and spec["clamp"] is None and spec["residual"] is None
    assert spec["gate"] == pytest.approx((1 / 6, 0.5))
    m = load(ms)
    x = _x_with_specials()
    ref = run_ort(model, {"x": x})[0]
    for threads in (1, 2, 4):
        got = load(ms, num_threads=threads).run({"x": x})["y"]
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5, equal_nan=True)
    assert len(m.plan.steps) == 1                              # the kernel runs in the Conv driver's epilogue


def test_a_clamp_range_other_than_0_1_is_not_a_gate(tmp_path):
    model, ms = _gate_model(tmp_path, "dense", _not_a_gate)
    assert all(spec is None or spec["gate"] is None for _, spec in _records(ms)[0])
    x = _x_with_specials()
    np.testing.assert_allclose(load(ms).run({"x": x})["y"], run_ort(model, {"x": x})[0], rtol=2e-5, atol=2e-5,
                               equal_nan=True)


def test_a_driver_without_gates_leaves_the_kernel_to_run():
    from converter_lite.kernels.conv_epilogue import MODE_CLAMP, MODE_GATE, EpilogueHook

    class ClampOnly(EpilogueHook):
        GATE = False

    assert ClampOnly().epilogue(None, None, (1 / 6, 0.5)) is None
    hook = EpilogueHook()
    assert hook.epilogue(None, None, (1 / 6, 0.5)) == ()
    assert hook.epilogue_words()["clamp"] == MODE_GATE
    assert hook.epilogue((0.0, 6.0), None) is None                 # one epilogue per step
    clamp = EpilogueHook()
    assert clamp.epilogue((0.0, 6.0), None) == () and clamp.epilogue_words()["clamp"] == MODE_CLAMP
    assert EpilogueHook().epilogue((0.0, 6.0), None, (1 / 6, 0.5)) is None   # a clamp and a gate: not both
