"""Reductions over a trailing block of axes (a spatial mean, ReduceSum/Max over [H, W], GlobalAveragePool's
expansion) run one loop over the block with linear offsets (codegen/reduce.py _merged_trailing); operands that
broadcast over the block take their coordinates from the offset.  Against the reference kernels, with the
special values (NaN, +-inf, denormals), keepdims 0/1, one and several threads."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import (
    F32,
    F64,
    Case,
    check_case,
    make_graph,
    random_array,
    shared_library,
)

from converter_lite.codegen.lower import plan_kernel
from converter_lite.codegen.reduce import ReduceStage, _merged_trailing

pytestmark = pytest.mark.needs_cc


def _red(op, axes, keepdims=1):
    def fn(b, x):
        return b.op(op, x, b.const(np.asarray(axes, np.int64)), keepdims=keepdims)
    return fn


def _relu_residual_mean(b, x, r):
    s = b.op("Max", x + r, b.const(np.float32(0)))
    return b.op("ReduceSum", s, b.const(np.asarray((2, 3), np.int64)), keepdims=1) * (1.0 / 49)


def _bias_then_max(b, x, bias):
    return b.op("ReduceMax", x + bias, b.const(np.asarray((2, 3), np.int64)), keepdims=0)


def _nonfinite(graph):
    """Random inputs with one NaN, one +inf and one -inf (each in its own plane), no huge finite values: a
    plane holding +-1e30 sums to whatever the order of its additions makes of the rest."""
    def make(rng):
        xs = [random_array(rng, v.dtype, v.shape, specials=False) for v in graph.inputs]
        flat = xs[0].reshape(-1)
        plane = int(np.prod(graph.inputs[0].shape[2:]))
        if flat.size >= 3 * plane:
            flat[[0, plane + 1, 2 * plane + 2]] = [np.nan, np.inf, -np.inf]
        return xs
    return make


CASES = [
    Case("sum_hw", make_graph("sum_hw", [(F32, (2, 16, 7, 7))], _red("ReduceSum", (2, 3)))),
    Case("mean_hw", make_graph("mean_hw", [(F32, (1, 24, 14, 14))], _red("ReduceMean", (2, 3), 0))),
    Case("max_hw", make_graph("max_hw", [(F32, (3, 5, 9, 11))], _red("ReduceMax", (2, 3)))),
    Case("min_chw", make_graph("min_chw", [(F32, (4, 3, 5, 2))], _red("ReduceMin", (1, 2, 3), 0))),
    Case("sum_hw64", make_graph("sum_hw64", [(F64, (2, 6, 10, 10))], _red("ReduceSum", (2, 3)))),
    Case("sum_1x1", make_graph("sum_1x1", [(F32, (2, 8, 1, 1))], _red("ReduceSum", (2, 3)))),
    Case("gap_fused", make_graph("gap_fused", [(F32, (1, 16, 7, 7)), (F32, (1, 16, 7, 7))], _relu_residual_mean)),
    Case("bias_max", make_graph("bias_max", [(F32, (2, 6, 5, 8)), (F32, (6, 1, 1))], _bias_then_max)),
    # 3136 float32 terms of ~3 per sum: both orders of addition are ~1e-3 from the exact sum
    Case("sum_big", make_graph("sum_big", [(F32, (1, 64, 56, 56))], _red("ReduceSum", (2, 3))), atol=2e-3),
]
for _c in CASES:
    if _c.name.startswith(("sum", "mean", "gap")):
        _c.inputs = _nonfinite(_c.graph)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "reduce-trailing", CASES, num_threads=2)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("nt", [1, 2])
def test_against_reference(lib, rng, case, nt):
    check_case(lib, case, rng, num_threads=nt)


def test_which_stages_merge():
    """Trailing blocks of two or more axes merge; a single axis or a block that is not trailing does not."""
    def stages(shape, axes):
        g = make_graph("g", [(F32, shape)], _red("ReduceSum", axes))
        return [s for s in plan_kernel(g).stages if isinstance(s, ReduceStage)]
    assert [_merged_trailing(s) for s in stages((2, 3, 4, 5), (2, 3))] == [True]
    assert [_merged_trailing(s) for s in stages((2, 3, 4, 5), (1, 2, 3))] == [True]
    assert [_merged_trailing(s) for s in stages((2, 3, 4, 5), (3,))] == [False]
    assert [_merged_trailing(s) for s in stages((2, 3, 4, 5), (1, 3))] == [False]
