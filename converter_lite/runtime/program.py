"""Lowering a graph to a flat ``Program``: numbered values and a list of steps, each with its implementation.

Values (``PValue``) are one of:

* a **constant** (``const`` holds the array: the model's weights, or a node folded at load time because all its
  inputs are constants);
* a **buffer**: static shape, written by a step (or a graph input copied in); the arena holds it;
* a **view** of another value (``base``, byte ``offset``): same bytes, C-contiguous, no step runs for it
  (Reshape/Flatten/Squeeze/Unsqueeze/Identity, leading-axis Slice/Split, no-op Pad/Expand/Cast, and outputs
  written in place of an input); or its base transposed (``perm``: strided, for readers that take strides,
  transpose_views.py);
* **dynamic**: shape unknown until run time (data-dependent ops); held in a per-run cell, run by the reference
  kernels only.

Per node, in graph order: a node whose inputs are all constants is evaluated once here (deterministic ops);
``GraphKernel`` nodes run native code when ``resolve(node)`` provides it, otherwise their sub-graph is inlined
(its ops get the fast kernels too); every other op takes the first applicable entry of the fast-kernel table
(``fast.table.FAST``, keyed by op type: a step implementation, a view, or None) and else its reference kernel
from ``ops.registry.OPS``.  Steps whose outputs nobody reads are dropped at the end (e.g. a Pad that the Conv
after it absorbed).  Every step remembers the top-level node (``kernel``) it belongs to, for profiling.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import RET_NOT_FIND_OP, ConverterError
from ..ir.core import Graph, Node, Value
from ..kernels.conv_epilogue import EPILOGUE_ATTR
from ..kernels.registry import DRIVERS_ATTR
from ..ops.registry import OPS, KernelError
from .native import wide_vectors

CLAMPS = frozenset({"Relu", "Clip"})   # bare clamps a Conv on its driver can apply (``_clamp_epilogue``)


@dataclass
class PValue:
    name: str
    shape: tuple[int, ...] | None
    dtype: np.dtype | None
    const: np.ndarray | None = None
    base: int | None = None           # a view of this value ...
    offset: int = 0                   # ... starting this many bytes into it
    tail: int = 0                     # bytes reserved right after a buffer for one reader's use (see NodeCtx)
    kind: str = "tensor"              # ir.core.KINDS: sequences and optionals are always dynamic
    perm: tuple[int, ...] | None = None   # a view that is its base transposed (strided: transpose_views.py)

    @property
    def nbytes(self) -> int:
        return 0 if self.shape is None else math.prod(self.shape) * self.dtype.itemsize

    @property
    def dynamic(self) -> bool:
        return self.const is None and (self.shape is None or self.dtype is None or self.dtype.kind in "OUS"
                                       or self.kind != "tensor")


@dataclass
class Impl:
    """How a step runs.  ``bind(ins, outs, scratch, nt) -> run()`` pre-binds arrays (static steps) for a run on
    ``nt`` threads; ``call(ins) -> outs`` computes fresh arrays (reference kernels, dynamic shapes).  ``inplace``: input positions whose
    storage output 0 may take over (elementwise only).  ``workspace``: scratch bytes needed by ``bind``.
    ``inputs`` overrides the node's inputs (value ids), e.g. a Conv reading the input of a Pad it absorbed.
    ``epilogue(clamp, residual, gate)``: given the fused kernel the converter recorded as this step's epilogue
    (its clamp bounds, the value id of the residual it adds, its gate's (a, b), each or None), returns the value ids the step must read in
    addition now that it computes the kernel itself (its output then holds the kernel's), else None."""
    bind: Callable[[list, list, np.ndarray], Callable[[], Any]] | None = None
    call: Callable[[list], list] | None = None
    inplace: tuple[int, ...] = ()
    workspace: int = 0
    native: bool = False
    inputs: tuple[int | None, ...] | None = None
    absorbed: tuple[str, ...] = ()
    epilogue: Callable | None = None
    bodies: dict | None = None          # a control-flow step's body plans by attribute (runtime/control_flow.py)


@dataclass(frozen=True)
class ViewOf:
    """Output ``k`` of a node is input ``pos`` seen at ``offset`` bytes with the output's shape."""
    views: tuple[tuple[int, int], ...]      # per output: (input position, byte offset)


@dataclass
class PStep:
    kernel: int
    node: Node
    inputs: tuple[int | None, ...]
    outputs: tuple[int, ...]
    impl: Impl


@dataclass
class KernelEntry:
    node: Node
    source_nodes: tuple[str, ...]
    native: bool = False


@dataclass
class Program:
    values: list[PValue] = field(default_factory=list)
    steps: list[PStep] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    kernels: list[KernelEntry] = field(default_factory=list)
    producer: dict[int, tuple[Node, tuple]] = field(default_factory=dict)   # value -> (node, its input ids)

    def add(self, v: PValue) -> int:
        self.values.append(v)
        return len(self.values) - 1

    def root(self, vid: int) -> int | None:
        """The buffer holding ``vid``'s bytes (None for constants and dynamic values)."""
        v = self.values[vid]
        while v.base is not None:
            vid = v.base
            v = self.values[vid]
        return None if v.const is not None or v.dynamic else vid

    def root_offset(self, vid: int) -> int:
        off, v = 0, self.values[vid]
        while v.base is not None:
            off += v.offset
            v = self.values[v.base]
        return off

    def is_buffer(self, vid: int) -> bool:
        v = self.values[vid]
        return v.base is None and v.const is None and not v.dynamic

    def make_view(self, vid: int, base: int, offset: int) -> None:
        self.values[vid].base, self.values[vid].offset = base, offset


class NodeCtx:
    """What a fast-kernel factory sees of one node: its input/output value ids, types and constants."""

    def __init__(self, prog: Program, node: Node, ins: list, outs: list, num_threads: int, library=None):
        self.prog, self.node, self.ins, self.outs, self.num_threads = prog, node, ins, outs, num_threads
        self.attrs = node.attrs
        self.library = library

    def native(self, symbol: str) -> int | None:
        """Address of the driver ``symbol`` (kernels/) in the model's native library when the converter recorded
        it for this node (``native_drivers``, passes/select_drivers.py), else None (not recorded, no native
        code, native code off)."""
        if self.library is None or symbol not in self.node.attrs.get(DRIVERS_ATTR, ()):
            return None
        return self.library.support(symbol)

    def wide_vectors(self) -> bool:
        """Whether the drivers may use their 32-register tiles here (runtime/native.py ``wide_vectors``)."""
        return self.library is not None and wide_vectors(self.library)

    def value(self, i: int) -> PValue | None:
        vid = self.ins[i] if i < len(self.ins) else None
        return None if vid is None else self.prog.values[vid]

    def const(self, i: int) -> np.ndarray | None:
        v = self.value(i)
        return None if v is None else v.const

    def shape(self, i: int):
        return self.value(i).shape

    def dtype(self, i: int):
        return self.value(i).dtype

    def out(self, k: int = 0) -> PValue:
        return self.prog.values[self.outs[k]]

    def request_tail(self, vid: int, nbytes: int) -> bool:
        """Reserves ``nbytes`` of arena right after value ``vid``'s bytes, for the step to fill and read on each
        run (e.g. a row of ones that makes a GEMM add the bias).  Granted (True) when the value is a whole
        arena buffer; the step then reaches the bytes with a view past the value's end."""
        if vid is None or not self.prog.is_buffer(vid):
            return False
        v = self.prog.values[vid]
        v.tail = max(v.tail, nbytes)
        return True

    def producer(self, i: int) -> tuple[Node, tuple] | None:
        vid = self.ins[i] if i < len(self.ins) else None
        return None if vid is None else self.prog.producer.get(vid)


Factory = Callable[[NodeCtx], "Impl | ViewOf | None"]


def lower(graph: Graph, resolve=None, fast: dict[str, Factory] | None = None, num_threads: int = 1,
          control_flow: Callable[[Node], Impl] | None = None) -> Program:
    """The program of ``graph`` (see the module doc); ``control_flow(node)`` makes the step of an If/Loop/Scan/
    SequenceMap node (runtime/control_flow.py, with plans for its bodies), else they run the reference
    kernels (bodies interpreted)."""
    prog = Program()
    ids: dict[int, int] = {}
    for v in graph.inputs:
        ids[id(v)] = prog.add(_pvalue(v))
    prog.inputs = [ids[id(v)] for v in graph.inputs]
    lw = _Lowerer(prog, ids, resolve, fast or {}, num_threads, control_flow)
    for v in [i for n in graph.nodes for i in n.inputs] + list(graph.outputs):
        lw.uses[id(v)] = lw.uses.get(id(v), 0) + 1
    lw.nodes(graph.nodes, None)
    prog.outputs = [_vid(prog, ids, v) for v in graph.outputs]
    _drop_dead_steps(prog)
    return prog


def _pvalue(v: Value) -> PValue:
    t = v.type
    if t is None:
        return PValue(v.name, None, None)
    return PValue(v.name, None if t.shape is None else tuple(map(int, t.shape)), _np_dtype(t.dtype), kind=t.kind)


def _shape(v: Value):
    return None if v.type is None or v.type.shape is None else tuple(map(int, v.type.shape))


def _dtype(v: Value):
    return None if v.type is None else _np_dtype(v.type.dtype)


_NP_DTYPES: dict = {}        # ir DType -> numpy dtype (one entry per DType member): ``np.dtype()`` per value is slow


def _np_dtype(dt) -> np.dtype:
    got = _NP_DTYPES.get(dt)
    if got is None:
        got = _NP_DTYPES[dt] = np.dtype(dt.np)
    return got


def _vid(prog: Program, ids: dict, v: Value | None) -> int | None:
    if v is None:
        return None
    vid = ids.get(id(v))
    if vid is None:
        if v.const is None:
            raise ConverterError(RET_NOT_FIND_OP, f"value {v.name!r} is read before it is computed")
        c = np.asarray(v.const)
        vid = ids[id(v)] = prog.add(PValue(v.name, tuple(c.shape), c.dtype, const=c))
    return vid


class _Lowerer:
    def __init__(self, prog, ids, resolve, fast, num_threads, control_flow=None):
        self.prog, self.ids, self.resolve, self.fast, self.num_threads = prog, ids, resolve, fast, num_threads
        self.control_flow = control_flow
        self.library = getattr(resolve, "library", None)
        self.uses: dict[int, int] = {}             # top-level Value id -> readers (nodes and graph outputs)

    def nodes(self, nodes: list[Node], kernel: int | None) -> None:
        for node in nodes:
            self.node(node, kernel)

    def node(self, node: Node, kernel: int | None) -> None:
        prog, ids = self.prog, self.ids
        values = prog.values
        ins = [None if v is None else ids.get(id(v)) or _vid(prog, ids, v) for v in node.inputs]
        # (most nodes read a computed value: no call of ``_fold`` for them)
        if all(v is None or values[v].const is not None for v in ins) and self._fold(node, ins):
            return
        top = kernel is None
        if top and node.op == "GraphKernel" and self._epilogue(node, ins):
            return
        if top and node.op in CLAMPS and self._clamp_epilogue(node, ins):
            return
        if top:
            prog.kernels.append(KernelEntry(node, tuple(node.attrs.get("source_nodes", ()))))
            kernel = len(prog.kernels) - 1
        if node.op == "GraphKernel" and "graph" in node.attrs:
            fn = self.resolve(node) if self.resolve is not None else None
            if fn is not None:
                prog.kernels[kernel].native = True
                self._step(node, ins, kernel, _native_impl(fn))
                return
            if "rows" not in node.attrs and "cols" not in node.attrs:   # their sub-graphs have nominal shapes
                self._inline(node, ins, kernel)
                return
        outs = [self._new(o) for o in node.outputs]
        if self.control_flow is not None and node.op != "GraphKernel" and \
                any(isinstance(a, Graph) for a in node.attrs.values()):
            self._step(node, ins, kernel, self.control_flow(node), outs)
            return
        impl = None
        factory = self.fast.get(node.op)
        if factory is not None and all(vid is None or not values[vid].dynamic for vid in ins + outs):
            ctx = NodeCtx(prog, node, ins, outs, self.num_threads, self.library)
            try:
                impl = factory(ctx)
            except (KernelError, ValueError, IndexError):
                impl = None                            # the reference kernel reports it at run time
        if isinstance(impl, ViewOf):
            for k, (pos, off) in enumerate(impl.views):
                prog.make_view(outs[k], ins[pos], off)
                prog.producer[outs[k]] = (node, tuple(ins))
            return
        if impl is None:
            impl = _reference_impl(node)
        self._step(node, ins, kernel, impl, outs)

    def _epilogue(self, node: Node, ins: list) -> bool:
        """Lets the previous step compute fused kernel ``node`` on its output when the converter recorded it as
        that Conv's epilogue (``conv_epilogue``, passes/conv_epilogue.py); ``node``'s output becomes a view of
        that step's output.  False when the step cannot (no epilogue hook: the Conv is not on its driver here)."""
        spec = node.attrs.get(EPILOGUE_ATTR)
        prog = self.prog
        last = prog.steps[-1] if prog.steps else None
        if spec is None or last is None or last.node.name != spec["host"] or last.impl.epilogue is None \
                or len(node.outputs) != 1 or len(last.outputs) != 1:
            return False
        own = last.outputs[0]
        if ins[spec["input"]] != own or self.uses.get(id(node.inputs[spec["input"]]), 0) != 1:
            return False
        residual = spec.get("residual")
        extra = last.impl.epilogue(spec.get("clamp"), None if residual is None else ins[residual], spec.get("gate"))
        if extra is None:
            return False
        last.inputs = tuple(last.inputs) + tuple(extra)
        out = self._new(node.outputs[0])
        prog.make_view(out, own, 0)
        prog.producer[out] = (node, tuple(ins))
        entry = prog.kernels[last.kernel]
        entry.source_nodes = (entry.source_nodes or (entry.node.name,)) + tuple(
            node.attrs.get("source_nodes", ()) or (node.name,))
        return True

    def _clamp_epilogue(self, node: Node, ins: list) -> bool:
        """Lets the previous step, a Conv on its driver, clamp its output for a Relu or Clip (constant bounds)
        reading only it, the Relu's output a view of the Conv's.  The converter records such epilogues for fused
        kernels (``_epilogue``); this takes the bare clamps a model with dynamic dims leaves after its Convs, in
        a plan made for one shape (openWakeWord's silero VAD: 15 Relus of 1 us each in its If branches)."""
        prog = self.prog
        last = prog.steps[-1] if prog.steps else None
        if last is None or last.node.op != "Conv" or last.impl.epilogue is None or len(last.outputs) != 1 \
                or len(node.outputs) != 1 or not ins or ins[0] is None or prog.values[ins[0]].dtype != np.float32:
            return False
        # the clamp reads the Conv's output, or a reshaped view of all of it (a 1-D Conv runs as a 2-D one between
        # an Unsqueeze and a Squeeze), and nothing else reads either
        vid, value = ins[0], node.inputs[0]
        while vid != last.outputs[0]:
            made = prog.producer.get(vid)
            pv = prog.values[vid]
            if made is None or pv.base is None or pv.offset or pv.perm is not None or self.uses.get(id(value), 0) != 1 \
                    or not made[0].inputs or made[1][0] != pv.base \
                    or prog.values[pv.base].nbytes != pv.nbytes:
                return False
            vid, value = pv.base, made[0].inputs[0]
        if self.uses.get(id(value), 0) != 1:
            return False
        bounds = [0.0, math.inf] if node.op == "Relu" else [-math.inf, math.inf]
        for k, i in enumerate((1, 2) if node.op == "Clip" else ()):
            if i < len(ins) and ins[i] is not None:
                c = prog.values[ins[i]].const
                if c is None or np.size(c) != 1:
                    return False                       # a bound computed at run time
                bounds[k] = float(np.asarray(c).reshape(-1)[0])
        lo, hi = bounds
        extra = last.impl.epilogue((lo, hi), None, None)
        if extra is None:
            return False
        last.inputs = tuple(last.inputs) + tuple(extra)
        out = self._new(node.outputs[0])
        prog.make_view(out, ins[0], 0)
        prog.producer[out] = (node, tuple(ins))
        entry = prog.kernels[last.kernel]
        entry.source_nodes = (entry.source_nodes or (entry.node.name,)) + (node.name,)
        return True

    def _new(self, v: Value) -> int:
        vid = self.ids[id(v)] = self.prog.add(_pvalue(v))
        return vid

    def _step(self, node: Node, ins: list, kernel: int, impl: Impl, outs: list | None = None) -> None:
        if outs is None:
            outs = [self._new(o) for o in node.outputs]
        made, producer = (node, tuple(ins)), self.prog.producer
        for o in outs:
            producer[o] = made
        inputs = tuple(impl.inputs) if impl.inputs is not None else made[1]
        self.prog.steps.append(PStep(kernel, node, inputs, tuple(outs), impl))
        if impl.absorbed:
            entry = self.prog.kernels[kernel]
            entry.source_nodes = tuple(impl.absorbed) + (entry.source_nodes or (node.name,))

    def _inline(self, node: Node, ins: list, kernel: int) -> None:
        sub: Graph = node.attrs["graph"]
        for sv, vid in zip(sub.inputs, ins):
            if vid is None:
                continue
            self.ids[id(sv)] = vid
        self.nodes(sub.nodes, kernel)
        for o, so in zip(node.outputs, sub.outputs):
            vid = _vid(self.prog, self.ids, so)
            want, have = _dtype(o), self.prog.values[vid].dtype
            if want is not None and have is not None and want != have:
                raise ConverterError(RET_NOT_FIND_OP, f"fused kernel {node.name!r}: sub-graph output "
                                                      f"{so.name!r} is {have}, the node declares {want}")
            self.ids[id(o)] = vid

    def _fold(self, node: Node, ins: list) -> bool:
        """Evaluates ``node`` now if every input is a constant (and the op is deterministic)."""
        values = self.prog.values
        if any(v is not None and values[v].const is None for v in ins) or not node.outputs:
            return False                               # (most nodes: checked first)
        op = OPS.get(node.op)
        if node.op != "GraphKernel" and (op is None or not op.deterministic):
            return False
        if any(o.type is not None and not o.type.is_tensor for o in node.outputs) or \
                (node.op != "GraphKernel" and any(isinstance(a, Graph) for a in node.attrs.values())):
            return False                               # sequences/optionals, and loops, run at run time
        if not any(v is not None for v in ins):
            return False
        try:
            from ..ops.interpret import eval_graph
            from ..ops.registry import evaluate_node
            arrays = [None if v is None else self.prog.values[v].const for v in ins]
            with np.errstate(all="ignore"):
                if node.op == "GraphKernel":
                    outs = eval_graph(node.attrs["graph"], arrays)
                else:
                    outs = evaluate_node(node, arrays)
        except (KernelError, ValueError, TypeError, IndexError, ArithmeticError):
            return False                               # fails again at run time, naming the node
        for o, a in zip(node.outputs, outs):
            dt = _dtype(o)
            a = np.asarray(a, order="C") if dt is None else np.asarray(a, dtype=dt, order="C")
            if _shape(o) is not None and a.shape != _shape(o):
                return False
            a.flags.writeable = False
            self.ids[id(o)] = self.prog.add(PValue(o.name, a.shape, a.dtype, const=a))
        return True


def _reference_impl(node: Node) -> Impl:
    op = OPS.get(node.op)
    if op is None:
        raise ConverterError(RET_NOT_FIND_OP, f"node {node.name!r} uses op {node.op!r}, which the runtime does "
                                              "not implement")
    compute, attrs, n = op.compute, node.attrs, len(node.outputs)

    def call(ins: list) -> list:
        out = compute(attrs, *ins)
        if isinstance(out, (tuple, list)):
            return list(out[:n])
        return [out]
    return Impl(call=call)


def _native_impl(fn) -> Impl:
    """A resolver's kernel: an object with ``bind(ins, outs) -> run()`` (and ``__call__(ins) -> outs``), or a
    plain ``fn(ins) -> outs``."""
    bind = getattr(fn, "bind", None)
    return Impl(bind=None if bind is None else (lambda ins, outs, scratch, nt=1: bind(ins, outs, nt)), call=fn,
                native=True)


def _drop_dead_steps(prog: Program) -> None:
    """Removes steps none of whose outputs is read (by a later step, a view that is read, or the outputs)."""
    needed: set[int] = set()

    def need(vid):
        while vid is not None and vid not in needed:
            needed.add(vid)
            vid = prog.values[vid].base
    for v in prog.outputs:
        need(v)
    kept = []
    for st in reversed(prog.steps):
        op = OPS.get(st.node.op)
        live = any(o in needed for o in st.outputs) or (op is not None and not op.deterministic)
        if live:
            kept.append(st)
            for v in st.inputs:
                need(v)
    prog.steps = kept[::-1]
    drop_unused_kernels(prog)


def drop_unused_kernels(prog: Program) -> None:
    """Removes the kernels no step belongs to any more (their steps were dropped), renumbering the steps'."""
    used = sorted({st.kernel for st in prog.steps})
    remap = {k: i for i, k in enumerate(used)}
    prog.kernels = [prog.kernels[k] for k in used]
    for st in prog.steps:
        st.kernel = remap[st.kernel]
