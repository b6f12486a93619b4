"""Reusing an expensive per-element value of a reduction in the map stage that follows it.

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

# ops costly enough (polynomials, divisions) that a store and a load are cheaper than evaluating them again
EXPENSIVE = frozenset({"Exp", "Log", "Tanh", "Sigmoid", "Erf", "Pow", "Sin", "Cos", "Softplus", "Softsign",
                       "Gelu", "Elu", "Selu", "Celu", "Mish", "HardSwish", "Atan", "Asin", "Acos", "Sinh",
                       "Cosh", "Tan", "Asinh", "Acosh", "Atanh"})


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
    for st in plan.stages:
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


def _reaches(plan, root: Value, pred) -> bool:
    """Whether a value satisfying ``pred`` is in the element expression of ``root`` (not crossing buffers)."""
    stack, seen = [root], set()
    while stack:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        if pred(u):
            return True
        node = u.producer
        if id(u) in plan.value_buf or u.const is not None or node is None or node.op not in SCALAR_EMITTERS:
            continue
        stack.extend(i for i in node.inputs if i is not None)
    return False
