"""Zero-copy I/O and IO binding (issue 18): large inputs read in place by fused native kernels, outputs written
straight into the arrays returned (from a per-executor pool of blocks no caller holds), ``Model.run(feeds,
outputs=...)``; and the aliasing rules: a returned array is never an input, a constant, or memory a later run
writes, and the profiled and copying paths stay right after a zero-copy run."""
import numpy as np
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest
from helpers import make_model, tensor_info

import converter_lite
from converter_lite.errors import ConverterError
from converter_lite.runtime.plan import ZERO_COPY_BYTES

N = 256                     # 256 x 256 float32 = 256 KB, above ZERO_COPY_BYTES


def _chain_model(extra_reader: bool = False):
    nodes = [oh.make_node("Mul", ["x", "h"], ["a"]), oh.make_node("Add", ["a", "c"], ["b"]),
             oh.make_node("Tanh", ["b"], ["t"]), oh.make_node("Mul", ["t", "two"], ["y"])]
    outputs = [tensor_info("y", np.float32, [N, N])]
    if extra_reader:                # x also read by an op that is no fused kernel: x must be copied
        nodes.append(oh.make_node("TopK", ["x", "k"], ["top", "idx"], axis=1))
        outputs.append(tensor_info("top", np.float32, [N, 2]))
    inits = {"h": np.array(0.5, np.float32), "c": np.array(0.1, np.float32), "two": np.array(2, np.float32),
             "k": np.array([2], np.int64)}
    return make_model(nodes, [tensor_info("x", np.float32, [N, N])], outputs, initializers=inits)


def _expected(x):
    return (np.tanh(x.astype(np.float64) * 0.5 + 0.1) * 2).astype(np.float32)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    assert N * N * 4 >= ZERO_COPY_BYTES
    ms = converter_lite.convert(_chain_model(), str(tmp_path_factory.mktemp("zc") / "chain"),
                                graph_kernel_flags="--opt_level=2")
    model = converter_lite.load(ms, num_threads=2, adaptive_threads=False)
    assert model.uses_native_code
    return model


def _x(seed):
    return np.random.default_rng(seed).standard_normal((N, N)).astype(np.float32)


