"""Thread counts of the libraries a run uses: numpy's BLAS and the native kernels' OpenMP team.

* **BLAS.**  numpy's OpenBLAS keeps one process-wide thread count.  ``blas_limit(n)`` sets it for the duration
  of a run and restores the caller's value afterwards; nested or concurrent runs are reference-counted, so the
  first run in sets it and the last one out restores it.  The library is found among the shared objects
  the process has loaded (``/proc/self/maps``) and driven through ctypes, as threadpoolctl does, without
  adding that dependency.  Other BLAS builds (MKL, Accelerate) are left alone.
  How many threads BLAS gets during a run is ``blas_threads(num_threads)``: OpenBLAS's idle workers spin on a
  core for a while after each call and its static work split waits for a preempted worker, so on a machine
  whose cores are also busy with the native kernels' team (or with other processes) a second BLAS thread
  costs far more than it gains on the small matrices of a converted model; the plan therefore splits large
  products itself (``fast_kernels``) and keeps BLAS at one thread.
* **OpenMP.**  libgomp reads ``OMP_WAIT_POLICY``/``GOMP_SPINCOUNT`` once, when it is loaded (with the first
  native library).  Its default spins an idle worker for ~300k iterations (milliseconds) after every parallel
  kernel, keeping a core away from BLAS and numpy between kernels; ``configure_openmp()`` (called before the
  first native library is loaded) sets a short spin, unless the user set either variable.
"""
from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager

from ..kernels.blas import loaded_libraries

# spins (each a pause instruction) an idle OpenMP worker waits before sleeping: ~0.1 ms, enough to stay
# awake between the kernels of one run, short enough not to hold a core after it
GOMP_SPINCOUNT = "10000"
_GET = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
        "openblas_get_num_threads")
_SET = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
        "openblas_set_num_threads")


