"""Interior/border splitting of the loop nest of a map stage that reads constant Pads (a window over a
zero-padded input: the depthwise convolution expansion is a Pad read by one shifted Slice per tap).

Read through its index map (index.py), a constant Pad costs a clamp and a select per padded axis and element,
and the clamped loads along the innermost loop are gathers.  Along the index maps that are affine per axis
(Slice, Transpose, Expand, numpy broadcasting of elementwise operands, reshapes that only add or drop size-1
dims) every coordinate of a Pad's output is ``m * x_k + a`` for one loop coordinate ``x_k`` of the stage (or a
constant).  ``pad_guards`` walks the stage's expression trees and gives, for every padded axis of every Pad
reached (a *guard*), the stage axis it follows and the range of ``x_k`` where the coordinate falls inside the
Pad's input, intersected over all paths (every tap) reaching that Pad; a guard reached through any other index
map is never free.

``emit_split_nest`` emits the loop of a stage axis that guards follow as three loops: border, interior (the
intersection of those guards' ranges), border.  In the interior the guards are *free*: ``em.free_guards``
holds their (id(Pad node), axis) keys and index.py reads the input without clamp or select, so the innermost
loop is a plain contiguous loop that LLVM vectorizes.  Every split axis is split in every region of the outer
ones (9 bodies for a 2-D window): in a border row the row guards are loop-invariant in the column loop (a
scalar clamp and a blend), so its interior columns are still contiguous vector loads, not gathers.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from llvmlite import ir

from ..ir.core import Value
from .index import INDEX_MAPS, RESHAPE_LIKE, pad_plan, slice_params, transpose_perm
from .loops import for_range
from .scalar import SCALAR_EMITTERS
from .types import I64

NEVER = "never"
# a form: (stage axis, multiplier, offset) of one coordinate; axis -1 is the constant ``offset``; None: unknown
Form = tuple[int, int, int] | None


@dataclass
class Guards:
    """Guards of one stage: ``ranges[key] = (stage axis, first, last)`` (inclusive) or NEVER."""
    ranges: dict = field(default_factory=dict)

    def add(self, key, state) -> None:
        old = self.ranges.get(key)
        if old is None or state == NEVER or old == NEVER:
            self.ranges[key] = state if old is None or state == NEVER else old
            return
        if old[0] != state[0]:
            self.ranges[key] = NEVER
        else:
            self.ranges[key] = (old[0], max(old[1], state[1]), min(old[2], state[2]))

    def interior(self, shape) -> dict[int, tuple[int, int]]:
        """Per stage axis that some guard follows: the interior [first, stop) where all of them are free."""
        out: dict[int, tuple[int, int]] = {}
        for st in self.ranges.values():
            if st == NEVER:
                continue
            k, lo, hi = st
            lo0, hi0 = out.get(k, (0, shape[k]))
            out[k] = (max(lo0, lo), min(hi0, hi + 1))
        return out

    def free_in(self, axes: set[int]) -> frozenset:
        return frozenset(key for key, st in self.ranges.items() if st != NEVER and st[0] in axes)


def _ceil_div(a: int, m: int) -> int:
    return -((-a) // m)


def _guard_state(form: Form, first: int, last: int, extent: int):
    """The range of the stage coordinate where ``first <= m * x + a <= last``."""
    if form is None:
        return NEVER
    k, m, a = form
    if k < 0 or m == 0:
        return (-1, 0, 0) if first <= a <= last else NEVER
    if m > 0:
        return (k, _ceil_div(first - a, m), (last - a) // m)
    return (k, _ceil_div(last - a, m), (first - a) // m)


def _broadcast(forms: tuple, shape, in_shape) -> tuple:
    off = len(shape) - len(in_shape)
    return tuple((-1, 0, 0) if d == 1 else forms[off + i] for i, d in enumerate(in_shape))


def pad_guards(roots: list[Value], shape: tuple[int, ...], stops: Callable[[Value], bool]) -> Guards:
    """The guards of the constant Pads reached from ``roots`` (values of ``shape``); ``stops(v)``: ``v`` is
    read from a buffer (not traced through)."""
    guards = Guards()
    seen: set = set()
    stack = [(r, tuple((k, 1, 0) for k in range(len(shape)))) for r in roots]
    while stack:
        v, forms = stack.pop()
        key = (id(v), forms)
        if key in seen or stops(v) or v.const is not None or v.producer is None:
            continue
        seen.add(key)
        node = v.producer
        op = node.op
        vshape = tuple(v.shape)
        if op in SCALAR_EMITTERS or op == "Expand":
            ins = node.inputs[:1] if op == "Expand" else node.inputs
            stack.extend((i, _broadcast(forms, vshape, i.shape)) for i in ins if i is not None)
        elif op in RESHAPE_LIKE:
            src = node.inputs[0]
            kept = [f for f, d in zip(forms, vshape) if d != 1]
            if [d for d in src.shape if d != 1] == [d for d in vshape if d != 1]:
                it = iter(kept)
                stack.append((src, tuple((-1, 0, 0) if d == 1 else next(it) for d in src.shape)))
            else:
                stack.append((src, (None,) * len(src.shape)))
        elif op == "Transpose":
            src = node.inputs[0]
            perm = transpose_perm(node, len(src.shape))
            inf: list = [None] * len(perm)
            for i, p in enumerate(perm):
                inf[p] = forms[i]
            stack.append((src, tuple(inf)))
        elif op == "Slice":
            src = node.inputs[0]
            inf = []
            for f, (start, step) in zip(forms, slice_params(node)):
                inf.append(None if f is None else (f[0], f[1] * step, f[2] * step + start))
            stack.append((src, tuple(inf)))
        elif op == "Pad" and node.attrs.get("mode", "constant") == "constant":
            src = node.inputs[0]
            inf = []
            for ax, (f, (crop, before, n), d) in enumerate(zip(forms, pad_plan(node), vshape)):
                if before or d != n:
                    guards.add((id(node), ax), _guard_state(f, before, before + n - 1, d))
                inf.append(None if f is None else (f[0], f[1], f[2] - before + crop))
            stack.append((src, tuple(inf)))
        elif op in INDEX_MAPS:
            stack.extend((i, (None,) * len(i.shape)) for i in node.inputs if i is not None and i.type is not None)
    return guards


def split_axes(guards: Guards, shape) -> dict[int, tuple[int, int]]:
    """Stage axes worth splitting: those with a non-empty interior that is not the whole axis; guards whose
    interior is the whole axis (or that are constant and inside) are free everywhere."""
    return {k: (lo, hi) for k, (lo, hi) in guards.interior(shape).items()
            if k >= 0 and lo < hi and (lo > 0 or hi < shape[k])}


def always_free(guards: Guards, shape) -> set[int]:
    """Stage axes (and -1 for constants) whose guards hold over the whole axis."""
    return {k for k, (lo, hi) in guards.interior(shape).items() if k < 0 or (lo <= 0 and hi >= shape[k])}


def _smax(b: ir.IRBuilder, x, y):
    if isinstance(x, int) and isinstance(y, int):
        return max(x, y)
    x, y = (ir.Constant(I64, v) if isinstance(v, int) else v for v in (x, y))
    return b.select(b.icmp_signed(">", x, y), x, y)


def _smin(b: ir.IRBuilder, x, y):
    if isinstance(x, int) and isinstance(y, int):
        return min(x, y)
    x, y = (ir.Constant(I64, v) if isinstance(v, int) else v for v in (x, y))
    return b.select(b.icmp_signed("<", x, y), x, y)


def emit_split_nest(em, extents, guards: Guards, shape, body: Callable[[list], None],
                    inner_hints: Callable[[int | None, bool], object]) -> None:
    """The loop nest over ``extents`` (start, stop per axis), split at the interiors of ``guards``; ``body(coords)``
    is called with ``em.free_guards`` set for each region.  ``inner_hints(extent, interior)``: hints of an
    innermost loop of that many iterations (None: unknown extent), in the interior or on a border."""
    b = em.b
    last = len(extents) - 1
    splits = split_axes(guards, shape)
    base = always_free(guards, shape)

    def nest(d: int, coords: list, interior: set[int]):
        if d > last:
            saved = em.free_guards
            em.free_guards = guards.free_in(interior)
            try:
                body(coords)
            finally:
                em.free_guards = saved
            return
        lo, hi = extents[d]
        if d in splits:
            first, stop = splits[d]
            parts = [(lo, _smin(b, hi, first), False), (_smax(b, lo, first), _smin(b, hi, stop), True),
                     (_smax(b, lo, stop), hi, False)]
        else:
            parts = [(lo, hi, False)]
        for start, end, inside in parts:
            if isinstance(start, int) and isinstance(end, int) and start >= end:
                continue
            n = end - start if isinstance(start, int) and isinstance(end, int) else None
            hints = inner_hints(n, inside) if d == last else None
            with for_range(b, start, end, f"d{d}", hints) as i:
                nest(d + 1, coords + [i], interior | {d} if inside else interior)

    nest(0, [], set(base))
