"""dynamic_fusion (passes/fuse/dynamic.py) and row kernels (codegen/rows.py, ops/graph_kernel.py): fused native
kernels of models with dynamic dims, one compiled kernel for every number of rows."""
import os
import sys

import numpy as np
import onnx.helper as oh
import pytest

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.frontend import import_model
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ir.input_dims import InputDims
from converter_lite.model.format import load_model
from converter_lite.passes.fuse.dynamic import row_form
from converter_lite.passes.fuse.dynamic_probes import fit_probes, probe_shapes, signatures
from helpers import assert_close, make_model, run_ort, tensor_info

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "e2e"))
from test_dynamic_shapes import mlp_model  # noqa: E402

F = np.float32
OPT2 = {"graph_kernel_flags": "--opt_level=2"}


def _row_kernels(path):
    return [n for n in load_model(path).graph.nodes if n.op == "GraphKernel" and "rows" in n.attrs]


def _check(proto, path, shapes, name="x", **load):
    model = converter_lite.load(path, **load)
    rng = np.random.default_rng(0)
    for s in shapes:
        x = rng.standard_normal(s).astype(F)
        for got, want in zip(model.run({name: x}).values(), run_ort(proto, {name: x})):
            assert got.shape == want.shape
            assert_close(got, want, rtol=1e-4, atol=1e-5, what=str(s))
    return model


def test_probes_tell_dynamic_dims_and_symbols():
    g = import_model(mlp_model())
    dims = InputDims.of_metadata(g.metadata)
    probes = probe_shapes(g, dims)
    assert probes and all(p[0]["x"][2] == p[1]["x"][2] == 16 for p in probes)
    sigs = signatures(g, probes)
    x = sigs[id(g.inputs[0])]
    assert isinstance(x[0], tuple) and isinstance(x[1], tuple) and x[2] == 16 and x[0] != x[1]
    assert row_form(x)[0] == 2 and row_form(x)[2] == (16,)


def test_mlp_fuses_into_one_row_kernel(tmp_path):
    proto = mlp_model()
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    # the row kernel of the MLP, and the final ReduceSum (no keepdims) past the Reshape in one of its own
    k, *rest = sorted(_row_kernels(path), key=lambda k: -len(k.attrs["source_nodes"]))
    assert len(rest) <= 1 and all(len(r.attrs["source_nodes"]) == 1 and "ReduceSum" in r.attrs["source_nodes"][0]
                                  for r in rest), [r.attrs["source_nodes"] for r in rest]
    assert k.attrs["rows"]["lead"] == 2
    assert {"Sigmoid", "ReduceMean", "Div"} <= {n.split("_")[0] for n in k.attrs["source_nodes"]} or \
        len(k.attrs["source_nodes"]) >= 8
    shapes = [(1, 1, 16), (2, 7, 16), (0, 3, 16), (5, 999, 16), (1, 5000, 16)]
    for nt in (1, 2, 4):
        _check(proto, path, shapes, num_threads=nt, adaptive_threads=False)
    _check(proto, path, shapes[:3], native=False)                 # the reference form of a row kernel


def test_no_cycle_through_an_outside_node(tmp_path):
    """relu -> MatMul (opaque) -> add(relu, matmul): relu and add may not share a kernel."""
    w = np.random.default_rng(1).standard_normal((8, 8)).astype(F)
    nodes = [oh.make_node("Relu", ["x"], ["a"]), oh.make_node("MatMul", ["a", "w"], ["b"]),
             oh.make_node("Add", ["a", "b"], ["c"]), oh.make_node("Tanh", ["c"], ["y"])]
    proto = make_model(nodes, [tensor_info("x", F, ["n", 8])], [tensor_info("y", F, ["n", 8])], {"w": w})
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    kernels = _row_kernels(path)
    assert len(kernels) == 2
    assert not any({"Relu", "Add"} <= {s.split("_")[0] for s in k.attrs["source_nodes"]} for k in kernels)
    _check(proto, path, [(1, 8), (33, 8)])


def test_what_stays_unfused(tmp_path):
    """A reduction over a dynamic axis and a constant broadcasting over the rows are not row kernels."""
    c = np.arange(12, dtype=F).reshape(3, 1, 4)
    nodes = [oh.make_node("ReduceSum", ["x", "ax"], ["s"], keepdims=1), oh.make_node("Sub", ["x", "s"], ["d"]),
             oh.make_node("Add", ["d", "c"], ["y"])]
    proto = make_model(nodes, [tensor_info("x", F, ["n", 4])], [tensor_info("y", F, [3, "n", 4])],
                       {"ax": np.array([0], np.int64), "c": c})
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    assert not _row_kernels(path)
    _check(proto, path, [(1, 4), (6, 4)])


