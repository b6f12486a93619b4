"""Support functions: model-independent native drivers emitted into every model's shared object.

Fused kernels are specialised per sub-graph; support functions are generic drivers the runtime calls for the
heavy non-fused ops (GEMM split across the thread pool, convolution tiles), with every size passed at run
time.  Each entry of ``SUPPORT`` maps an exported symbol to the function that emits its definition into an
``ir.Module`` (the module also holds the thread pool, pool.py, which the drivers may call).  The list of
symbols goes into the model's ``native/target.json`` (``"support"``), so a runtime finds out from the file
which drivers a model carries (older models carry none and run those ops through numpy).

``SUPPORT_OPS``: ops whose fast runtime kernels use a driver; a model containing one gets a shared object even
when it has no fused kernel.
"""
from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable

from llvmlite import ir

from .conv_depthwise import DEPTHWISE_SYMBOL, emit_conv_depthwise
from .conv_direct import DIRECT_SYMBOL, emit_conv_direct
from .conv_driver import CONV_SYMBOLS, emit_conv_f32, emit_conv_f64
from .conv_pointwise import POINTWISE_SYMBOL, emit_conv_pointwise
from .gemm_driver import GEMM_TILES_SYMBOL, emit_gemm_tiles
from .resize import RESIZE_LINEAR_SYMBOL, emit_resize_linear
from .runlist import RUN_SYMBOL, emit_runlist
from .sgemm import SGEMM_SYMBOL, emit_sgemm

SUPPORT: dict[str, Callable[[ir.Module], ir.Function]] = {
    GEMM_TILES_SYMBOL: emit_gemm_tiles, SGEMM_SYMBOL: emit_sgemm, RUN_SYMBOL: emit_runlist,
    CONV_SYMBOLS["float32"]: emit_conv_f32, CONV_SYMBOLS["float64"]: emit_conv_f64,
    DIRECT_SYMBOL: emit_conv_direct, POINTWISE_SYMBOL: emit_conv_pointwise, DEPTHWISE_SYMBOL: emit_conv_depthwise,
    RESIZE_LINEAR_SYMBOL: emit_resize_linear,
}

SUPPORT_OPS = frozenset({"MatMul", "Gemm", "Conv", "FusedMatMul", "Resize"})


def support_source_key() -> str:
    """What the support module's IR depends on: the code generator's sources and the SUPPORT table (symbols and
    emitters), so a cached copy of the IR is found without emitting it (emitting takes ~2 s)."""
    h = hashlib.sha256(_sources_digest().encode())
    for symbol, emit in sorted(SUPPORT.items()):
        h.update(f"{symbol}={emit.__module__}.{emit.__qualname__}".encode())
    return h.hexdigest()


@functools.cache
def _sources_digest() -> str:
    """sha256 of the code generator's sources (read once per process)."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


def support_module() -> ir.Module:
    """A module defining the thread pool (pool.py) and every support function: compiled once per target and
    CODEGEN_VERSION and kept in the kernel cache (build.py), since it does not depend on the model."""
    from .pool import emit_pool
    module = ir.Module(name="support")
    emit_pool(module)
    emit_support(module)
    return module


def emit_support(module: ir.Module) -> list[str]:
    """Defines every support function in ``module``; returns their symbols (sorted)."""
    for symbol in sorted(SUPPORT):
        if module.globals.get(symbol) is None:
            SUPPORT[symbol](module)
    return sorted(SUPPORT)
