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

Concats are split the same way: one reached along such affine maps with its axis following a stage axis with
multiplier 1 (``Guards.pieces``) cuts that axis where its input changes, and in each region ``em.known_pieces``
names the input read there, which index.py reads directly instead of loading every input at a clamped
coordinate and selecting (per element, with gathers along the innermost loop): YOLOv8n's byte Concat of its
three heads along the 2100 anchors took 204 us, 4 split.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

from llvmlite import ir

from ..ir.core import Value
from .index import INDEX_MAPS, RESHAPE_LIKE, pad_plan, slice_params, transpose_perm
from .loops import for_range
from .scalar import SCALAR_EMITTERS
from .types import I64

NEVER = "never"
MAX_PIECES = 16        # Concats of more inputs keep their per-element selection (a loop body per input otherwise)
# a form: (stage axis, multiplier, offset) of one coordinate; axis -1 is the constant ``offset``; None: unknown
Form = tuple[int, int, int] | None


@dataclass
class Guards:
    """Guards of one stage: ``ranges[key] = (stage axis, first, last)`` (inclusive) or NEVER; ``pieces[id(Concat)]
    = (stage axis, ((first, stop) per input))``: where each input of a Concat is the one read, or NEVER."""
    ranges: dict = field(default_factory=dict)
    pieces: dict = field(default_factory=dict)

    def add_pieces(self, key, state) -> None:
        old = self.pieces.get(key)
        self.pieces[key] = state if old is None or old == state else NEVER

    def cuts(self, shape) -> dict[int, set[int]]:
        """Per stage axis, the coordinates inside it where some Concat's input changes."""
        out: dict[int, set[int]] = {}
        for st in self.pieces.values():
            if st == NEVER:
                continue
            k, spans = st
            out.setdefault(k, set()).update(p for span in spans for p in span if 0 < p < shape[k])
        return {k: v for k, v in out.items() if v}

    def pieces_in(self, axis: int, first: int, stop: int) -> dict[int, int]:
        """The Concats along ``axis`` that read one input all over ``[first, stop)``: id(node) -> its index."""
        out = {}
        for key, st in self.pieces.items():
            if st != NEVER and st[0] == axis:
                for j, (a, b) in enumerate(st[1]):
                    if a <= first and stop <= b:
                        out[key] = j
                        break
        return out

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
        elif op == "Concat" and v.index == 0 and len(vshape) > 0:
            ax = int(node.attrs.get("axis", 0)) % len(vshape)
            f = forms[ax]
            known = f is not None and f[0] >= 0 and f[1] == 1
            off, spans = 0, []
            for i in node.inputs:
                if i is None or i.type is None:
                    continue
                n = int(i.shape[ax])
                spans.append((off - f[2], off + n - f[2]) if known else None)
                stack.append((i, tuple((g[0], g[1], g[2] - off) if d == ax and g is not None else g
                                       for d, g in enumerate(forms))))
                off += n
            guards.add_pieces(id(node), (f[0], tuple(spans)) if known and len(spans) <= MAX_PIECES else NEVER)
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
                    inner_hints: Callable[[int | None, bool], object], repeat: int = 1) -> None:
    """The loop nest over ``extents`` (start, stop per axis), split at the interiors of ``guards``; ``body(coords)``
    is called with ``em.free_guards`` set for each region.  ``inner_hints(extent, interior)``: hints of an
    innermost loop of that many iterations (None: unknown extent), in the interior or on a border.  ``repeat``
    > 1: the innermost loop runs over ``j`` and its body is emitted for ``repeat * j + k``, k = 0 .. repeat - 1
    (regions whose bounds ``repeat`` divides), so that a read at ``c // repeat`` (a nearest upsampling) is one
    contiguous load per ``j`` and the stores interleave: LLVM vectorizes that (byte permutes), not the
    per-element gathers of ``c // repeat``."""
    b = em.b
    last = len(extents) - 1
    splits = split_axes(guards, shape)
    cuts = guards.cuts(shape)
    base = always_free(guards, shape)

    def nest(d: int, coords: list, interior: set[int], pieces: dict):
        if d > last:
            saved = em.free_guards, em.known_pieces
            em.free_guards, em.known_pieces = guards.free_in(interior), pieces
            try:
                body(coords)
            finally:
                em.free_guards, em.known_pieces = saved
            return
        lo, hi = extents[d]
        points = sorted(set(splits.get(d, ())) | cuts.get(d, set()))
        points = [p for p in points if 0 < p < shape[d]]
        bounds = [0] + points + [shape[d]]
        for r, (p0, p1) in enumerate(pairwise(bounds)):
            start = lo if r == 0 else _smax(b, lo, p0)
            end = hi if r == len(bounds) - 2 else _smin(b, hi, p1)
            if isinstance(start, int) and isinstance(end, int) and start >= end:
                continue
            inside = d in splits and splits[d][0] <= p0 and p1 <= splits[d][1]
            n = end - start if isinstance(start, int) and isinstance(end, int) else None
            inner = interior | {d} if inside else interior
            here = {**pieces, **guards.pieces_in(d, p0, p1)}
            if d == last and repeat > 1 and n is not None and start % repeat == 0 and end % repeat == 0:
                step = ir.Constant(I64, repeat)
                with for_range(b, start // repeat, end // repeat, f"d{d}", inner_hints(n // repeat, inside)) as j:
                    base = b.mul(j, step, flags=("nsw", "nuw"))
                    for k in range(repeat):
                        c = base if k == 0 else b.add(base, ir.Constant(I64, k), flags=("nsw", "nuw"))
                        nest(d + 1, coords + [c], inner, here)
                continue
            hints = inner_hints(n, inside) if d == last else None
            with for_range(b, start, end, f"d{d}", hints) as i:
                nest(d + 1, coords + [i], inner, here)

    nest(0, [], set(base), {})
