"""Native code generation for fused kernels (the only package that imports llvmlite).

    bundle = build_kernels([(name, subgraph), ...], target={"cpu_type": ...}, cache_dir=...)
    bundle.sections  # {"native/lib.so": ..., "native/kernels.ll": ..., "native/target.json": ...}

Layers: types/loops/mathfn/scalar/index/reduce/lower/abi build IR with llvmlite.ir; library (optimize, emit),
link (cc -shared), cache (content-hash cache), build (the driver), jit (in-memory rebuild for a loader);
threadpool, internal and vector are the toolkit the hand-written drivers (converter_lite/kernels/*/emit.py) use.
codegen imports no driver: the converter hands ``build_kernels`` the emitters of the drivers a model needs.
"""
from .build import (
    PARALLEL_THRESHOLD,
    SECTION_LL,
    SECTION_SO,
    SECTION_TARGET,
    NativeBundle,
    build_kernels,
    kernel_assembly,
)
from .errors import UnsupportedOpError
from .index import INDEX_MAPS
from .lower import check_supported
from .reduce import REDUCE_OPS, REDUCERS
from .scalar import SCALAR_EMITTERS


def supported_ops() -> frozenset[str]:
    """Every op type a fused kernel may contain."""
    return frozenset(SCALAR_EMITTERS) | frozenset(INDEX_MAPS) | REDUCE_OPS


def unsupported_reason(graph, name: str = "") -> str | None:
    """None if ``graph`` can be compiled, else the reason (naming the op)."""
    try:
        check_supported(graph, name)
    except UnsupportedOpError as e:
        return e.message
    return None


__all__ = [
    "INDEX_MAPS",
    "PARALLEL_THRESHOLD",
    "REDUCERS",
    "SCALAR_EMITTERS",
    "SECTION_LL",
    "SECTION_SO",
    "SECTION_TARGET",
    "NativeBundle",
    "UnsupportedOpError",
    "build_kernels",
    "check_supported",
    "kernel_assembly",
    "supported_ops",
    "unsupported_reason",
]