def test_a_model_no_probe_fits_runs_unfused(tmp_path):
    """Only batch 1 reshapes to [2, 3]: no probe shape infers, nothing is fused, batch 1 runs and another
    batch is -600 naming the Reshape."""
    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Reshape", ["r", "shape"], ["y"], name="fixed")]
    proto = make_model(nodes, [tensor_info("x", F, ["n", 6])], [tensor_info("y", F, [2, 3])],
                       {"shape": np.array([2, 3], np.int64)})
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    assert not _row_kernels(path)
    model = _check(proto, path, [(1, 6)])
    with pytest.raises(ConverterError) as e:
        model.run({"x": np.ones((2, 6), F)})
    assert e.value.code == -600 and "fixed" in e.value.message


def test_a_dim_only_one_size_fits_is_pinned(tmp_path, caplog):
    """The height is '?' but a Reshape to a constant shape needs it to be 24: no probe fits, fit_probes finds 24
    among the common sizes and the model fuses for that height (static in the kernels); another height is -600."""
    import logging
    rng = np.random.default_rng(2)
    nodes = [oh.make_node("Mul", ["x", "scale"], ["a"]), oh.make_node("Sigmoid", ["a"], ["s"]),
             oh.make_node("Mul", ["x", "s"], ["m"]), oh.make_node("Reshape", ["m", "shape"], ["r"], name="to_24"),
             oh.make_node("Tanh", ["r"], ["y"])]
    proto = make_model(nodes, [tensor_info("x", F, ["n", "h", 16])], [tensor_info("y", F, ["n", 24, 4, 4])],
                       {"scale": rng.standard_normal(16).astype(F), "shape": np.array([0, 24, 4, 4], np.int64)},
                       opset=17)
    g = import_model(proto)
    dims = InputDims.of_metadata(g.metadata)
    assert signatures(g, probe_shapes(g, dims)) is None
    pair, sym, values = fit_probes(g, dims)
    assert sym.name == "h" and values == (24, 24) and pair[0]["x"][0] != pair[1]["x"][0]
    with caplog.at_level(logging.INFO, logger="converter_lite"):
        path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    assert "input 'x' dim 1 ('h') only fits 24" in caplog.text
    kernels = _row_kernels(path)
    assert kernels and {"Mul", "Sigmoid", "Tanh"} <= {s.split("_")[0] for k in kernels for s in k.attrs["source_nodes"]}
    model = _check(proto, path, [(1, 24, 16), (3, 24, 16), (0, 24, 16), (37, 24, 16)])
    for h in (32, 23):                            # the row kernel's check of its tail, before the Reshape's
        with pytest.raises(ConverterError) as e:
            model.run({"x": np.ones((2, h, 16), F)})
        assert e.value.code == -600 and "GraphKernel" in e.value.message


def test_a_dim_some_sizes_fit_stays_dynamic(tmp_path, caplog):
    """Heights 40 to 103 pool to 1 row, which a Reshape needs: no probe pair fits (192 pools to 3), 48 and 96 do
    and the height stays dynamic in the kernels: every height the model takes runs."""
    import logging
    nodes = [oh.make_node("Sigmoid", ["x"], ["s"]),
             oh.make_node("MaxPool", ["s"], ["p"], kernel_shape=[40, 1], strides=[64, 1]),
             oh.make_node("Reshape", ["p", "shape"], ["r"]), oh.make_node("Tanh", ["r"], ["t"]),
             oh.make_node("Mul", ["t", "r"], ["y"])]
    proto = make_model(nodes, [tensor_info("x", F, ["n", 1, "h", 8])], [tensor_info("y", F, ["n", 8])],
                       {"shape": np.array([0, 8], np.int64)}, opset=17)
    with caplog.at_level(logging.INFO, logger="converter_lite"):
        path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    assert "input 'x' dim 2 ('h') fits none of the probe sizes but fits 48 and 96" in caplog.text
    assert len(_row_kernels(path)) == 2
    model = _check(proto, path, [(1, 1, 40, 8), (2, 1, 48, 8), (3, 1, 77, 8), (1, 1, 103, 8)])
    with pytest.raises(ConverterError) as e:
        model.run({"x": np.ones((1, 1, 104, 8), F)})
    assert e.value.code == -600


def test_rebuilt_kernels_are_row_kernels_too(tmp_path):
    """trust_native_code=False regenerates every kernel from the file's sub-graphs (JIT): row kernels included."""
    proto = mlp_model()
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    model = _check(proto, path, [(2, 9, 16), (1, 300, 16)], trust_native_code=False)
    assert any(k.native for k in model.kernels_for({"x": np.ones((1, 4, 16), F)}))


