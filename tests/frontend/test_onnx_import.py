"""ONNX importer: functions, external data, old opsets, static shapes, folding, dead nodes, malformed graphs."""
import os

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.frontend import import_model
from converter_lite.frontend.input_shapes import parse_input_shapes
from converter_lite.ops.interpret import eval_graph
from helpers import assert_close, make_model, run_ort, tensor_info

F = np.float32


def _run(model, feeds, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    ms = converter_lite.convert(path, str(tmp_path / "m"))
    return list(converter_lite.load(ms).run(feeds).values())


def test_function_is_inlined():
    fn = oh.make_function("acme", "Twice", ["a"], ["b"], [oh.make_node("Add", ["a", "a"], ["b"])],
                          opset_imports=[oh.make_opsetid("", 17)])
    m = make_model([oh.make_node("Twice", ["x"], ["y"], domain="acme")], [tensor_info("x", F, [3])],
                   [tensor_info("y", F, [3])], functions=[fn])
    g = import_model(m)
    assert [n.op for n in g.nodes] == ["Add"]
    np.testing.assert_array_equal(eval_graph(g, [np.arange(3, dtype=F)])[0], [0, 2, 4])


def test_external_data(tmp_path):
    w = np.arange(12, dtype=F).reshape(3, 4)
    m = make_model([oh.make_node("MatMul", ["x", "w"], ["y"])], [tensor_info("x", F, [2, 3])],
                   [tensor_info("y", F, [2, 4])], {"w": w})
    path = str(tmp_path / "ext.onnx")
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
              size_threshold=0)
    assert os.path.exists(tmp_path / "weights.bin")
    g = import_model(path)
    x = np.ones((2, 3), F)
    np.testing.assert_allclose(eval_graph(g, [x])[0], x @ w)


def test_missing_external_data_file(tmp_path):
    m = make_model([oh.make_node("Add", ["x", "w"], ["y"])], [tensor_info("x", F, [4])], [tensor_info("y", F, [4])],
                   {"w": np.ones(4, F)})
    path = str(tmp_path / "ext.onnx")
    onnx.save(m, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    os.remove(tmp_path / "w.bin")
    with pytest.raises(ConverterError) as e:
        import_model(path)
    assert e.value.code == -200


def test_dynamic_dims_stay_dynamic_unless_given():
    m = make_model([oh.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F, ["batch", 3])],
                   [tensor_info("y", F, ["batch", 3])])
    g = import_model(m)
    assert g.inputs[0].type.shape is None and g.outputs[0].type.shape is None
    assert g.metadata["input_dims"] == '{"x": [{"sym": "batch"}, 3]}'
    assert import_model(m, {"x": (7, 3)}).inputs[0].type.shape == (7, 3)
    assert import_model(m, {"x": ((1, 8), 3)}).metadata["input_dims"] == '{"x": [{"sym": "batch", "min": 1, "max": 8}, 3]}'
    assert parse_input_shapes("x:1-8,3") == {"x": ((1, 8), 3)}


def test_parse_input_shapes_mindspore_syntax():
    assert parse_input_shapes("in:1,3,224,224;ids:1,128") == {"in": (1, 3, 224, 224), "ids": (1, 128)}
    assert parse_input_shapes("a:b:2,3") == {"a:b": (2, 3)}     # the last ':' splits


def test_shape_subgraph_folds_to_constants():
    nodes = [oh.make_node("Shape", ["x"], ["s"]), oh.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             oh.make_node("Unsqueeze", ["n", "ax"], ["n1"]), oh.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
             oh.make_node("Reshape", ["x", "shape"], ["y"])]
    m = make_model(nodes, [tensor_info("x", F, ["N", 2, 3])], [tensor_info("y", F, None)],
                   {"zero": np.array(0, np.int64), "ax": np.array([0], np.int64), "m1": np.array([-1], np.int64)})
    g = import_model(m, {"x": (4, 2, 3)})
    assert [n.op for n in g.nodes] == ["Reshape"]
    assert g.outputs[0].type.shape == (4, 6)


def test_shape_fed_at_run_time_runs_with_dynamic_shapes(tmp_path):
    m = make_model([oh.make_node("Reshape", ["x", "shape"], ["r"]), oh.make_node("Relu", ["r"], ["y"])],
                   [tensor_info("x", F, [2, 6]), tensor_info("shape", np.int64, [2])], [tensor_info("y", F, None)])
    g = import_model(m)
    assert g.outputs[0].type.shape is None
    x = np.arange(-6, 6, dtype=F).reshape(2, 6)
    for shape in ([3, 4], [12, 1]):
        out = _run(m, {"x": x, "shape": np.array(shape, np.int64)}, tmp_path)[0]
        np.testing.assert_array_equal(out, np.maximum(x.reshape(shape), 0))