def test_inputs_read_in_place_and_outputs_never_alias(chain):
    x1, x2 = _x(1), _x(2)
    r1 = chain.run({"x": x1})["y"]
    ex = chain.plan._free[0]
    direct = ex.direct[chain.plan.run_threads]
    assert direct is not None and len(direct.ins) == 1 and len(direct.outs) == 1    # the zero-copy path ran
    keep = r1.copy()
    view = r1[:3]                                    # a caller's view keeps the block: it is not reused
    del r1
    r2 = chain.run({"x": x2})["y"]
    r3 = chain.run({"x": x1})["y"]
    np.testing.assert_allclose(view, keep[:3])
    np.testing.assert_allclose(r2, _expected(x2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r3, keep, rtol=0, atol=0)
    for r in (r2, r3):
        assert not np.shares_memory(r, x1) and not np.shares_memory(r, x2) and r.flags.writeable
        assert not np.shares_memory(r, ex.arena)
    assert not np.shares_memory(r2, r3) and not np.shares_memory(r2, view)


def test_inputs_that_cannot_be_read_in_place_are_copied(chain):
    x = _x(3)
    np.testing.assert_allclose(chain.run({"x": np.asfortranarray(x)})["y"], _expected(x), rtol=1e-5, atol=1e-6)
    big = np.zeros(N * N + 1, np.float32)[1:].reshape(N, N)      # a view at an odd offset: still aligned
    big[...] = x
    np.testing.assert_allclose(chain.run({"x": big})["y"], _expected(x), rtol=1e-5, atol=1e-6)


def test_outputs_binding_writes_into_the_callers_array(chain):
    x = _x(4)
    out = np.empty((N, N), np.float32)
    got = chain.run({"x": x}, outputs={"y": out})["y"]
    assert got is out
    np.testing.assert_allclose(out, _expected(x), rtol=1e-5, atol=1e-6)
    # an output array that is the input itself: computed right (through a copy), never read half-written
    y = x.copy()
    assert chain.run({"x": y}, outputs={"y": y})["y"] is y
    np.testing.assert_allclose(y, _expected(x), rtol=1e-5, atol=1e-6)
    # a non-contiguous output array is written too (after the run)
    strided = np.empty((N, 2 * N), np.float32)[:, ::2]
    assert chain.run({"x": x}, outputs={"y": strided})["y"] is strided
    np.testing.assert_allclose(strided, _expected(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad, words", [({"z": np.empty((N, N), np.float32)}, "unknown output 'z'"),
                                        ({"y": np.empty((N, N), np.float64)}, "'y' needs a writable array"),
                                        ({"y": np.empty((N, 1), np.float32)}, "'y' needs a writable array"),
                                        ({"y": [1, 2]}, "'y' needs a writable array")])
def test_bad_outputs_name_the_output(chain, bad, words):
    with pytest.raises(ConverterError) as e:
        chain.run({"x": _x(5)}, outputs=bad)
    assert e.value.code == -600 and words in str(e.value)


def test_profiled_runs_after_zero_copy_runs_read_their_own_inputs(chain):
    x1 = _x(6)
    chain.run({"x": x1})
    del x1                                           # the slots pointed at it: a profiled run must not
    x2 = _x(7)
    timings = [0.0] * len(chain.kernels)
    np.testing.assert_allclose(chain.run_profiled({"x": x2}, timings)["y"], _expected(x2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(chain.run({"x": x2})["y"], _expected(x2), rtol=1e-5, atol=1e-6)


def test_an_input_also_read_by_a_numpy_step_is_copied(tmp_path):
    model = converter_lite.load(converter_lite.convert(_chain_model(extra_reader=True), str(tmp_path / "m"),
                                                       graph_kernel_flags="--opt_level=2"))
    x = _x(8)
    out = model.run({"x": x})
    np.testing.assert_allclose(out["y"], _expected(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["top"], -np.sort(-x, axis=1)[:, :2], rtol=0, atol=0)
    assert model.plan._free[0].direct and all(d is None or not d.ins for d in model.plan._free[0].direct.values())


def test_small_models_keep_the_copying_path(tmp_path):
    m = make_model([oh.make_node("Tanh", ["x"], ["y"])], [tensor_info("x", np.float32, [4, 4])],
                   [tensor_info("y", np.float32, [4, 4])])
    model = converter_lite.load(converter_lite.convert(m, str(tmp_path / "s"), graph_kernel_flags="--opt_level=2"))
    x = np.ones((4, 4), np.float32)
    r = model.run({"x": x})["y"]
    assert not np.shares_memory(r, x)
    assert model.plan._free[0].direct and all(d is None for d in model.plan._free[0].direct.values())
    out = np.empty((4, 4), np.float32)
    assert model.run({"x": x}, outputs={"y": out})["y"] is out
    np.testing.assert_allclose(out, np.tanh(1.0), rtol=1e-6)


def test_constant_output_is_a_copy(tmp_path):
    w = onh.from_array(np.arange(4, dtype=np.float32), "w")
    m = make_model([oh.make_node("Identity", ["w"], ["y"]), oh.make_node("Relu", ["x"], ["z"])],
                   [tensor_info("x", np.float32, [4])], [tensor_info("y", np.float32, [4]),
                                                          tensor_info("z", np.float32, [4])])
    m.graph.initializer.append(w)
    model = converter_lite.load(converter_lite.convert(m, str(tmp_path / "c")))
    out = model.run({"x": np.ones(4, np.float32)})
    out["y"][0] = 99                                   # the caller's own: the model's constant is untouched
    assert model.run({"x": np.ones(4, np.float32)})["y"][0] == 0

