"""converter_lite.runtime.native: loading a bundle's shared object, calling kernels through ctypes, and the
errors for a corrupt .so, a missing symbol, unknown kernels and wrong buffers (never a crash)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from codegen_testutil import F32, I64, make_graph

from converter_lite.codegen import build_kernels
from converter_lite.errors import ConverterError
from converter_lite.runtime.native import NativeLibrary

pytestmark = pytest.mark.needs_cc


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    add = make_graph("add", [(F32, (3, 5)), (F32, (5,))], lambda b, x, y: [x + y, b.op("ReduceSum", x, keepdims=0)])
    idx = make_graph("idx", [(I64, (4,))], lambda b, x: x * 3)
    return build_kernels([("add.0/fused", add), ("idx", idx)], cache_dir=str(tmp_path_factory.mktemp("c")))


def test_load_and_call(bundle, rng):
    lib = NativeLibrary.from_sections(bundle.sections)
    assert sorted(lib.kernel_names) == ["add.0/fused", "idx"] and not lib.rebuilt
    x, y = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    out, total = np.empty((3, 5), np.float32), np.empty((), np.float32)
    k = lib.kernel("add.0/fused")
    k([x, y], [out, total])
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    np.testing.assert_allclose(total, x.sum(), rtol=1e-5)
    xt = np.asfortranarray(x)                              # non-contiguous inputs are made contiguous
    k([xt, y], [out, total])
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    x += 1                                                 # same arrays again: cached pointers, new data
    k([x, y], [out, total])
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    out2 = np.empty_like(out)
    k([x, y], [out2, total])
    np.testing.assert_allclose(out2, x + y, rtol=1e-6)
    run = k.bind([x, y], [out, total])
    out[:] = 0
    run()
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


def test_thread_count_setting(bundle, rng):
    lib = NativeLibrary.from_sections(bundle.sections)
    lib.set_num_threads(3)
    k = lib.kernel("idx")
    assert k._num_threads == 3
    out = np.empty(4, np.int64)
    k([np.arange(4, dtype=np.int64)], [out])
    assert list(out) == [0, 3, 6, 9]


def test_same_code_is_dlopened_once(bundle):
    a = NativeLibrary.from_sections(bundle.sections)
    b = NativeLibrary.from_sections(dict(bundle.sections))
    assert a._handle is b._handle


def test_wrong_buffers_raise(bundle):
    k = NativeLibrary.from_sections(bundle.sections).kernel("idx")
    good = np.arange(4, dtype=np.int64)
    with pytest.raises(ConverterError, match="inputs 0 must be int64"):
        k([good.astype(np.int32)], [np.empty(4, np.int64)])
    with pytest.raises(ConverterError, match="expected 1 outputs"):
        k([good], [])
    with pytest.raises(ConverterError, match="writable C-contiguous"):
        k([good], [np.empty(8, np.int64)[::2]])


def test_unknown_kernel_and_missing_symbol(bundle):
    lib = NativeLibrary.from_sections(bundle.sections)
    with pytest.raises(ConverterError, match="'nope' is not in"):
        lib.kernel("nope")
    with pytest.raises(KeyError):                            # callers that fall back on KeyError work too
        lib.kernel("nope")
    assert "idx" in lib and "nope" not in lib
    meta = json.loads(bundle.sections["native/target.json"])
    meta["kernels"].append(dict(meta["kernels"][0], name="ghost", symbol="cl_ghost"))
    sections = dict(bundle.sections, **{"native/target.json": json.dumps(meta).encode()})
    with pytest.raises(ConverterError, match="symbol 'cl_ghost' is missing"):
        NativeLibrary.from_sections(sections).kernel("ghost")


def test_corrupt_shared_object(bundle):
    so = bundle.sections["native/lib.so"]
    for bad in (so[: len(so) // 3], b"\x7fELF" + b"\0" * 200, b"garbage"):
        sections = dict(bundle.sections, **{"native/lib.so": bad})
        with pytest.raises(ConverterError, match="failed to load"):
            NativeLibrary.from_sections(sections)


def test_missing_sections(bundle):
    with pytest.raises(ConverterError, match="target.json"):
        NativeLibrary.from_sections({"native/lib.so": bundle.sections["native/lib.so"]})
    with pytest.raises(ConverterError, match="not valid JSON"):
        NativeLibrary.from_sections(dict(bundle.sections, **{"native/target.json": b"{"}))
