"""KernelLibrary: LLVM IR text -> optimized native object for one target (llvmlite.binding only).

Lifecycle per module: parse -> verify -> set triple/data layout -> optimize (the O3 pipeline with the loop and
SLP vectorizers, tuned for the target machine) -> emit an ELF object (reloc=pic, so it can go into a .so).

The target (``resolve_target``) comes from the graph-kernel flags ``cpu_arch``/``cpu_type``/``cpu_feature``;
empty means the host CPU with all its features.  ``TargetSpec.required`` lists the CPU features the code may
use, recorded in native/target.json so a loader can tell whether its host can run the code:
* host target: the host's enabled features;
* a named CPU: the features the C compiler enables for ``-march=<cpu>`` (read from its predefined macros), or
  the x86-64 micro-architecture levels table; ``None`` (unknown) makes the loader rebuild from the IR.
"""
from __future__ import annotations

import functools
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import llvmlite
import llvmlite.binding as llvm

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError

log = logging.getLogger("converter_lite.codegen")
_stderr_lock = threading.Lock()


@contextmanager
def quiet_llvm():
    """LLVM prints optimization remarks (``remark/warning: loop not vectorized`` for a loop whose vectorization
    hint it could not honour) straight to file descriptor 2, which a conversion's user would see as noise: while
    the optimizer runs, fd 2 goes to a temporary file whose text is logged at debug level instead."""
    with _stderr_lock, tempfile.TemporaryFile(mode="w+b") as tmp:
        try:
            saved = os.dup(2)
        except OSError:                 # no stderr at all: nothing to protect
            yield
            return
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace").strip()
            if text:
                log.debug("LLVM: %s", text)


@dataclass(frozen=True)
class TargetSpec:
    triple: str
    cpu: str
    features: str                                  # the LLVM feature string handed to the target machine
    required: tuple[str, ...] | None               # features the code may use (None: unknown)

    def fingerprint(self) -> dict:
        return {"triple": self.triple, "cpu": self.cpu, "features": self.features,
                "required_features": None if self.required is None else list(self.required),
                "llvmlite": llvmlite.__version__, "llvm": ".".join(map(str, llvm.llvm_version_info))}

    @property
    def usable(self) -> frozenset[str]:
        """The CPU features generated code may rely on (empty when unknown)."""
        return frozenset(self.required or ())


@functools.cache
def _init_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


_ARCH_ALIASES = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64",
                 "aarch64": "aarch64", "arm64": "aarch64", "armv8": "aarch64"}

# x86-64 micro-architecture levels (psABI), the fallback when the C compiler cannot describe a CPU
_X86_LEVELS = {
    "x86-64": (),
    "x86-64-v2": ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf"),
    "x86-64-v3": ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf", "avx", "avx2", "bmi", "bmi2",
                  "f16c", "fma", "lzcnt", "movbe", "xsave"),
}
_X86_LEVELS["x86-64-v4"] = _X86_LEVELS["x86-64-v3"] + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")

# predefined macro of `cc -march=X` -> LLVM feature name, for the features that change generated code
_CC_MACROS = {
    "__SSE3__": "sse3", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4.1", "__SSE4_2__": "sse4.2", "__AVX__": "avx",
    "__AVX2__": "avx2", "__FMA__": "fma", "__F16C__": "f16c", "__BMI__": "bmi", "__BMI2__": "bmi2",
    "__LZCNT__": "lzcnt", "__POPCNT__": "popcnt", "__MOVBE__": "movbe", "__AVX512F__": "avx512f",
    "__AVX512BW__": "avx512bw", "__AVX512CD__": "avx512cd", "__AVX512DQ__": "avx512dq", "__AVX512VL__": "avx512vl",
    "__AVX512VNNI__": "avx512vnni", "__AVX512BF16__": "avx512bf16", "__AVX512IFMA__": "avx512ifma",
    "__AVX512VBMI__": "avx512vbmi", "__AVX512VBMI2__": "avx512vbmi2", "__AVX512BITALG__": "avx512bitalg",
    "__AVX512VPOPCNTDQ__": "avx512vpopcntdq", "__AVX512FP16__": "avx512fp16", "__AVXVNNI__": "avxvnni",
    "__AMX_TILE__": "amx-tile", "__AMX_INT8__": "amx-int8", "__AMX_BF16__": "amx-bf16",
}


