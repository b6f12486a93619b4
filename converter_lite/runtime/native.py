"""NativeLibrary: loads the native kernels of a model (numpy + ctypes only; llvmlite only to rebuild).

    lib = NativeLibrary.from_sections(sections)           # sections of a NativeBundle / the .ms file
    fn = lib.kernel("fused_0")
    fn([x, y], [out])                                      # inputs, outputs: numpy arrays

Loading:
1. native/target.json is checked against this host: same architecture, and every CPU feature the code may use
   (``required_features``) present in /proc/cpuinfo.  If not (or ``trust_native_code=False``), the kernels are
   rebuilt for this host from native/kernels.ll in memory by the ``jit`` callable the caller hands in
   (toolchain.jit, which ``converter_lite.load`` passes: the runtime imports no code generator), with the
   drivers the model lists re-emitted; a warning says so once per process.
2. Otherwise native/lib.so is written to an anonymous memory file (memfd; a private temp file elsewhere) and
   dlopen'ed once per process per content hash.
   A driver that cannot be rebuilt without a feature (``REQUIRED_FEATURES`` of its kernels/*/abi.py: the bf16
   GEMM of ``--bf16=on`` needs avx512bf16) makes a host lacking it refuse the model, naming the feature
   (``_refuse_drivers``), instead of rebuilding.
A .so that fails to load, a missing symbol or an argument of the wrong dtype/shape raises ConverterError; a
kernel is never called with buffers it was not compiled for.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import logging
import math
import os
import platform
import tempfile
import threading
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import RET_ERROR, ConverterError
from ..kernels.native_call import data_address
from ..kernels.runlist.bind import tag
from ..ops.graph_kernel import column_facts

log = logging.getLogger("converter_lite.native")

SECTION_SO = "native/lib.so"
SECTION_LL = "native/kernels.ll.z"     # zlib-compressed LLVM IR
SECTION_LL_PLAIN = "native/kernels.ll"  # the same, uncompressed (files written before it was compressed)
SECTION_TARGET = "native/target.json"

_KERNEL_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64)
_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
# LLVM feature name -> /proc/cpuinfo flag, where they differ (others are compared as they are)
_CPUINFO_NAME = {"sse3": "pni", "bmi": "bmi1", "prfchw": "3dnowprefetch", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "pclmul": "pclmulqdq", "lzcnt": "abm",
                 "sha": "sha_ni", "rdrnd": "rdrand", "cx16": "cx16", "sahf": "lahf_lm", "amx-tile": "amx_tile",
                 "amx-int8": "amx_int8", "amx-bf16": "amx_bf16", "avxvnni": "avx_vnni", "avx512fp16": "avx512_fp16",
                 "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16", "avx512vbmi2": "avx512_vbmi2",
                 "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq"}
# the features whose absence would make code fault (vector ISA and instructions LLVM emits for our kernels)
_CHECKED = {"sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "popcnt",
            "movbe", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512vnni", "avx512bf16",
            "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "avx512fp16",
            "avxvnni", "amx-tile", "amx-int8", "amx-bf16", "fma4", "xop", "sse4a",
            "sve", "sve2", "neon", "fp-armv8", "dotprod", "fullfp16", "i8mm", "bf16"}
_AARCH64_NAME = {"neon": "asimd", "fp-armv8": "fp", "dotprod": "asimddp", "fullfp16": "fphp", "bf16": "bf16"}

_loaded: dict[str, object] = {}            # content hash -> CDLL / JitLibrary, once per process
_lock = threading.Lock()
_warned: set[str] = set()


@functools.cache
def host_cpu_flags() -> frozenset[str]:
    """CPU flags of this host from /proc/cpuinfo (empty if unreadable); read once per process."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(val.split())
    except OSError:
        pass
    return frozenset()


def wide_vectors(library) -> bool:
    """Whether the support drivers may use their 32-register tiles: AVX-512 in the library's code (or code
    rebuilt for this host) and on this CPU; else their 16-register tiles."""
    # (asked per convolution and GEMM of every plan: no set of the features built per call)
    return "avx512f" in host_cpu_flags() and ("avx512f" in (library.meta.get("required_features") or ())
                                              or bool(library.rebuilt))


