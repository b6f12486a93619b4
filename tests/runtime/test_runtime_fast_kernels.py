"""Every entry of the runtime's fast-kernel table against its reference kernel (converter_lite/runtime/fast_*.py).

Each case is one node in a graph whose non-constant inputs are graph inputs; the plan must take the fast path
(the step has a ``bind``, not the reference ``call``) and produce what ``eval_graph`` (the reference kernels)
produces: bit-identical where the fast kernel uses the reference's numpy operations, within float rounding for
BLAS products (MatMul/Gemm/Conv).
"""
from __future__ import annotations

import numpy as np
import pytest
from runtime_graphs import single_node_graph

from converter_lite.ir import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.interpret import eval_graph
from converter_lite.ops.registry import infer_types
from converter_lite.runtime.plan import Plan

F32 = np.float32


def run_case(op, inputs, attrs=None, consts=(), n_outputs=1, exact=True, fast=True, num_threads=1):
    """inputs: list of arrays (None = omitted); indices in ``consts`` become constants."""
    g, feeds = single_node_graph(op, inputs, attrs, consts, n_outputs, name=f"{op.lower()}_node")
    plan = Plan(g, num_threads=num_threads)
    if fast:
        assert plan.program.steps, "no step"
        assert all(s.impl.bind is not None and not s.impl.native for s in plan.program.steps), \
            f"{op} took the reference path"
    with np.errstate(all="ignore"):
        want = eval_graph(g, feeds)
    for _ in range(2):                                        # a second run reuses the bound arena
        with np.errstate(all="ignore"):
            got = plan.execute(feeds)
        for gv, wv in zip(got, want):
            assert gv.dtype == wv.dtype and gv.shape == wv.shape
            if exact:
                np.testing.assert_array_equal(gv, wv)
            else:
                np.testing.assert_allclose(gv, wv, rtol=2e-5, atol=2e-5)
    return plan


def arr(rng, *shape, dtype=F32, specials=False):
    a = rng.standard_normal(shape).astype(dtype)
    if specials and a.size >= 4:
        a.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return a


UNARY = ["Neg", "Abs", "Sqrt", "Exp", "Log", "Tanh", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "Relu",
         "Sigmoid", "Erf"]


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(rng, op, dtype):
    if op == "Erf" and dtype == np.float64:
        pytest.skip("float64 Erf keeps math.erf (reference path)")
    with np.errstate(all="ignore"):
        run_case(op, [arr(rng, 3, 17, dtype=dtype, specials=True)])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (5,)), ((1, 5), (4, 1)), ((4, 5), ())])
def test_binary(rng, op, shapes):
    a, b = arr(rng, *shapes[0], specials=True), arr(rng, *shapes[1])
    if op == "Pow":
        a = np.abs(a)
    with np.errstate(all="ignore"):
        run_case(op, [a, b])
        run_case(op, [a, b], consts=(1,))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Neg", "Abs", "Relu"])
def test_integer_elementwise(rng, op):
    a = rng.integers(-100, 100, (3, 4)).astype(np.int64)
    b = rng.integers(-100, 100, (4,)).astype(np.int64)
    run_case(op, [a, b] if op in ("Add", "Sub", "Mul") else [a])


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_compare(rng, op):
    a = rng.integers(0, 3, (3, 4)).astype(F32)
    run_case(op, [a, rng.integers(0, 3, (4,)).astype(F32)])


