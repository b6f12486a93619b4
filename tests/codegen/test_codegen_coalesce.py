"""coalesce.py: a kernel whose first long axis is short (a batch of 2) has its leading axes merged before it
is lowered, so its threads have rows to share; kernels where merging would move elements keep their shape.
The lowered kernels match the reference interpreter at 1, 2, 4 and 16 threads (the split logic runs for any
team size, whatever the machine's cores)."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import F32, I64, Case, build_library, make_graph, random_array

from converter_lite.codegen.coalesce import coalesce_leading
from converter_lite.codegen.lower import plan_kernel
from converter_lite.codegen.schedule import row_chunking
from converter_lite.ops.interpret import eval_graph


def _gelu(b, x, bias):
    y = x + bias
    return y * 0.5 * (b.op("Erf", y * 0.70710677) + 1.0)


def _softmax(b, x, mask):
    ax = b.const(np.array([-1], np.int64))
    s = x + mask
    e = b.op("Exp", s - b.op("ReduceMax", s, ax, keepdims=1))
    return e / b.op("ReduceSum", e, ax, keepdims=1)


def _argmax(b, x):
    return b.op("ArgMax", x, axis=-1, keepdims=1)


def _row_bias(b, x, y):                 # y [1, 64, 512] broadcast over the batch: axes 0 and 1 cannot merge
    return x * y


def _reduce_middle(b, x):               # ReduceSum over axis 1: only axis 0 precedes it, nothing to merge
    return b.op("ReduceSum", x, b.const(np.array([1], np.int64)), keepdims=1)


CASES = {
    "gelu": ([(F32, (2, 64, 512)), (F32, (512,))], _gelu, [(128, 512)]),
    "softmax": ([(F32, (2, 2, 64, 64)), (F32, (2, 1, 1, 64))], _softmax, None),
    "argmax": ([(F32, (2, 3, 5, 40))], _argmax, [(30, 40)]),
    "row_bias": ([(F32, (2, 64, 512)), (F32, (1, 64, 512))], _row_bias, [(2, 64, 512)]),
    "reduce_middle": ([(F32, (2, 24, 40))], _reduce_middle, [(2, 24, 40)]),
}


def test_merged_shapes():
    g = make_graph("gelu", *CASES["gelu"][:2])
    c = coalesce_leading(g)
    assert c is not g and c.outputs[0].shape == (128, 512)
    assert c.inputs[1].shape == (512,)                          # a trailing broadcast operand keeps its shape
    assert g.outputs[0].shape == (2, 64, 512)                   # the model's graph is not touched
    plan = plan_kernel(c)
    assert [s.part_extent for s in plan.stages] == [128]


def test_softmax_rows_merge_but_mask_blocks_the_heads():
    # the mask [2, 1, 1, 64] is full on axis 0 and broadcast on axes 1-2: the batch cannot merge with the heads
    g = make_graph("softmax", *CASES["softmax"][:2])
    assert coalesce_leading(g) is g
    g2 = make_graph("sm2", [(F32, (2, 2, 64, 64)), (F32, (1, 1, 1, 64))], _softmax)
    c = coalesce_leading(g2)
    assert c.inputs[0].shape == (256, 64) and c.inputs[1].shape == (1, 64)
    assert row_chunking(plan_kernel(c))[0] == 256


@pytest.mark.parametrize("name", ["row_bias", "reduce_middle"])
def test_no_merge_when_elements_would_move(name):
    inputs, fn, _ = CASES[name]
    g = make_graph(name, inputs, fn)
    assert coalesce_leading(g) is g


def test_long_first_axis_is_left_alone():
    g = make_graph("long", [(F32, (128, 4, 512)), (F32, (512,))], _gelu)
    assert coalesce_leading(g) is g


def test_index_maps_are_left_alone():
    g = make_graph("tr", [(F32, (2, 64, 32))], lambda b, x: b.op("Transpose", x, perm=[0, 2, 1]) + 1.0)
    assert coalesce_leading(g) is g


@pytest.mark.needs_cc
def test_lowered_kernels_match_the_reference_at_any_team_size(tmp_path, rng):
    graphs = {name: make_graph(name, inputs, fn) for name, (inputs, fn, _) in CASES.items()}
    graphs["sm2"] = make_graph("sm2", [(F32, (2, 2, 64, 64)), (F32, (1, 1, 1, 64))], _softmax)
    lib = build_library([Case(n, g) for n, g in graphs.items()], str(tmp_path), num_threads=2,
                        parallel_threshold=1)
    for name, g in graphs.items():
        xs = [random_array(rng, v.dtype, v.shape) for v in g.inputs]
        ref = eval_graph(g, xs)
        for threads in (1, 2, 4, 16):
            outs = [np.full(v.shape, -7, v.dtype.np) for v in g.outputs]
            for _ in range(2):
                lib.kernel(name)(xs, outs, num_threads=threads)
            for o, r in zip(outs, ref):
                if o.dtype == I64.np:
                    np.testing.assert_array_equal(o, r, err_msg=f"{name} at {threads} threads")
                else:
                    np.testing.assert_allclose(o, r, rtol=2e-5, atol=1e-6, equal_nan=True,
                                               err_msg=f"{name} at {threads} threads")
