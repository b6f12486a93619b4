"""Probing a graph with dynamic dims for dynamic_fusion (dynamic.py): which dims are dynamic, which are the same
symbol, and small shapes the model admits.

The graph is made static (runtime/concretize.py, shape inference only) at two probe shapes, each dynamic dim
given two different values (``PROBES``, within its ``--inputShape`` range).  A dim equal in both probes is
static; one that differs is dynamic, and two dynamic dims with the same pair of values are the same symbol
(``signatures``).  When a probe fails (a model that takes only some sizes: a height fixed by a Reshape, dims
that must be multiples of 32), the next probe set is tried.  When none fits, ``fit_probes`` looks for the one
symbol at fault: it gives it common sizes (``PIN_SIZES``) in both probes, the other symbols keeping their probe
values; a symbol two sizes fit stays dynamic at those, one only one size fits is pinned to it (static in the
signatures, as ``--inputShape`` would have declared it; the kernels' run-time checks reject another value with
-600).  The PaddleOCR recognizer's height is such a dim (a Reshape after the backbone needs it pooled to 1).  A
model no single symbol's sizes fit keeps running unfused.  ``warm_shapes`` then finds small shapes the model
admits, for the warm-up plan at load.
"""
from __future__ import annotations

from collections.abc import Callable

from ...ir.core import Graph, Value
from ...ir.input_dims import Dim, InputDims

# values per probe set for dynamic symbol j: (first probe, second probe)
PROBES = (lambda j: (64 + 32 * j, 160 + 32 * j), lambda j: (8 + 4 * j, 20 + 4 * j), lambda j: (2 + j, 5 + j))
# sizes tried for a dim that breaks every probe (a height only some sizes fit): fit_probes
PIN_SIZES = (1, 2, 3, 4, 8, 16, 24, 32, 48, 64, 96, 112, 128, 160, 192, 224, 256, 320, 384, 416, 448, 480, 512, 640)
PIN_TRIES = 160                 # shape inferences fit_probes may spend (~5 ms each for the 430-node OCR recognizer)
PIN_BUDGET = 200_000            # ... and graph nodes they may visit in all (~2 s)


def _symbols(dims: InputDims) -> list[Dim]:
    seen: dict[str, Dim] = {}
    for ds in dims.dims.values():
        for d in ds:
            if isinstance(d, Dim) and d.name not in seen:
                seen[d.name] = d
    return list(seen.values())


def _probe_values(syms: list[Dim]) -> list[list[dict]]:
    """Per probe set whose values fit the ranges: [{symbol: first value}, {symbol: second value}]."""
    out = []
    for values in PROBES:
        val: list[dict] = [{}, {}]
        ok = True
        for j, s in enumerate(syms):
            for k in range(2):
                v = max(values(j)[k], s.lo, 2 if s.hi is None or s.hi >= 2 else s.lo)
                val[k][s.name] = v if s.hi is None else min(v, s.hi)
            if val[0][s.name] == val[1][s.name] and (s.hi is None or s.hi > s.lo):
                ok = False
        if ok:
            out.append(val)
    return out


def _shapes(dims: InputDims, val: dict) -> dict:
    return {n: tuple(val[d.name] if isinstance(d, Dim) else d for d in ds) for n, ds in dims.dims.items()}


def probe_shapes(graph: Graph, dims: InputDims) -> list[list[dict]]:
    """Candidate pairs of input-shape dicts, best first: in each, every symbol has two distinct values within its
    range (a symbol whose range is one value is fixed: it gets that value in both)."""
    return [[_shapes(dims, v) for v in val] for val in _probe_values(_symbols(dims))]