class _OpenBLAS:
    def __init__(self):
        self.get = self.set = None
        for path in loaded_libraries("openblas"):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            get = next((getattr(lib, s) for s in _GET if hasattr(lib, s)), None)
            set_ = next((getattr(lib, s) for s in _SET if hasattr(lib, s)), None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                self.get, self.set = get, set_
                return



_blas: _OpenBLAS | None = None
_lock = threading.Lock()
_active = 0
_saved: int | None = None


def _library() -> _OpenBLAS:
    global _blas
    if _blas is None:
        import numpy.linalg  # noqa: F401  (loads the BLAS library if numpy has not yet)
        _blas = _OpenBLAS()
    return _blas


def blas_threads(num_threads: int) -> int:
    """Threads BLAS may use inside a run of a plan with ``num_threads`` (see the module doc)."""
    return 1


def get_blas_threads() -> int | None:
    """numpy's current BLAS thread count (None when it is not an OpenBLAS we can drive)."""
    lib = _library()
    return None if lib.get is None else int(lib.get())


def blas_enter(num_threads: int) -> None:
    """Limits numpy's BLAS to ``blas_threads(num_threads)`` threads until the matching ``blas_exit`` (see the
    module doc: the first caller in saves and sets the count, the last one out restores it)."""
    global _active, _saved
    lib = _blas if _blas is not None else _library()
    if lib.set is None:
        return
    with _lock:
        if _active == 0:
            want = blas_threads(num_threads)
            current = int(lib.get())
            _saved = current if current != want else None
            if _saved is not None:
                lib.set(want)
        _active += 1


def blas_exit() -> None:
    global _active, _saved
    if _blas is None or _blas.set is None:
        return
    with _lock:
        _active -= 1
        if _active == 0 and _saved is not None:
            _blas.set(_saved)
            _saved = None


@contextmanager
def blas_limit(num_threads: int):
    """``blas_enter``/``blas_exit`` around the body."""
    blas_enter(num_threads)
    try:
        yield
    finally:
        blas_exit()


def configure_openmp() -> None:
    """Sets a short OpenMP spin before libgomp is loaded (no effect once it is, or if the user chose)."""
    if ("OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
            and not loaded_libraries("libgomp")):
        os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT


class ThreadChooser:
    """Chooses, run by run, between running with 1 thread and with the plan's ``num_threads`` by measured wall
    time.  A second thread only pays when a core is free: on a machine whose cores are busy (other processes,
    or a caller running models in parallel) every team-based kernel waits for a helper that the OS has not
    scheduled, and the run gets slower than on one thread.  Options are measured in *bursts* of consecutive
    runs whose first run is not timed: the first run after a switch meets the other option's state (pool
    workers asleep after 1-thread runs, or still spinning), and timing it alone made 2 threads look 2-3x
    slower than their steady state (vit_mini: 3.0 ms exploration samples against 1.2 ms in a row).  Each
    option gets a burst of ``WARMUP`` timed runs first, then the one with the lowest ``QUANTILE`` (the
    third-fastest of nine) over its last ``WINDOW`` timed runs is used: a second core taken for a moment
    (another library's threads spinning after its own call, a short burst elsewhere) slows only some 2-thread
    samples and 1-thread ones not at all, so a median let transient bursts keep a model on one thread (bert_tiny
    after onnxruntime runs in the same process: 0.52 ms on 1 thread where 2 threads run it in 0.32 ms), while a
    core that stays busy slows every sample and still loses the low quantile.  Exploration: a burst of ``BURST``
    runs of the other option, so the choice follows the machine's load (the first ``TRUST`` bursts of an option
    come every ``EXPLORE`` runs whatever its level: its warm-up burst may have met a cold pool or another
    library's threads still spinning, and a model whose 2-thread warm-up took 2.5x its steady time stayed on one
    thread for hundreds of runs); in between, one run of the best option in
    ``SAMPLE`` is timed (a run not timed costs no lock), so the best option's level follows the load by itself.
    The bursts come every ``EXPLORE`` runs when the two levels are close, and further apart the more the other
    option is behind, so that the slower runs they cost stay near ``BUDGET`` of the time: ``BURST * gap /
    BUDGET`` runs apart (``gap`` = its level / the best's - 1), at most ``MAX_EXPLORE``; an option more than twice
    as slow as the best is explored at most ``TAIL_SHARE`` of the runs (``BURST / TAIL_SHARE`` = 750 apart), so
    its runs stay out of the p99 (resnet_mini, convnext_mini: p99/median 2.7 and 3.6 with bursts 1.3% of runs).
    ``BUDGET`` was 2%: resnet_mini (1 thread 1.5x slower) then explored every 75 runs, and the bursts with the
    slow 2-thread runs after them (the second core coming back) put p90 at 1.2-1.7x and p99 at 1.95-2.15x the
    median on this VM; at 0.5% (every 300 runs) p90 is 1.07-1.15x and p99 1.64-1.66x (fixed 2 threads: 1.61x).
    Every 32nd run with
    3 of them on one thread cost bert_base at 224 ms-scale runs (2 threads 65 ms, 1 thread 120 ms) 12-20% of its
    mean time and 2-13% of its median (the second core also takes a few runs to come back to speed after a
    1-thread burst).  When the best option changes, the one just left gets the ``TRUST`` quick explorations again:
    a transient that tipped the levels (another library's threads spinning for tens of ms, which the best
    option's sampled runs meet and the other's do not) is undone within a few ``EXPLORE`` runs (bert_tiny after
    onnxruntime blocks in one process: median 0.52 ms, its 1-thread time, with the chooser ending on 2 threads;
    0.32 with this).  Never more than ``num_threads`` threads."""
    WARMUP, WINDOW, EXPLORE, SAMPLE, BURST, TRUST = 3, 9, 32, 4, 3, 2
    MAX_EXPLORE, BUDGET, TAIL_SHARE = 1024, 0.005, 0.004
    QUANTILE = 0.25

    def __init__(self, options: tuple[int, ...]):
        from collections import deque
        self.options = options
        self.samples = {o: deque(maxlen=self.WINDOW) for o in options}
        self.seen = {o: 0 for o in options}
        self.runs = 0
        self._level = {o: 0.0 for o in options}        # QUANTILE of each option's samples (kept by record)
        self._cold = True                              # some option has fewer than WARMUP samples
        self._best = options[0]                        # lowest level (kept by record)
        self._burst: list[int] = []                    # the timed runs left of the current burst
        self._explore_at = self.EXPLORE                # the run that starts the next exploration
        self._bursts = {o: 0 for o in options}         # exploration bursts each option has had
        self._lock = threading.Lock()

    def pick(self) -> int:
        return self.choose()[0]

    def choose(self) -> tuple[int, bool]:
        """The option for the next run, and whether to ``record`` its time: the runs of a burst after its first
        (warm-up and exploration), and runs of the best option every ``SAMPLE``-th time (the steady state takes
        no lock and no clock)."""
        self.runs += 1                                 # a lost increment under a race only shifts the schedule
        runs = self.runs
        if not self._cold and not self._burst and runs < self._explore_at and runs % self.SAMPLE:
            return self._best, False
        with self._lock:
            if self._burst:
                return self._burst.pop(), True
            if self._cold:
                cold = [o for o in self.options if len(self.samples[o]) < self.WARMUP]
                if cold:
                    o = min(cold, key=lambda o: len(self.samples[o]))
                    self._burst = [o] * (self.WARMUP - len(self.samples[o]))
                    return o, False
                self._cold = False
            best = self._best
            if runs >= self._explore_at:
                others = [o for o in self.options if o != best]
                o = others[(runs // self.EXPLORE) % len(others)]
                self._bursts[o] += 1
                self._burst = [o] * (self.BURST - 1)
                self._explore_at = runs + self.interval()
                return o, False
            return best, True

    def interval(self) -> int:
        """Runs until the next exploration: ``EXPLORE`` .. ``MAX_EXPLORE``, longer the further the closest other
        option is behind the best (see the class doc)."""
        if min(n for o, n in self._bursts.items() if o != self._best) < self.TRUST:
            return self.EXPLORE
        best = self._level[self._best]
        other = min(v for o, v in self._level.items() if o != self._best)
        gap = other / best - 1.0 if best > 0 else 0.0
        runs = self.BURST * gap / self.BUDGET
        if gap > 1.0:           # its runs would be tail runs (over 2x the median): keep them under TAIL_SHARE
            runs = max(runs, self.BURST / self.TAIL_SHARE)
        return int(min(self.MAX_EXPLORE, max(self.EXPLORE, runs)))

    def best(self) -> int:
        return self._best

    def record(self, option: int, seconds: float) -> None:
        with self._lock:
            self.seen[option] += 1
            samples = self.samples[option]
            samples.append(seconds)
            s = sorted(samples)
            self._level[option] = s[int(self.QUANTILE * (len(s) - 1))]
            old = self._best
            self._best = min(self.options, key=self._level.__getitem__)
            if self._best != old and not self._cold:
                # the option just left gets TRUST quick re-explorations, as a new one does: a transient that
                # tipped the levels (another library's threads spinning for tens of ms, sampled by the best
                # option's every-SAMPLE-th runs) is undone within a few EXPLORE runs, where its stale level
                # alone would have kept it unexplored for hundreds
                self._bursts[old] = 0
                self._explore_at = min(self._explore_at, self.runs + self.EXPLORE)
