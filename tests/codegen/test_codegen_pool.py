"""The thread pool of parallel kernels (codegen/threadpool.py): correct from several callers at once, after fork()
(the pool believes it has workers the child does not have: the caller must never wait for a worker that has
not started), in the JIT-rebuilt form, and with the stitched row kernels."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from codegen_testutil import F32, Case, build_library, make_graph

from converter_lite import toolchain
from converter_lite.runtime.native import NativeLibrary

pytestmark = pytest.mark.needs_cc


def _softmax(b, x):
    ax = b.const(np.array([-1], np.int64))
    e = b.op("Exp", x - b.op("ReduceMax", x, ax, keepdims=1))
    return e / b.op("ReduceSum", e, ax, keepdims=1)


def _two_stages(b, x):                      # a column reduction then a broadcast: stages with a barrier between
    s = b.op("ReduceSum", x, b.const(np.array([0], np.int64)), keepdims=1)
    return b.op("Tanh", x * 0.5) - s


CASES = [Case("p_softmax", make_graph("p_softmax", [(F32, (300, 130))], _softmax)),
         Case("p_stages", make_graph("p_stages", [(F32, (257, 301))], _two_stages)),
         Case("p_chain", make_graph("p_chain", [(F32, (513, 257))], lambda b, x: b.op("Tanh", x * 0.5 + 0.1) * 2.0))]


@pytest.fixture(scope="module")
def bundle_lib(tmp_path_factory):
    cache = tmp_path_factory.mktemp("pool")
    lib = build_library(CASES, str(cache), num_threads=2, parallel_threshold=1)
    return lib


def _expected(lib, case, x):
    y = np.empty(case.graph.outputs[0].shape, np.float32)
    lib.kernel(case.name)([x], [y], num_threads=1)
    return y


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_parallel_equals_serial_for_any_thread_count(bundle_lib, case, rng):
    assert bundle_lib.kernel(case.name).spec["parallel"]
    x = rng.standard_normal(case.graph.inputs[0].shape).astype(np.float32)
    ref = _expected(bundle_lib, case, x)
    for nt in (2, 3, 4, 2):
        y = np.full_like(ref, 7.0)
        for _ in range(20):
            bundle_lib.kernel(case.name)([x], [y], num_threads=nt)
            np.testing.assert_array_equal(y, ref)


def test_concurrent_callers_share_the_pool(bundle_lib, rng):
    """Callers that find the pool busy run their chunks themselves; every result is right."""
    case = CASES[0]
    xs = [rng.standard_normal(case.graph.inputs[0].shape).astype(np.float32) for _ in range(4)]
    refs = [_expected(bundle_lib, case, x) for x in xs]
    errors = []

    def work(k):
        y = np.empty_like(refs[k])
        for _ in range(200):
            bundle_lib.kernel(case.name)([xs[k]], [y], num_threads=2)
            if not np.array_equal(y, refs[k]):
                errors.append(k)
                return

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_without_workers_still_finishes(bundle_lib, rng):
    case = CASES[2]
    x = rng.standard_normal(case.graph.inputs[0].shape).astype(np.float32)
    ref = _expected(bundle_lib, case, x)
    y = np.empty_like(ref)
    bundle_lib.kernel(case.name)([x], [y], num_threads=2)          # the parent's pool has its worker now
    pid = os.fork()
    if pid == 0:                                                  # child: the worker thread is gone
        ok = False
        try:
            z = np.empty_like(ref)
            for _ in range(5):
                bundle_lib.kernel(case.name)([x], [z], num_threads=2)
            ok = bool(np.array_equal(z, ref))
        finally:
            os._exit(0 if ok else 1)
    for _ in range(600):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        threading.Event().wait(0.1)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung waiting for a worker")
    assert os.waitstatus_to_exitcode(status) == 0


def test_rebuilt_kernels_use_the_pool_too(tmp_path, rng):
    from converter_lite.codegen import build_kernels
    bundle = build_kernels([(c.name, c.graph) for c in CASES], cache_dir=str(tmp_path), num_threads_hint=2,
                           parallel_threshold=1, link=False)
    lib = NativeLibrary.from_sections(bundle.sections, num_threads=2, jit=toolchain.jit)
    assert lib.rebuilt
    for case in CASES:
        x = rng.standard_normal(case.graph.inputs[0].shape).astype(np.float32)
        ref = _expected(lib, case, x)
        y = np.empty_like(ref)
        for _ in range(10):
            lib.kernel(case.name)([x], [y], num_threads=2)
            np.testing.assert_array_equal(y, ref)