def missing_features(meta: dict, flags: set[str] | None = None) -> list[str] | None:
    """The recorded CPU features this host lacks ([] = compatible); None if compatibility is unknown."""
    arch = _ARCH.get(platform.machine().lower(), platform.machine().lower())
    triple_arch = str(meta.get("triple", "")).split("-")[0]
    if _ARCH.get(triple_arch, triple_arch) != arch:
        return [f"architecture {triple_arch}"]
    required = meta.get("required_features")
    if required is None:
        return None
    flags = host_cpu_flags() if flags is None else flags
    if not flags:
        return None
    table = _AARCH64_NAME if arch == "aarch64" else _CPUINFO_NAME
    return [f for f in required if f in _CHECKED and table.get(f, f) not in flags and f not in flags]


def _refuse_drivers(meta: dict, missing: list[str] | None) -> None:
    """Raises naming the features when the model's drivers need CPU features this host lacks (the drivers'
    ``REQUIRED_FEATURES``), which no rebuild can do without."""
    if not missing:
        return
    from ..kernels.registry import BY_SYMBOL
    for symbol in meta.get("support", ()):
        driver = BY_SYMBOL.get(symbol)
        need = [f for f in getattr(driver.abi, "REQUIRED_FEATURES", ()) if f in missing] if driver else []
        if need:
            names = ", ".join(f"{f} (/proc/cpuinfo: {_CPUINFO_NAME.get(f, f)})" for f in need)
            raise ConverterError(RET_ERROR, f"this model's native driver {symbol} ({driver.name}) needs the CPU "
                                            f"feature {names}, which this host lacks: the model was converted with "
                                            "--bf16=on for a CPU with AVX-512 BF16; convert it again without "
                                            "--bf16 to run it here")


def kernel_ir(sections) -> bytes | None:
    """The model's kernel IR (LLVM text), or None when it has none."""
    if SECTION_LL in sections:
        try:
            return zlib.decompress(bytes(sections[SECTION_LL]))
        except zlib.error:
            raise ConverterError(RET_ERROR, f"{SECTION_LL} is corrupted (not zlib data)") from None
    return bytes(sections[SECTION_LL_PLAIN]) if SECTION_LL_PLAIN in sections else None


class UnknownKernelError(ConverterError, KeyError):
    """The model's native code has no kernel of that name (it stays interpreted); also a KeyError."""

    def __init__(self, message: str):
        ConverterError.__init__(self, RET_ERROR, message)