def test_row_kernel_refuses_a_stage_across_rows():
    from converter_lite.codegen.errors import UnsupportedOpError
    from converter_lite.codegen.rows import row_multipliers
    x = Value("x", TensorType(DType.float32, (1021, 8)))
    s = Value("s", TensorType(DType.float32, (1, 8)))
    axes = Value("axes", const=np.array([0], np.int64))
    g = Graph("g", [x], [s], [Node("ReduceSum", [x, axes], [s], {"keepdims": 1})])
    with pytest.raises(UnsupportedOpError):
        row_multipliers(g, 1021)


def _column_model():
    """scores[b, h, s, t] (t dynamic): scale, an additive mask [b, 1, 1, t], a boolean mask [1, 1, s, t], softmax
    over t; plus a mean over t kept as an output of its own (a row-level output of the column kernel)."""
    nodes = [oh.make_node("Mul", ["x", "scale"], ["a"]), oh.make_node("Add", ["a", "bias"], ["b"]),
             oh.make_node("Where", ["keep", "b", "neg"], ["c"]), oh.make_node("Softmax", ["c"], ["y"], axis=-1),
             oh.make_node("ReduceMean", ["c", "ax"], ["m"], keepdims=1),
             oh.make_node("LogSoftmax", ["x"], ["z"], axis=3)]
    return make_model(nodes, [tensor_info("x", F, ["b", 2, "s", "t"]), tensor_info("bias", F, ["b", 1, 1, "t"]),
                              tensor_info("keep", np.bool_, [1, 1, "s", "t"])],
                      [tensor_info("y", F, ["b", 2, "s", "t"]), tensor_info("m", F, ["b", 2, "s", 1]),
                       tensor_info("z", F, ["b", 2, "s", "t"])],
                      {"scale": np.array(0.3, F), "neg": np.array(-1e4, F), "ax": np.array([-1], np.int64)})


@pytest.mark.parametrize("nt", [1, 2, 4])
def test_column_kernels_at_every_shape(tmp_path, nt):
    proto = _column_model()
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    cols = [n for n in load_model(path).graph.nodes if n.op == "GraphKernel" and "cols" in n.attrs]
    assert len(cols) >= 1 and any("Softmax" in s for k in cols for s in k.attrs["source_nodes"])
    model = converter_lite.load(path, num_threads=nt, adaptive_threads=False)
    rng = np.random.default_rng(nt)
    for b, s, t in [(1, 1, 1), (2, 3, 5), (1, 64, 64), (3, 17, 300), (2, 200, 129), (1, 0, 4)]:
        feeds = {"x": rng.standard_normal((b, 2, s, t)).astype(F),
                 "bias": rng.standard_normal((b, 1, 1, t)).astype(F),
                 "keep": rng.random((1, 1, s, t)) > 0.3}
        got = model.run(feeds)
        for (name, g), w in zip(got.items(), run_ort(proto, feeds)):
            assert g.shape == w.shape, name
            assert_close(g, w, rtol=1e-4, atol=1e-5, what=f"{name} at {(b, s, t)}")
    assert any(k.native and k.op == "GraphKernel" for k in model.kernels_for(feeds))


def test_column_kernel_reference_form(tmp_path):
    proto = _column_model()
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    model = converter_lite.load(path, native=False)
    feeds = {"x": np.ones((2, 2, 3, 7), F), "bias": np.zeros((2, 1, 1, 7), F), "keep": np.ones((1, 1, 3, 7), bool)}
    for g, w in zip(model.run(feeds).values(), run_ort(proto, feeds)):
        assert_close(g, w, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConverterError) as e:                   # a bias of the wrong batch: the kernel names it
        model.run({**feeds, "bias": np.zeros((3, 1, 1, 7), F)})
    assert e.value.code == -600


