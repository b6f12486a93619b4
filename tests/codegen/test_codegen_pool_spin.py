"""How an idle worker of the kernels' thread pool (codegen/threadpool.py) waits: it spins, giving its core away
with sched_yield as it goes, then sleeps on a futex; and a caller whose worker shares its one CPU still gets every
chunk done (the case the yield is for: a pause-only spin held the core while the caller waited to run)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from codegen_testutil import F32, Case, build_library, make_graph
from llvmlite import ir

from converter_lite.codegen.threadpool import SPIN_TICKS, YIELD_TICKS, emit_pool


def _worker_ir() -> str:
    module = ir.Module(name="pool")
    emit_pool(module)
    return str(module.get_global("cl_pool.worker"))


def test_spinning_worker_yields_its_core_then_sleeps():
    text = _worker_ir()
    assert 'call i32 @"sched_yield"()' in text              # the spin gives the core to whoever waits for it
    assert "llvm.x86.sse2.pause" in text                    # and pauses between the yields
    assert f", {SPIN_TICKS}\n" in text and f", {YIELD_TICKS}\n" in text   # the spin's length, the yields' spacing
    assert '@"syscall"(i64 202' in text                     # futex(2) once the spin is over
    assert 0 < YIELD_TICKS < SPIN_TICKS


@pytest.mark.needs_cc
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_caller_and_worker_on_one_cpu_finish_every_call(tmp_path, rng):
    """The worker is created by the first parallel call on a thread pinned to one CPU, so it inherits that CPU:
    caller and worker then take turns on it for every chunk.  A library of its own (a kernel no other test
    builds), so its pool's worker is this test's."""
    case = Case("p_one_cpu", make_graph("p_one_cpu", [(F32, (257, 129))],
                                        lambda b, x: b.op("Sigmoid", x * 0.25 - 0.5) * x))
    lib = build_library([case], str(tmp_path), num_threads=2, parallel_threshold=1)
    assert lib.kernel(case.name).spec["parallel"]
    x = rng.standard_normal(case.graph.inputs[0].shape).astype(np.float32)
    ref = np.empty(case.graph.outputs[0].shape, np.float32)
    lib.kernel(case.name)([x], [ref], num_threads=1)
    before = set(os.listdir("/proc/self/task"))
    saved = os.sched_getaffinity(0)
    cpu = min(saved)
    os.sched_setaffinity(0, {cpu})
    try:
        y = np.empty_like(ref)
        for _ in range(200):
            y.fill(7.0)
            lib.kernel(case.name)([x], [y], num_threads=2)
            np.testing.assert_array_equal(y, ref)
    finally:
        os.sched_setaffinity(0, saved)
    workers = set(os.listdir("/proc/self/task")) - before
    assert workers                                          # the pool started its worker on the pinned thread
    for tid in workers:
        assert os.sched_getaffinity(int(tid)) == {cpu}