class NativeKernel:
    """A callable native kernel: ``fn(inputs, outputs)`` checks the buffers and calls the code."""

    __slots__ = ("_argv_t", "_col_groups", "_col_src", "_cols", "_entry", "_fn", "_in_checks", "_in_specs",
                 "_keep", "_last", "_num_threads", "_out_checks", "_out_specs", "_ranks", "_rows", "name", "spec")

    def __init__(self, name: str, spec: dict, fn: Callable, num_threads: int, keep: object):
        self.name = name
        self.spec = spec
        self._fn = fn
        self._entry = ctypes.cast(fn, ctypes.c_void_p).value    # (the run list's record of a bound call)
        self._num_threads = num_threads
        self._in_specs = [(np.dtype(a["dtype"]), tuple(a["shape"])) for a in spec["inputs"]]
        self._out_specs = [(np.dtype(a["dtype"]), tuple(a["shape"])) for a in spec["outputs"]]
        self._rows = int(spec.get("rows") or 0)           # a row kernel (codegen/rows.py): R is the last arg
        self._cols = int(spec.get("cols") or 0)           # a column kernel (codegen/columns.py): its shape is
        extra = 1 if self._rows or self._cols else 0      # the last arg
        self._argv_t = ctypes.c_void_p * (len(self._in_specs) + len(self._out_specs) + extra)
        pats = [s for _, s in [*self._in_specs, *self._out_specs]]     # a column kernel's patterns
        self._ranks = [len(p) for p in pats]
        # per argument (``_check``): (dtype, shape or None when only the dtype is checked there): every argument
        # of a column kernel, the row arguments of a row kernel (any leading dims holding R rows of the static
        # tail, checked by ``_extra``)
        self._in_checks, self._out_checks = ([(dt, None if self._cols or (self._rows and shape and
                                                                          shape[0] == self._rows) else shape)
                                              for dt, shape in specs] for specs in (self._in_specs, self._out_specs))
        # a column kernel's iteration shape, per axis: the first input not broadcasting along it (-1: none, 1),
        # and the arguments grouped by the axes they broadcast along (one shape to compare per group): what
        # ``column_extents`` and a per-argument comparison would find, with the patterns' work done once
        self._col_src, self._col_groups = column_facts([p for _, p in self._in_specs], pats,
                                                           self._cols)
        self._keep = keep                                  # the library stays loaded while kernels exist
        self._last: tuple = ((), None, None)               # (arrays, argv, what argv points into) of the last call

    @property
    def parallel(self) -> bool:
        return bool(self.spec.get("parallel"))

    def _check(self, arrays: Sequence[np.ndarray], checks: list, what: str, writable: bool) -> list[np.ndarray]:
        """``arrays`` checked against ``checks`` (``_in_checks``/``_out_checks``); an input that is not
        C-contiguous is replaced by a contiguous copy."""
        if len(arrays) != len(checks):
            raise ConverterError(RET_ERROR, f"kernel {self.name}: expected {len(checks)} {what}, got {len(arrays)}")
        out = []
        for a, (dt, shape) in zip(arrays, checks):
            if type(a) is not np.ndarray:
                a = np.asarray(a)
            if a.dtype != dt or (shape is not None and a.shape != shape):
                k = len(out)
                if shape is None:
                    raise ConverterError(RET_ERROR, f"kernel {self.name}: {what} {k} must be {dt}, got {a.dtype}")
                raise ConverterError(RET_ERROR, f"kernel {self.name}: {what} {k} must be {dt}{list(shape)}, "
                                                f"got {a.dtype}{list(a.shape)}")
            flags = a.flags
            if writable:
                if not (flags.c_contiguous and flags.writeable):
                    raise ConverterError(RET_ERROR, f"kernel {self.name}: output {len(out)} must be a writable "
                                                    "C-contiguous array")
            elif not flags.c_contiguous:
                a = np.ascontiguousarray(a)
            out.append(a)
        return out

    def _extra(self, ins: list, outs: list) -> tuple[tuple, object]:
        """(the argument words after the buffers, what they point into): none for a kernel of static shapes; R
        for a row kernel (every row argument checked to hold R rows); a pointer to the iteration shape for a
        column kernel (every argument checked to broadcast to it as its pattern says)."""
        if self._cols:
            arrays = [*ins, *outs]
            if [a.ndim for a in arrays] != self._ranks:
                raise ConverterError(RET_ERROR, f"kernel {self.name}: arguments must have rank {self._cols}")
            ext = [1 if i < 0 else ins[i].shape[j] for j, i in enumerate(self._col_src)]
            for mask, members in self._col_groups:
                w = tuple([e if m else 1 for m, e in zip(mask, ext)])
                for k in members:
                    if arrays[k].shape != w:
                        pat = [*self._in_specs, *self._out_specs][k][1]
                        raise ConverterError(RET_ERROR, f"kernel {self.name}: argument {k} {list(arrays[k].shape)} "
                                                        f"does not broadcast to {ext} as {list(pat)}")
            dims = np.array(ext, np.int64)
            return (data_address(dims),), dims
        if not self._rows:
            return (), None
        rows = None
        for k, (a, (_, shape)) in enumerate(zip([*outs, *ins], [*self._out_specs, *self._in_specs])):
            if not shape or shape[0] != self._rows:
                continue
            tail = math.prod(shape[1:])
            if rows is None and tail:
                rows = a.size // tail
            if tail * (rows or 0) != a.size:
                raise ConverterError(RET_ERROR, f"kernel {self.name}: argument {k} {list(a.shape)} is not {rows} "
                                                f"rows of {list(shape[1:])}")
        return (rows or 0,), None

    def __call__(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
                 num_threads: int | None = None) -> None:
        nt = self._num_threads if num_threads is None else num_threads
        arrays, argv, _ = self._last
        # the same (already checked) array objects as last time: reuse their pointers.  ``_last`` holds them,
        # so their memory cannot have been freed or reused meanwhile.
        if len(arrays) == len(inputs) + len(outputs) and all(
                a is b for a, b in zip(arrays, (*inputs, *outputs))):
            self._fn(argv, nt)
            return
        ins = self._check(inputs, self._in_checks, "inputs", False)
        outs = self._check(outputs, self._out_checks, "outputs", True)
        words, held = self._extra(ins, outs)
        argv = self._argv_t(*map(data_address, ins), *map(data_address, outs), *words)
        same = all(a is b for a, b in zip(ins, inputs))   # no input had to be copied to be contiguous
        self._last = ((*inputs, *outputs), argv, held) if same else ((), None, None)
        self._fn(argv, nt)

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> Callable[[], None]:
        """A zero-argument callable running the kernel on these (checked, kept alive) buffers: the fastest
        way to call a kernel repeatedly on preallocated memory."""
        ins = self._check(inputs, self._in_checks, "inputs", False)
        outs = self._check(outputs, self._out_checks, "outputs", True)
        words, held = self._extra(ins, outs)
        argv = self._argv_t(*map(data_address, ins), *map(data_address, outs), *words)
        fn, nt, keep = self._fn, self._num_threads if num_threads is None else num_threads, (ins, outs, held)

        def run() -> None:
            fn(argv, nt)
        run.buffers = keep                                  # type: ignore[attr-defined]
        if all(a is b for a, b in zip(ins, inputs)):
            # the argument words (inputs, then outputs), which a caller may point at other arrays of the same
            # dtype, shape and layout between calls (plan.Executor's zero-copy I/O); the records of a merged
            # run of native steps read them from here too
            run.io_argv = argv                              # type: ignore[attr-defined]
        return tag(run, self._entry, 2, ctypes.addressof(argv), nt)