def test_constant_folding_and_dead_nodes():
    nodes = [oh.make_node("Add", ["c1", "c2"], ["c3"]), oh.make_node("Mul", ["x", "c3"], ["y"]),
             oh.make_node("Neg", ["x"], ["unused"])]
    m = make_model(nodes, [tensor_info("x", F, [2])], [tensor_info("y", F, [2])],
                   {"c1": np.array([1, 2], F), "c2": np.array([3, 4], F)})
    g = import_model(m)
    assert [n.op for n in g.nodes] == ["Mul"]
    np.testing.assert_array_equal(g.nodes[0].inputs[1].const, [4, 6])


def test_unsorted_graph_is_sorted():
    nodes = [oh.make_node("Relu", ["a"], ["y"]), oh.make_node("Neg", ["x"], ["a"])]
    m = make_model(nodes, [tensor_info("x", F, [2])], [tensor_info("y", F, [2])])
    g = import_model(m)
    assert [n.op for n in g.nodes] == ["Neg", "Relu"]


def test_cycle_is_an_error():
    nodes = [oh.make_node("Add", ["x", "b"], ["a"], name="n1"), oh.make_node("Relu", ["a"], ["b"], name="n2")]
    m = make_model(nodes, [tensor_info("x", F, [2])], [tensor_info("b", F, [2])])
    with pytest.raises(ConverterError, match="cycle") as e:
        import_model(m)
    assert e.value.code == -200


def test_dangling_input_is_an_error():
    m = make_model([oh.make_node("Add", ["x", "ghost"], ["y"], name="adder")], [tensor_info("x", F, [2])],
                   [tensor_info("y", F, [2])])
    with pytest.raises(ConverterError, match="ghost") as e:
        import_model(m)
    assert "adder" in str(e.value)


def test_shape_contradiction_names_the_node():
    m = make_model([oh.make_node("Add", ["x", "z"], ["y"], name="bad_add")],
                   [tensor_info("x", F, [2, 3]), tensor_info("z", F, [4])], [tensor_info("y", F, None)])
    with pytest.raises(ConverterError, match="bad_add") as e:
        import_model(m)
    assert e.value.code == -500


def test_unsupported_dtype_input():
    m = make_model([oh.make_node("Identity", ["x"], ["y"])], [oh.make_tensor_value_info("x", 26, [2])],
                   [oh.make_tensor_value_info("y", 26, [2])])
    with pytest.raises(ConverterError, match="unsupported element type"):
        import_model(m)


# -- old opsets (the forms the importer upgrades) ----------------------------------------------------------------
def _legacy(nodes, inputs, outputs, inits, opset):
    return make_model(nodes, inputs, outputs, inits, opset=opset, ir_version=4 if opset < 9 else 6)


def test_opset6_legacy_broadcast_add(tmp_path):
    m = _legacy([oh.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)], [tensor_info("x", F, [2, 3, 4])],
                [tensor_info("y", F, [2, 3, 4])], {"b": np.array([1, 2, 3], F)}, 6)
    x = np.zeros((2, 3, 4), F)
    out = _run(m, {"x": x}, tmp_path)[0]
    np.testing.assert_array_equal(out, x + np.array([1, 2, 3], F)[:, None])


def test_opset6_prelu_per_channel_slope(tmp_path):
    m = _legacy([oh.make_node("PRelu", ["x", "s"], ["y"])], [tensor_info("x", F, [1, 3, 2, 2])],
                [tensor_info("y", F, [1, 3, 2, 2])], {"s": np.array([0.1, 0.2, 0.3], F)}, 6)
    x = -np.ones((1, 3, 2, 2), F)
    np.testing.assert_allclose(_run(m, {"x": x}, tmp_path)[0], x * np.array([0.1, 0.2, 0.3], F)[:, None, None])


