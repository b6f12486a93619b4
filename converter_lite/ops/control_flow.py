"""Control flow: If, Loop, Scan, SequenceMap.  Their bodies are graphs in the node's attributes
(``BODY_ATTRS``); every value a body reads from an outer scope is an explicit input (the importer appends
them, ``attrs["captures"]`` counts them), so a body is self-contained:

    If(cond, *captures)                       then_branch/else_branch(*captures) -> outputs
    Loop(M?, cond?, *v_initial, *captures)    body(i, cond, *v, *captures) -> (cond, *v, *scan_outputs)
    Scan(*states, *scan_inputs, *captures)    body(*states, *scan_elements, *captures) -> (*states, *scan_outputs)
    SequenceMap(seq, *extra, *captures)       body(elem, *extra_elems, *captures) -> outputs (one per sequence)

The semantics are written once here, over ``run(attr, inputs, invariant=0) -> outputs`` that runs one body:
the reference kernels pass the interpreter (``eval_graph``), the runtime its pre-built body plans
(runtime/control_flow.py).  ``invariant`` says how many trailing inputs (the captures) are the very values of
the previous run of that body in this call; a body's outputs are valid until its next run, so what is kept
across iterations (scan outputs, the final carried values) is copied.
Scan follows opset 9+ (axes and directions); ``legacy_batch`` marks an opset-8 Scan (a batch axis first and
an optional ``sequence_lens``), which the importer keeps as such.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.core import Graph, Node, TensorType
from .interpret import eval_graph
from .registry import KernelError, reference

BODY_ATTRS: dict[str, tuple[str, ...]] = {
    "If": ("then_branch", "else_branch"),
    "Loop": ("body",),
    "Scan": ("body",),
    "SequenceMap": ("body",),
}
# a Loop without a trip count stops after this many iterations with an error (a condition that never turns
# false would otherwise hang the caller); Model/Plan may pass another bound
DEFAULT_MAX_ITERATIONS = 1 << 24

RunBody = Callable[..., list]


class LoopBoundError(KernelError):
    """A Loop ran into its iteration bound."""


def _scalar(a, what: str):
    arr = a if type(a) is np.ndarray else np.asarray(a)
    if arr.size != 1:
        raise KernelError(f"{what} must be a scalar, got shape {list(arr.shape)}")
    return arr.item()               # (a third of reshape(-1)[0]'s cost: a Loop reads two a call)


# -- If --------------------------------------------------------------------------------------------------------
def if_branch(cond) -> str:
    """The body attribute an If whose condition input is ``cond`` runs."""
    return "then_branch" if bool(_scalar(cond, "If condition")) else "else_branch"


def run_if(attrs: dict, ins: list, run: RunBody) -> list:
    return list(run(if_branch(ins[0]), list(ins[1:])))


# -- Loop ------------------------------------------------------------------------------------------------------
def loop_counts(node_inputs: int, body: Graph, captures: int) -> tuple[int, int]:
    """(N loop-carried values, K scan outputs) of a Loop."""
    n = node_inputs - 2 - captures
    return n, len(body.outputs) - 1 - n


def _kept(v):
    """A body output kept past the body's next run: a copy (lists and None are values already)."""
    return np.array(v, copy=True) if isinstance(v, np.ndarray) else v


def run_loop(attrs: dict, ins: list, run: RunBody, max_iterations: int = DEFAULT_MAX_ITERATIONS) -> list:
    body: Graph = attrs["body"]
    ncap = int(attrs.get("captures", 0))
    ins = list(ins) + [None] * max(0, 2 - len(ins))
    n, k, limit, cond = loop_start(ins, body, ncap)
    carried = list(ins[2:2 + n])
    caps = list(ins[2 + n:])
    scans: list[list] = [[] for _ in range(k)]
    i = 0
    while cond and (limit is None or i < limit):
        if limit is None and i >= max_iterations:
            raise loop_bound_error(max_iterations)
        outs = run("body", [np.int64(i), np.bool_(cond), *carried, *caps], len(caps) if i else 0)
        cond = body_condition(outs[0])
        carried = list(outs[1:1 + n])
        for s, v in zip(scans, outs[1 + n:]):
            s.append(_kept(v))
        i += 1
    carried = [_kept(v) for v in carried] if i else carried
    return carried + stack_scans(body, n, scans)


