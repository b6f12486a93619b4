"""A one-line progress counter for long runs, on a terminal only (SPEC §6).

``Progress(stream)`` is called as ``progress(stage, done, total)``.  Nothing is written during the first
``delay`` seconds, so short runs print nothing; after that the line ``\\r<stage> <done>/<total>  ETA <s> s`` is
rewritten at most every ``interval`` seconds (and once at the end of each stage), and ``close()`` erases it so
the next line of output starts clean.  The clock is injectable for tests.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

DELAY_S = 1.0          # runs shorter than this show no progress at all
INTERVAL_S = 0.2       # at most five redraws a second


class Progress:
    """See the module docstring."""

    def __init__(self, stream: TextIO | None = None, delay: float = DELAY_S, interval: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.delay, self.interval, self.clock = delay, interval, clock
        self.started = clock()
        self.stage_started: dict[str, tuple[float, int]] = {}   # stage -> (time, done) when first seen
        self.last = float("-inf")
        self.width = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        t0, d0 = self.stage_started.setdefault(stage, (now, done))
        if now - self.started < self.delay:
            return
        if now - self.last < self.interval and done != total:
            return
        self.last = now
        line = f"{stage} {done}/{total}"
        if d0 < done < total:
            eta = (now - t0) / (done - d0) * (total - done)
            line += f"  ETA {eta:.1f} s"
        self._draw(line)

    def _draw(self, line: str) -> None:
        pad = " " * max(0, self.width - len(line))
        self.stream.write(f"\r{line}{pad}")
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0
