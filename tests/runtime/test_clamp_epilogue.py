"""A bare Relu or Clip after a Conv on its driver: the Conv clamps its own output (runtime/program.py
``_clamp_epilogue``) and the clamp is no step of its own; values as onnxruntime's.  The converter fuses such
clamps in the main graph; they stay bare in the branches of an If on a value computed at run time in a model
with dynamic dims, made static per shape at run time (openWakeWord's silero VAD), after its 1-D Convs, which run
as 2-D ones between reshapes.  A Conv output read by others too keeps its clamp step."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
from helpers import make_model, run_ort, tensor_info

import converter_lite

F32 = np.float32


def _branch(tag: str, rng, inits: dict, shared: bool) -> onnx.GraphProto:
    """Three 1-D convolutions written as 2-D ones between an Unsqueeze and a Squeeze (as silero's exporter wrote
    them), each followed by a clamp."""
    nodes, cur = [], "x"
    for i, (c, clamp) in enumerate(((3, "Relu"), (8, "Clip"), (8, "Relu"))):
        inits[f"{tag}w{i}"] = (rng.standard_normal((8, c, 1, 3)) * 0.3).astype(F32)
        inits[f"{tag}b{i}"] = (rng.standard_normal(8) * 0.1).astype(F32)
        nodes += [oh.make_node("Unsqueeze", [cur, "axis2"], [f"{tag}u{i}"]),
                  oh.make_node("Conv", [f"{tag}u{i}", f"{tag}w{i}", f"{tag}b{i}"], [f"{tag}c{i}"], pads=[0, 1, 0, 1]),
                  oh.make_node("Squeeze", [f"{tag}c{i}", "axis2"], [f"{tag}q{i}"]),
                  oh.make_node(clamp, [f"{tag}q{i}"] + (["lo", "hi"] if clamp == "Clip" else []), [f"{tag}r{i}"])]
        cur = f"{tag}r{i}"
    if shared:                                     # the last Conv's output read by the Relu and by an Add
        nodes.append(oh.make_node("Add", [f"{tag}q2", cur], [f"{tag}s"]))
        cur = f"{tag}s"
    return oh.make_graph(nodes, tag, [], [tensor_info(cur, F32, None)])


def _model(shared: bool) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = {"lo": np.array(0.0, F32), "hi": np.array(6.0, F32), "one": np.array(1, np.int64),
             "axis2": np.array([2], np.int64)}
    nodes = [oh.make_node("Equal", ["flag", "one"], ["cond"]),
             oh.make_node("If", ["cond"], ["y"], then_branch=_branch("t", rng, inits, shared),
                          else_branch=_branch("e", rng, inits, shared))]
    return make_model(nodes, [tensor_info("x", F32, [1, 3, "t"]), tensor_info("flag", np.int64, [])],
                      [tensor_info("y", F32, None)], inits)


def _run(tmp_path, shared: bool) -> list[str]:
    """The ops of the branch plans' steps, after checking both branches at two shapes against onnxruntime."""
    model = _model(shared)
    src = str(tmp_path / "m.onnx")
    onnx.save(model, src)
    # dynamic fusion off: it fuses these clamps where it finds the branch's shapes (silero's it did not)
    flags = "--opt_level=2 --disable_pass=dynamic_fusion"
    m = converter_lite.load(converter_lite.convert(src, str(tmp_path / "m"), graph_kernel_flags=flags), num_threads=1)
    rng = np.random.default_rng(1)
    for t in (13, 40):
        for flag in (0, 1):
            feeds = {"x": (rng.standard_normal((1, 3, t)) * 3).astype(F32), "flag": np.array(flag, np.int64)}
            for _ in range(2):                     # the first run at a shape may take the generic plan
                got = list(m.run(feeds).values())
            for g, o in zip(got, run_ort(model, feeds)):
                np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-5)
    plan = m._plan_for([feeds["x"], feeds["flag"]])
    bodies = [b for s in plan.program.steps if s.impl.bodies for b in s.impl.bodies.values()]
    assert len(bodies) == 2
    for b in bodies:                               # branches made static for the shape (runtime/concretize.py)
        ex = b.acquire()
        try:
            assert ex.fixed_buffers() is not None and all(s.impl.bind is not None for s in b.program.steps)
        finally:
            b.release(ex)
    return [s.node.op for b in bodies for s in b.program.steps]


def test_bare_clamps_become_conv_epilogues(tmp_path):
    ops = _run(tmp_path, shared=False)
    assert ops == ["Conv"] * 6, ops


def test_a_shared_conv_output_keeps_its_clamp(tmp_path):
    ops = _run(tmp_path, shared=True)
    assert ops == ["Conv", "Conv", "Conv", "Relu", "Add"] * 2, ops