def loop_start(ins: list, body: Graph, ncap: int) -> tuple:
    """A Loop's (N carried, K scan outputs, trip limit or None, first condition) from its inputs (padded to 2)."""
    n, k = loop_counts(len(ins), body, ncap)
    trip = ins[0]
    limit = None if trip is None else int(_scalar(trip, "Loop trip count M"))
    return n, k, limit, True if ins[1] is None else bool(_scalar(ins[1], "Loop condition"))


def loop_bound_error(max_iterations: int) -> LoopBoundError:
    return LoopBoundError(f"Loop ran {max_iterations} iterations without its condition turning false (no trip "
                          "count bounds it)")


def body_condition(c) -> bool:
    return bool(c) if getattr(c, "size", 1) == 1 else bool(_scalar(c, "Loop body condition output"))


def stack_scans(body: Graph, n: int, scans: list[list]) -> list:
    """A Loop's scan outputs: each one's per-iteration values stacked (empty, of the body output's type, when
    it ran no iteration)."""
    stacked = []
    for j, s in enumerate(scans):
        if s:
            stacked.append(np.stack([np.asarray(v) for v in s]))
        else:
            t = body.outputs[1 + n + j].type
            shape = t.shape if t is not None and t.shape is not None else ()
            stacked.append(np.zeros((0, *shape), t.dtype.np if t is not None else np.float32))
    return stacked


# -- Scan ------------------------------------------------------------------------------------------------------
def _axes(attrs: dict, key: str, count: int, ranks: list[int]) -> list[int]:
    axes = list(attrs.get(key) or [0] * count)
    if len(axes) != count:
        raise KernelError(f"Scan {key} has {len(axes)} entries for {count} values")
    out = []
    for a, r in zip(axes, ranks):
        if not -r <= a < max(r, 1):
            raise KernelError(f"Scan {key} axis {a} is out of range for rank {r}")
        out.append(a + r if a < 0 else a)
    return out


