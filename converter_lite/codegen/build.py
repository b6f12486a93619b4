"""build_kernels: fused sub-graphs -> one shared object plus its IR and target fingerprint (a NativeBundle).

1. Each kernel is lowered (abi.lower_kernel) under a placeholder name; the IR text, with the target triple,
   CPU, features and tool versions, is hashed.  The hash names the kernel's function (``clk_<hash>``), so
   identical kernels (same sub-graph, shapes, dtypes, target) are compiled once per model and found again in
   the on-disk cache (cache.py) by later conversions.
2. A small module exports each kernel's symbol (abi.symbol_for) as a tail call to its function.
3. The hand-written drivers the caller names (``drivers``: symbol -> emitter, kernels/registry.py; the
   converter passes those its graph's nodes recorded) are each compiled into an object of their own, cached by
   their sources, and so is the thread pool (threadpool.py).
4. The objects are linked with ``cc -shared`` (link.py).  The whole bundle is cached too, keyed by the kernel
   hashes and the drivers, so converting the same model again skips compiling and linking.

Sections of the bundle: ``native/lib.so``, ``native/kernels.ll`` (the unoptimized IR of every kernel, the
thread pool and the exports, one module: what a loader rebuilds from when its CPU lacks the recorded features;
the drivers are not in it: they are re-emitted by symbol, jit.py) and ``native/target.json`` (triple, CPU,
features, versions, the linked drivers as ``"support"``, and per kernel its symbol and argument dtypes/shapes).
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import os
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from llvmlite import ir

from ..ir.core import Graph
from .abi import KernelSpec, export_wrappers, kernel_spec, lower_kernel, symbol_for
from .cache import KernelCache, content_key, default_cache_dir
from .columns import lower_column_kernel
from .errors import UnsupportedOpError
from .library import KernelLibrary, resolve_target
from .link import link_shared
from .lower import check_supported
from .rows import lower_row_kernel
from .threadpool import emit_pool

CODEGEN_VERSION = "3"
PLACEHOLDER = "__cl_kernel__"
PARALLEL_THRESHOLD = 1 << 15       # elements of work below which a kernel stays single-threaded

SECTION_SO = "native/lib.so"
SECTION_LL = "native/kernels.ll.z"       # the kernels' LLVM IR (zlib): what a host lacking the CPU features rebuilds
SECTION_TARGET = "native/target.json"


@dataclass
class NativeBundle:
    sections: dict[str, bytes]
    specs: dict[str, KernelSpec]
    skipped: dict[str, str] = field(default_factory=dict)       # kernel name -> why it stays interpreted
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def target(self) -> dict:
        return json.loads(self.sections[SECTION_TARGET])


Emitter = Callable[[ir.Module], object]


def build_kernels(kernels: list[tuple[str, Graph]], target: dict | None = None, cache_dir: str | None = None,
                  num_threads_hint: int = 2, *, drivers: Mapping[str, Emitter] | None = None,
                  parallel_threshold: int = PARALLEL_THRESHOLD,
                  on_unsupported: str = "raise", cc: str = "cc", link: bool = True) -> NativeBundle:
    """Compiles ``kernels`` = [(name, sub-graph)] into one NativeBundle; an entry (name, sub-graph, nominal)
    (``{"rows": nominal}`` or ``{"cols": rank}``) a row or column kernel of a model with dynamic dims (rows.py,
    columns.py).

    With ``link=False`` nothing is compiled: the bundle holds the kernels' LLVM IR and target fingerprint only
    (no ``native/lib.so``), which a loader JIT-compiles in memory (``runtime.native``) — how a model whose
    shipped machine code is not trusted gets kernels regenerated from its own sub-graphs.

    Args:
        target: graph-kernel flags ``cpu_arch``/``cpu_type``/``cpu_feature``; empty = the host CPU.
        cache_dir: on-disk kernel cache; None = ``$CONVERTER_LITE_CACHE_DIR`` or ``~/.cache/converter_lite/kernels``,
            "" = no cache.  Its size is capped (``CONVERTER_LITE_CACHE_MAX_SIZE``, cache.py).
        drivers: the hand-written drivers to link, symbol -> emitter (kernels/registry.py ``emitters``).
        num_threads_hint: <= 1 compiles every kernel single-threaded (no libgomp dependency).
        parallel_threshold: kernels with less work (elements of the largest stage) stay single-threaded.
        on_unsupported: "raise" -> UnsupportedOpError naming the op; "skip" -> leave the kernel out and say
            why in ``bundle.skipped``.
    """
    t0 = time.perf_counter()
    drivers = dict(sorted((drivers or {}).items()))
    tspec = resolve_target(target, cc)
    cache = KernelCache(default_cache_dir() if cache_dir is None else (cache_dir or None))
    fingerprint = json.dumps(tspec.fingerprint(), sort_keys=True)
    texts: dict[str, str] = {}
    exports: list[tuple[str, str]] = []
    specs: dict[str, KernelSpec] = {}
    skipped: dict[str, str] = {}
    for name, graph, *rest in kernels:
        if name in specs:
            raise ValueError(f"kernel name {name!r} used twice")
        form = rest[0] if rest else {}
        try:
            check_supported(graph, name)
            if form.get("rows"):
                module, parallel = lower_row_kernel(graph, PLACEHOLDER, form["rows"], threshold=parallel_threshold,
                                                    kernel=name, features=tspec.usable), True
            elif form.get("cols"):
                module, parallel = lower_column_kernel(graph, PLACEHOLDER, threshold=parallel_threshold,
                                                       kernel=name, features=tspec.usable), True
            else:
                module, parallel = lower_kernel(graph, PLACEHOLDER, threads=num_threads_hint,
                                                threshold=parallel_threshold, kernel=name, features=tspec.usable)
        except UnsupportedOpError as e:
            if on_unsupported != "skip":
                raise
            skipped[name] = e.message
            continue
        module.triple = tspec.triple
        text = str(module)
        key = content_key(CODEGEN_VERSION, fingerprint, text)
        canon = "clk_" + key[:32]
        texts.setdefault(key, text.replace(PLACEHOLDER, canon))
        exports.append((symbol_for(name), canon))
        specs[name] = kernel_spec(name, graph, parallel, form.get("rows"), form.get("cols"))
    t_lower = time.perf_counter()
    exports_ir = str(export_wrappers(exports))
    pool_ir = _pool_ir(tspec.triple)
    if not link:
        ll = _merged_ir(KernelLibrary(tspec), list(texts.values()) + [pool_ir, exports_ir]).encode()
        meta = dict(tspec.fingerprint(), codegen_version=CODEGEN_VERSION, so_sha256=None,
                    openmp=True, support=sorted(drivers), kernels=[s.to_json() for s in specs.values()])
        return NativeBundle({SECTION_LL: zlib.compress(ll, 6), SECTION_TARGET: json.dumps(meta, indent=1).encode()}, specs, skipped,
                            {"kernels": len(specs), "unique_kernels": len(texts), "compiled": 0,
                             "total_s": time.perf_counter() - t0})
    driver_keys = {sym: content_key(CODEGEN_VERSION, fingerprint, sym, _emitter_sources(emit))
                   for sym, emit in drivers.items()}
    bundle_key = content_key(CODEGEN_VERSION, fingerprint, exports_ir, pool_ir, *sorted(texts),
                             *sorted(driver_keys.values()))
    so = cache.get(bundle_key, ".so")
    ll = cache.get(bundle_key, ".ll")
    compiled = 0
    if so is None or ll is None:
        lib = KernelLibrary(tspec)
        objects = []
        for key, text in texts.items():
            obj = cache.get(key, ".o")
            if obj is None:
                obj = lib.compile(text)
                compiled += 1
                cache.put(key, ".o", obj)
            objects.append(obj)
        for symbol, emit in drivers.items():          # model-independent: compiled once per target and source
            obj = cache.get(driver_keys[symbol], ".o")
            if obj is None:
                obj = _compile_module(tspec, driver_ir(symbol, emit, tspec.triple, tspec.usable))
                cache.put(driver_keys[symbol], ".o", obj)
            objects.append(obj)
        pool_key = content_key(CODEGEN_VERSION, fingerprint, pool_ir)
        obj = cache.get(pool_key, ".o")
        if obj is None:
            obj = _compile_module(tspec, pool_ir)
            cache.put(pool_key, ".o", obj)
        objects.append(obj)
        objects.append(lib.compile(exports_ir))
        so = link_shared(objects, openmp=True, cc=cc)
        ll = _merged_ir(lib, list(texts.values()) + [pool_ir, exports_ir]).encode()
        cache.put(bundle_key, ".so", so)
        cache.put(bundle_key, ".ll", ll)
        cache.trim()                               # the cap (cache.py): least recently used entries go
    meta = dict(tspec.fingerprint(), codegen_version=CODEGEN_VERSION, so_sha256=hashlib.sha256(so).hexdigest(),
                openmp=True, support=sorted(drivers),
                kernels=[s.to_json() for s in specs.values()])
    sections = {SECTION_SO: so, SECTION_LL: zlib.compress(ll, 6), SECTION_TARGET: json.dumps(meta, indent=1).encode()}
    t_end = time.perf_counter()
    stats = {"kernels": len(specs), "unique_kernels": len(texts), "compiled": compiled,
             "cache_hits": cache.hits, "lower_s": t_lower - t0, "total_s": t_end - t0}
    return NativeBundle(sections, specs, skipped, stats)


@functools.cache
def driver_ir(symbol: str, emit: Emitter, triple: str, features: frozenset[str] = frozenset()) -> str:
    """The IR text of one driver's module (its symbol and internal helpers; the thread pool only declared), once
    per process (emitting the convolution drivers takes about a second).  An emitter with a ``features``
    parameter is handed the target's CPU features (the int8 GEMM uses AVX-512 VNNI only where they have it)."""
    module = ir.Module(name=symbol)
    module.triple = triple
    if "features" in inspect.signature(emit).parameters:
        emit(module, features=features)
    else:
        emit(module)
    return str(module)