def host_arch() -> str:
    m = platform.machine().lower()
    return _ARCH_ALIASES.get(m, m)


def normalize_features(spec: str) -> list[str]:
    """'avx2, +fma,-avx512f' -> ['+avx2', '+fma', '-avx512f'] (MindSpore lists plain names)."""
    out = []
    for tok in spec.replace(";", ",").replace(" ", ",").split(","):
        tok = tok.strip()
        if tok:
            out.append(tok if tok[0] in "+-" else "+" + tok)
    return out


@functools.lru_cache(maxsize=64)
def cpu_implied_features(cpu: str, cc: str = "cc") -> tuple[str, ...] | None:
    """Features a named CPU implies, from the C compiler's macros for -march=<cpu>, else the levels table."""
    if cpu in _X86_LEVELS:
        return tuple(sorted(set(_X86_LEVELS[cpu])))
    exe = shutil.which(cc)
    if exe and host_arch() == "x86_64":
        try:
            res = subprocess.run([exe, f"-march={cpu}", "-dM", "-E", "-x", "c", "/dev/null"], check=False,
                                 capture_output=True,
                                 text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            res = None
        if res is not None and res.returncode == 0:
            found = {_CC_MACROS[w] for line in res.stdout.splitlines() for w in line.split()[1:2] if w in _CC_MACROS}
            return tuple(sorted(found))
    return None


def resolve_target(target: dict | None, cc: str = "cc") -> TargetSpec:
    """The code-generation target for graph-kernel flags ``cpu_arch``/``cpu_type``/``cpu_feature``."""
    _init_llvm()
    target = dict(target or {})
    arch = str(target.get("cpu_arch") or "").strip().lower()
    if arch and _ARCH_ALIASES.get(arch, arch) != host_arch():
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"cpu_arch={arch!r} differs from this machine ({host_arch()}); cross-compiling native "
                             "kernels is not supported: convert on a machine of that architecture or leave "
                             "cpu_arch empty")
    cpu = str(target.get("cpu_type") or "").strip()
    user = normalize_features(str(target.get("cpu_feature") or ""))
    triple = llvm.get_process_triple()
    if not cpu:
        host = llvm.get_host_cpu_features()
        for f in user:
            host[f[1:]] = f[0] == "+"
        feats = ",".join(("+" if on else "-") + name for name, on in sorted(host.items()))
        required = tuple(sorted(name for name, on in host.items() if on))
        return TargetSpec(triple, llvm.get_host_cpu_name(), feats, required)
    try:
        llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=",".join(user))
    except RuntimeError as e:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"cpu_type={cpu!r} is not a CPU LLVM knows: {e}") from None
    implied = cpu_implied_features(cpu, cc)
    required = None
    if implied is not None:
        req = set(implied) | {f[1:] for f in user if f[0] == "+"}
        req -= {f[1:] for f in user if f[0] == "-"}
        required = tuple(sorted(req))
    return TargetSpec(triple, cpu, ",".join(user), required)


class KernelLibrary:
    """Compiles IR modules for one TargetSpec."""

    def __init__(self, target: TargetSpec, opt: int = 3):
        _init_llvm()
        self.target = target
        self.opt = opt
        self.tm = llvm.Target.from_triple(target.triple).create_target_machine(
            cpu=target.cpu, features=target.features, opt=opt, reloc="pic", codemodel="default")

    @property
    def data_layout(self) -> str:
        return str(self.tm.target_data)

    def parse(self, ir_text: str) -> llvm.ModuleRef:
        mod = llvm.parse_assembly(ir_text)
        mod.triple = self.target.triple
        mod.data_layout = self.data_layout
        mod.verify()
        return mod

    def optimize(self, mod: llvm.ModuleRef) -> None:
        pto = llvm.create_pipeline_tuning_options(speed_level=self.opt)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(self.tm, pto)
        with quiet_llvm():
            pb.getModulePassManager().run(mod, pb)

    def compile(self, ir_text: str) -> bytes:
        """IR text -> optimized ELF object bytes."""
        mod = self.parse(ir_text)
        self.optimize(mod)
        with quiet_llvm():
            return self.tm.emit_object(mod)

    def assembly(self, ir_text: str) -> str:
        mod = self.parse(ir_text)
        self.optimize(mod)
        with quiet_llvm():
            return self.tm.emit_assembly(mod)
