"""Splitting one large numpy/BLAS call over ``num_threads`` threads, the calling thread included.

``pool(n)`` is a process-wide team of ``n - 1`` helper threads (daemon, created on first use).  ``team.run(parts)``
runs independent zero-argument callables: the helpers and the caller take parts from a shared counter, so a
helper that the OS has not scheduled yet simply takes no part (the caller does the work) and the caller only
ever waits for parts a helper has already started.  numpy releases the GIL inside BLAS and its loops, so the
parts run truly in parallel.  A team serves one run at a time; a second concurrent caller runs its parts
itself rather than wait.

``row_parallel(fn, a, b, out, work, num_threads)`` binds ``fn(a, b, out=out)`` (a matmul), split by rows of
``a``/``out`` into ``2 * num_threads`` blocks when ``work`` (multiply-adds) is at least ``MIN_WORK``.
"""
from __future__ import annotations

import itertools
import threading
from functools import partial

MIN_WORK = 1 << 22          # ~4M multiply-adds (~50 us on one core): below, waking a helper costs more
ROW_ALIGN = 8


class _Job:
    __slots__ = ("counter", "done", "error", "finished", "lock", "n", "parts")

    def __init__(self, parts):
        self.parts, self.n = parts, len(parts)
        self.counter = itertools.count()
        self.done = 0
        self.lock = threading.Lock()
        self.finished = threading.Event()
        self.error: BaseException | None = None

    def work(self) -> None:
        n, parts = self.n, self.parts
        while True:
            i = next(self.counter)             # atomic under the GIL
            if i >= n:
                return
            try:
                parts[i]()
            except BaseException as e:  # noqa: BLE001  (re-raised by the caller)
                self.error = self.error or e
            with self.lock:
                self.done += 1
                if self.done == n:
                    self.finished.set()


class Team:
    def __init__(self, helpers: int):
        self._cond = threading.Condition()
        self._job: _Job | None = None
        self._gen = 0
        self._busy = threading.Lock()
        for _ in range(helpers):
            threading.Thread(target=self._helper, daemon=True, name="converter_lite-helper").start()

    def _helper(self) -> None:
        seen = 0
        while True:
            with self._cond:
                while self._gen == seen:
                    self._cond.wait()
                seen, job = self._gen, self._job
            if job is not None:
                job.work()

    def run(self, parts: list) -> None:
        if not self._busy.acquire(blocking=False):
            for p in parts:
                p()
            return
        try:
            job = _Job(parts)
            with self._cond:
                self._job = job
                self._gen += 1
                self._cond.notify_all()
            job.work()
            job.finished.wait()
            with self._cond:
                self._job = None
            if job.error is not None:
                raise job.error
        finally:
            self._busy.release()


_teams: dict[int, Team] = {}
_teams_lock = threading.Lock()


def pool(num_threads: int) -> Team | None:
    """The shared team for ``num_threads`` threads (None for one thread)."""
    if num_threads <= 1:
        return None
    with _teams_lock:
        team = _teams.get(num_threads)
        if team is None:
            team = _teams[num_threads] = Team(num_threads - 1)
        return team


def split_rows(rows: int, parts: int, align: int = ROW_ALIGN) -> list[tuple[int, int]]:
    """``parts`` contiguous row ranges covering ``rows`` (sizes multiples of ``align`` but the last)."""
    chunk = -(-rows // max(parts, 1))
    step = max(align, -(-chunk // align) * align)
    return [(s, min(s + step, rows)) for s in range(0, rows, step)]


def row_parallel(fn, a, b, out, work: int, num_threads: int):
    """``fn(a, b, out=out)`` as a zero-argument callable, split by rows when large (see the module doc)."""
    team = pool(num_threads) if work >= MIN_WORK else None
    rows = a.shape[0] if a.ndim == 2 else 0
    if team is None or rows < 2 * ROW_ALIGN:
        return partial(fn, a, b, out=out)
    parts = [partial(fn, a[s:e], b, out=out[s:e]) for s, e in split_rows(rows, 2 * num_threads)]
    run = team.run
    return lambda: run(parts)


def sequence(calls: list):
    """One zero-argument callable running ``calls`` in order (the call itself when there is one)."""
    if len(calls) == 1:
        return calls[0]

    def run():
        for c in calls:
            c()
    return run


def parallel_calls(calls: list, num_threads: int):
    """One zero-argument callable running independent ``calls`` on the team (in order on one thread)."""
    team = pool(num_threads) if len(calls) > 1 else None
    if team is None:
        return sequence(calls)
    run_parts = team.run
    return lambda: run_parts(calls)
