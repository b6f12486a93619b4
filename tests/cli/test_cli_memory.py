"""cli/memory.py: peak RSS since a point, and the traced peak of numpy arrays during one call."""
from __future__ import annotations

import numpy as np

from converter_lite.cli.memory import (
    MIB,
    RssPeak,
    current_rss_bytes,
    fmt_mib,
    traced_peak,
)


def test_rss_peak_sees_a_temporary_allocation():
    rss = RssPeak().start()
    # 64 MiB: above glibc's largest dynamic mmap threshold (32 MiB), so fresh pages rather than heap memory an
    # earlier test freed but left resident (an 8 MiB block could then raise the RSS by less than 6 MiB)
    a = np.ones(64 * MIB // 8)
    del a
    assert rss.method in ("VmHWM", "ru_maxrss")
    if rss.method == "VmHWM":
        assert rss.peak_bytes() >= 48 * MIB
        assert rss.peak_total_bytes() >= current_rss_bytes()
    assert rss.describe()


def test_traced_peak_counts_arrays_alive_at_once():
    def work():
        x = np.ones(MIB // 8)                      # 1 MiB
        y = np.ones(MIB // 8)                      # + 1 MiB alive together
        return x + y                               # + 1 MiB result
    peak = traced_peak(work)
    assert 3 * MIB <= peak < 4 * MIB
    assert fmt_mib(peak).count(".") == 1 and fmt_mib(None) == "n/a"