def test_clip_where_cast(rng):
    x = arr(rng, 5, 6, specials=True)
    run_case("Clip", [x, np.float32(-0.5), np.float32(0.5)], consts=(1, 2))
    run_case("Clip", [x, None, np.float32(0.5)], consts=(2,))
    run_case("Where", [x > 0, x, arr(rng, 6)])
    run_case("Cast", [x], {"to": int(DType.float64)})
    run_case("Cast", [rng.integers(-5, 5, (4,)).astype(np.int32)], {"to": int(DType.float32)})
    run_case("Cast", [rng.integers(-5, 5, (4,)).astype(np.int32)], {"to": int(DType.int64)})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(rng, axis):
    run_case("Softmax", [arr(rng, 3, 7, 5) * 4], {"axis": axis})


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm(rng, axis, bias):
    x = arr(rng, 2, 6, 16) * 3 + 1
    ins = [x, arr(rng, *x.shape[axis:]), arr(rng, *x.shape[axis:]) if bias else None]
    run_case("LayerNormalization", ins, {"axis": axis, "epsilon": 1e-5}, consts=(1, 2))


def test_transpose_concat_gather(rng):
    x = arr(rng, 2, 3, 4)
    run_case("Transpose", [x], {"perm": (2, 0, 1)})
    run_case("Transpose", [x])
    run_case("Concat", [x, arr(rng, 2, 5, 4), arr(rng, 2, 1, 4)], {"axis": 1})
    table = arr(rng, 10, 6)
    idx = np.array([[0, 9, -1], [3, 3, -10]], np.int64)
    run_case("Gather", [table, idx], consts=(0,))
    run_case("Gather", [table, idx], consts=(1,))
    run_case("Gather", [table, np.array([1, -2], np.int32)], {"axis": 1})


@pytest.mark.parametrize("index", [np.array([2], np.int64), np.array(-1, np.int64), np.array([[-3]], np.int32)])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_one_index(rng, index, axis):
    """One index (a token in a decoding loop) takes the slice-assignment path: any axis, a 0-d or [1, 1] index,
    negative values."""
    run_case("Gather", [arr(rng, 3, 4, 5), index], {"axis": axis}, consts=(0,))


@pytest.mark.parametrize("index", [np.array([4]), np.array(-5)])
def test_gather_one_index_out_of_range_is_an_error(index):
    from converter_lite.errors import ConverterError
    g_in = Value("x", TensorType(DType.float32, (4, 3)))
    idx = Value("i", TensorType(DType.int64, index.shape))
    out = Value("y")
    node = Node("Gather", [g_in, idx], [out], {}, name="g")
    out.type = infer_types(node)[0]
    plan = Plan(Graph("g", [g_in, idx], [out], [node]))
    with pytest.raises(ConverterError, match="'g'.*out of range"):
        plan.execute([np.zeros((4, 3), F32), index])
    np.testing.assert_array_equal(plan.execute([np.eye(4, 3, dtype=F32), np.full(index.shape, -4)])[0],
                                  np.eye(4, 3, dtype=F32)[0].reshape(index.shape + (3,)))


def test_gather_out_of_range_is_an_error(rng):
    from converter_lite.errors import ConverterError
    g_in = Value("x", TensorType(DType.float32, (4, 3)))
    idx = Value("i", TensorType(DType.int64, (2,)))
    out = Value("y")
    node = Node("Gather", [g_in, idx], [out], {}, name="g")
    out.type = infer_types(node)[0]
    plan = Plan(Graph("g", [g_in, idx], [out], [node]))
    with pytest.raises(ConverterError, match="'g'"):
        plan.execute([np.zeros((4, 3), F32), np.array([0, 4])])


def test_slice_split_views_and_copies(rng):
    x = arr(rng, 6, 4, 5)
    # leading-axis slice: a view (no step); inner-axis slice with a step: a copy
    plan = run_case("Slice", [x, np.array([1]), np.array([4]), np.array([0])], consts=(1, 2, 3), fast=False)
    assert not plan.steps
    run_case("Slice", [x, np.array([0, 4]), np.array([4, 0]), np.array([1, 2]), np.array([2, -2])],
             consts=(1, 2, 3, 4))
    plan = run_case("Split", [x, np.array([2, 4])], {"axis": 0}, consts=(1,), n_outputs=2, fast=False)
    assert not plan.steps
    run_case("Split", [x], {"axis": 2, "num_outputs": 2}, n_outputs=2)
    run_case("Expand", [arr(rng, 3, 1), np.array([2, 3, 4])], consts=(1,))


