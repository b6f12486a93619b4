"""The runtime's ReduceSum/Mean/Max/Min (runtime/fast/reduce.py) against the reference kernels, bit for bit:
negative and multiple axes, keepdims on and off, all axes, NaN and infinities, odd sizes, float32 and float64."""
from __future__ import annotations

import numpy as np
import pytest
from runtime_graphs import single_node_graph
from test_runtime_fast_kernels import arr, run_case

from converter_lite.runtime.plan import Plan

OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes,keepdims", [((3, 129), [-1], 1), ((2, 5, 7), [0, 2], 0), ((4, 6), None, 1),
                                                 ((1, 64, 3), [1], 0), ((17,), [0], 0), ((2, 3, 4, 5), [-3, -1], 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_are_the_reference(rng, op, shape, axes, keepdims, dtype):
    x = arr(rng, *shape, dtype=dtype, specials=True)
    inputs = [x] if axes is None else [x, np.array(axes, np.int64)]
    run_case(op, inputs, {"keepdims": keepdims}, consts=(1,) if axes is not None else ())


@pytest.mark.parametrize("attrs,inputs", [({"noop_with_empty_axes": 1}, "empty"), ({}, "int")])
def test_reductions_declined_stay_on_the_reference(rng, attrs, inputs):
    x = arr(rng, 3, 4)
    if inputs == "empty":
        case, consts = [x, np.array([], np.int64)], (1,)
    else:
        case, consts = [x.astype(np.int32), np.array([1], np.int64)], (1,)
    g, _ = single_node_graph("ReduceMean", case, attrs, consts, name="r")
    steps = Plan(g).program.steps
    assert all(s.impl.bind is None for s in steps)
    run_case("ReduceMean", case, attrs, consts=consts, fast=False)
