"""Peak memory of a model run, measured two ways (used by ``benchmark`` and ``make bench``).

1. ``RssPeak`` — the process's resident memory: ``start()`` records the current RSS and resets the kernel's
   peak-RSS counter (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0); ``peak_bytes()`` is then
   ``VmHWM - RSS at start`` from ``/proc/self/status``: everything the work in between made resident (weights
   paged in from the memory-mapped file, buffers of numpy, of native kernels and of their threads).  Where the
   counter cannot be reset (not Linux, or ``/proc`` read-only) ``getrusage``'s lifetime maximum is used instead,
   which over-states the figure when something before ``start`` peaked higher; ``method`` says which one was
   measured.  Memory that an earlier run left in malloc's free lists is re-used without raising RSS, so the
   figure is the *new* resident memory, not the working set: measure in a fresh process for the working set.
2. ``traced_peak`` — the largest total of numpy arrays alive at once during one call (``tracemalloc``, which
   numpy reports its data allocations to).  Independent of malloc caching, but it misses memory not allocated
   through numpy (native kernels' own scratch, onnxruntime).  Tracing slows allocation down: never time a run
   that is traced.
"""
from __future__ import annotations

import resource
import sys
import tracemalloc
from collections.abc import Callable

PROC_STATUS = "/proc/self/status"
PROC_CLEAR_REFS = "/proc/self/clear_refs"
RESET_PEAK_RSS = "5"          # clear_refs command that resets VmHWM to the current RSS (Documentation/proc.rst)
KIB = 1024
MIB = 1024 * 1024


def _status_kib(field: str) -> int | None:
    try:
        with open(PROC_STATUS, encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def current_rss_bytes() -> int | None:
    """Resident set size now (None where ``/proc`` is unavailable)."""
    kib = _status_kib("VmRSS")
    return None if kib is None else kib * KIB


def _maxrss_bytes() -> int:
    # ru_maxrss is in KiB on Linux, in bytes on macOS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * KIB


def _reset_peak() -> bool:
    try:
        with open(PROC_CLEAR_REFS, "w", encoding="ascii") as f:
            f.write(RESET_PEAK_RSS)
        return True
    except OSError:
        return False


class RssPeak:
    """Peak resident memory added since ``start()``; see the module docstring (method 1)."""

    def __init__(self) -> None:
        self.baseline = 0
        self.method = "none"

    def start(self) -> RssPeak:
        rss = current_rss_bytes()
        if rss is not None and _reset_peak():
            self.baseline, self.method = rss, "VmHWM"
        else:
            self.baseline = rss if rss is not None else _maxrss_bytes()
            self.method = "ru_maxrss"
        return self

    def peak_total_bytes(self) -> int:
        """The process's peak RSS since ``start()`` (lifetime peak with the ``ru_maxrss`` fallback)."""
        if self.method == "VmHWM":
            kib = _status_kib("VmHWM")
            if kib is not None:
                return kib * KIB
        return _maxrss_bytes()

    def peak_bytes(self) -> int:
        """Peak RSS since ``start()`` minus the RSS at ``start()`` (never negative)."""
        return max(0, self.peak_total_bytes() - self.baseline)

    def describe(self) -> str:
        if self.method == "VmHWM":
            return "peak RSS minus the RSS before loading; VmHWM reset through /proc/self/clear_refs"
        return "lifetime peak RSS minus the RSS before loading; ru_maxrss, an upper bound"


def traced_peak(fn: Callable[[], object]) -> int:
    """Bytes of the largest set of Python/numpy allocations alive at once while ``fn()`` runs (method 2)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return max(0, peak - base)


def fmt_mib(n_bytes: float | None) -> str:
    return "n/a" if n_bytes is None else f"{n_bytes / MIB:.3f}"


__all__ = ["MIB", "RssPeak", "current_rss_bytes", "fmt_mib", "traced_peak"]
