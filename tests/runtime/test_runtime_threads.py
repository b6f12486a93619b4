"""Threads: the BLAS limit during runs, the thread chooser, the helper team (converter_lite/runtime/threads.py,
parallel.py)."""
from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from runtime_graphs import f32

from converter_lite.ir import Graph, Node, Value
from converter_lite.runtime import threads
from converter_lite.runtime.fast import parallel
from converter_lite.runtime.plan import Plan


def test_blas_limit_sets_one_thread_and_restores():
    before = threads.get_blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS this runtime can drive")
    with threads.blas_limit(4):
        assert threads.get_blas_threads() == 1
        with threads.blas_limit(2):                     # nested (or concurrent) runs keep it
            assert threads.get_blas_threads() == 1
        assert threads.get_blas_threads() == 1
    assert threads.get_blas_threads() == before


def test_blas_limit_with_concurrent_runs_restores_once():
    before = threads.get_blas_threads()
    if before is None:
        pytest.skip("numpy's BLAS is not an OpenBLAS this runtime can drive")
    barrier = threading.Barrier(4)

    def run():
        with threads.blas_limit(2):
            barrier.wait()
            assert threads.get_blas_threads() == 1
    ts = [threading.Thread(target=run) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert threads.get_blas_threads() == before


def test_chooser_warms_up_both_then_picks_the_faster():
    c = threads.ThreadChooser((1, 2))
    cost = {1: 3.0, 2: 1.0}
    picks = []
    for _ in range(64):
        o = c.pick()
        picks.append(o)
        c.record(o, cost[o])
    assert set(picks[:8]) == {1, 2}                     # both tried during warm-up
    steady = picks[16:]
    assert steady.count(2) > 0.85 * len(steady)         # mostly the faster one ...
    assert 1 in steady                                  # ... but the other is re-measured


def test_chooser_recovers_from_a_slow_warm_up_within_a_hundred_runs():
    """The 2-thread warm-up met a cold pool (or another library's spinning threads): 2.5x its steady time, slower
    than 1 thread.  The next burst comes EXPLORE runs later, not hundreds, and finds it fast."""
    c = threads.ThreadChooser((1, 2))
    timed2 = 0
    for run in range(100):
        o, sample = c.choose()
        if sample:
            cost = 1.8
            if o == 2:
                timed2 += 1
                cost = 4.5 if timed2 <= c.WARMUP else 1.0
            c.record(o, cost)
    assert c.best() == 2


def test_chooser_follows_a_change_of_load():
    c = threads.ThreadChooser((1, 2))
    cost = {1: 3.0, 2: 1.0}
    for _ in range(40):
        o = c.pick()
        c.record(o, cost[o])
    assert c.best() == 2
    cost = {1: 3.0, 2: 9.0}                             # the second core got busy
    for _ in range(200):
        o = c.pick()
        c.record(o, cost[o])
    assert c.best() == 1


def _matmul_graph(rows=256, k=192, n=160):
    x = f32("x", rows, k)
    w = Value("w", const=np.random.default_rng(1).standard_normal((k, n)).astype(np.float32))
    y, z = f32("y", rows, n), f32("z", rows, n)
    return Graph("mm", [x], [z], [Node("MatMul", [x, w], [y], name="mm"), Node("Tanh", [y], [z], name="t")])


def test_fixed_thread_count_is_reproducible(rng):
    plan = Plan(_matmul_graph(), num_threads=2, adaptive=False)
    assert plan.chooser is None
    x = rng.standard_normal((256, 192)).astype(np.float32)
    first = plan.execute([x])[0]
    for _ in range(3):
        np.testing.assert_array_equal(plan.execute([x])[0], first)


def test_every_thread_count_gives_the_same_result(rng, monkeypatch):
    monkeypatch.setattr(parallel, "MIN_WORK", 1)        # split even this small product
    plan = Plan(_matmul_graph(), num_threads=3)
    x = rng.standard_normal((256, 192)).astype(np.float32)
    w = plan.program.values[plan.program.steps[0].inputs[1]].const
    want = np.tanh(x.astype(np.float64) @ w.astype(np.float64))
    # float32 sums of 192 products (|x @ w| ~ 14) differ from the exact ones by ~1e-5 whatever the split; a
    # wrong split (rows missed or computed twice) is off by O(1)
    for nt in (1, 2, 3):
        np.testing.assert_allclose(plan.execute([x], num_threads=nt)[0], want, rtol=1e-5, atol=5e-5)
    assert {1, 2, 3} <= set(next(iter(plan._free)).bound)


def test_team_runs_every_part_once_and_reraises():
    team = parallel.pool(3)
    hits = [0] * 50

    def part(i):
        def run():
            hits[i] += 1
        return run
    team.run([part(i) for i in range(50)])
    assert hits == [1] * 50

    def boom():
        raise ValueError("part failed")
    with pytest.raises(ValueError, match="part failed"):
        team.run([part(0), boom, part(1)])


def test_split_rows_covers_rows():
    for rows in (1, 7, 8, 9, 100, 257):
        for parts in (1, 2, 4):
            blocks = parallel.split_rows(rows, parts)
            assert blocks[0][0] == 0 and blocks[-1][1] == rows
            assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    assert parallel.split_rows(16, 1, 8) == [(0, 16)]           # one part means one block
    assert len(parallel.split_rows(64, 2, 8)) == 2 and len(parallel.split_rows(64, 4, 8)) == 4


def test_chooser_keeps_two_threads_through_transient_bursts():
    """A third of the 2-thread samples hit a busy core (another engine's spinning threads): 2 threads still win
    when they are faster the rest of the time; a core busy all the time makes 1 thread win."""
    c = threads.ThreadChooser((1, 2))
    n = 0

    def cost(o):
        return 0.52 if o == 1 else (0.53 if n % 3 == 0 else 0.32)
    for _ in range(400):
        n += 1
        o = c.pick()
        c.record(o, cost(o))
    assert c.best() == 2
    for _ in range(400):
        o = c.pick()
        c.record(o, 0.52 if o == 1 else 0.6)
    assert c.best() == 1


def test_blas_limit_only_for_plans_that_use_blas():
    plan = Plan(_matmul_graph(), num_threads=2)
    assert plan.uses_blas and plan.needs_blas(1) and plan.needs_blas(2)     # its MatMul runs numpy's
    x, y = f32("x", 4), f32("y", 4)
    plan = Plan(Graph("g", [x], [y], [Node("Neg", [x], [y], name="n")]))
    assert not plan.uses_blas and not plan.needs_blas(1)


def test_steps_bound_to_native_code_need_no_blas_limit():
    """A BLAS op's step bound to one foreign call (runlist ``tag``) or run by a native fused kernel never calls
    numpy's BLAS; one bound to numpy does, and so does a control-flow body with BLAS ops."""
    from types import SimpleNamespace

    from converter_lite.runtime.step_needs import step_blas_free

    def step(op, native=False, bodies=None):
        return SimpleNamespace(node=SimpleNamespace(op=op), impl=SimpleNamespace(native=native, bodies=bodies))

    def numpy_call():
        return None

    def native_call():
        return None
    native_call.native = (1, 2, 3, 4, 0)
    assert step_blas_free(step("Add"), numpy_call)
    assert not step_blas_free(step("MatMul"), numpy_call)
    assert step_blas_free(step("MatMul"), native_call)
    assert step_blas_free(step("Conv", native=True), numpy_call)
    assert not step_blas_free(step("Loop", bodies={"body": SimpleNamespace(blas_inside=True)}), numpy_call)
    assert step_blas_free(step("Loop", bodies={"body": SimpleNamespace(blas_inside=False)}), numpy_call)


def test_chooser_times_warm_up_exploration_and_every_sample_th_run():
    c = threads.ThreadChooser((1, 2))
    cost = {1: 3.0, 2: 1.0}
    timed = []
    for _ in range(96):
        o, sample = c.choose()
        timed.append(sample)
        if sample:
            c.record(o, cost[o])
    assert timed[:8] == [False, True, True, True] * 2    # warm-up bursts: an untimed first run, then timed
    steady = timed[32:]
    assert 0 < sum(steady) <= len(steady) // 2          # later only some runs are
    assert c.best() == 2


def test_chooser_explores_in_bursts_whose_first_run_is_not_timed():
    """The run right after a switch of thread count is not timed (it meets the other option's state)."""
    c = threads.ThreadChooser((1, 2))
    cost = {1: 1.1, 2: 1.0}
    log = []
    for _ in range(3 * c.EXPLORE):
        o, sample = c.choose()
        log.append((o, sample))
        if sample:
            c.record(o, cost[o])
    switches = [i for i in range(1, len(log) - 1) if log[i][0] != log[i - 1][0] and log[i][0] == 1]
    assert len(switches) >= 2                                # explorations of the slower option
    for i in switches:
        assert not log[i][1] and log[i + 1] == (1, True)


def _switches(costs, runs):
    c = threads.ThreadChooser((1, 2))
    picks = []
    for _ in range(runs):
        o, sample = c.choose()
        picks.append(o)
        if sample:
            c.record(o, costs[o])
    return [i for i in range(1, runs) if picks[i] == 1 and picks[i - 1] == 2], c


@pytest.mark.parametrize("slow,apart", [(1.05, 32), (1.3, 180), (2.0, 600), (2.5, 900), (4.0, 1024), (9.0, 1024)])
def test_chooser_explores_a_slower_option_the_less_often_the_slower_it_is(slow, apart):
    """Exploring costs BURST runs of the slower option: bursts come BURST * gap / BUDGET runs apart (at least
    EXPLORE, at most MAX_EXPLORE), so they cost about BUDGET of the time whatever the gap; an option more than
    twice as slow is tried in at most TAIL_SHARE of the runs, so its runs stay out of the p99 (issue 18)."""
    starts, c = _switches({1: slow, 2: 1.0}, 3000)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[:c.TRUST - 1] == [c.EXPLORE] * (c.TRUST - 1)     # the first bursts come soon, whatever the gap
    gaps = gaps[c.TRUST - 1:]
    assert gaps and all(abs(g - apart) <= 1 for g in gaps), gaps
    assert c.best() == 2
    # the time the steady bursts (after the first TRUST ones) cost, as a fraction of the runs they span
    extra = (slow - 1.0) * c.BURST * len(gaps) / sum(gaps)
    assert extra <= c.BUDGET * 1.1 or apart in (c.EXPLORE, c.MAX_EXPLORE)          # the bounds win
    if slow > 2.0:
        assert c.BURST / apart <= c.TAIL_SHARE * 1.01



def test_chooser_returns_quickly_after_a_transient_switch():
    """Steady on 2 threads, then a transient (another engine's threads spinning for a block of runs) makes the
    2-thread samples slow enough to switch to 1 thread; once it is over, 2 threads are re-explored within a few
    EXPLORE runs (the option just left gets the quick explorations a new one gets), not after its stale level's
    hundreds of runs, and win again."""
    c = threads.ThreadChooser((1, 2))
    busy = False

    def cost(o):
        return 1.0 if o == 1 else (2.5 if busy else 0.6)
    for _ in range(200):
        o, sample = c.choose()
        if sample:
            c.record(o, cost(o))
    assert c.best() == 2
    busy = True
    runs = 0
    while c.best() == 2:
        runs += 1
        assert runs < 200
        o, sample = c.choose()
        if sample:
            c.record(o, cost(o))
    busy = False
    picks = []
    for _ in range(4 * c.EXPLORE):
        o, sample = c.choose()
        picks.append(o)
        if sample:
            c.record(o, cost(o))
    assert c.best() == 2 and 2 in picks[:2 * c.EXPLORE]