class NativeLibrary:
    """The native kernels of one model (see the module docstring)."""

    def __init__(self, meta: dict, resolve: Callable[[str], int], handle: object, rebuilt: bool,
                 num_threads: int):
        self.meta = meta
        self.rebuilt = rebuilt
        self.num_threads = num_threads
        self._resolve = resolve
        self._handle = handle
        self._specs = {k["name"]: k for k in meta.get("kernels", [])}
        self._support: dict[str, int | None] = {}      # driver symbol -> address (``support``)

    @property
    def kernel_names(self) -> list[str]:
        return list(self._specs)

    def __contains__(self, name: str) -> bool:
        return name in self._specs

    def set_num_threads(self, num_threads: int) -> None:
        """Threads used by kernels obtained from now on (kernels compiled single-threaded ignore it)."""
        self.num_threads = max(1, int(num_threads))

    @classmethod
    def from_sections(cls, sections: dict[str, bytes], trust_native_code: bool = True,
                      num_threads: int = 1, jit: Callable | None = None) -> NativeLibrary:
        try:
            meta = json.loads(sections[SECTION_TARGET])
        except KeyError:
            raise ConverterError(RET_ERROR, f"the model has no {SECTION_TARGET} section") from None
        except ValueError as e:
            raise ConverterError(RET_ERROR, f"{SECTION_TARGET} is not valid JSON: {e}") from None
        missing = missing_features(meta)
        _refuse_drivers(meta, missing)
        reason = None
        if not trust_native_code:
            reason = "trust_native_code=False"
        elif missing is None:
            reason = "the CPU features the code needs are unknown"
        elif missing:
            reason = "this CPU lacks " + ", ".join(missing)
        if reason is None and SECTION_SO in sections:
            handle = _dlopen(sections[SECTION_SO], meta.get("so_sha256"))
            return cls(meta, lambda sym: _dlsym(handle, sym), handle, False, num_threads)
        ll = kernel_ir(sections)
        if ll is None:
            raise ConverterError(RET_ERROR, f"native code cannot run here ({reason or 'no shared object'}) and "
                                            f"the model has no {SECTION_LL} to rebuild it from")
        drivers = list(meta.get("support", ()))
        key = "jit:" + hashlib.sha256(bytes(ll) + json.dumps(drivers).encode()).hexdigest()   # IR + re-emitted drivers
        if key not in _warned:
            _warned.add(key)
            log.warning("native kernels compiled for %s (%s) are rebuilt for this host: %s",
                        meta.get("cpu"), meta.get("triple"), reason or "no shared object")
        with _lock:
            built = _loaded.get(key)
            if built is None:
                if jit is None:
                    raise ConverterError(RET_ERROR, f"native code cannot run here ({reason or 'no shared object'}) "
                                                    "and rebuilding it needs the code generator: load the model "
                                                    "with converter_lite.load (it hands the runtime one)")
                built = _loaded[key] = jit(bytes(ll).decode(), drivers)
        return cls(meta, built.address, built, True, num_threads)

    def support(self, symbol: str) -> int | None:
        """Address of the native driver ``symbol`` (kernels/), or None when the model's native
        code does not carry it (models converted before it existed).  Looked up once per symbol: a plan asks it
        for every convolution, GEMM and pool it binds."""
        try:
            return self._support[symbol]
        except KeyError:
            pass
        address = None
        if symbol in self.meta.get("support", ()):
            try:
                address = int(self._resolve(symbol))
            except (KeyError, AttributeError, OSError):
                pass
        self._support[symbol] = address
        return address

    def kernel(self, name: str, num_threads: int | None = None) -> NativeKernel:
        spec = self._specs.get(name)
        if spec is None:
            raise UnknownKernelError(f"native kernel {name!r} is not in the model's native code "
                                     f"(it has {len(self._specs)} kernels)")
        addr = self._resolve(spec["symbol"])
        fn = _KERNEL_FN(addr)
        return NativeKernel(name, spec, fn, self.num_threads if num_threads is None else num_threads, self._handle)


