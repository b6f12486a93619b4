"""Reusing per-element values across the stages of a kernel instead of evaluating them again.

**Stored first** (``plan_stored_first``).  Stages run reductions first, then map stages, so a reduction whose
input is also a kernel output evaluated that output's whole expression, and the map stage evaluated it again
(magika's GELU-tanh, reshaped, summed over rows and returned: 845 us at 2 threads, GELU computed twice, the
reduction's elements through the Reshape's index arithmetic).  A map stage whose outputs depend on no
reduction and which some reduction reads runs first instead, and the later stages read those outputs back
from their buffers (``cached``): an output buffer holds the value exactly, at the value's own shape.

**Spilled by a reduction** (``plan_reuse``):

Softmax lowers to ``e = exp(x - max)``, ``s = ReduceSum(e)``, ``y = e / s``: the sum stage and the output stage
would each evaluate ``exp``.  ``plan_reuse`` finds such a value ``V`` (the input expression of an inner-form
reduction, containing a transcendental op, with the shape and float dtype of the kernel's single map output,
and read by that output's expression): the reduction stage then also stores ``V`` into the output buffer
while it accumulates (``ReduceStage.spill``), and the map stage reads ``V`` back from there
(``MapStage.cached``) instead of recomputing it, then overwrites the element with the result.  Without index
maps in the kernel, the map stage reads ``V`` only at the index it writes, so the overwrite is safe.
"""
from __future__ import annotations

from ..ir.core import Value
from ..ir.dtype import DType
from .index import INDEX_MAPS
from .reduce import SPECIAL, ReduceStage
from .scalar import SCALAR_EMITTERS
from .stages import MapStage

INLINE = frozenset(SCALAR_EMITTERS) | frozenset(INDEX_MAPS)     # ops a stage evaluates inline
# ops costly enough (polynomials, divisions) that a store and a load are cheaper than evaluating them again
EXPENSIVE = frozenset({"Exp", "Log", "Tanh", "Sigmoid", "Erf", "Pow", "Sin", "Cos", "Softplus", "Softsign",
                       "Gelu", "Elu", "Selu", "Celu", "Mish", "HardSwish", "Atan", "Asin", "Acos", "Sinh",
                       "Cosh", "Tan", "Asinh", "Acosh", "Atanh"})


def plan_stored_first(plan, outputs: list[tuple[Value, object]]) -> None:
    """Runs the outputs that depend on no reduction and that some reduction reads in map stages before the
    reductions (split off their stage when its other outputs need a reduction); later stages read them from
    their buffers (``outputs``: (graph output, its buffer))."""
    reductions = [st for st in plan.stages if isinstance(st, ReduceStage)]
    if not reductions:
        return
    reduced = {id(st.node.outputs[0]) for st in reductions}
    by_buf = {id(ob): v for v, ob in outputs}
    first, order = [], []
    for st in plan.stages:
        if not isinstance(st, MapStage):
            order.append(st)
            continue
        early = []
        for src, ob in st.items:
            v = by_buf.get(id(ob))
            if v is None or tuple(v.shape) != tuple(ob.shape) or \
                    _reaches(plan, src, lambda u: id(u) in reduced, INLINE):
                continue
            if any(_reaches(plan, r.node.inputs[0], lambda u, v=v: u is v, INLINE) for r in reductions):
                early.append((src, ob))
        if not early:
            order.append(st)
            continue
        moved = {id(ob) for _, ob in early}
        rest = [(src, ob) for src, ob in st.items if id(ob) not in moved]
        first.append((MapStage(st.shape, early, st.flat), [(by_buf[id(ob)], ob) for _, ob in early]))
        if rest:
            order.append(MapStage(st.shape, rest, st.flat, dict(st.cached)))
    if not first:
        return
    order = [m for m, _ in first] + order
    for k, (_, stored) in enumerate(first):          # each stage reads what the stages before it stored
        for st in order[k + 1:]:
            st.cached.update({id(v): ob for v, ob in stored})
    plan.stages[:] = order


def plan_reuse(plan) -> None:
    """Marks at most one (reduction stage, value) pair of ``plan`` for reuse through the output buffer."""
    maps = [st for st in plan.stages if isinstance(st, MapStage)]
    if len(maps) != 1 or len(maps[0].items) != 1:
        return
    if any(node.op in INDEX_MAPS for node in plan.graph.nodes):
        return
    m = maps[0]
    root, ob = m.items[0]
    if ob.kind != "output" or ob.dtype not in (DType.float32, DType.float64) or tuple(ob.shape) != tuple(m.shape):
        return
    for st in plan.stages[:plan.stages.index(m)]:      # reductions that run before the map stage
        if not isinstance(st, ReduceStage) or not st.inner or st.node.op in SPECIAL:
            continue
        v = st.node.inputs[0]
        if tuple(v.shape) != tuple(ob.shape) or v.dtype is not ob.dtype:
            continue
        if id(v) in plan.value_buf or v.const is not None or v.producer is None:
            continue
        if _reaches(plan, v, lambda u: u.producer is not None and u.producer.op in EXPENSIVE) \
                and _reaches(plan, root, lambda u: u is v):
            st.spill.append((v, ob))
            m.cached[id(v)] = ob
            return


def _reaches(plan, root: Value, pred, through=SCALAR_EMITTERS) -> bool:
    """Whether a value satisfying ``pred`` is in the element expression of ``root``, walking through the ops in
    ``through`` (elementwise ones by default; ``INLINE`` adds index maps), not crossing buffers or constants."""
    stack, seen = [root], set()
    while stack:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        if pred(u):
            return True
        node = u.producer
        if id(u) in plan.value_buf or u.const is not None or node is None or node.op not in through:
            continue
        stack.extend(i for i in node.inputs if i is not None)
    return False