@functools.cache
def _pool_ir(triple: str) -> str:
    module = ir.Module(name="threadpool")
    module.triple = triple
    emit_pool(module)
    return str(module)


@functools.cache
def _emitter_sources(emit: Emitter) -> str:
    """sha256 of what an emitter's code depends on: the code generator's sources and its driver folder's."""
    h = hashlib.sha256(f"{emit.__module__}.{emit.__qualname__}".encode())
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.dirname(os.path.abspath(importlib.import_module(emit.__module__).__file__))
    for d in (here, folder):
        for name in sorted(os.listdir(d)):
            if name.endswith(".py"):
                with open(os.path.join(d, name), "rb") as f:
                    h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


@functools.lru_cache(maxsize=16)
def _compile_module(tspec, text: str) -> bytes:
    """A driver's or the thread pool's object, also kept for the process (conversions without a disk cache)."""
    return KernelLibrary(tspec).compile(text)


def _merged_ir(lib: KernelLibrary, texts: list[str]) -> str:
    """All modules linked into one (unoptimized) module's text."""
    mods = [lib.parse(t) for t in texts]
    main = mods[0]
    for m in mods[1:]:
        main.link_in(m)
    return str(main)


def kernel_assembly(graph: Graph, target: dict | None = None, name: str = "kernel", num_threads_hint: int = 2,
                    parallel_threshold: int = PARALLEL_THRESHOLD) -> tuple[str, str]:
    """(LLVM IR, optimized assembly) of one kernel, for dumps (``dump_as_text``) and inspection."""
    tspec = resolve_target(target)
    check_supported(graph, name)
    module, _ = lower_kernel(graph, symbol_for(name), threads=num_threads_hint, threshold=parallel_threshold,
                             kernel=name, features=tspec.usable)
    module.triple = tspec.triple
    text = str(module)
    return text, KernelLibrary(tspec).assembly(text)


__all__ = ["NativeBundle", "build_kernels", "kernel_assembly"]
