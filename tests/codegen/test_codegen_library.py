"""Target resolution (graph-kernel flags cpu_arch/cpu_type/cpu_feature), optimized code for the target, and the
portability path: code built for another CPU than the host loads (directly when the host has every feature the
code may use, otherwise rebuilt from the embedded IR)."""
from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest
from codegen_testutil import F32, make_graph

from converter_lite import toolchain
from converter_lite.codegen import build_kernels, kernel_assembly
from converter_lite.codegen.library import normalize_features, resolve_target
from converter_lite.errors import ConverterError
from converter_lite.runtime.native import (
    NativeLibrary,
    host_cpu_flags,
    missing_features,
)

pytestmark = pytest.mark.needs_cc


def _chain():
    return make_graph("chain", [(F32, (64, 1000))], lambda b, x: b.op("Tanh", x * 0.5 + 0.1) * 2.0)


def test_host_target_records_its_features():
    t = resolve_target(None)
    assert t.cpu and t.required and "+" in t.features
    assert missing_features(t.fingerprint()) == []


def test_named_cpu_and_feature_flags():
    t = resolve_target({"cpu_type": "x86-64", "cpu_feature": "avx2, -avx512f"})
    assert t.cpu == "x86-64" and t.features == "+avx2,-avx512f"
    assert "avx2" in t.required and "avx512f" not in t.required
    assert normalize_features("+fma;sse4.2") == ["+fma", "+sse4.2"]
    with pytest.raises(ConverterError) as e:
        resolve_target({"cpu_arch": "riscv64"})
    assert e.value.code == -600 and "cross-compiling" in str(e.value)
    # a CPU the C compiler cannot describe: the features it needs are unknown, so loaders rebuild from the IR
    assert resolve_target({"cpu_type": "no-such-cpu-9000"}).required is None


def test_hot_loops_are_vectorized_without_libm_calls():
    ir_text, asm = kernel_assembly(_chain(), num_threads_hint=1)
    assert 'define void @"cl_kernel"(i8**' in ir_text
    assert not re.search(r"call\s+\w*(tanh|exp)", asm)
    assert re.search(r"%[xyz]mm\d+", asm) and re.search(r"v\w+ps\s", asm)        # packed single precision
    if "avx512f" in host_cpu_flags():
        assert "zmm" in asm


def test_generic_x86_64_code_uses_no_avx():
    _, asm = kernel_assembly(_chain(), target={"cpu_type": "x86-64"})
    assert "ymm" not in asm and "zmm" not in asm and "vfmadd" not in asm


def _run(lib: NativeLibrary, x: np.ndarray) -> np.ndarray:
    y = np.empty_like(x)
    lib.kernel("chain")([x], [y])
    y2 = np.empty_like(x)
    lib.kernel("chain", num_threads=2)([x], [y2])          # the libgomp team works in every loading mode
    np.testing.assert_array_equal(y, y2)
    return y


def test_portability_generic_cpu_loads_directly(tmp_path, rng):
    bundle = build_kernels([("chain", _chain())], target={"cpu_type": "x86-64"}, cache_dir=str(tmp_path))
    meta = json.loads(bundle.sections["native/target.json"])
    assert meta["cpu"] == "x86-64" and meta["required_features"] == []
    lib = NativeLibrary.from_sections(bundle.sections)
    assert not lib.rebuilt
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    np.testing.assert_allclose(_run(lib, x), np.tanh(x * 0.5 + 0.1) * 2, rtol=1e-6, atol=1e-6)


def _foreign_cpu() -> str | None:
    """A CPU LLVM and cc know whose features this host lacks (AVX-512 FP16/AMX, or AVX-512 on older hosts)."""
    flags = host_cpu_flags()
    for cpu in ("sapphirerapids", "graniterapids", "skylake-avx512", "znver4"):
        try:
            t = resolve_target({"cpu_type": cpu})
        except ConverterError:
            continue
        if t.required and missing_features(t.fingerprint(), flags):
            return cpu
    return None


def test_portability_foreign_cpu_is_rebuilt_for_the_host(tmp_path, rng, caplog):
    cpu = _foreign_cpu()
    if cpu is None:
        pytest.skip("no known CPU has features this host lacks")
    bundle = build_kernels([("chain", _chain())], target={"cpu_type": cpu}, cache_dir=str(tmp_path))
    meta = json.loads(bundle.sections["native/target.json"])
    assert missing_features(meta), meta["required_features"]
    with caplog.at_level(logging.WARNING, logger="converter_lite.native"):
        lib = NativeLibrary.from_sections(bundle.sections, jit=toolchain.jit)
        NativeLibrary.from_sections(bundle.sections, jit=toolchain.jit)                # warned once per process
    assert lib.rebuilt
    assert sum("rebuilt for this host" in r.message for r in caplog.records) == 1
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    np.testing.assert_allclose(_run(lib, x), np.tanh(x * 0.5 + 0.1) * 2, rtol=1e-6, atol=1e-6)


def test_untrusted_native_code_is_rebuilt_from_ir(tmp_path, rng):
    bundle = build_kernels([("chain", _chain())], cache_dir=str(tmp_path))
    lib = NativeLibrary.from_sections(bundle.sections, trust_native_code=False, jit=toolchain.jit)
    assert lib.rebuilt
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    np.testing.assert_allclose(_run(lib, x), np.tanh(x * 0.5 + 0.1) * 2, rtol=1e-6, atol=1e-6)
