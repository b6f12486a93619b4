"""Softmax-like kernels evaluate exp once (reuse.py) and divide by a row sum as one reciprocal per row; a
kernel output that a reduction reads is evaluated once, by a map stage run first (magika's GELU-tanh)."""
from __future__ import annotations

import numpy as np
import pytest

from converter_lite.codegen.lower import plan_kernel
from converter_lite.codegen.reduce import ReduceStage

from codegen_testutil import F32, F64, Case, check_case, make_graph, shared_library


def _ax(b):
    return b.const(np.array([-1], np.int64))


def _softmax(b, x):
    e = b.op("Exp", x - b.op("ReduceMax", x, _ax(b), keepdims=1))
    return e / b.op("ReduceSum", e, _ax(b), keepdims=1)


def _exp_twice(b, x):                                  # the output reads the spilled value in two places
    e = b.op("Exp", x * 0.5)
    s = b.op("ReduceSum", e, _ax(b), keepdims=1)
    return e * 2.0 / s + e


def _two_outputs(b, x):                                # two map outputs: no reuse
    e = b.op("Exp", x)
    s = b.op("ReduceSum", e, _ax(b), keepdims=1)
    return [e / s, e + 1.0]


def _cheap(b, x):                                      # nothing expensive to save
    d = x - b.op("ReduceMean", x, _ax(b), keepdims=1)
    return d / b.op("ReduceSum", d * d, _ax(b), keepdims=1)


def _gelu_rows(b, x):                                 # magika: GELU-tanh, reshaped, summed over rows, squared
    g = x * 0.5 * (b.op("Tanh", (x + x * x * x * 0.044715) * 0.7978846) + 1.0)
    r = b.op("Reshape", g, b.const(np.array([1, 12, 40], np.int64)))
    s = b.op("ReduceSum", r, b.const(np.array([1], np.int64)), keepdims=0)
    return [r, s, r * r]


def _gelu_rows_shape(b, x, shape):
    g = x * 0.5 * (b.op("Tanh", (x + x * x * x * 0.044715) * 0.7978846) + 1.0)
    r = b.op("Reshape", g, b.const(np.array(shape, np.int64)))
    return [r, b.op("ReduceSum", r, b.const(np.array([1], np.int64)), keepdims=0), r * r]


def _stored_then_reduced(b, x):                        # no reshape; the row sums divide the stored value
    e = b.op("Exp", x * 0.5)
    s = b.op("ReduceSum", e, _ax(b), keepdims=1)
    return [e, s, e / s]


def _exp_and_its_sum(b, x):                            # attention's exp(x - max) and its row sums, both returned
    e = b.op("Exp", x - b.op("ReduceMax", x, _ax(b), keepdims=1))
    return [e, b.op("ReduceSum", e, _ax(b), keepdims=1)]


def _sum_feeds_the_output(b, x):                       # the output depends on the reduction: not moved
    s = b.op("ReduceSum", b.op("Exp", x), _ax(b), keepdims=1)
    return [b.op("Exp", x) + s]


def _stage_kinds(graph):
    plan = plan_kernel(graph)
    return [(type(st).__name__, len(st.cached)) for st in plan.stages]


def test_an_output_a_reduction_reads_is_stored_first():
    assert _stage_kinds(make_graph("g", [(F32, (1, 48, 10))], _gelu_rows)) == \
        [("MapStage", 0), ("ReduceStage", 1), ("MapStage", 1)]
    kinds = _stage_kinds(make_graph("s", [(F32, (6, 40))], _stored_then_reduced))
    assert kinds[0] == ("MapStage", 0) and ("ReduceStage", 1) in kinds
    assert _stage_kinds(make_graph("n", [(F32, (6, 40))], _sum_feeds_the_output))[0][0] == "ReduceStage"


def _spilled(graph):
    plan = plan_kernel(graph)
    return [(st.node.op, v.name) for st in plan.stages if isinstance(st, ReduceStage) for v, _ in st.spill]


def test_softmax_sum_stage_stores_exp_for_the_output_stage():
    g = make_graph("sm", [(F32, (4, 8))], _softmax)
    spilled = _spilled(g)
    assert [op for op, _ in spilled] == ["ReduceSum"]
    assert _spilled(make_graph("e2", [(F32, (4, 8))], _exp_twice))


@pytest.mark.parametrize("fn", [_two_outputs, _cheap])
def test_no_reuse_without_a_single_output_or_an_expensive_value(fn):
    assert _spilled(make_graph("n", [(F32, (4, 8))], fn)) == []


CASES = [
    Case("r_softmax", make_graph("r_softmax", [(F32, (67, 130))], _softmax)),
    Case("r_softmax64", make_graph("r_softmax64", [(F64, (5, 33))], _softmax)),
    Case("r_softmax3d", make_graph("r_softmax3d", [(F32, (3, 5, 17))], _softmax)),
    Case("r_exp_twice", make_graph("r_exp_twice", [(F32, (9, 40))], _exp_twice)),
    Case("r_two_outputs", make_graph("r_two_outputs", [(F32, (9, 40))], _two_outputs)),
    Case("r_cheap", make_graph("r_cheap", [(F32, (9, 40))], _cheap)),
    Case("r_empty_rows", make_graph("r_empty_rows", [(F32, (0, 16))], _softmax)),
    Case("r_gelu_rows", make_graph("r_gelu_rows", [(F32, (1, 48, 10))], _gelu_rows)),
    Case("r_gelu_rows_wide", make_graph("r_gelu_rows_wide", [(F32, (3, 96, 80))],
                                        lambda b, x: _gelu_rows_shape(b, x, [3, 192, 40]))),
    Case("r_stored_then_reduced", make_graph("r_stored_then_reduced", [(F32, (37, 70))], _stored_then_reduced)),
    Case("r_exp_and_its_sum", make_graph("r_exp_and_its_sum", [(F32, (2, 4, 16, 64))], _exp_and_its_sum)),
    Case("r_sum_feeds_the_output", make_graph("r_sum_feeds_the_output", [(F32, (9, 40))], _sum_feeds_the_output)),
]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "reuse", CASES, num_threads=2, parallel_threshold=1)


@pytest.mark.needs_cc
@pytest.mark.parametrize("threads", [1, 2, 5])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reuse_matches_reference(lib, case, threads, rng):
    check_case(lib, case, rng, num_threads=threads)


def test_row_max_is_plain_vector_max_with_a_nan_flag():
    """Float ReduceMax/Min accumulate with vmaxps/vminps (NaN-ignoring) and OR a NaN mask on the side, not with
    the NaN-propagating llvm.maximum (a blend and a compare per vector); NaN rows still give NaN (above)."""
    import re

    from converter_lite.codegen import kernel_assembly
    from converter_lite.runtime.native import host_cpu_flags
    if "avx2" not in host_cpu_flags():
        pytest.skip("needs an AVX2 host")
    for op, ins in (("ReduceMax", "vmaxps"), ("ReduceMin", "vminps")):
        g = make_graph("m", [(F32, (64, 128))], lambda b, x, op=op: b.op(op, x, _ax(b), keepdims=1))
        _, asm = kernel_assembly(g, num_threads_hint=1)
        assert re.search(ins + r"\s+%[yz]mm", asm), op
        assert "vpmovd2m" not in asm and "vblendmps" not in asm and "vblendvps" not in asm, op
        assert "vcmpunordps" in asm, op