def run_scan(attrs: dict, ins: list, run: RunBody) -> list:
    if attrs.get("legacy_batch"):
        return _run_scan8(attrs, ins, run)
    body: Graph = attrs["body"]
    m = int(attrs["num_scan_inputs"])
    ncap = int(attrs.get("captures", 0))
    n = len(ins) - m - ncap
    k = len(body.outputs) - n
    states, xs, caps = list(ins[:n]), [np.asarray(x) for x in ins[n:n + m]], list(ins[n + m:])
    in_axes = _axes(attrs, "scan_input_axes", m, [x.ndim for x in xs])
    in_dirs = list(attrs.get("scan_input_directions") or [0] * m)
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) > 1:
        raise KernelError(f"Scan inputs have different sequence lengths {sorted(lengths)}")
    length = lengths.pop() if lengths else 0
    scans: list[list] = [[] for _ in range(k)]
    for t in range(length):
        elems = [np.take(x, length - 1 - t if d else t, axis=a) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = run("body", states + elems + caps, len(caps) if t else 0)
        states = list(outs[:n])
        for s, v in zip(scans, outs[n:]):
            s.append(_kept(np.asarray(v)))
    states = [_kept(v) for v in states] if length else states
    out_dirs = list(attrs.get("scan_output_directions") or [0] * k)
    results = []
    for j, s in enumerate(scans):
        if not s:
            t = body.outputs[n + j].type
            shape = t.shape if t.shape is not None else ()
            s_arr = np.zeros((0, *shape), t.dtype.np)
        else:
            s_arr = np.stack(s[::-1] if out_dirs[j] else s)
        results.append(s_arr)
    out_axes = _axes(attrs, "scan_output_axes", k, [r.ndim for r in results])
    results = [np.moveaxis(r, 0, a) if a else r for r, a in zip(results, out_axes)]
    return states + results


def _run_scan8(attrs: dict, ins: list, run: RunBody) -> list:
    """Opset-8 Scan: input 0 is the optional sequence_lens, every state and scan input has the batch axis
    first and the sequence axis second; each batch row runs its own scan over its first sequence_lens steps."""
    body: Graph = attrs["body"]
    m = int(attrs["num_scan_inputs"])
    ncap = int(attrs.get("captures", 0))
    lens = ins[0]
    rest = list(ins[1:])
    n = len(rest) - m - ncap
    k = len(body.outputs) - n
    states, xs, caps = rest[:n], [np.asarray(x) for x in rest[n:n + m]], rest[n + m:]
    dirs = list(attrs.get("directions") or [0] * m)
    batch = xs[0].shape[0] if xs else (np.asarray(states[0]).shape[0] if states else 0)
    finals: list[list] = [[] for _ in range(n)]
    outs_b: list[list] = [[] for _ in range(k)]
    for b in range(batch):
        steps = xs[0].shape[1] if xs else 0
        if lens is not None:
            steps = int(np.asarray(lens).reshape(-1)[b])
        st = [np.asarray(s)[b] for s in states]
        per: list[list] = [[] for _ in range(k)]
        for t in range(steps):
            elems = [x[b, steps - 1 - t if d else t] for x, d in zip(xs, dirs)]
            outs = run("body", st + elems + list(caps))
            st = list(outs[:n])
            for s, v in zip(per, outs[n:]):
                s.append(_kept(np.asarray(v)))
        for f, v in zip(finals, st):
            f.append(_kept(np.asarray(v)))
        for o, s in zip(outs_b, per):
            o.append(np.stack(s))
    return [np.stack(f) for f in finals] + [np.stack(o) for o in outs_b]


# -- SequenceMap -----------------------------------------------------------------------------------------------
def run_sequence_map(attrs: dict, ins: list, run: RunBody) -> list:
    body: Graph = attrs["body"]
    ncap = int(attrs.get("captures", 0))
    args = list(ins[:len(ins) - ncap])
    caps = list(ins[len(ins) - ncap:])
    seq = args[0]
    if not isinstance(seq, list):
        raise KernelError("SequenceMap input 0 must be a sequence")
    for j, a in enumerate(args[1:], 1):
        if isinstance(a, list) and len(a) != len(seq):
            raise KernelError(f"SequenceMap input {j} has {len(a)} elements, input 0 has {len(seq)}")
    results: list[list] = [[] for _ in body.outputs]
    for i in range(len(seq)):
        elems = [a[i] if isinstance(a, list) else a for a in args]
        for r, v in zip(results, run("body", elems + caps, len(caps) if i else 0)):
            r.append(_kept(np.asarray(v)))
    return results


RUNNERS: dict[str, Callable[..., list]] = {"If": run_if, "Loop": run_loop, "Scan": run_scan,
                                           "SequenceMap": run_sequence_map}


# -- reference kernels: the bodies run on the interpreter ---------------------------------------------------
def _interpreted(attrs: dict) -> RunBody:
    return lambda key, ins, invariant=0: eval_graph(attrs[key], list(ins))


def _reference(op: str):
    runner = RUNNERS[op]

    def compute(attrs, *ins):
        return tuple(runner(attrs, list(ins), _interpreted(attrs)))
    return compute


# -- inference ---------------------------------------------------------------------------------------------
def merge_types(a: TensorType, b: TensorType) -> TensorType:
    """The type that covers both ``a`` and ``b`` (same dtype and kind): equal types stay, else the shape is
    dynamic (an If output is whatever the taken branch gives, a Loop-carried value may change shape)."""
    if a == b:
        return a
    kinds = {a.kind, b.kind}
    if len(kinds) == 2 and kinds in ({"optional", "tensor"}, {"optional_sequence", "sequence"}):
        return TensorType(a.dtype, None, a.kind if a.kind.startswith("optional") else b.kind)
    if a.dtype != b.dtype or a.kind != b.kind:
        raise KernelError(f"types {a} and {b} differ in element type or kind")
    return TensorType(a.dtype, None, a.kind)


def _infer_if(node: Node) -> list[TensorType]:
    then, other = node.attrs["then_branch"], node.attrs["else_branch"]
    if len(then.outputs) != len(other.outputs) or len(then.outputs) != len(node.outputs):
        raise KernelError(f"If branches return {len(then.outputs)} and {len(other.outputs)} values for "
                          f"{len(node.outputs)} outputs")
    return [merge_types(a.type, b.type) for a, b in zip(then.outputs, other.outputs)]


def _const_scalar(v):
    if v is None or v.const is None or np.asarray(v.const).size != 1:
        return None
    return np.asarray(v.const).reshape(-1)[0]


def _infer_loop(node: Node) -> list[TensorType]:
    body: Graph = node.attrs["body"]
    n, k = loop_counts(len(node.inputs) + max(0, 2 - len(node.inputs)), body, int(node.attrs.get("captures", 0)))
    if n < 0 or k < 0:
        raise KernelError(f"Loop body has {len(body.inputs)} inputs and {len(body.outputs)} outputs for "
                          f"{len(node.inputs)} node inputs")
    carried = [merge_types(node.inputs[2 + j].type, body.outputs[1 + j].type) for j in range(n)]
    trip = _const_scalar(node.inputs[0] if node.inputs else None)
    cond_in = _const_scalar(node.inputs[1] if len(node.inputs) > 1 else None)
    cond_body = _const_scalar(body.outputs[0])
    fixed = trip is not None and (len(node.inputs) < 2 or node.inputs[1] is None or cond_in) \
        and (cond_body is not None and bool(cond_body) or body.outputs[0] is body.inputs[1] and cond_in)
    scans = []
    for o in body.outputs[1 + n:]:
        t = o.type
        if fixed and t.is_tensor and t.shape is not None:
            scans.append(TensorType(t.dtype, (max(0, int(trip)), *t.shape)))
        else:
            scans.append(TensorType(t.dtype, None, t.kind))
    return carried + scans


def _infer_scan(node: Node) -> list[TensorType]:
    body: Graph = node.attrs["body"]
    m = int(node.attrs["num_scan_inputs"])
    ins = node.inputs[1:] if node.attrs.get("legacy_batch") else node.inputs
    n = len(ins) - m - int(node.attrs.get("captures", 0))
    if n < 0 or len(body.outputs) < n:
        raise KernelError(f"Scan body has {len(body.outputs)} outputs for {n} states")
    xs = ins[n:n + m]
    if node.attrs.get("legacy_batch") or any(x.type.shape is None for x in xs):
        return [TensorType(o.type.dtype, None, o.type.kind) for o in body.outputs]
    states = [merge_types(ins[j].type, body.outputs[j].type) for j in range(n)]
    axes = _axes(node.attrs, "scan_input_axes", m, [len(x.type.shape) for x in xs])
    length = xs[0].type.shape[axes[0]] if xs else 0
    outs = []
    k = len(body.outputs) - n
    elem = [o.type for o in body.outputs[n:]]
    ranks = [len(t.shape) + 1 if t.shape is not None else 1 for t in elem]
    out_axes = _axes(node.attrs, "scan_output_axes", k, ranks)
    for t, a in zip(elem, out_axes):
        if t.shape is None:
            outs.append(TensorType(t.dtype, None))
            continue
        shape = [length, *t.shape]
        shape.insert(a, shape.pop(0))
        outs.append(TensorType(t.dtype, tuple(shape)))
    return states + outs


def _infer_sequence_map(node: Node) -> list[TensorType]:
    return [TensorType(o.type.dtype, None, "sequence") for o in node.attrs["body"].outputs]


for _op, _infer in (("If", _infer_if), ("Loop", _infer_loop), ("Scan", _infer_scan),
                    ("SequenceMap", _infer_sequence_map)):
    reference(_op, infer=_infer, any_shape=True)(_reference(_op))

__all__ = ["BODY_ATTRS", "DEFAULT_MAX_ITERATIONS", "RUNNERS", "LoopBoundError", "merge_types"]