def check_elf(data: bytes) -> None:
    """Rejects a shared object whose ELF headers point outside the file: dlopen would map past its end and
    die of SIGBUS instead of failing."""
    import struct

    def bad(why: str) -> ConverterError:
        return ConverterError(RET_ERROR, f"the model's native code (native/lib.so) failed to load: {why}")

    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise bad("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise bad("not a 64-bit little-endian ELF file")
    e_type, = struct.unpack_from("<H", data, 16)
    if e_type != 3:
        raise bad("not a shared object")
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
    if phentsize < 56 or phoff + phnum * phentsize > len(data) or shoff + shnum * shentsize > len(data):
        raise bad("truncated (headers beyond the end of the file)")
    for k in range(phnum):
        p_type, _flags, p_offset, _vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + k * phentsize)
        if p_type in (1, 2, 3, 4) and p_offset + p_filesz > len(data):      # LOAD, DYNAMIC, INTERP, NOTE
            raise bad("truncated (a segment lies beyond the end of the file)")


def _dlopen(data: bytes, sha256: str | None = None) -> ctypes.CDLL:
    key = hashlib.sha256(data).hexdigest()
    if sha256 is not None and sha256 != key:
        raise ConverterError(RET_ERROR, "the model's native code (native/lib.so) failed to load: it is corrupted "
                                        "(checksum mismatch with native/target.json)")
    check_elf(data)
    with _lock:
        lib = _loaded.get(key)
        if lib is not None:
            return lib                                     # type: ignore[return-value]
        path, fd = _write_private(data, key)
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as e:
            raise ConverterError(RET_ERROR, f"the model's native code (native/lib.so) failed to load: {e}") from None
        finally:
            if fd is None:
                os.unlink(path)                            # the mapping stays valid after unlinking
        _loaded[key] = lib
        _loaded["fd:" + key] = fd                          # a memfd must stay open while mapped
        return lib


def _write_private(data: bytes, key: str) -> tuple[str, int | None]:
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create(f"cl_kernels_{key[:12]}", 0)
            _write_all(fd, data)
            return f"/proc/self/fd/{fd}", fd
        except OSError:
            pass
    fd, path = tempfile.mkstemp(prefix="cl_kernels_", suffix=".so")
    _write_all(fd, data)
    os.close(fd)
    return path, None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    os.lseek(fd, 0, os.SEEK_SET)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _dlsym(lib: ctypes.CDLL, symbol: str) -> int:
    try:
        return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
    except AttributeError:
        raise ConverterError(RET_ERROR, f"native kernel symbol {symbol!r} is missing from the model's "
                                        "shared object") from None
