"""Max/min reductions keep a "saw a NaN" flag per output (codegen/reduce.py).  Regression: with the flag an
i1, LLVM 22 vectorised the flags of several short rows together and set one row's flag without a NaN in it
(softmax over [6, 4, 5] at opt_level 3 gave a NaN row; it showed once exp used llvm.ldexp).  Many row counts
and lengths, several ranks, with and without AVX-512 (the exp scaling differs), against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import F32, Case, make_graph, shared_library

from converter_lite.passes.expand.emit import exp, reduce_max, reduce_sum

pytestmark = pytest.mark.needs_cc

SHAPES = [(6, 4, 5), (2, 3, 4, 5), (24, 5), (7, 3), (9, 1), (33, 17), (5, 4, 3, 2), (3, 8), (16, 7), (40, 2),
          (11, 13), (4, 31)]


def _softmax(b, x):
    ax = (x.v.type.rank - 1,)
    e = exp(x - reduce_max(x, ax))
    return e / reduce_sum(e, ax)


def _max_min(b, x):
    ax = (x.v.type.rank - 1,)
    return [b.op("ReduceMax", x, b.const(np.asarray(ax, np.int64)), keepdims=0),
            b.op("ReduceMin", x, b.const(np.asarray(ax, np.int64)), keepdims=0)]


def _cases():
    cases = []
    for shape in SHAPES:
        tag = "x".join(map(str, shape))
        cases.append(Case(f"sm_{tag}", make_graph(f"sm_{tag}", [(F32, shape)], _softmax)))
        cases.append(Case(f"mm_{tag}", make_graph(f"mm_{tag}", [(F32, shape)], _max_min)))
    return cases


CASES = _cases()


@pytest.fixture(scope="module", params=["host", "no-avx512f"])
def lib(tmp_path_factory, request):
    target = {"cpu_feature": "-avx512f"} if request.param == "no-avx512f" else None
    return shared_library(tmp_path_factory, f"reduce-flags-{request.param}", CASES, num_threads=1, target=target)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("nan_row", [None, 0, -1])
def test_rows_against_numpy(lib, rng, shape, nan_row):
    tag = "x".join(map(str, shape))
    x = rng.standard_normal(shape).astype(np.float32) * 3
    rows = x.reshape(-1, shape[-1])
    if nan_row is not None:
        rows[nan_row, rows.shape[1] // 2] = np.nan           # exactly this row's results are NaN
    y = np.empty_like(x)
    lib.kernel(f"sm_{tag}")([x], [y])
    e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-7)
    mx, mn = np.empty(shape[:-1], np.float32), np.empty(shape[:-1], np.float32)
    lib.kernel(f"mm_{tag}")([x], [mx, mn])
    np.testing.assert_array_equal(mx, x.max(-1))
    np.testing.assert_array_equal(mn, x.min(-1))