@pytest.mark.parametrize("shapes", [((2, 8, 16), (16, 12)), ((5, 7), (7, 3)), ((2, 3, 8, 4), (2, 3, 4, 6)),
                                    ((8,), (8, 3)), ((4, 8), (8,)), ((3, 1, 4, 5), (2, 5, 6))])
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul(rng, shapes, threads):
    run_case("MatMul", [arr(rng, *shapes[0]), arr(rng, *shapes[1])], consts=(1,), exact=False,
             num_threads=threads)


def test_large_matmul_split_across_threads(rng):
    run_case("MatMul", [arr(rng, 300, 256), arr(rng, 256, 96)], consts=(1,), exact=False, num_threads=2)


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("alpha_beta", [(1.0, 1.0), (0.5, 2.0), (1.0, 0.0)])
def test_gemm(rng, ta, tb, alpha_beta):
    a = arr(rng, *((6, 4) if ta else (4, 6)))
    b = arr(rng, *((5, 6) if tb else (6, 5)))
    attrs = {"transA": ta, "transB": tb, "alpha": alpha_beta[0], "beta": alpha_beta[1]}
    run_case("Gemm", [a, b, arr(rng, 5)], attrs, consts=(1, 2), exact=False)
    run_case("Gemm", [a, b, arr(rng, 4, 5)], attrs, exact=False)


@pytest.mark.parametrize("ceil", [0, 1])
@pytest.mark.parametrize("geom", [((3, 3), (2, 2), (1, 1, 1, 1), (1, 1)), ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
                                  ((3, 2), (1, 2), (0, 1, 2, 0), (2, 1))])
def test_pools(rng, ceil, geom):
    k, s, p, d = geom
    x = arr(rng, 2, 3, 9, 8, specials=True)
    attrs = {"kernel_shape": k, "strides": s, "pads": p, "ceil_mode": ceil}
    run_case("MaxPool", [x], {**attrs, "dilations": d})
    run_case("AveragePool", [x], {**attrs, "count_include_pad": 0})
    run_case("AveragePool", [x], {**attrs, "count_include_pad": 1})
    run_case("MaxPool", [rng.integers(-9, 9, (1, 2, 7, 7)).astype(np.int32)], attrs)


def test_maxpool_nan_rule_matches_reference():
    x = np.full((1, 1, 3, 3), 1.0, F32)
    x[0, 0, 0, 0] = np.nan                    # first tap NaN: stays NaN
    x[0, 0, 2, 2] = np.nan                    # a later NaN is skipped
    run_case("MaxPool", [x], {"kernel_shape": (2, 2), "strides": (1, 1)})
    run_case("MaxPool", [np.full((1, 1, 2, 2), np.nan, F32)], {"kernel_shape": (2, 2)})


def test_global_average_pool_and_pad(rng):
    run_case("GlobalAveragePool", [arr(rng, 2, 3, 5, 4)])
    x = arr(rng, 2, 3, 4)
    run_case("Pad", [x, np.array([0, 1, 2, 1, 0, 3])], consts=(1,))
    run_case("Pad", [x, np.array([1, 2, 3, 0]), np.float32(-7), np.array([0, 2])], consts=(1, 2, 3))
    plan = run_case("Pad", [x, np.zeros(6, np.int64)], consts=(1,), fast=False)
    assert not plan.steps


