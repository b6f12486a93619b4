"""Linking objects into a shared object with the system C compiler, and the error without one."""
from __future__ import annotations

import pytest
from codegen_testutil import F32, make_graph

from converter_lite.codegen import build_kernels
from converter_lite.codegen.link import find_cc, link_shared
from converter_lite.errors import ConverterError


def test_missing_cc_names_what_to_install(tmp_path):
    g = make_graph("k", [(F32, (4,))], lambda b, x: x + 1.0)
    with pytest.raises(ConverterError) as e:
        build_kernels([("k", g)], cache_dir=str(tmp_path), cc="no-such-cc-xyz")
    assert e.value.code == -1 and "install a C compiler (e.g. apt-get install gcc)" in str(e.value)
    with pytest.raises(ConverterError):
        find_cc("no-such-cc-xyz")


@pytest.mark.needs_cc
def test_link_error_is_reported():
    with pytest.raises(ConverterError) as e:
        link_shared([b"not an object file"], openmp=False)
    assert "linking native kernels" in str(e.value)


@pytest.mark.needs_cc
def test_single_threaded_bundles_do_not_need_libgomp(tmp_path):
    g = make_graph("k", [(F32, (300, 300))], lambda b, x: x + 1.0)
    serial = build_kernels([("k", g)], cache_dir=str(tmp_path), num_threads_hint=1)
    assert b"libgomp" not in serial.sections["native/lib.so"]
    threaded = build_kernels([("k", g)], cache_dir=str(tmp_path), num_threads_hint=2)
    # parallel kernels use the thread pool of codegen/threadpool.py (pthreads), not libgomp
    assert threaded.specs["k"].parallel and b"cl_pool_parallel_for" in threaded.sections["native/lib.so"]
    assert b"libgomp" not in threaded.sections["native/lib.so"]
