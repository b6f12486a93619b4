"""Models "from the wild": unknown input dims written as -1, 0, '?', empty or named are all dynamic (--inputShape
may set them; left dynamic, the model runs at any shape the kernels accept);
a default-domain opset newer than onnx knows is -200 unless every node matches its newest known schema."""
import json
import logging

import numpy as np
import onnx
import onnx.defs
import onnx.helper as oh
import pytest
from helpers import make_model, tensor_info

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.frontend import import_model

F = np.float32
NEWEST = onnx.defs.onnx_opset_version()
UNKNOWN = [-1, 0, "?", None, "batch"]      # None: a dim with neither dim_value nor dim_param


def _declared(model, i=0):
    d = model.graph.input[i].type.tensor_type.shape.dim
    return [x.dim_value if x.HasField("dim_value") else (x.dim_param or None) for x in d]


def _relu(dim0, out=None):
    return make_model([oh.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F, [dim0, 3])],
                      [tensor_info("y", F, out or [dim0, 3])])


def _pool(dims):
    return make_model([oh.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], name="pool1")],
                      [tensor_info("x", F, dims)], [tensor_info("y", F, None)])


@pytest.mark.parametrize("dim", UNKNOWN, ids=repr)
def test_every_unknown_dim_form_is_dynamic(dim, caplog):
    m = _relu(dim)
    assert _declared(m)[0] == dim           # the proto really holds that form (-1 and 0 as dim_value)
    g = import_model(m, input_shapes={"x": (4, 3)})
    assert g.inputs[0].type.shape == (4, 3)
    assert g.metadata["dynamic_inputs"] == '{"x": [0]}'
    g = import_model(m)                     # not given: the input stays dynamic, its dims recorded
    assert g.inputs[0].type.shape is None and "dynamic_inputs" not in g.metadata
    assert json.loads(g.metadata["input_dims"])["x"] == [{"sym": dim if dim == "batch" else "x_d0"}, 3]


@pytest.mark.parametrize("dim", [-1, 0])
def test_a_positive_dim_is_still_fixed(dim):
    m = make_model([oh.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F, [dim, 3])],
                   [tensor_info("y", F, [dim, 3])])
    with pytest.raises(ConverterError) as e:
        import_model(m, input_shapes={"x": (2, 4)})
    assert e.value.code == -600
    assert "'x'" in e.value.message and "fixes its dim 1 to 3" in e.value.message
    assert f"[{dim}, 3]" in e.value.message


def test_input_shape_sets_minus_one_and_question_marks(tmp_path):
    """The issue's model: [-1, 3, '?', '?'] with --inputShape=x:1,3,48,192 used to fail with "the model fixes it
    to [-1, 3, '?', '?']"."""
    path = str(tmp_path / "m.onnx")
    onnx.save(_pool([-1, 3, "?", "?"]), path)
    ms = converter_lite.convert(path, str(tmp_path / "m"), input_shape="x:1,3,48,192")
    x = np.random.default_rng(0).standard_normal((1, 3, 48, 192)).astype(F)
    y = list(converter_lite.load(ms).run({"x": x}).values())[0]
    assert y.shape == (1, 3, 46, 190)
    np.testing.assert_allclose(y[0, 1, 5, 7], x[0, 1, 5:8, 7:10].mean(), rtol=1e-5)


@pytest.mark.parametrize("dim", [-1, 0])
def test_minus_one_and_zero_dims_respecialize_at_run_time(dim, tmp_path):
    ms = converter_lite.convert(_relu(dim), str(tmp_path / "m"))
    model = converter_lite.load(ms)
    for n in (1, 4, 0):                     # 0: a legitimately empty tensor still runs
        x = np.linspace(-1, 1, n * 3, dtype=F).reshape(n, 3)
        np.testing.assert_array_equal(list(model.run({"x": x}).values())[0], np.maximum(x, 0))


@pytest.mark.parametrize("dim", [-1, 0])
def test_declared_output_dims_minus_one_and_zero_are_unknown(dim):
    g = import_model(_relu(2, out=[dim, 3]))
    assert g.outputs[0].type.shape == (2, 3)


def test_output_dim_contradiction_still_fails():
    with pytest.raises(ConverterError) as e:
        import_model(_relu(2, out=[5, 3]))
    assert e.value.code == -500