CONV_CASES = [  # C, H, W, M, kernel, strides, pads, dilations, group
    (3, 9, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (4, 10, 7, 6, (3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 1),
    (4, 9, 9, 4, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),
    (8, 6, 6, 12, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (8, 6, 6, 12, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    (6, 8, 8, 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),
    (6, 9, 9, 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),
    (5, 7, 7, 5, (7, 7), (1, 1), (3, 3, 3, 3), (1, 1), 5),
    (8, 8, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    (8, 8, 8, 4, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),
    (3, 32, 32, 8, (16, 16), (16, 16), (0, 0, 0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv(rng, case, bias, threads):
    c, h, w, m, k, s, p, d, g = case
    x = arr(rng, 2, c, h, w)
    wt = arr(rng, m, c // g, *k)
    ins = [x, wt, arr(rng, m) if bias else None]
    attrs = {"kernel_shape": k, "strides": s, "pads": p, "dilations": d, "group": g}
    run_case("Conv", ins, attrs, consts=(1, 2), exact=False, num_threads=threads)


def test_conv_workspace_is_bounded(rng, monkeypatch):
    """With a tiny im2col limit the output rows are processed in blocks; the result is unchanged."""
    from converter_lite.runtime.fast import conv as fast_conv
    monkeypatch.setattr(fast_conv, "COLS_LIMIT", 1024)
    for case in CONV_CASES[:3] + CONV_CASES[5:8]:
        c, h, w, m, k, s, p, d, g = case
        attrs = {"kernel_shape": k, "strides": s, "pads": p, "dilations": d, "group": g}
        plan = run_case("Conv", [arr(rng, 1, c, h, w), arr(rng, m, c // g, *k), arr(rng, m)], attrs,
                        consts=(1, 2), exact=False)
        assert plan.workspace < 64 * 1024


def test_pad_before_conv_runs_as_the_converter_left_it(rng):
    """The runtime folds nothing: a Pad in front of a Conv is a step of its own (the converter's pad_conv_fusion
    folds it into the Conv's pads, passes/rewrite/pad_conv.py)."""
    x = Value("x", TensorType(DType.float32, (1, 3, 8, 8)))
    pads = Value("pads", const=np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64))
    xp = Value("xp", TensorType(DType.float32, (1, 3, 11, 11)))
    w = Value("w", const=arr(rng, 4, 3, 3, 3))
    b = Value("b", const=arr(rng, 4))
    y = Value("y", TensorType(DType.float32, (1, 4, 5, 5)))
    g = Graph("g", [x], [y], [Node("Pad", [x, pads], [xp], {"mode": "constant"}, name="pad"),
                              Node("Conv", [xp, w, b], [y], {"strides": (2, 2)}, name="conv")])
    plan = Plan(g)
    assert [s.node.name for s in plan.steps] == ["pad", "conv"]
    xv = arr(rng, 1, 3, 8, 8)
    np.testing.assert_allclose(plan.execute([xv])[0], eval_graph(g, [xv])[0], rtol=1e-5, atol=1e-5)


def test_ones_row_after_an_in_place_input(rng):
    """1x1 Conv -> Relu (in place) -> 1x1 Conv with bias: the second Conv's row of ones lives after the buffer
    that the Relu wrote over, and never overlaps another live buffer."""
    from converter_lite.runtime.arena import check_plan

    x = Value("x", TensorType(DType.float32, (1, 4, 5, 5)))
    w1, b1 = Value("w1", const=arr(rng, 6, 4, 1, 1)), Value("b1", const=arr(rng, 6))
    w2, b2 = Value("w2", const=arr(rng, 3, 6, 1, 1)), Value("b2", const=arr(rng, 3))
    y1, r1 = Value("y1", TensorType(DType.float32, (1, 6, 5, 5))), Value("r1", TensorType(DType.float32, (1, 6, 5, 5)))
    y2, z = Value("y2", TensorType(DType.float32, (1, 3, 5, 5))), Value("z", TensorType(DType.float32, (1, 3, 5, 5)))
    g = Graph("g", [x], [z, y1], [Node("Conv", [x, w1, b1], [y1], name="c1"), Node("Relu", [y1], [r1], name="r"),
                                  Node("Conv", [r1, w2, b2], [y2], name="c2"), Node("Neg", [y2], [z], name="n")])
    g.outputs = [z]
    plan = Plan(g)
    check_plan(plan.program, plan.memory)
    assert any(v.tail for v in plan.program.values)
    xv = arr(rng, 1, 4, 5, 5)
    for _ in range(2):
        np.testing.assert_allclose(plan.execute([xv])[0], eval_graph(g, [xv])[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    {"mode": "nearest"},
    {"mode": "nearest", "coordinate_transformation_mode": "align_corners", "nearest_mode": "round_prefer_ceil"},
])
def test_resize_nearest_is_a_gather(rng, attrs):
    x = arr(rng, 1, 3, 5, 4)
    run_case("Resize", [x, None, np.array([1, 1, 2.0, 1.5], np.float32)], attrs, consts=(2,))
    run_case("Resize", [x, None, None, np.array([1, 3, 7, 9], np.int64)], attrs, consts=(3,))


def test_other_index_maps_are_gathers(rng):
    x = arr(rng, 1, 8, 3, 4)
    run_case("DepthToSpace", [x], {"blocksize": 2, "mode": "CRD"})
    run_case("DepthToSpace", [x], {"blocksize": 2})
    run_case("SpaceToDepth", [arr(rng, 2, 3, 4, 6)], {"blocksize": 2})
    run_case("Tile", [arr(rng, 2, 3), np.array([3, 2])], consts=(1,))
    for mode in ("edge", "reflect", "wrap"):
        run_case("Pad", [arr(rng, 2, 3, 4), np.array([0, 1, 2, 1, 0, 3])], {"mode": mode}, consts=(1,))
    run_case("Tile", [rng.integers(0, 9, (2, 3)).astype(np.int64), np.array([2, 2])], consts=(1,))


def test_resize_linear_keeps_the_reference(rng):
    x = arr(rng, 1, 1, 4, 4)
    plan = run_case("Resize", [x, None, np.array([1, 1, 2.0, 2.0], np.float32)], {"mode": "linear"}, consts=(2,),
                    fast=False)
    assert plan.program.steps[0].impl.bind is None


def test_maxpool_flat_passes_match_reference_on_random_geometries(rng):
    """Kernel/stride/dilation/pads/ceil_mode combinations, windows wider than the input, integer inputs and NaNs
    (the flat passes of fast_maxpool.py fall back to the reference where a NaN reaches a window)."""
    for trial in range(40):
        h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        d = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
        s = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        p = tuple(int(min(v, e - 1)) for v, e in zip(rng.integers(0, 3, 4), [(k[0] - 1) * d[0] + 1,
                                                                                (k[1] - 1) * d[1] + 1] * 2))
        attrs = {"kernel_shape": k, "strides": s, "dilations": d, "pads": p, "ceil_mode": int(trial % 2)}
        eff = [(kk - 1) * dd + 1 for kk, dd in zip(k, d)]
        if h + p[0] + p[2] < eff[0] or w + p[1] + p[3] < eff[1]:
            continue
        x = arr(rng, 2, 3, h, w)
        if trial % 3 == 0:
            x.reshape(-1)[rng.integers(0, x.size, 3)] = np.nan
        if trial % 5 == 0:
            x = rng.integers(-50, 50, x.shape).astype(np.int64 if trial % 2 else np.int8)
        run_case("MaxPool", [x], attrs, num_threads=1 + trial % 2)


def test_maxpool_split_over_threads(rng):
    x = arr(rng, 1, 32, 96, 96)
    x[0, 5, 10, 10] = np.nan
    for threads in (1, 2):
        run_case("MaxPool", [x], {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)},
                 num_threads=threads)


@pytest.mark.parametrize("pads", [(0, 0, 1, 1, 0, 0, 1, 1), (0, 0, 0, 0, 0, 0, 1, 1), (1, 0, 0, 0, 0, 2, 0, 0),
                                  (0, 1, 0, 2, 0, 0, 3, 0), (0, 0, 2, 0, 0, 0, 0, 0), (2, 1, 0, 1, 1, 0, 2, 0)])
def test_constant_pad_runs(rng, pads):
    """The void-run copy/fill of fast_pad.py on every innermost-padded-axis position, floats and ints, zero and
    non-zero values; a second run sees the same result although the arena bytes were reused in between."""
    x = arr(rng, 2, 3, 4, 5)
    run_case("Pad", [x, np.array(pads)], consts=(1,))
    run_case("Pad", [x, np.array(pads), np.float32(-2.5)], consts=(1, 2))
    run_case("Pad", [rng.integers(-9, 9, (2, 3, 4, 5)).astype(np.int16), np.array(pads), np.int16(7)],
             consts=(1, 2))


@pytest.mark.parametrize("geom", [((3, 3), (1, 1, 1, 1), (1, 1)), ((2, 2), (0, 0, 0, 0), (1, 1)),
                                  ((3, 3), (2, 2, 2, 2), (2, 2)), ((4, 4), (1, 2, 2, 1), (1, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int16, np.float64])
def test_maxpool_stride2_even_odd_columns(rng, geom, dtype):
    """Stride-2 pools whose output is half the input width take fast_maxpool's even/odd column split."""
    k, p, d = geom
    x = (rng.standard_normal((2, 5, 9, 12)) * 50).astype(dtype)
    if x.dtype.kind == "f":
        x[1, 2, 3, 4] = np.nan
    run_case("MaxPool", [x], {"kernel_shape": k, "strides": (2, 2), "pads": p, "dilations": d})


@pytest.mark.parametrize("pads", [(0, 0, 1, 1, 0, 0, 1, 1), (0, 0, 0, 0, 0, 0, 1, 1), (0, 0, 2, 0, 0, 0, 1, 3),
                                  (0, 0, 0, 1, 0, 0, 0, 2), (0, 1, 1, 0, 0, 0, 0, 1)])
def test_pad_rewrites_its_padding_every_run(rng, pads):
    """The arena bytes under the padding may hold other values between runs: poisoned, they are rewritten."""
    x = arr(rng, 2, 3, 4, 5)
    plan = run_case("Pad", [x, np.array(pads), np.float32(1.5)], consts=(1, 2))
    want = plan.execute([x])[0]
    ex = plan._free[-1]
    ex.arena.view(np.uint8)[:] = 0xFF                          # NaN everywhere
    np.testing.assert_array_equal(ex.run([x], None, 1)[0], want)


@pytest.mark.parametrize("shape", [(1, 16, 32, 32), (2, 64, 7, 7), (3, 5, 11, 13), (2, 3, 4), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_global_average_pool_shapes(rng, shape, dtype):
    run_case("GlobalAveragePool", [arr(rng, *shape, dtype=dtype, specials=True)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,c,m,hw,k,bias", [(1, 16, 8, (10, 12), (2, 2), True), (2, 5, 3, (3, 7), (3, 2), False),
                                             (1, 4, 4, (6, 6), (4, 4), True)])
def test_conv_transpose_kernel_equal_to_stride(rng, dtype, n, c, m, hw, k, bias):
    x = arr(rng, n, c, *hw, dtype=dtype, specials=True)
    w = arr(rng, c, m, *k, dtype=dtype)
    ins = [x, w] + ([arr(rng, m, dtype=dtype)] if bias else [])
    run_case("ConvTranspose", ins, {"kernel_shape": list(k), "strides": list(k)}, consts=(1, 2), exact=False)


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2]},
                                   {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 0, 0]},
                                   {"kernel_shape": [2, 2], "strides": [2, 2], "output_padding": [1, 1]}])
def test_other_conv_transposes_take_the_reference_kernel(rng, attrs):
    ins = [arr(rng, 1, 4, 5, 5), arr(rng, 4, 3, *attrs["kernel_shape"])]
    plan = run_case("ConvTranspose", ins, attrs, consts=(1,), exact=False, fast=False)
    assert all(s.impl.bind is None for s in plan.program.steps)