@pytest.mark.parametrize("dims", [["n", 6, "h", "w"], ["n", 6, 5, 7]])
def test_batch_norm_of_a_dynamic_image(tmp_path, dims):
    """Per-channel parameters along axis 1: a column kernel when the width is dynamic, a row kernel when only
    the batch is."""
    rng = np.random.default_rng(0)
    nodes = [oh.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y0"]), oh.make_node("Relu", ["y0"], ["y"])]
    params = {k: rng.random(6).astype(F) + (0.5 if k == "v" else 0) for k in "sbmv"}
    proto = make_model(nodes, [tensor_info("x", F, dims)], [tensor_info("y", F, None)], params)
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    kinds = [("cols" in n.attrs, "rows" in n.attrs) for n in load_model(path).graph.nodes]
    assert kinds == [(True, False)] if dims[-1] == "w" else kinds == [(False, True)]
    shapes = [(1, 6, 5, 7), (2, 6, 33, 1), (3, 6, 1, 64)] if dims[-1] == "w" else [(1, 6, 5, 7), (4, 6, 5, 7)]
    _check(proto, path, shapes)


def test_a_cluster_that_would_feed_itself_is_not_outlined():
    """Two clusters can feed each other (found in YOLOv8n's head): outlining checks the graph as it is."""
    from converter_lite.passes.fuse.dynamic import _closes_a_cycle
    t = TensorType(DType.float32, None)
    x = Value("x", t)
    vals = {k: Value(k, t) for k in "abc"}
    a = Node("Relu", [x], [vals["a"]], name="a")
    other = Node("Neg", [vals["a"]], [vals["b"]], name="other")
    c = Node("Add", [vals["a"], vals["b"]], [vals["c"]], name="c")
    g = Graph("g", [x], [vals["c"]], [a, other, c])
    assert _closes_a_cycle(g, [a, c], {id(a), id(c)})
    assert not _closes_a_cycle(g, [a, other], {id(a), id(other)})


def test_a_dynamic_dim_probed_at_one_is_not_a_broadcast(tmp_path):
    """A width pooled down to 1 at the smaller probe (64 // 64) is still dynamic in a column kernel's pattern."""
    nodes = [oh.make_node("AveragePool", ["x"], ["p"], kernel_shape=[1, 64], strides=[1, 64]),
             oh.make_node("Sigmoid", ["p"], ["s"]), oh.make_node("Mul", ["p", "s"], ["y"])]
    proto = make_model(nodes, [tensor_info("x", F, [1, 4, 1, "w"])], [tensor_info("y", F, None)])
    path = converter_lite.convert(proto, str(tmp_path / "m"), input_shape="x:1,4,1,64-4096", **OPT2)
    assert any("cols" in n.attrs for n in load_model(path).graph.nodes)
    _check(proto, path, [(1, 4, 1, 64), (1, 4, 1, 640), (1, 4, 1, 4000)])


def test_control_flow_on_input_shapes_is_reported(tmp_path, caplog):
    """An If on the input's length (silero VAD's pattern) cannot fold while the length is dynamic: a warning
    names it and the flag that folds it."""
    import logging
    then = oh.make_graph([oh.make_node("Relu", ["x"], ["t"])], "then", [], [tensor_info("t", F, None)])
    other = oh.make_graph([oh.make_node("Neg", ["x"], ["e"])], "else", [], [tensor_info("e", F, None)])
    nodes = [oh.make_node("Shape", ["x"], ["s"]), oh.make_node("Gather", ["s", "one"], ["n"], axis=0),
             oh.make_node("Greater", ["n", "k"], ["c"]),
             oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="branch_on_length")]
    proto = make_model(nodes, [tensor_info("x", F, [1, "n"])], [tensor_info("y", F, None)],
                       {"one": np.array(1, np.int64), "k": np.array(256, np.int64)})
    with caplog.at_level(logging.WARNING, logger="converter_lite"):
        path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    assert "branch_on_length" in caplog.text and "--inputShape" in caplog.text
    model = _check(proto, path, [(1, 100), (1, 300)])
    plan = model._plan_for([np.ones((1, 300), F)])
    assert "If" not in {n.op for n in plan.graph.nodes}         # the condition folded: the branch is inlined
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="converter_lite"):
        converter_lite.convert(proto, str(tmp_path / "s"), input_shape="x:1,512", **OPT2)
    assert "branch_on_length" not in caplog.text


def test_a_dynamic_1d_conv_runs_on_the_2d_drivers(tmp_path):
    """conv1d_as_conv2d rewrites a Conv of rank-3 weights whatever the input's length (silero's STFT Conv: 1.3 ms
    on the reference kernel)."""
    w = np.random.default_rng(0).standard_normal((8, 2, 5)).astype(F)
    proto = make_model([oh.make_node("Conv", ["x", "w"], ["y"], pads=[2, 2], strides=[2])],
                       [tensor_info("x", F, ["n", 2, "l"])], [tensor_info("y", F, None)], {"w": w})
    path = converter_lite.convert(proto, str(tmp_path / "m"), **OPT2)
    convs = [n for n in load_model(path).graph.nodes if n.op == "Conv"]
    assert convs and all(n.inputs[1].const.ndim == 4 for n in convs)
    _check(proto, path, [(1, 2, 9), (3, 2, 100), (2, 2, 1)])


