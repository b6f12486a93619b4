"""The on-disk kernel cache: hits on a second build, one compile for identical kernels, atomic entries, and
several processes building into one cache at once."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from codegen_testutil import F32, make_graph

from converter_lite.codegen import build_kernels
from converter_lite.codegen.cache import KernelCache, content_key

pytestmark = pytest.mark.needs_cc


def _kernels():
    a = make_graph("a", [(F32, (8, 16))], lambda b, x: b.op("Tanh", x * 0.5) * 2.0)
    same = make_graph("same", [(F32, (8, 16))], lambda b, x: b.op("Tanh", x * 0.5) * 2.0)
    other = make_graph("other", [(F32, (8, 16))], lambda b, x: b.op("Exp", x))
    return [("k_a", a), ("k_same", same), ("k_other", other)]


def test_second_build_hits_the_cache(tmp_path):
    first = build_kernels(_kernels(), cache_dir=str(tmp_path))
    assert first.stats["unique_kernels"] == 2 and first.stats["compiled"] == 2     # k_a and k_same share code
    second = build_kernels(_kernels(), cache_dir=str(tmp_path))
    assert second.stats["compiled"] == 0 and second.stats["cache_hits"] >= 2
    assert second.sections == first.sections
    # a new model reusing one kernel compiles only the new one
    extra = make_graph("extra", [(F32, (8, 16))], lambda b, x: b.op("Log", x))
    third = build_kernels(_kernels()[:1] + [("k_extra", extra)], cache_dir=str(tmp_path))
    assert third.stats["compiled"] == 1


def test_disabled_cache_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    build_kernels(_kernels()[:1], cache_dir="")
    assert not os.listdir(tmp_path)


def test_cache_entries_are_atomic_and_errors_are_misses(tmp_path):
    cache = KernelCache(str(tmp_path))
    key = content_key("x", b"y")
    assert cache.get(key, ".o") is None
    cache.put(key, ".o", b"data")
    assert cache.get(key, ".o") == b"data"
    assert not [f for _, _, files in os.walk(tmp_path) for f in files if f.startswith(".tmp_")]
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    KernelCache(str(blocked)).put(key, ".o", b"data")          # read-only/unusable cache: silently skipped
    assert content_key("ab", "c") != content_key("a", "bc")


def test_parallel_builds_share_one_cache(tmp_path):
    """Four processes build the same kernels into one cache concurrently: all succeed with identical code."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_codegen_cache import _kernels
        from converter_lite.codegen import build_kernels
        b = build_kernels(_kernels(), cache_dir={str(tmp_path / 'cache')!r})
        sys.stdout.buffer.write(b.sections["native/lib.so"])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e.decode()[-2000:] for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and outs[0][0].startswith(b"\x7fELF")
    leftovers = [f for _, _, files in os.walk(tmp_path) for f in files if f.startswith(".tmp_")]
    assert not leftovers
