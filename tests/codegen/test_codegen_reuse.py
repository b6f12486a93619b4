"""Softmax-like kernels evaluate exp once (reuse.py) and divide by a row sum as one reciprocal per row."""
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
]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "reuse", CASES, num_threads=2, parallel_threshold=1)


@pytest.mark.needs_cc
@pytest.mark.parametrize("threads", [1, 2])
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
