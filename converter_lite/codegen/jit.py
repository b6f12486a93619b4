"""Rebuilding a bundle's kernels for this host in memory (MCJIT), when its recorded CPU features are missing
here or the shipped shared object must not be loaded.  No C compiler is involved.

``jit_library(ll_text, drivers)`` re-targets the embedded IR to the host CPU, links in the hand-written
drivers the model names (re-emitted by their emitters: ``drivers`` maps symbol -> emitter, from
kernels/registry.py; the ``.ms`` does not carry their IR), optimizes it and returns a JitLibrary whose
``address(symbol)`` gives the entry point of each kernel and driver.  The thread pool is in the IR
(threadpool.py); libgomp is still loaded first for models converted before the pool, whose IR calls GOMP_parallel.
The engine must stay alive as long as the process may call the kernels (pool workers run its code), which the
loader's per-process cache guarantees.
"""
from __future__ import annotations

import ctypes.util
from collections.abc import Callable, Mapping

import llvmlite.binding as llvm

from ..errors import RET_ERROR, ConverterError
from .build import driver_ir
from .library import KernelLibrary, resolve_target


class JitLibrary:
    def __init__(self, engine: llvm.ExecutionEngine, module: llvm.ModuleRef):
        self._engine = engine                      # keeps the code alive
        self._module = module

    def address(self, symbol: str) -> int:
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise ConverterError(RET_ERROR, f"native kernel symbol {symbol!r} is not in the rebuilt code")
        return addr


def _load_gomp() -> None:
    path = ctypes.util.find_library("gomp")
    if path:
        llvm.load_library_permanently(path)


def jit_library(ll_text: str, drivers: Mapping[str, Callable] | None = None) -> JitLibrary:
    host = resolve_target(None)
    lib = KernelLibrary(host)
    try:
        mod = lib.parse(ll_text)
    except RuntimeError as e:
        raise ConverterError(RET_ERROR, f"the embedded kernel IR does not parse: {e}") from None
    for symbol, emit in sorted((drivers or {}).items()):
        if _defines(mod, symbol):
            continue
        mod.link_in(lib.parse(driver_ir(symbol, emit, host.triple, host.usable)))
    lib.optimize(mod)
    _load_gomp()
    tm = llvm.Target.from_triple(host.triple).create_target_machine(
        cpu=host.cpu, features=host.features, opt=3, jit=True)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return JitLibrary(engine, mod)


def _defines(mod: llvm.ModuleRef, symbol: str) -> bool:
    """Whether ``mod`` already defines ``symbol`` (IR of models converted before drivers were re-emitted)."""
    try:
        return not mod.get_function(symbol).is_declaration
    except NameError:
        return False