def test_window_pad_of_a_dynamic_value_is_not_a_window():
    """The clusterer asked window_pad about a Pad of dynamic shape (MobileNet with dynamic dims): False, not a
    TypeError."""
    from converter_lite.passes.fuse.window import window_pad
    x, y = Value("x", TensorType(DType.float32, None)), Value("y", TensorType(DType.float32, None))
    pads = Value("p", const=np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    assert window_pad(Node("Pad", [x, pads], [y], {"mode": "constant"})) is False


def test_row_kernels_take_leading_one_constants_and_rank_dropping_reductions(tmp_path):
    """Exporters' layer norms (magika's jax2tf export): a bias [1, 1, 64] added to [batch, 2048, 64] (its leading
    1s broadcast over the rows) and ReduceSum over the middle axis without keepdims; both join the row kernel
    instead of running on numpy."""
    rng = np.random.default_rng(4)
    nodes = [oh.make_node("Add", ["x", "bias"], ["a"]), oh.make_node("Tanh", ["a"], ["t"]),
             oh.make_node("Mul", ["t", "t"], ["sq"]),
             oh.make_node("ReduceSum", ["sq", "ax"], ["s"], keepdims=0),
             oh.make_node("Sqrt", ["s"], ["y"])]
    proto = make_model(nodes, [tensor_info("x", F, ["batch", 24, 8])], [tensor_info("y", F, None)],
                       {"bias": rng.standard_normal((1, 1, 8)).astype(F), "ax": np.array([1], np.int64)})
    path = converter_lite.convert(proto, str(tmp_path / "ln"), **OPT2)
    kernels = _row_kernels(path)
    fused = {s.split("_")[0] for k in kernels for s in k.attrs["source_nodes"]}
    assert {"Add", "ReduceSum", "Sqrt"} <= fused, fused
    assert not [n.op for n in load_model(path).graph.nodes if n.op != "GraphKernel"]
    _check(proto, path, [(1, 24, 8), (3, 24, 8), (0, 24, 8), (17, 24, 8)])


def _branch_model():
    """An If on an input's value (not its shape) whose branches compute elementwise chains of a dynamic-shape
    capture: x [n, 16] -> (x * 2 + 1) -> Tanh, or (x - 3) * x -> Relu."""
    then_g = oh.make_graph([oh.make_node("Mul", ["x", "two"], ["tm"]), oh.make_node("Add", ["tm", "one"], ["ta"]),
                            oh.make_node("Tanh", ["ta"], ["ty"])], "then", [], [tensor_info("ty", F, None)])
    else_g = oh.make_graph([oh.make_node("Sub", ["x", "three"], ["es"]), oh.make_node("Mul", ["es", "x"], ["em"]),
                            oh.make_node("Relu", ["em"], ["ey"])], "else", [], [tensor_info("ey", F, None)])
    inits = {"two": np.array(2, F), "one": np.array(1, F), "three": np.array(3, F), "k": np.array(1, np.int64)}
    nodes = [oh.make_node("Equal", ["flag", "k"], ["cond"]),
             oh.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    return make_model(nodes, [tensor_info("x", F, ["n", 16]), tensor_info("flag", np.int64, [])],
                      [tensor_info("y", F, None)], inits)


def test_if_branches_on_a_value_fuse_too(tmp_path, caplog):
    """The branches of an If deciding on an input's value are made static at the probe shapes (runtime/
    concretize.py) and their chains fuse into row kernels like the main graph's; both branches run right.  A
    warning names the input and the flags that fuse or fold the branches at conversion."""
    import logging

    import onnx
    proto = _branch_model()
    src = str(tmp_path / "m.onnx")
    onnx.save(proto, src)
    with caplog.at_level(logging.WARNING, logger="converter_lite"):
        path = converter_lite.convert(src, str(tmp_path / "m"), **OPT2)
    assert "on 'flag'" in caplog.text and "--inputValue=flag:<value>" in caplog.text
    branches = [n.attrs[k] for n in load_model(path).graph.nodes if n.op == "If"
                for k in ("then_branch", "else_branch")]
    assert len(branches) == 2
    for b in branches:
        assert [n.op for n in b.nodes] == ["GraphKernel"] and "rows" in b.nodes[0].attrs
    model = converter_lite.load(path)
    rng = np.random.default_rng(0)
    for n in (1, 5, 33):
        for flag in (0, 1):
            feeds = {"x": rng.standard_normal((n, 16)).astype(F), "flag": np.array(flag, np.int64)}
            for got, want in zip(model.run(feeds).values(), run_ort(proto, feeds)):
                assert_close(got, want, rtol=1e-5, atol=1e-6, what=f"n={n} flag={flag}")