def test_opset9_softmax_coerces_to_2d(tmp_path, rng):
    m = _legacy([oh.make_node("Softmax", ["x"], ["y"], axis=1)], [tensor_info("x", F, [2, 3, 4])],
                [tensor_info("y", F, [2, 3, 4])], {}, 9)
    x = rng.standard_normal((2, 3, 4)).astype(F)
    e = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(1, keepdims=True))
    expected = (e / e.sum(1, keepdims=True)).reshape(2, 3, 4)
    np.testing.assert_allclose(_run(m, {"x": x}, tmp_path)[0], expected, rtol=1e-5)
    assert_close(_run(m, {"x": x}, tmp_path)[0], run_ort(m, {"x": x})[0], rtol=1e-5)


@pytest.mark.parametrize("opset", [7, 9])
def test_old_attribute_forms_match_onnxruntime(tmp_path, rng, opset):
    nodes = [oh.make_node("Slice", ["x"], ["s"], starts=[0, 1], ends=[2, 3], axes=[0, 1]),
             oh.make_node("Pad", ["s"], ["p"], pads=[0, 1, 0, 1], value=0.5),
             oh.make_node("Clip", ["p"], ["c"], min=-0.5, max=0.7),
             oh.make_node("ReduceSum", ["c"], ["r"], axes=[1], keepdims=1),
             oh.make_node("Unsqueeze", ["r"], ["u"], axes=[0]),
             oh.make_node("Squeeze", ["u"], ["q"], axes=[0]),
             oh.make_node("Upsample", ["q", "scales"], ["up"], mode="nearest") if opset == 9 else
             oh.make_node("Upsample", ["q"], ["up"], mode="nearest", scales=[1.0, 2.0]),
             oh.make_node("Split", ["up"], ["y1", "y2"], axis=1, split=[1, 1])]
    m = _legacy(nodes, [tensor_info("x", F, [3, 4])], [tensor_info("y1", F, None), tensor_info("y2", F, None)],
                {"scales": np.array([1.0, 2.0], F)} if opset == 9 else {}, opset)
    x = rng.standard_normal((3, 4)).astype(F)
    ours = _run(m, {"x": x}, tmp_path)
    for a, e in zip(ours, run_ort(m, {"x": x})):
        assert_close(a, e)


def test_opset8_batchnorm_and_dropout(tmp_path, rng):
    nodes = [oh.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3, spatial=1),
             oh.make_node("Dropout", ["bn"], ["y"], ratio=0.3)]
    inits = {"s": np.array([1, 2], F), "b": np.array([0, 1], F), "m": np.array([0.5, -0.5], F),
             "v": np.array([1, 4], F)}
    m = _legacy(nodes, [tensor_info("x", F, [1, 2, 3])], [tensor_info("y", F, [1, 2, 3])], inits, 8)
    x = rng.standard_normal((1, 2, 3)).astype(F)
    assert_close(_run(m, {"x": x}, tmp_path)[0], run_ort(m, {"x": x})[0], rtol=1e-5)


def test_legacy_sample_model_matches_onnxruntime(tmp_path, rng):
    path = os.path.join(os.path.dirname(__file__), "..", "..", "models", "legacy_opset9.onnx")
    m = onnx.load(path)
    x = rng.standard_normal((1, 3, 8, 8)).astype(F)
    assert_close(_run(m, {"x": x}, tmp_path)[0], run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_constant_node_forms():
    nodes = [oh.make_node("Constant", [], ["a"], value_float=2.0),
             oh.make_node("Constant", [], ["b"], value_ints=[1, 2]),
             oh.make_node("Constant", [], ["c"], value=onh.from_array(np.array([3.0, 4.0], F))),
             oh.make_node("Cast", ["b"], ["bf"], to=1),
             oh.make_node("Mul", ["x", "a"], ["t"]), oh.make_node("Add", ["t", "bf"], ["t2"]),
             oh.make_node("Add", ["t2", "c"], ["y"])]
    m = make_model(nodes, [tensor_info("x", F, [2])], [tensor_info("y", F, [2])])
    g = import_model(m)
    np.testing.assert_allclose(eval_graph(g, [np.array([1, 1], F)])[0], [6, 8])


def test_opset_newer_than_known_converts_with_a_warning(caplog):
    import onnx.defs
    newest = onnx.defs.onnx_opset_version()
    model = make_model([oh.make_node("Relu", ["x"], ["y"])], [tensor_info("x", np.float32, [2])],
                       [tensor_info("y", np.float32, [2])], opset=newest + 5)
    with caplog.at_level("WARNING", logger="converter_lite"):
        g = import_model(model)
    assert [n.op for n in g.nodes] == ["Relu"]
    assert f"opset {newest + 5}, newer than the newest this converter knows ({newest}" in caplog.text
