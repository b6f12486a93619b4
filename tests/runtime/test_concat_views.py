"""Concats written in place (runtime/concat_views.py): when a Concat's output holds each input as a contiguous
block (batch 1 along channels, any axis with only 1s before it), the inputs' producers write into the output
and the Concat step is dropped; otherwise (batch 2, an input also a graph output or used twice or by another
Concat made in place, a graph input, Split parts out of order) the copy stays.  Every case matches onnxruntime,
planned from the imported graph (numpy fast kernels), converted with fixed shapes (fused native kernels) and
converted with dynamic dims (a plan per input shape), on one and two threads."""
import numpy as np
import onnx.helper as oh
import pytest
from helpers import assert_close, make_model, run_ort, tensor_info

import converter_lite
from converter_lite.frontend import import_model
from converter_lite.runtime.arena import check_plan
from converter_lite.runtime.plan import Plan

F = np.float32


class _Builder:
    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], {}

    def conv(self, out: str, x: str, cin: int, cout: int) -> str:
        self.inits[out + "_w"] = (self.rng.standard_normal((cout, cin, 3, 3)) * 0.3).astype(F)
        self.inits[out + "_b"] = self.rng.standard_normal(cout).astype(F)
        self.nodes.append(oh.make_node("Conv", [x, out + "_w", out + "_b"], [out], pads=[1, 1, 1, 1]))
        return out

    def op(self, op: str, ins: list, out: str, **attrs) -> str:
        self.nodes.append(oh.make_node(op, ins, [out], **attrs))
        return out

    def branches(self) -> None:
        """ra = relu(conv x) [4 ch], sb = sigmoid(conv x) [5 ch], ab = ra + conv x [4 ch]."""
        self.op("Relu", [self.conv("a", "x", 3, 4)], "ra")
        self.op("Sigmoid", [self.conv("b", "x", 3, 5)], "sb")
        self.op("Add", ["ra", self.conv("c", "x", 3, 4)], "ab")


def _case(name: str):
    """(builder, graph outputs, Concat steps left at batch 1)."""
    b = _Builder()
    b.branches()
    outs, left = ["y"], 0
    if name == "channels":
        b.conv("y", b.op("Concat", ["ra", "sb", "ab"], "cat", axis=1), 13, 2)
    elif name == "negative_axis":
        b.conv("y", b.op("Concat", ["ra", "sb"], "cat", axis=-3), 9, 2)
    elif name == "concat_is_output":
        b.op("Concat", ["ra", "sb", "ab"], "y", axis=1)
    elif name == "shared":                     # ra in two Concats: one owns it, the other copies
        b.conv("y1", b.op("Concat", ["ra", "sb"], "cat1", axis=1), 9, 2)
        b.conv("y2", b.op("Concat", ["ab", "ra"], "cat2", axis=1), 8, 2)
        b.op("Add", ["y1", "y2"], "y")
        left = 1
    elif name == "input_is_output":            # sb: a fused kernel's output, written into the caller's array
        b.conv("y", b.op("Concat", ["ra", "sb"], "cat", axis=1), 9, 2)
        outs, left = ["y", "sb"], 1
    elif name == "view_is_output":             # an output reads ra's bytes through a view (Reshape)
        b.conv("y", b.op("Concat", ["ra", "sb"], "cat", axis=1), 9, 2)
        b.op("Flatten", ["ra"], "raf", axis=1)
        outs, left = ["y", "raf"], 1
    elif name == "twice":
        b.conv("y", b.op("Concat", ["ra", "sb", "ra"], "cat", axis=1), 13, 2)
        left = 1
    elif name == "graph_input":
        b.conv("y", b.op("Concat", ["x", "ra"], "cat", axis=1), 7, 2)
        left = 1
    elif name == "nested":                     # an inner Concat (also read by a Conv) inside an outer one
        b.op("Concat", ["ra", "sb"], "cat1", axis=1)
        b.conv("y", b.op("Concat", ["cat1", "ab"], "cat2", axis=1), 13, 2)
        b.conv("z", "cat1", 9, 3)
        outs = ["y", "z"]
    elif name in ("split", "split_swapped", "split_half"):   # YOLO's C2f: a Split's halves, a Conv of one
        b.op("Relu", [b.conv("s", "x", 3, 8)], "rs")
        b.nodes.append(oh.make_node("Split", ["rs", "sizes"], ["s0", "s1"], axis=1))
        b.inits["sizes"] = np.array([4, 4], np.int64)
        b.op("Relu", [b.conv("m", "s1", 4, 4)], "rm")
        order = {"split": ["s0", "s1", "rm"], "split_swapped": ["s1", "s0", "rm"], "split_half": ["s0", "rm"]}[name]
        b.conv("y", b.op("Concat", order, "cat", axis=1), 4 * len(order), 2)
        left = 0 if name == "split" else 1
    elif name == "read_after":                 # ra read again after the Concat's last reader (an elementwise
        b.conv("yc", b.op("Concat", ["ra", "sb"], "cat", axis=1), 9, 4)   # step the arena may run in place)
        b.op("Add", ["yc", b.op("Neg", ["ra"], "t")], "y")
    elif name == "last_axis":                  # [N, 1, 1, W] along W: only 1s before the axis at batch 1
        b.op("ReduceMean", ["ra", "axes"], "p", keepdims=1)
        b.op("ReduceMax", ["sb", "axes"], "q", keepdims=1)
        b.inits["axes"] = np.array([1, 2], np.int64)
        b.op("Mul", [b.op("Concat", ["p", "q"], "cat", axis=-1), "two"], "y")
        b.inits["two"] = np.array(2, F)
    else:
        raise KeyError(name)
    return b, outs, left