def test_dims_a_kernel_rejects_fail_at_run_time_naming_the_node(tmp_path):
    """Dims left dynamic are checked by the kernels at the shapes fed: a 2x2 image under a 3x3 pooling window
    fails naming the node, and the model still runs an admitted shape."""
    path = str(tmp_path / "m.onnx")
    onnx.save(_pool([-1, 3, "?", "?"]), path)
    model = converter_lite.load(converter_lite.convert(path, str(tmp_path / "m")))
    assert model.input_shapes == {"x": ["x_d0", 3, "x_d2", "x_d3"]}
    with pytest.raises(ConverterError) as e:
        model.run({"x": np.ones((1, 3, 2, 2), F)})
    assert e.value.code == -600 and "pool1" in e.value.message and "[1, 3, 2, 2]" in e.value.message
    assert list(model.run({"x": np.ones((2, 3, 5, 4), F)}).values())[0].shape == (2, 3, 3, 2)


def test_named_dims_are_the_symbols(tmp_path):
    model = converter_lite.load(converter_lite.convert(_pool(["batch", 3, "h", "w"]), str(tmp_path / "m")))
    assert model.input_shapes == {"x": ["batch", 3, "h", "w"]}


def test_several_dynamic_inputs(tmp_path):
    m = make_model([oh.make_node("Concat", ["a", "b"], ["y"], axis=1, name="cat")],
                   [tensor_info("a", F, [None, 2, "h"]), tensor_info("b", F, [0, 2, 4]),
                    tensor_info("c", F, [1, 2])],
                   [tensor_info("y", F, None)])
    model = converter_lite.load(converter_lite.convert(m, str(tmp_path / "m")))
    assert model.input_shapes == {"a": ["a_d0", 2, "h"], "b": ["b_d0", 2, 4], "c": [1, 2]}
    a, b, c = np.ones((3, 2, 4), F), np.zeros((3, 2, 4), F), np.ones((1, 2), F)
    assert list(model.run({"a": a, "b": b, "c": c}).values())[0].shape == (3, 4, 4)
    with pytest.raises(ConverterError) as e:                    # the inputs disagree: the node says so
        model.run({"a": np.ones((2, 2, 4), F), "b": b, "c": c})
    assert "cat" in e.value.message
    # giving the dims converts a static model
    converter_lite.convert(m, str(tmp_path / "m"), input_shape={"a": (1, 2, 4), "b": (1, 2, 4)})


def test_inference_failure_with_dims_given_stays_minus_500(tmp_path):
    for shapes in ({"x": (1, 3, 2, 2)}, None):
        m = _pool([1, 3, 2, 2]) if shapes is None else _pool([-1, 3, "?", "?"])
        with pytest.raises(ConverterError) as e:
            converter_lite.convert(m, str(tmp_path / "m"), input_shape=shapes)
        assert e.value.code == -500 and "pool1" in e.value.message and "--inputShape" not in e.value.message


def _opset99(node):
    return make_model([node], [tensor_info("x", F, [2])], [tensor_info("y", F, [2])], opset=99)


def test_opset_99_with_a_changed_op_is_a_graph_file_error():
    with pytest.raises(ConverterError) as e:
        import_model(_opset99(oh.make_node("Relu", ["x"], ["y"], alpha=0.5, name="r1")))
    msg = e.value.message
    assert e.value.code == -200
    assert f"declares opset 99 for domain 'ai.onnx', newer than the newest this converter knows ({NEWEST}" in msg
    assert "Relu node 'r1'" in msg and "alpha" in msg


def test_opset_99_checks_the_nodes_of_if_branches():
    bad = oh.make_graph([oh.make_node("Relu", ["x"], ["t"], alpha=0.5, name="inner")], "b", [],
                        [tensor_info("t", F, [2])])
    good = oh.make_graph([oh.make_node("Neg", ["x"], ["t"])], "b2", [], [tensor_info("t", F, [2])])
    nodes = [oh.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(np.array(True))),
             oh.make_node("If", ["c"], ["y"], then_branch=bad, else_branch=good)]
    m = make_model(nodes, [tensor_info("x", F, [2])], [tensor_info("y", F, [2])], opset=99)
    with pytest.raises(ConverterError) as e:
        import_model(m)
    assert e.value.code == -200 and "'inner'" in e.value.message


def test_opset_99_with_unchanged_ops_converts_with_a_warning(caplog, tmp_path):
    with caplog.at_level(logging.WARNING, logger="converter_lite"):
        ms = converter_lite.convert(_opset99(oh.make_node("Relu", ["x"], ["y"])), str(tmp_path / "m"))
    assert f"declares ai.onnx opset 99, newer than the newest this converter knows ({NEWEST}" in caplog.text
    x = np.array([-1, 2], F)
    np.testing.assert_array_equal(list(converter_lite.load(ms).run({"x": x}).values())[0], [0, 2])