def fit_probes(graph: Graph, dims: InputDims, budget: int | None = None) -> tuple[list[dict], Dim, tuple] | None:
    """When no pair of ``probe_shapes`` infers (a height only some sizes fit, e.g. a Reshape after the backbone
    needing it pooled to 1): a pair in which one symbol whose varying breaks inference takes common sizes
    (``PIN_SIZES`` within its range, and the range's bounds) and the others their probe values, as ``(pair,
    symbol, (v0, v1))``; None when no single symbol fixes it within ``budget`` shape inferences (by default
    ``PIN_BUDGET`` node visits' worth: a few seconds at most).

    The symbol is the first (in the inputs' order) for which a size fits both probes of a probe set, ``v0`` the
    smallest such size.  When another size fits too, the symbol stays dynamic, ``v1`` the largest other one (far
    apart, so the dims derived from it by strides differ too); else it is pinned (``v0 == v1``): static in the
    signatures, as if ``--inputShape`` had declared it."""
    from ...errors import ConverterError
    from ...runtime.concretize import concretize
    syms = _symbols(dims)
    seen: dict[tuple, bool] = {}
    left = [min(PIN_TRIES, PIN_BUDGET // max(len(graph.nodes), 1)) if budget is None else budget]

    def fits(val: dict) -> bool:
        shapes = _shapes(dims, val)
        key = tuple(sorted(shapes.items()))
        if key not in seen:
            if left[0] <= 0:
                raise _OutOfBudget
            left[0] -= 1
            try:
                concretize(graph, shapes, {})
                seen[key] = True
            except ConverterError:
                seen[key] = False
        return seen[key]

    try:
        for val in _probe_values(syms):
            for s in syms:
                if s.hi is not None and s.hi <= s.lo:
                    continue                                     # fixed by its range already
                bounds = {s.lo, s.hi} - {None, 0} if s.lo or s.hi is not None else set()
                sizes = sorted({c for c in PIN_SIZES if s.admits(c)} | bounds)
                first = next((c for c in sizes if fits({**val[0], s.name: c}) and fits({**val[1], s.name: c})),
                             None)
                if first is None:
                    continue
                others = {(val[0][t.name], val[1][t.name]) for t in syms if t is not s}   # other symbols' pairs
                second = next((c for c in reversed(sizes) if c != first and (first, c) not in others
                               and fits({**val[1], s.name: c})), first)
                pair = [_shapes(dims, {**val[0], s.name: first}), _shapes(dims, {**val[1], s.name: second})]
                return pair, s, (first, second)
    except _OutOfBudget:
        pass
    return None


class _OutOfBudget(Exception):
    pass


WARM_SIZES = (1, 2, 4, 8, 16, 32)      # tried, smallest first, for each dynamic dim of the warm-up shapes


def warm_shapes(graph: Graph, dims: InputDims, known: dict | None = None) -> dict | None:
    """Small input shapes the model admits, for a warm-up plan when it loads (runtime/model.py): building a
    first plan packs the weights for the drivers and runs each code path once, which a model of fixed shapes
    does at load; without it the first run at the user's first shape pays for them too (PP-OCR's recogniser:
    ~13 ms of weight packing).  From the first probe shapes that infer, each symbol in turn takes the smallest
    of ``WARM_SIZES`` (within its range) with which the graph still infers; ``known``: input shapes known to
    infer (``fit_probes``'), tried first; None when none infers."""
    from ...errors import ConverterError
    from ...runtime.concretize import concretize

    def fits(val: dict) -> bool:
        try:
            concretize(graph, _shapes(dims, val), {})
            return True
        except ConverterError:
            return False
    syms = _symbols(dims)
    starts = [] if known is None else [{d.name: known[n][a] for n, ds in dims.dims.items()
                                        for a, d in enumerate(ds) if isinstance(d, Dim)}]
    start = next((v for v in starts + [v[0] for v in _probe_values(syms)] if fits(v)), None)
    if start is None:
        return None
    for s in syms:
        for c in WARM_SIZES:
            if c >= start[s.name]:
                break
            if s.admits(c) and fits({**start, s.name: c}):
                start = {**start, s.name: c}
                break
    return {n: list(shape) for n, shape in _shapes(dims, start).items()}


def signatures(graph: Graph, probes: list[dict]) -> dict[int, tuple] | None:
    """id(value) -> its dims (an int where both probes agree, else ``("?", a, b)``) for the first probe pair
    whose shapes infer; None when none does."""
    from ...errors import ConverterError
    from ...runtime.concretize import (
        concretize,  # shape inference only: no kernels are bound
    )

    values = _values(graph)
    for pair in probes:
        shapes = []
        try:
            for p in pair:
                vmap: dict = {}
                concretize(graph, p, vmap)
                shapes.append({id(v): _static_shape(vmap.get(id(v))) for v in values})
        except ConverterError:
            continue
        sigs = {}
        for vid, s1 in shapes[0].items():
            s2 = shapes[1].get(vid)
            if s1 is None or s2 is None or len(s1) != len(s2):
                continue
            sigs[vid] = tuple(a if a == b else ("?", a, b) for a, b in zip(s1, s2))
        return sigs
    return None


def _static_shape(v: Value | None) -> tuple | None:
    if v is None or v.type is None or not v.type.is_tensor or not v.type.is_static:
        return None
    return tuple(v.type.shape)


def with_if_branches(graph: Graph) -> list[Graph]:
    """``graph`` and the branches of its If nodes, nested ones included: concretize makes a branch static at the
    probe shapes when the values it captures are, so its values get signatures and its ops can fuse."""
    out = [graph]
    for n in graph.nodes:
        if n.op == "If":
            for key in ("then_branch", "else_branch"):
                body = n.attrs.get(key)
                if isinstance(body, Graph):
                    out.extend(with_if_branches(body))
    return out


def _values(graph: Graph) -> list[Value]:
    """The inputs and node outputs of the graph and of its If branches."""
    out = []
    for g in with_if_branches(graph):
        out.extend(g.inputs)
        for n in g.nodes:
            out.extend(n.outputs)
    return out


def fit_signatures(graph: Graph, dims: InputDims) -> tuple[dict[int, tuple] | None, Callable[[int], str] | None,
                                                  dict | None]:
    """The signatures at the pair ``fit_probes`` finds and what to say of the dim it sized (given the number of
    kernels fused), and the first input shapes of the pair; (None, None, None) without one."""
    found = fit_probes(graph, dims)
    sigs = None if found is None else signatures(graph, [found[0]])
    if sigs is None:
        return None, None, None
    _, sym, (v0, v1) = found
    where = ", ".join(f"input {n!r} dim {a}" for n, ds in dims.dims.items() for a, d in enumerate(ds)
                      if isinstance(d, Dim) and d.name == sym.name)
    if v0 == v1:
        return sigs, lambda n: (f"{where} ({sym.name!r}) only fits {v0} of the common sizes tried; {n} kernel(s) "
                                f"fused for that value (run with --inputShape to declare it)"), found[0][0]
    return sigs, lambda n: (f"{where} ({sym.name!r}) fits none of the probe sizes but fits {v0} and {v1}; {n} "
                            f"kernel(s) fused with it dynamic at those (--inputShape declaring the sizes it takes "
                            f"is surer)"), found[0][0]
