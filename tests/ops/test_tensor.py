"""Layout ops (converter_lite/ops/tensor.py) against onnxruntime, plus inference == kernel for each case."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import (
    DTYPES,
    I64_MAX,
    I64_MIN,
    check,
    check_rejects,
    data,
    i64,
    ours,
)


# -- Reshape / Flatten -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,target,allowzero", [
    ((2, 3, 4), (4, 6), 0), ((2, 3, 4), (-1,), 0), ((2, 3, 4), (0, -1), 0), ((2, 3, 4), (0, 0, 2, 2), 0),
    ((2, 3, 4), (-1, 3, 0), 0), ((0, 3), (3, 0), 1), ((), (1, 1), 0), ((1, 1), (), 0),
    ((2, 0, 4), (0, 4, -1), 0), ((6,), (2, 3), 1),
])
def test_reshape(shape, target, allowzero, dtype):
    check("Reshape", {"x": data(shape, dtype), "s": i64(*target)}, const=("s",), allowzero=allowzero)


@pytest.mark.parametrize("shape,target,allowzero", [((2, 3), (4, -1), 0), ((2, 3), (-1, -1), 0),
                                                     ((0, 3), (0, -1), 1), ((2, 3), (0, 0, 0), 0),
                                                     ((0, 3), (0, -1), 0)])
def test_reshape_rejects(shape, target, allowzero):
    check_rejects("Reshape", {"x": data(shape), "s": i64(*target)}, const=("s",), allowzero=allowzero)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), 3), ((2, 3, 4), -1),
                                        ((2, 3, 4), -3), ((2, 0, 4), 2), ((5,), 1)])
def test_flatten(shape, axis, dtype):
    check("Flatten", {"x": data(shape, dtype)}, axis=axis)


def test_flatten_default_axis():
    check("Flatten", {"x": data((2, 3, 4))})
    check_rejects("Flatten", {"x": data((2, 3))}, axis=3)


# -- Transpose -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,perm", [((2, 3, 4), None), ((2, 3, 4), [1, 0, 2]), ((2, 3, 4, 5), [0, 2, 3, 1]),
                                        ((3, 0, 2), [2, 0, 1]), ((7,), [0]), ((), None)])
def test_transpose(shape, perm, dtype):
    attrs = {} if perm is None else {"perm": perm}
    check("Transpose", {"x": data(shape, dtype)}, **attrs)


def test_transpose_rejects_bad_perm():
    check_rejects("Transpose", {"x": data((2, 3))}, perm=[0, 0])
    check_rejects("Transpose", {"x": data((2, 3))}, perm=[0, 1, 2])


# -- Squeeze / Unsqueeze ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 2), None), ((1, 3, 1, 2), (0,)), ((1, 3, 1, 2), (-2, 0)),
                                        ((1, 1), None), ((0, 1), (1,)), ((3,), None)])
def test_squeeze(shape, axes, dtype):
    inputs = {"x": data(shape, dtype), "a": None if axes is None else i64(*axes)}
    check("Squeeze", inputs, const=("a",))


def test_squeeze_empty_axes_squeezes_every_unit_axis():
    check("Squeeze", {"x": data((1, 3, 1)), "a": np.zeros(0, np.int64)}, const=("a",))


def test_squeeze_rejects_non_unit_axis():
    check_rejects("Squeeze", {"x": data((1, 3)), "a": i64(1)}, const=("a",))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axes", [((3, 4), (0,)), ((3, 4), (2,)), ((3, 4), (-1,)), ((3, 4), (3, 0)),
                                        ((3, 4), (-1, 1, 0)), ((), (0,)), ((), (1, 0)), ((0, 2), (1,))])
def test_unsqueeze(shape, axes, dtype):
    check("Unsqueeze", {"x": data(shape, dtype), "a": i64(*axes)}, const=("a",))


def test_unsqueeze_rejects_repeated_axis():
    check_rejects("Unsqueeze", {"x": data((3,)), "a": i64(0, -3)}, const=("a",))


# -- Concat ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes,axis", [([(2, 3), (2, 5)], 1), ([(2, 3), (4, 3), (1, 3)], 0),
                                         ([(2, 3, 4), (2, 3, 1)], -1), ([(2, 0), (2, 3), (2, 0)], -1),
                                         ([(4,)], 0), ([(0, 3), (0, 3)], 0)])
def test_concat(shapes, axis, dtype):
    inputs = {f"x{i}": data(s, dtype, seed=i) for i, s in enumerate(shapes)}
    check("Concat", inputs, axis=axis)


def test_concat_rejects_mismatch():
    check_rejects("Concat", {"a": data((2, 3)), "b": data((3, 3))}, axis=1)


# -- Split -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis,split,n", [
    ((6, 4), 0, (2, 4), None), ((6, 4), 1, (1, 1, 2), None), ((6, 4), -1, (0, 4), None),
    ((6, 4), 0, None, 3), ((7, 4), 0, None, 3), ((2, 5), -1, None, 2), ((2, 11), 1, None, 4),
])
def test_split(shape, axis, split, n, dtype):
    inputs = {"x": data(shape, dtype), "s": None if split is None else i64(*split)}
    attrs = {} if n is None else {"num_outputs": n}
    check("Split", inputs, n_outputs=len(split) if split else n, const=("s",), axis=axis, **attrs)


def test_split_num_outputs_may_leave_empty_chunks():
    # the opset-18 rule (chunks of ceil(dim/n), smaller last one); onnxruntime refuses these two cases
    assert [o.shape for o in ours("Split", {"x": data((2, 9))}, 4, axis=1, num_outputs=4)] == [(2, 3)] * 3 + [(2, 0)]
    assert [o.shape for o in ours("Split", {"x": data((0, 4))}, 2, num_outputs=2)] == [(0, 4)] * 2


def test_split_rejects_bad_sizes():
    check_rejects("Split", {"x": data((6,)), "s": i64(2, 2)}, n_outputs=2, const=("s",))


# -- Slice -----------------------------------------------------------------------------------------------------
SLICES = [
    ((10,), (2,), (7,), None, None), ((10,), (-3,), (I64_MAX,), None, None), ((10,), (0,), (-1,), None, (2,)),
    ((10,), (9,), (I64_MIN,), None, (-1,)), ((10,), (-1,), (-11,), (0,), (-3,)), ((10,), (20,), (30,), None, None),
    ((10,), (8,), (2,), None, None), ((10,), (-20,), (3,), None, (1,)), ((10,), (100,), (-100,), None, (-2,)),
    ((4, 5, 6), (1, 1), (3, -1), (0, 2), None), ((4, 5, 6), (0, 4), (I64_MAX, 0), (-1, 1), (2, -1)),
    ((4, 5, 6), (0,), (0,), (1,), None), ((0, 3), (0,), (1,), (0,), None), ((4, 5), (3, 4), (0, 0), (0, 1), (-2, -2)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,starts,ends,axes,steps", SLICES)
def test_slice(shape, starts, ends, axes, steps, dtype):
    inputs = {"x": data(shape, dtype), "st": i64(*starts), "en": i64(*ends),
              "ax": None if axes is None else i64(*axes), "sp": None if steps is None else i64(*steps)}
    check("Slice", inputs, const=("st", "en", "ax", "sp"))


def test_slice_int32_inputs_and_rejects():
    i32 = {"x": data((5, 6)), "st": np.array([1], np.int32), "en": np.array([-1], np.int32),
           "ax": np.array([-1], np.int32)}
    check("Slice", i32, const=("st", "en", "ax"))
    check_rejects("Slice", {"x": data((5,)), "st": i64(0), "en": i64(3), "ax": i64(0), "sp": i64(0)},
                  const=("st", "en", "ax", "sp"))


# -- Expand / Tile ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,target", [((3, 1), (2, 3, 4)), ((3, 4), (1,)), ((1,), (2, 0)), ((), (2, 2)),
                                          ((2, 1, 3), (4, 1)), ((3, 1), (1, 1, 1, 5))])
def test_expand(shape, target, dtype):
    check("Expand", {"x": data(shape, dtype), "s": i64(*target)}, const=("s",))


def test_expand_rejects_incompatible():
    check_rejects("Expand", {"x": data((3,)), "s": i64(4)}, const=("s",))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,repeats", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((2, 0), (2, 2)), ((4,), (0,)),
                                           ((1, 2, 3), (2, 1, 2))])
def test_tile(shape, repeats, dtype):
    check("Tile", {"x": data(shape, dtype), "r": i64(*repeats)}, const=("r",))


def test_tile_rejects_wrong_length():
    check_rejects("Tile", {"x": data((2, 3)), "r": i64(2)}, const=("r",))
