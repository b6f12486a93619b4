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


# -- the size cap (issue 18) ------------------------------------------------------------------------------------
def test_parse_size():
    from converter_lite.codegen.cache import parse_size
    assert parse_size("300M") == 300 << 20 and parse_size("1g") == 1 << 30 and parse_size("4096") == 4096
    assert parse_size("1.5KiB") == 1536 and parse_size("0") == 0
    for bad in ("lots", "-1M", "12Q"):
        with pytest.raises(ValueError, match="CONVERTER_LITE_CACHE_MAX_SIZE"):
            parse_size(bad)


def test_a_bad_cap_in_the_environment_is_a_clear_error(monkeypatch):
    from converter_lite.codegen.cache import default_max_bytes
    from converter_lite.errors import ConverterError
    monkeypatch.setenv("CONVERTER_LITE_CACHE_MAX_SIZE", "big")
    with pytest.raises(ConverterError) as e:
        default_max_bytes()
    assert e.value.code == -600 and "CONVERTER_LITE_CACHE_MAX_SIZE" in str(e.value)


def test_trim_evicts_the_least_recently_used_down_to_the_low_water_mark(tmp_path):
    from converter_lite.codegen.cache import LOW_WATER
    cache = KernelCache(str(tmp_path), max_bytes=100_000)
    keys = [content_key(str(i)) for i in range(20)]
    for i, key in enumerate(keys):
        cache.put(key, ".o", bytes(10_000))
        os.utime(cache._path(key, ".o"), (1_000_000 + i, 1_000_000 + i))   # entry i used at time i
    assert cache.size() == 200_000
    assert cache.get(keys[0], ".o") is not None                              # the oldest, used just now
    removed = cache.trim()
    assert cache.size() <= 100_000 * LOW_WATER and removed == 12
    assert cache.get(keys[0], ".o") is not None                              # kept: recently used
    assert cache.get(keys[1], ".o") is None and cache.get(keys[19], ".o") is not None
    assert KernelCache(str(tmp_path), max_bytes=0).trim(force=True) == 0    # 0: no cap


def test_the_cap_holds_with_two_processes_filling_one_cache(tmp_path):
    """Two writers over a 200 KB cap, each trimming after its puts: no error, and the cache ends under the cap."""
    script = textwrap.dedent(f"""
        import os, sys
        from converter_lite.codegen.cache import KernelCache, content_key
        c = KernelCache({str(tmp_path)!r}, max_bytes=200_000)
        for i in range(60):
            c.put(content_key(sys.argv[1], str(i)), ".o", os.urandom(8_000))
            if i % 5 == 4:
                c.trim()
        """)
    procs = [subprocess.Popen([sys.executable, "-c", script, tag]) for tag in ("a", "b")]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert KernelCache(str(tmp_path)).size() <= 200_000


def test_two_concurrent_conversions_stay_under_the_cap(tmp_path):
    """The cap through the converter: CONVERTER_LITE_CACHE_DIR/_MAX_SIZE, two conversions at once."""
    models = os.path.join(os.path.dirname(__file__), "..", "..", "models")
    env = dict(os.environ, CONVERTER_LITE_CACHE_DIR=str(tmp_path / "cache"), CONVERTER_LITE_CACHE_MAX_SIZE="1M")
    cmds = [[sys.executable, "-m", "converter_lite.cli.converter", "--fmk=ONNX",
             f"--modelFile={os.path.join(models, name)}.onnx", f"--outputFile={tmp_path / name}",
             f"--configFile={os.path.join(models, '..', 'cfg', 'akg.cfg')}"] for name in ("conv_net", "mlp_block")]
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in cmds]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert 0 < KernelCache(str(tmp_path / "cache")).size() <= 1 << 20
