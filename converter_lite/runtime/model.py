"""``load(path) -> Model`` and ``Model.run(feeds) -> outputs``: running a ``.ms`` file with numpy only.

The model's graph becomes a flat ``Plan`` at load time (plan.py: pre-bound steps over one pre-planned arena).
Fused kernels (``GraphKernel`` nodes) run native code when the file carries native sections (names starting
with ``native/``) and the native library provides the kernel; otherwise their sub-graphs are inlined into the
plan.  Other nodes run the runtime's fast kernels (fast/table.py) or the reference kernels of
``converter_lite.ops``.

Native hook (runtime/native.py): ``NativeLibrary.from_sections(sections)`` returns an object whose
``kernel(name)`` gives ``fn(inputs: list[ndarray], outputs: list[ndarray])`` (C-contiguous inputs of the
declared dtypes; outputs preallocated, written in place), or None/KeyError when it lacks that kernel; when the
kernel also has ``bind(inputs, outputs) -> run()`` the plan binds it once to its buffers.  If the library
object has ``set_num_threads(n)``, it is called with the model's ``num_threads``.

Threads: ``num_threads`` bounds every part of a run: the native kernels' OpenMP team and the runtime's own
splitting of large GEMMs/convolutions (runtime/fast/parallel.py) use at most that many threads, and numpy's BLAS
is held at one thread during a run so that teams never oversubscribe the cores (runtime/threads.py).  By
default each run uses 1 or ``num_threads`` threads, whichever recent runs measured faster
(``adaptive_threads``): a second thread only pays when a core is free.

Thread safety: ``Model.run`` may be called from several threads at once.  The plan's per-run state (arena and
bound steps) lives in executors taken from a pool for the duration of a run, so concurrent runs never share
buffers; constants are read-only views of the file; native kernels are reentrant (the native library
guarantees it).
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..errors import RET_INPUT_PARAM_INVALID, RET_MEMORY_FAILED, ConverterError
from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from ..ir.input_dims import WARM_KEY, InputDims
from ..model.format import LoadedModel, load_model
from ..ops.control_flow import DEFAULT_MAX_ITERATIONS
from .plan import Plan
from .respecialize import Reshaper
from .shape_plans import ShapePlans, generic_ok
from .threads import configure_openmp

NATIVE_PREFIX = "native/"
log = logging.getLogger("converter_lite.runtime")


@dataclass(frozen=True)
class KernelInfo:
    """One top-level step of the model, for profiling tables."""
    name: str
    op: str
    source_nodes: tuple[str, ...]
    native: bool


class Model:
    """A loaded ``.ms`` model.  Build it with ``load``."""

    def __init__(self, loaded: LoadedModel, num_threads: int = 2, native: bool = True,
                 adaptive_threads: bool = True, trust_native_code: bool = True, toolchain=None,
                 max_loop_iterations: int = DEFAULT_MAX_ITERATIONS):
        if num_threads < 1:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"num_threads must be > 0, got {num_threads}")
        self.path = loaded.path
        self.metadata: dict[str, Any] = loaded.metadata
        self.num_threads = num_threads
        self.graph = loaded.graph
        resolve = _native_resolver(loaded, num_threads, trust_native_code, toolchain) if native else None
        self.plan = Plan(loaded.graph, resolve, num_threads=num_threads, adaptive=adaptive_threads,
                         max_loop_iterations=max_loop_iterations)
        self.input_names: list[str] = [v.name for v in loaded.graph.inputs]
        self.output_names: list[str] = [v.name for v in loaded.graph.outputs]
        self.input_types: list[TensorType] = [v.type for v in loaded.graph.inputs]
        self.output_types: list[TensorType] = [v.type for v in loaded.graph.outputs]
        self.kernels: list[KernelInfo] = _kernel_infos(self.plan)
        self._inputs = {name: (i, t) for i, (name, t) in enumerate(zip(self.input_names, self.input_types))}
        # (name, dtype, shape) per input for the fast feed check; string inputs always take the full one
        self._expect = None if any(t.dtype is DType.string or not t.is_static for t in self.input_types) else \
            [(n, np.dtype(t.dtype.np), tuple(t.shape)) for n, t in zip(self.input_names, self.input_types)]
        # inputs whose values were fixed at conversion (--inputValue): (position, name, value) checked every run
        fixed = json.loads(loaded.graph.metadata.get("input_values") or "{}")
        self._guards = [(self._inputs[n][0], n, np.asarray(v).reshape(self._inputs[n][1].shape).astype(
            self._inputs[n][1].dtype.np)) for n, v in fixed.items() if n in self._inputs]
        # dynamic input dims (ir/input_dims.py): one plan per input shape, made at run time (shape_plans.py)
        self._dims = InputDims.of_metadata(loaded.graph.metadata, self.path)
        self._shape_plans = None
        if self._dims is not None:
            dynamic = [n for n in self.input_names if n in self._dims.dims]
            self._dyn_pos = [self._inputs[n][0] for n in dynamic]
            # (name, dtype) per input for the repeated-shapes path (``_same_shapes``): tensors only
            self._plain = None if any(t.dtype is DType.string or not t.is_tensor for t in self.input_types) else \
                [(n, np.dtype(t.dtype.np)) for n, t in zip(self.input_names, self.input_types)]
            self._last: tuple | None = None          # (input shapes, plan) of the last fully checked run
            # a shape seen once runs on the generic plan when that is cheap (shape_plans.generic_ok)
            self._generic_first = generic_ok(self.plan)
            self._shape_plans = ShapePlans(loaded.graph, dynamic, lambda g, shared: Plan(
                g, resolve, num_threads=num_threads, adaptive=adaptive_threads,
                max_loop_iterations=max_loop_iterations, shared=shared))
            if self._generic_first:                   # its first runs at new shapes run on it: bound now
                self.plan.prepare()
            elif not self.plan.body_plans():          # (a loop on zeros could run long)
                self._warm_up(loaded.graph.metadata.get(WARM_KEY))
        self._reshaper = Reshaper.of(loaded, {v.name: v.type.shape for v in loaded.graph.inputs},
                                     lambda p: Model(load_model(p), num_threads, native, adaptive_threads,
                                                     trust_native_code, toolchain, max_loop_iterations),
                                     getattr(toolchain, "reconvert", None))

    def _warm_up(self, warm: str | None) -> None:
        """Packs the weights and runs the code paths at load, with a plan at small shapes the converter found
        the model admits (shape_plans.ShapePlans.warm_up), zeros for inputs."""
        shapes = json.loads(warm) if warm else None
        if not isinstance(shapes, dict) or any(not t.is_tensor or t.dtype is DType.string for t in self.input_types):
            return
        inputs = []
        for name, t in zip(self.input_names, self.input_types):
            shape = shapes.get(name, t.shape)
            if shape is None:
                return
            inputs.append(np.zeros(tuple(int(d) for d in shape), t.dtype.np))
        self._shape_plans.warm_up(tuple(inputs[p].shape for p in self._dyn_pos), inputs)

    @property
    def uses_native_code(self) -> bool:
        return any(k.native for k in self.kernels) or any(k.native for p in self.plan.body_plans()
                                                            for k in p.kernels)

    def run(self, feeds: Mapping[str, Any], outputs: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        """Runs the model.  ``feeds`` maps every input name to an array of the declared dtype and shape.

        Returns the outputs by name, in graph-output order.  Every returned array is the caller's own: never an
        input, a constant or a buffer a later run reuses.  ``outputs`` (IO binding) maps output names to
        preallocated arrays of the declared dtype and shape, which the run writes into and returns.  Inputs are
        read in place where they are large, C-contiguous, aligned and of the declared dtype and only fused
        kernels read them, and outputs are written straight into the arrays returned, so
        a run does not copy them (runtime/plan.py).  Raises ConverterError(-600) naming the input or output on
        a missing/unknown name or a dtype/shape mismatch, and ConverterError(-303) naming the node when a
        kernel fails.
        """
        if self._reshaper is not None:              # dynamic dims fed at other sizes: runtime/respecialize.py
            shapes = self._reshaper.shapes_for(feeds)
            if shapes is not None:
                return self._reshaper.model_for(shapes).run(feeds, outputs)
        plan = None
        if self._shape_plans is None:
            inputs = self._plain_feeds(feeds)
        else:                                       # the shapes of the last run: its plan, checks done
            inputs, plan = self._same_shapes(feeds)
        if inputs is None:
            inputs = self.check_feeds(feeds)
        if self._guards:
            self._check_guards(inputs)
        generic = False
        if plan is None:
            if self._shape_plans is None:
                plan = self.plan
            else:
                plan = self._plan_for(inputs, outputs is None)
                generic = plan is self.plan          # a shape seen for the first time (shape_plans.py)
        bound = None if outputs is None else self._bound_outputs(outputs, plan.graph)
        try:
            try:
                outs = plan.execute(inputs, outputs=bound)
            except ConverterError:
                if not generic:
                    raise
                # the generic plan met a shape some node or kernel rejects: the shape's own plan says which
                # input and dim (-600), or runs it
                plan = self._shape_plans.plan_for(tuple(inputs[p].shape for p in self._dyn_pos))
                outs = plan.execute(inputs)
        except MemoryError:
            raise ConverterError(RET_MEMORY_FAILED, f"{os.path.basename(self.path)}: not enough memory to run the "
                                                    "model (its working buffers could not be allocated)") from None
        names = self.output_names                   # Plan.execute returns new arrays
        return {names[0]: outs[0]} if len(names) == 1 else dict(zip(names, outs))

    def run_profiled(self, feeds: Mapping[str, Any], timings: list[float]) -> dict[str, np.ndarray]:
        """Like ``run``, and adds each top-level kernel's wall time (seconds) to ``timings[k]`` (one entry per
        ``self.kernels_for(feeds)``: ``self.kernels`` for a model of static shapes)."""
        inputs = self.check_feeds(feeds)
        if self._guards:
            self._check_guards(inputs)
        plan = self.plan if self._shape_plans is None else self._plan_for(inputs)
        return self._outputs(plan.execute(inputs, timings))

    def kernels_for(self, feeds: Mapping[str, Any]) -> list[KernelInfo]:
        """The top-level kernels a run with ``feeds`` executes (a model with dynamic dims has a plan per input
        shape, with the kernels bound for it)."""
        if self._shape_plans is None:
            return self.kernels
        return _kernel_infos(self._plan_for(self.check_feeds(feeds)))

    @property
    def input_shapes(self) -> dict[str, list]:
        """``{name: [int | "symbol", ...]}``: each tensor input's dims, a dynamic dim by its symbol."""
        dims = {} if self._dims is None else self._dims.symbolic()
        return {n: dims[n] if n in dims else (None if t.shape is None else list(t.shape))
                for n, t in zip(self.input_names, self.input_types)}

    def resize(self, inputs, dims: Sequence[Sequence[int]] | None = None) -> None:
        """MindSpore's ``Model.resize``: prepares the model to run at these input shapes (a hint: the plan for
        them is built now, so the first run at them does not pay for it; any admitted shape runs without it).
        ``inputs``: ``{name: shape}``, or input names (or objects with a ``name``) with ``dims`` their shapes.
        Raises -600 naming the input and dim for a shape the model does not admit."""
        if dims is not None:
            names = [getattr(i, "name", i) for i in inputs]
            if len(names) != len(dims):
                raise _bad(f"resize: {len(names)} input(s) but {len(dims)} shape(s)")
            inputs = dict(zip(names, dims))
        if not isinstance(inputs, Mapping):
            raise _bad("resize takes {name: shape} (or input names and their dims)")
        want = {}
        for name, shape in inputs.items():
            if name not in self._inputs:
                raise _bad(f"resize: unknown input {name!r}; the model's inputs are {self._describe_inputs()}")
            want[name] = tuple(int(d) for d in shape)
        if self._shape_plans is None:
            for name, shape in want.items():
                t = self._inputs[name][1]
                if t.shape is not None and shape != t.shape:
                    raise _bad(f"resize: input {name!r} has the fixed shape {list(t.shape)}; the model was converted "
                               f"with it (convert without --inputShape to run other shapes)")
            return
        shapes = []
        for name in self._shape_plans.dynamic:
            if name not in want:
                raise _bad(f"resize: give the shape of input {name!r} too (dims {self.input_shapes[name]})")
            self._dims.check(name, want[name])
            shapes.append(want[name])
        self._shape_plans.plan_for(tuple(shapes))

    def _plan_for(self, inputs: list, first_generic: bool = False) -> Plan:
        """The plan for the shapes of ``inputs`` (dynamic dims checked: -600 naming the input and dim); with
        ``first_generic``, the generic plan for shapes seen for the first time when it is cheap
        (shape_plans.py)."""
        shapes = []
        for name, pos in zip(self._shape_plans.dynamic, self._dyn_pos):
            shape = inputs[pos].shape
            self._dims.check(name, shape)
            shapes.append(shape)
        if first_generic and self._generic_first and self._shape_plans.first_sight(tuple(shapes)):
            return self.plan
        plan = self._shape_plans.plan_for(tuple(shapes))
        if self._plain is not None and all(isinstance(a, np.ndarray) for a in inputs):
            self._last = (tuple(a.shape for a in inputs), plan)
        return plan

    def _same_shapes(self, feeds) -> tuple[list | None, Plan | None]:
        """(inputs in order, the plan) when ``feeds`` is a dict of exactly the inputs, ndarrays of the declared
        dtypes and of the shapes of the last run that went through the full checks; else (None, None).  Saves a
        model with dynamic dims the feed checks and the plan lookup on repeated shapes (a streaming model)."""
        plain, last = self._plain, self._last
        if plain is None or last is None or type(feeds) is not dict or len(feeds) != len(plain):
            return None, None
        inputs = []
        for (name, dtype), shape in zip(plain, last[0]):
            a = feeds.get(name)
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
                return None, None
            inputs.append(a)
        return inputs, last[1]

    def specialized(self, shapes: Mapping[str, Sequence[int]]) -> Model:
        """This model for the given input shapes: itself when they are the converted ones, else (for inputs
        whose source model has dynamic dims) the model converted again for them (runtime/respecialize.py).  Raises
        ConverterError(-600) naming the input when a shape cannot be used."""
        want = {k: tuple(int(d) for d in v) for k, v in shapes.items()}
        for name in want:
            if name not in self._inputs:
                raise _bad(f"unknown input {name!r}; the model's inputs are {self._describe_inputs()}")
        if all(want.get(n, t.shape) == t.shape for n, t in zip(self.input_names, self.input_types)):
            return self
        probe = {n: SimpleNamespace(shape=want.get(n, t.shape)) for n, t in zip(self.input_names, self.input_types)}
        target = None if self._reshaper is None else self._reshaper.shapes_for(probe)
        if target is None:
            bad = next(n for n, t in zip(self.input_names, self.input_types) if want.get(n, t.shape) != t.shape)
            dyn = "" if self._reshaper is None else f" (dynamic axes: {sorted(self._reshaper.dynamic.get(bad, ()))})"
            raise _bad(f"input {bad!r}: shape {list(want[bad])} cannot be used; the model was converted for "
                       f"{self._inputs[bad][1]}{dyn} (re-convert with --inputShape to change fixed dims)")
        return self._reshaper.model_for(target)

    def _bound_outputs(self, outputs: Mapping[str, np.ndarray], graph) -> list:
        """``outputs`` checked (names, dtypes, shapes, writable arrays; the types of ``graph``, the run's plan's)
        and listed by output position."""
        if not isinstance(outputs, Mapping):
            raise _bad(f"outputs must be a dict of output name -> array, got {type(outputs).__name__}")
        bound: list = [None] * len(self.output_names)
        index = {n: i for i, n in enumerate(self.output_names)}
        for name, arr in outputs.items():
            if name not in index:
                raise _bad(f"outputs: unknown output {name!r}; the model's outputs are {self.output_names}")
            t = graph.outputs[index[name]].type
            if not t.is_tensor or t.shape is None:
                raise _bad(f"outputs: output {name!r} ({t}) has no fixed shape; it cannot be preallocated")
            if not isinstance(arr, np.ndarray) or arr.dtype != t.dtype.np or arr.shape != t.shape \
                    or not arr.flags.writeable:
                got = f"{arr.dtype} {list(arr.shape)}" if isinstance(arr, np.ndarray) else type(arr).__name__
                raise _bad(f"outputs: {name!r} needs a writable array of {t}, got {got}")
            bound[index[name]] = arr
        return bound

    def _check_guards(self, inputs: list) -> None:
        for pos, name, value in self._guards:
            if not np.array_equal(inputs[pos], value):
                raise _bad(f"input {name!r} was fixed to {value.reshape(-1).tolist()} at conversion (--inputValue); "
                           f"this run gives {np.asarray(inputs[pos]).reshape(-1).tolist()[:8]}: feed the fixed "
                           "value, or convert without --inputValue to run any value")

    def _plain_feeds(self, feeds) -> list[np.ndarray] | None:
        """The feeds in input order when ``feeds`` is a dict holding exactly the inputs, each an ndarray of the
        declared dtype and shape (the common case, checked cheaply); else None (``check_feeds`` decides)."""
        expect = self._expect
        if expect is None or type(feeds) is not dict or len(feeds) != len(expect):
            return None
        inputs = []
        for name, dtype, shape in expect:
            a = feeds.get(name)
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
                return None
            inputs.append(a)
        return inputs

    def _outputs(self, arrays: list) -> dict[str, Any]:
        return {name: a if not isinstance(a, np.ndarray) or a.flags.writeable else a.copy()
                for name, a in zip(self.output_names, arrays)}

    def check_feeds(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """Validates ``feeds`` and returns the arrays in graph-input order (see ``run``)."""
        if not isinstance(feeds, Mapping):
            raise _bad(f"feeds must be a dict of input name -> array, got {type(feeds).__name__}")
        for name in feeds:
            if name not in self._inputs:
                raise _bad(f"unknown input {name!r}; the model's inputs are {self._describe_inputs()}")
        inputs: list[np.ndarray] = []
        for name, (_, t) in self._inputs.items():
            if name not in feeds:
                raise _bad(f"missing input {name!r} ({t}); the model's inputs are {self._describe_inputs()}")
            inputs.append(_check_value(name, feeds[name], t))
        return inputs

    def _describe_inputs(self) -> str:
        dims = {} if self._dims is None else self._dims.symbolic()
        return ", ".join(f"{n} ({t.dtype.short}{dims[n]})".replace("'", "") if n in dims else f"{n} ({t})"
                         for n, t in zip(self.input_names, self.input_types))

    def __repr__(self) -> str:
        return (f"Model({os.path.basename(self.path)!r}, inputs={self._describe_inputs()}, "
                f"outputs={self.output_names}, kernels={len(self.kernels)})")


def _kernel_infos(plan: Plan) -> list[KernelInfo]:
    return [KernelInfo(k.node.name, k.node.op, k.source_nodes, k.native) for k in plan.kernels]


def load(path: str | os.PathLike, num_threads: int = 2, native: bool = True,
         adaptive_threads: bool = True, trust_native_code: bool = True, toolchain=None,
         max_loop_iterations: int = DEFAULT_MAX_ITERATIONS) -> Model:
    """Loads a ``.ms`` file (memory-mapped) and prepares it for ``run``.

    Args:
        path: the model file.
        num_threads: the most threads a run uses (> 0): native kernels, the runtime's own splitting of large
            products; numpy's BLAS stays at one thread.
        native: False runs every kernel with the numpy reference kernels even if native code is present.
        adaptive_threads: with ``num_threads > 1``, each run uses 1 or ``num_threads`` threads, whichever the
            recent runs measured faster (runtime/threads.py ``ThreadChooser``; a model without matrix
            products whose buffers total at most 64 KB always uses one); False always uses ``num_threads``.
        trust_native_code: False never runs the machine code shipped in the file: every fused kernel is
            generated again from its sub-graph of basic ops (the file's graph, which is data) by our own code
            generator and compiled in memory (needs llvmlite; no C compiler).
        max_loop_iterations: a Loop without a trip count (only its condition stops it) fails with -303 naming
            the node after this many iterations, instead of hanging the caller.
        toolchain: the converter side (``converter_lite.toolchain``: ``jit``, ``regenerate``, ``reconvert``), which
            ``converter_lite.load`` passes; without it a model that needs its native code rebuilt, or re-converting
            for other sizes of its dynamic dims, fails with an error saying so.

    Raises:
        ConverterError: -200 for an invalid/corrupted file, -300 for an op the runtime lacks.
    """
    return Model(load_model(path), num_threads=num_threads, native=native, adaptive_threads=adaptive_threads,
                 trust_native_code=trust_native_code, toolchain=toolchain, max_loop_iterations=max_loop_iterations)


def _bad(message: str) -> ConverterError:
    return ConverterError(RET_INPUT_PARAM_INVALID, message)


def _check_value(name: str, value: Any, t: TensorType):
    """A feed checked against the input's type: an ndarray for a tensor, a list of ndarrays for a sequence,
    either of those or None for an optional."""
    kind = t.kind
    if kind.startswith("optional"):
        if value is None:
            return None
        kind = kind[len("optional_"):] if kind != "optional" else "tensor"
    if kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise _bad(f"input {name!r}: expected a sequence ({t}): a list of arrays, got {type(value).__name__}")
        elem = TensorType(t.dtype, None)
        return [_check_array(f"{name}[{i}]", a, elem) for i, a in enumerate(value)]
    return _check_array(name, value, t)


def _check_array(name: str, value: Any, t: TensorType) -> np.ndarray:
    expected = t.dtype.np
    if not isinstance(value, np.ndarray):
        try:
            value = np.asarray(value, dtype=expected)
        except (TypeError, ValueError) as e:
            raise _bad(f"input {name!r}: expected {t}, got a {type(value).__name__} that is not "
                       f"convertible ({e})") from None
    if t.dtype is DType.string:
        ok = value.dtype.kind in "OUS"
    else:
        ok = value.dtype == expected
    if not ok:
        raise _bad(f"input {name!r}: expected dtype {t.dtype.name} ({t}), got {value.dtype} "
                   f"{list(value.shape)}")
    if t.shape is not None and value.shape != t.shape:
        raise _bad(f"input {name!r}: expected shape {list(t.shape)} ({t}), got {list(value.shape)} "
                   "(shapes are fixed at conversion; re-convert with --inputShape to change them)")
    return value


# -- native kernels ------------------------------------------------------------------------------------------
def _native_resolver(loaded: LoadedModel, num_threads: int, trust_native_code: bool = True, toolchain=None):
    """A resolver giving native kernels for GraphKernel nodes, or None when the file has no native code."""
    if not any(name.startswith(NATIVE_PREFIX) for name in loaded.sections):
        return None
    try:
        from .native import NativeLibrary
    except ImportError as e:
        log.warning("model %s has native code but the native runtime is unavailable (%s); "
                    "running reference kernels", loaded.path, e)
        return None
    configure_openmp()
    if trust_native_code:
        # the native sections are small next to the weights: hand the loader plain bytes
        sections = {k: bytes(v) for k, v in loaded.sections.items() if k.startswith(NATIVE_PREFIX)}
    else:
        regenerate = getattr(toolchain, "regenerate", None)
        if regenerate is None:
            raise ConverterError(RET_INPUT_PARAM_INVALID, "trust_native_code=False generates the native code again, "
                                 "which needs the converter: load the model with converter_lite.load")
        sections = regenerate(loaded.graph, num_threads)
        if not sections:
            return None
    lib = NativeLibrary.from_sections(sections, trust_native_code=trust_native_code,
                                      jit=getattr(toolchain, "jit", None))
    if hasattr(lib, "set_num_threads"):
        lib.set_num_threads(num_threads)

    kernels: dict = {}          # name -> NativeKernel: made once, for every plan (a model of dynamic shapes)

    def resolve(node: Node):
        if node.op != "GraphKernel":
            return None
        name = node.attrs.get("kernel_name")
        fn = kernels.get(name)
        if fn is None:
            try:
                fn = lib.kernel(name) if name else None
            except KeyError:
                fn = None
            if fn is not None:
                kernels[name] = fn
        if fn is None:
            log.info("no native code for kernel %s (node %s); running its reference sub-graph", name, node.name)
            return None
        return _native_kernel(fn, node)
    resolve.library = lib       # program.NodeCtx reaches the library's drivers (kernels/) through it
    return resolve


class _NativeStep:
    """A native kernel for the plan: ``bind(ins, outs)`` once per arena (the fast path), or ``__call__(ins)``
    allocating its outputs (inputs of dynamic shape)."""

    def __init__(self, fn, node: Node):
        self.fn = fn
        self.specs = [(o.type.shape, o.type.dtype.np) for o in node.outputs]
        self.in_dtypes = [None if v is None else v.type.dtype.np for v in node.inputs]
        # a row or column kernel of a graph with dynamic shapes: its outputs' shapes come from its inputs'
        self.shapes = None if all(o.type.is_static for o in node.outputs) else _run_shapes(node)

    def bind(self, ins: list, outs: list, num_threads: int | None = None):
        # np.asarray(order="C"), not np.ascontiguousarray: that one turns 0-d arrays into shape [1]
        args = [a if a is None else np.asarray(a, dtype=dt, order="C") for a, dt in zip(ins, self.in_dtypes)]
        if any(a is not b for a, b in zip(args, ins)):       # a copy made now would be stale at run time
            return self._copying(ins, outs)
        bind = getattr(self.fn, "bind", None)
        if bind is not None:
            return bind(args, outs, num_threads=num_threads)
        fn = self.fn
        return lambda: fn(args, outs)

    def _copying(self, ins: list, outs: list):
        fn, dts = self.fn, self.in_dtypes

        def run():
            fn([a if a is None else np.asarray(a, dtype=dt, order="C") for a, dt in zip(ins, dts)], outs)
        return run

    def __call__(self, ins: list) -> list:
        args = [a if a is None else np.asarray(a, dtype=dt, order="C") for a, dt in zip(ins, self.in_dtypes)]
        shapes = [s for s, _ in self.specs] if self.shapes is None else self.shapes(args)
        outs = [np.empty(shape, dtype) for shape, (_, dtype) in zip(shapes, self.specs)]
        self.fn(args, outs)
        return outs


def _run_shapes(node: Node):
    """``shapes(inputs) -> output shapes`` of a row or column kernel (ops/graph_kernel.py): a row kernel's
    outputs are its reference input's leading dims then their static tails; a column kernel's, its iteration
    shape (``column_extents``) where their pattern is not 1.  The kernel's own checks (native.py ``_extra``)
    reject inputs that do not fit."""
    from ..ops.graph_kernel import column_extents
    sub = node.attrs["graph"]
    if "cols" in node.attrs:
        pats, outs = [v.type.shape for v in sub.inputs], [v.type.shape for v in sub.outputs]

        def cols(ins):
            ext = column_extents(pats, [a.shape for a in ins])
            return [tuple(1 if q == 1 else e for q, e in zip(p, ext)) for p in outs]
        return cols
    rows = node.attrs["rows"]
    ref, lead, tails = rows["ref"], rows["lead"], [tuple(v.type.shape[1:]) for v in sub.outputs]
    return lambda ins: [tuple(ins[ref].shape[:lead]) + t for t in tails]


def _native_kernel(fn, node: Node) -> _NativeStep:
    return _NativeStep(fn, node)
