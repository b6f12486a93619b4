"""schedule.py: row-stitched kernels run groups of row chunks per pool chunk; results match numpy on one thread
and on two, with a row count that leaves a partial row chunk and a partial group."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import F32, Case, build_library, make_graph

from converter_lite.codegen import schedule
from converter_lite.codegen.lower import plan_kernel

pytestmark = pytest.mark.needs_cc


def _softmax(b, x):
    ax = b.const(np.array([-1], np.int64))
    e = b.op("Exp", x - b.op("ReduceMax", x, ax, keepdims=1))
    return e / b.op("ReduceSum", e, ax, keepdims=1)


def _layer_norm(b, x):
    ax = b.const(np.array([-1], np.int64))
    d = x - b.op("ReduceMean", x, ax, keepdims=1)
    return d / b.op("Sqrt", b.op("ReduceMean", d * d, ax, keepdims=1) + 1e-5)


ROWS, COLS = 1999, 64            # 32 rows per row chunk: 63 row chunks, the last one partial


def test_row_bodies_group_row_chunks():
    plan = plan_kernel(make_graph("sm", [(F32, (ROWS, COLS))], _softmax))
    n, chunk = schedule.row_chunking(plan)
    assert (n, chunk) == (ROWS, schedule.ROW_CHUNK_ELEMS // COLS)
    from llvmlite import ir
    from converter_lite.codegen.lower import emit_stages
    module = ir.Module("m")
    bodies = schedule.emit_chunk_bodies(module, plan, "sm", emit_stages(module, plan, "sm", "sm"))
    assert len(bodies) == 1 and bodies[0][1] <= schedule.ROW_POOL_CHUNKS
    group = -(-(-(-n // chunk)) // schedule.ROW_POOL_CHUNKS)
    assert bodies[0][1] * group >= -(-n // chunk) > (bodies[0][1] - 1) * group


def test_grouped_row_chunks_match_numpy(tmp_path, rng):
    cases = [Case("sm", make_graph("sm", [(F32, (ROWS, COLS))], _softmax)),
             Case("ln", make_graph("ln", [(F32, (ROWS, COLS))], _layer_norm))]
    lib = build_library(cases, str(tmp_path), num_threads=2, parallel_threshold=1)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32) * 4
    x[1998, 5] = np.nan                                   # the last (partial) chunk of the last group
    e = np.exp(x - x.max(1, keepdims=True))
    ref_sm = e / e.sum(1, keepdims=True)
    d = x - x.mean(1, keepdims=True)
    ref_ln = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5)
    for threads in (1, 2):
        for name, ref in (("sm", ref_sm), ("ln", ref_ln)):
            out = np.full_like(x, -7.0)
            for _ in range(3):                            # the pool's worker joins after the first call
                lib.kernel(name)([x], [out], num_threads=threads)
            np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-6)
            assert np.isnan(out[1998]).all() and not np.isnan(out[:1998]).any()