CASES = ["channels", "negative_axis", "concat_is_output", "shared", "input_is_output", "view_is_output", "twice",
         "graph_input", "nested", "split", "split_swapped", "split_half", "read_after", "last_axis"]


def _model(name: str, shape):
    b, outs, left = _case(name)
    model = make_model(b.nodes, [tensor_info("x", F, list(shape))], [tensor_info(o, F, None) for o in outs],
                       b.inits)
    return model, left, sum(n.op_type == "Concat" for n in b.nodes)


def _concats(plan) -> int:
    return sum(s.node.op == "Concat" for s in plan.steps)


def _check(got: dict, want: list, what: str) -> None:
    assert list(got) and len(got) == len(want)
    for g, w in zip(got.values(), want):
        assert_close(g, w, rtol=1e-4, atol=1e-5, what=what)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("batch", [1, 2])
def test_planned_graph_matches_onnxruntime(name, batch, threads):
    """The imported graph planned directly: at batch 1 the Concats that qualify have no step, at batch 2 all
    stay; the arena never lets two live buffers share bytes; repeated runs stay right, one over an arena
    poisoned with NaNs (every block of a Concat's output is written again by its step)."""
    shape = (batch, 3, 6, 7)
    model, left, total = _model(name, shape)
    plan = Plan(import_model(model), num_threads=threads)
    assert _concats(plan) == (left if batch == 1 else total), [s.node.op for s in plan.steps]
    check_plan(plan.program, plan.memory)
    rng = np.random.default_rng(1)
    for _ in range(2):
        x = rng.standard_normal(shape).astype(F)
        want = run_ort(model, {"x": x})
        _check(dict(enumerate(plan.execute([x]))), want, f"{name} at {shape}")
    ex = plan._free[-1]
    ex.arena.view(np.uint8)[:] = 0xFF
    _check(dict(enumerate(ex.run([x], None, threads))), want, f"{name} at {shape}, arena poisoned")


def test_zero_size_input_is_skipped():
    """An input with no elements (an empty Slice) takes no bytes of the output: the Concat still goes."""
    b = _Builder()
    b.branches()
    b.nodes.append(oh.make_node("Slice", ["ra", "zero", "zero", "one"], ["e"]))
    b.inits.update(zero=np.array([0], np.int64), one=np.array([1], np.int64))
    b.conv("y", b.op("Concat", ["ra", "e", "sb"], "cat", axis=1), 9, 2)
    model = make_model(b.nodes, [tensor_info("x", F, [1, 3, 5, 6])], [tensor_info("y", F, None)], b.inits)
    plan = Plan(import_model(model))
    assert _concats(plan) == 0
    x = np.random.default_rng(2).standard_normal((1, 3, 5, 6)).astype(F)
    _check({"y": plan.execute([x])[0]}, run_ort(model, {"x": x}), "zero-size input")


# every 4-channel value is 80 KB, above ZERO_COPY_BYTES: large outputs that one fused kernel writes go straight
# into the caller's array (plan.py ``_io_direct``), which must never be a block of a Concat's output
BIG = (1, 3, 64, 80)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("concat_views")
    out = {}
    for name in CASES:
        for dims in ([1, *BIG[1:]], ["N", 3, "H", "W"]):
            model, left, total = _model(name, dims)
            path = converter_lite.convert(model, str(d / f"{name}_{dims[0]}"), graph_kernel_flags="--opt_level=2")
            out[name, dims[0]] = (model, path, left, total)
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", CASES)
def test_static_model_matches_onnxruntime(converted, name, threads):
    """Converted with fixed shapes, the converter fuses most Concats into the kernels computing their inputs;
    whatever Concat steps are left go through the same rule."""
    model, path, _, _ = converted[name, 1]
    m = converter_lite.load(path, num_threads=threads)
    check_plan(m.plan.program, m.plan.memory)
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.standard_normal(BIG).astype(F)
        _check(m.run({"x": x}), run_ort(model, {"x": x}), f"{name} static")


SHAPES = [BIG, (2, 3, 5, 7), (1, 3, 17, 9), (1, 3, 8, 10), (3, 3, 4, 4), BIG]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", CASES)
def test_dynamic_model_matches_onnxruntime(converted, name, threads):
    """Converted without input shapes: each shape's plan drops the Concats that qualify at that shape (batch 1)
    and keeps the others (batch 2 and 3); every run matches onnxruntime, a plan reused included."""
    model, path, left, total = converted[name, "N"]
    m = converter_lite.load(path, num_threads=threads)
    rng = np.random.default_rng(4)
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(F)
        for _ in range(2):
            _check(m.run({"x": x}), run_ort(model, {"x": x}), f"{name} at {shape}")
        plan = m._shape_plans.plan_for((shape,))
        assert _concats(plan) == (left if shape[0] == 1 else total), (shape, [s.node.op for s in plan.steps])
        check_plan(plan.program, plan.memory)
        for ex in plan._free:
            ex.arena.view(np.uint8)[:] = 0xFF
        _check(m.run({"x": x}), run_ort(model, {"x": x}), f"{name} at {shape}, arena poisoned")
