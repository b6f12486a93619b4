"""Helpers for the codegen tests: build sub-graphs, random inputs with special values, compare with eval_graph."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import converter_lite.ops  # noqa: F401  (registers the op table)
from converter_lite.codegen import build_kernels
from converter_lite.ops.builder import GraphBuilder
from converter_lite.ir.core import Graph, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.ops.interpret import eval_graph
from converter_lite.runtime.native import NativeLibrary

F16, F32, F64 = DType.float16, DType.float32, DType.float64
I8, U8, I32, I64, BOOL = DType.int8, DType.uint8, DType.int32, DType.int64, DType.bool

# tolerances against the reference kernels (numpy): inline approximations are within ~2 ulp in float32
TOL = {F32: (1e-5, 1e-6), F64: (1e-12, 1e-13), F16: (2e-3, 2e-3)}


def make_graph(name: str, inputs: list[tuple[DType, tuple[int, ...]]], fn: Callable) -> Graph:
    """A sub-graph whose inputs have the given types; ``fn(b, *xs)`` returns the output(s) as BValues."""
    g = Graph(name)
    g.inputs = [Value(f"x{i}", TensorType(dt, tuple(shape))) for i, (dt, shape) in enumerate(inputs)]
    b = GraphBuilder(g, name_prefix=name)
    outs = fn(b, *[b.wrap(v) for v in g.inputs])
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    g.outputs = [getattr(o, "v", o) for o in outs]
    return g


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 1e30, -1e30, 88.0, -100.0]


def random_array(rng: np.random.Generator, dtype: DType, shape, specials: bool = True, scale: float = 3.0,
                 positive: bool = False) -> np.ndarray:
    shape = tuple(shape)
    if dtype.is_float:
        a = rng.standard_normal(shape) * scale
        if positive:
            a = np.abs(a) + 0.1
        flat = a.reshape(-1)
        if specials and flat.size >= 2 * len(SPECIALS):
            pos = rng.choice(flat.size, len(SPECIALS), replace=False)
            flat[pos] = SPECIALS
        with np.errstate(all="ignore"):
            return flat.reshape(shape).astype(dtype.np)
    if dtype is DType.bool:
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype.np)
    lo, hi = (max(info.min, -20), min(info.max, 20)) if not positive else (1, 20)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype.np)


@dataclass
class Case:
    name: str
    graph: Graph
    inputs: Callable[[np.random.Generator], list[np.ndarray]] | None = None
    rtol: float | None = None
    atol: float | None = None


def default_inputs(graph: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    return [random_array(rng, v.dtype, v.shape) for v in graph.inputs]


def build_library(cases: list[Case], cache_dir: str, num_threads: int = 2, **kw) -> NativeLibrary:
    bundle = build_kernels([(c.name, c.graph) for c in cases], cache_dir=cache_dir, num_threads_hint=num_threads,
                           **kw)
    return NativeLibrary.from_sections(bundle.sections, num_threads=num_threads)


def shared_library(tmp_path_factory, name: str, cases: list[Case], **kw) -> NativeLibrary:
    """build_library with one kernel cache for the whole test session: under pytest-xdist the first worker
    compiles a module's kernels while the others wait on a lock and then load them from the cache."""
    import fcntl
    import os

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = root / "codegen-shared-cache"
    root.mkdir(exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return build_library(cases, str(root), **kw)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_native(lib: NativeLibrary, case: Case, inputs: list[np.ndarray], num_threads: int | None = None):
    outs = [np.full(v.shape, 7, v.dtype.np) for v in case.graph.outputs]
    lib.kernel(case.name)(inputs, outs, num_threads=num_threads)
    return outs


def assert_matches(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float, what: str) -> None:
    """Equal dtype/shape; floats close with NaN where NaN and infinities exactly; others exactly equal."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind == "f":
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        assert np.array_equal(np.isnan(a), np.isnan(e)), f"{what}: NaN positions differ\n{a}\n{e}"
        inf = np.isinf(e) | np.isinf(a)
        assert np.array_equal(a[inf], e[inf]), f"{what}: infinities differ {a[inf]} vs {e[inf]}"
        ok = ~(np.isnan(e) | inf)
        np.testing.assert_allclose(a[ok], e[ok], rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check_case(lib: NativeLibrary, case: Case, rng: np.random.Generator, num_threads: int | None = None) -> None:
    inputs = case.inputs(rng) if case.inputs else default_inputs(case.graph, rng)
    with np.errstate(all="ignore"):
        expected = eval_graph(case.graph, inputs)
    actual = run_native(lib, case, inputs, num_threads)
    for k, (a, e) in enumerate(zip(actual, expected)):
        dt = case.graph.outputs[k].dtype
        rtol, atol = TOL.get(dt, (0, 0))
        assert_matches(a, e, case.rtol if case.rtol is not None else rtol,
                       case.atol if case.atol is not None else atol, f"{case.name} output {k}")
