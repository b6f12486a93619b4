"""How far apart two CPUs are for a cache line: the round trip of a flag between a thread pinned to CPU 0 and one
pinned to CPU 1 (median of 5 runs of 200,000 round trips), by a small C program compiled with the machine's C
compiler (a development tool: without ``cc`` or a second CPU it reports nothing).

On a 2-vCPU cloud VM the host places the two vCPUs on cores that share a cache (~90 ns here) or not (~400 ns,
another CCD); with the latter, two threads lose to one on models whose consecutive kernels hand data between
cores, for onnxruntime and for us alike (convnext_mini at 2 threads: ours 0.69 -> 1.31 ms, onnxruntime 0.82 ->
1.39, the 1-thread times 1.08 and 1.14 unchanged).  The bench tools print it at the start and the end of a run,
so that a run's 2-thread figures can be read against it.

    python -m tools.cross_core        # prints e.g. "92 ns"
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
static _Atomic long flag __attribute__((aligned(64)));
enum { N = 200000 };
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static void *other(void *a) {
    (void)a; pin(1);
    for (long i = 0; i < N; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1) {}
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return 0;
}
int main(void) {
    pthread_t t; struct timespec a, b;
    pin(0); atomic_store(&flag, 0);
    pthread_create(&t, 0, other, 0);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < N; i++) {
        atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2) {}
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, 0);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / N);
    return 0;
}
"""


def round_trip_ns(runs: int = 5) -> float | None:
    """Median round trip in ns between CPU 0 and CPU 1, or None (one CPU, no C compiler, a failed run)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or (os.cpu_count() or 1) < 2:
        return None
    with tempfile.TemporaryDirectory(prefix="cl_xcore_") as tmp:
        src, exe = os.path.join(tmp, "x.c"), os.path.join(tmp, "x")
        with open(src, "w") as f:
            f.write(SOURCE)
        if subprocess.run([cc, "-O2", "-pthread", src, "-o", exe], capture_output=True, check=False).returncode:
            return None
        times = []
        for _ in range(runs):
            try:
                out = subprocess.run([exe], capture_output=True, text=True, timeout=30, check=True).stdout
                times.append(float(out))
            except (subprocess.SubprocessError, ValueError):
                return None
    return statistics.median(times)


def describe(ns: float | None) -> str:
    return "n/a (no C compiler or one CPU)" if ns is None else f"{ns:.0f} ns"


if __name__ == "__main__":
    print(describe(round_trip_ns()))
    sys.exit(0)
