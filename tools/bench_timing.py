"""Interleaved timing: every engine runs a short block of consecutive runs per round, round after round, in one
process.

Interleaving spreads the machine's noise (other processes, frequency changes, a neighbour's burst) over all
engines alike, where timing one engine after the other would hand it to whichever ran during the burst.  The
order within a round rotates (round r starts with engine r mod n).  Each engine runs ``block`` times in a row
per round: thread pools spin for a while after a run (onnxruntime's intra-op threads by default, for tens of
ms here), and runs that start while another engine's threads still spin lose a core — measured here:
converter_lite's 2-thread resnet_mini 2.7 ms alone, 4.1-4.9 ms in the eight runs right after onnxruntime runs,
3.4 ms when 50 ms pass in between.  No user runs two engines back to back, so each block starts with one
untimed lead-in: runs of the engine, not timed, until ``settle`` seconds have passed since the block began (at
least one run).  One untimed run was not enough: onnxruntime's idle intra-op threads keep spinning on a core for
~30-45 ms after its last run (measured from their CPU time, conv_net and bert_tiny sessions; 43 ms for the
PP-LCNet orientation classifier at 2 threads, so ``settle`` is 80 ms), while
converter_lite's pool spins ~0.1 ms, so the disturbance fell almost only on the engine after onnxruntime (our
2-thread runs met a busy second core: conv_net 125 us or, when the scheduler preempted a pool worker for a
time slice, 1.1 ms, against 80 us alone, and the thread chooser, which sees such runs, kept 1 thread).  The
timed runs thus report each engine at its own steady state, as a user running one engine sees it (onnxruntime
keeps its default spinning).  The warm-up runs go the same way, a block per engine after its lead-in: warmed
up call by call, every warm-up run met the other engine's spinning threads, and our plan's thread chooser took
its first 2-thread samples from them.  An idle ``pause`` before each block is available but off: a pause lets every
engine's threads fall asleep and the cores idle, and in trials it made the 2-thread runs after it slower, not
cleaner.

A model's loop is time-boxed by ``Budget``: rounds go on until both ``min_rounds`` rounds and ``min_seconds``
have passed, and stop at ``max_seconds`` once ``floor_rounds`` rounds are done (slow engines on a slow machine).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Budget:
    min_rounds: int = 10
    min_seconds: float = 3.0
    max_seconds: float = 30.0
    floor_rounds: int = 5
    warmup: int = 3
    block: int = 4                     # consecutive runs of one engine per round
    pause: float = 0.0                 # idle seconds before each block (0: measured no clearer, see the doc)
    settle: float = 0.08               # seconds of untimed runs that start each block (at least one run)


QUICK = Budget(min_rounds=3, min_seconds=0.0, max_seconds=2.0, floor_rounds=2, warmup=1, block=1, pause=0.0,
               settle=0.0)


@dataclass
class Samples:
    times_ms: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return float(np.median(self.times_ms))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.times_ms, 90))

    @property
    def p99(self) -> float:
        return float(np.percentile(self.times_ms, 99))

    def summary(self) -> dict:
        return {"median_ms": self.median, "p90_ms": self.p90, "p99_ms": self.p99, "min_ms": min(self.times_ms),
                "runs": len(self.times_ms)}


def lead_in(fn: Callable[[], object], settle: float) -> None:
    """Untimed runs of ``fn`` until ``settle`` seconds have passed (at least one run): they outlast the
    previous engine's spinning threads (see the module docstring)."""
    clock = time.perf_counter
    lead = clock()
    fn()
    while clock() - lead < settle:
        fn()


def interleave(runs: dict[str, Callable[[], object]], budget: Budget,
               progress: Callable[[int, float], None] | None = None) -> dict[str, Samples]:
    """Times each of ``runs`` (name -> zero-argument call) round-robin in blocks; see the module docstring.

    ``progress(rounds_done, seconds_elapsed)`` is called after every round when given.
    """
    names = list(runs)
    for name in names if budget.warmup > 0 else ():    # a warm-up block per engine, after its lead-in
        if budget.block > 1:
            lead_in(runs[name], budget.settle)
        for _ in range(budget.warmup):
            runs[name]()
    samples = {name: Samples() for name in names}
    clock = time.perf_counter
    start = clock()
    rounds = 0
    while True:
        elapsed = clock() - start
        enough = rounds >= budget.min_rounds and elapsed >= budget.min_seconds
        out_of_time = elapsed >= budget.max_seconds and rounds >= budget.floor_rounds
        if enough or out_of_time:
            break
        for k in range(len(names)):
            name = names[(rounds + k) % len(names)]
            fn, times = runs[name], samples[name].times_ms
            if budget.pause > 0 and len(names) > 1:
                time.sleep(budget.pause)
            if budget.block > 1:
                lead_in(fn, budget.settle)
            for _ in range(budget.block):
                t0 = clock()
                fn()
                times.append((clock() - t0) * 1e3)
        rounds += 1
        if progress is not None:
            progress(rounds, clock() - start)
    return samples
