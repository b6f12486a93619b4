"""Fuzz emitters for the index-map ops: Reshape, Transpose, Squeeze, Unsqueeze, Expand, Slice, Concat.

They move values without computing, so they keep every property of their input (bound, grid, loose); shapes
are computed here with ONNX's rules (Reshape 0/-1 and allowzero, bidirectional Expand, Slice clamping with
negative steps and INT64 extremes).
"""
from __future__ import annotations

from fuzz_graph import INT64_MAX, INT64_MIN, GraphMaker, T, broadcast, fits


def _emit_like(g: GraphMaker, op: str, inputs: list, x: T, shape, **attrs) -> T:
    return g.emit(op, inputs, x.dtype, tuple(shape), x.bound, x.grid, x.loose, **attrs)


def _factor(n: int) -> list[int]:
    out, p = [], 2
    while n > 1 and p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def reshape(g: GraphMaker):
    x = g.pick()
    if x is None:
        return None
    rank = g.int_(0 if x.size == 1 else 1, 4)
    if x.size == 0:
        dims = [g.int_(1, 3) for _ in range(max(rank, 1))]
        dims[g.int_(0, len(dims) - 1)] = 0
        return _emit_like(g, "Reshape", [x, g.ints(dims)], x, dims, allowzero=1)
    dims = [1] * rank
    for p in _factor(x.size):
        dims[g.int_(0, rank - 1)] *= p
    spec = list(dims)
    if spec and g.flag():
        spec[g.int_(0, rank - 1)] = -1
    for i in range(min(rank, x.rank)):
        if spec[i] == x.shape[i] and g.flag():
            spec[i] = 0                                   # allowzero=0: copy the input's dim
    return _emit_like(g, "Reshape", [x, g.ints(spec)], x, dims)


def transpose(g: GraphMaker):
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return None
    if g.int_(0, 3) == 0:
        return _emit_like(g, "Transpose", [x], x, x.shape[::-1])
    perm = g.permutation(range(x.rank))
    return _emit_like(g, "Transpose", [x], x, [x.shape[p] for p in perm], perm=perm)


def squeeze(g: GraphMaker):
    x = g.pick(lambda t: 1 in t.shape)
    if x is None:
        return None
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    axes = [i for i in ones if g.flag()]
    if not axes:
        return _emit_like(g, "Squeeze", [x], x, [d for d in x.shape if d != 1])
    spec = [a - x.rank if g.flag() else a for a in g.permutation(axes)]
    return _emit_like(g, "Squeeze", [x, g.ints(spec)], x, [d for i, d in enumerate(x.shape) if i not in axes])


def unsqueeze(g: GraphMaker):
    x = g.pick(lambda t: t.rank <= 3)
    if x is None:
        return None
    out_rank = x.rank + g.int_(1, 2)
    pos = g.permutation(range(out_rank))[: out_rank - x.rank]
    dims = iter(x.shape)
    shape = [1 if i in pos else next(dims) for i in range(out_rank)]
    spec = [p - out_rank if g.flag() else p for p in pos]
    return _emit_like(g, "Unsqueeze", [x, g.ints(spec)], x, shape)


def expand(g: GraphMaker):
    x = g.pick()
    if x is None:
        return None
    target = [g.int_(1, 3) if d == 1 else (1 if g.flag() else d) for d in x.shape]
    target = [g.int_(1, 3) for _ in range(g.int_(0, 1))] + target
    shape = broadcast(x.shape, tuple(target))
    if not fits(shape):
        target, shape = list(x.shape), x.shape
    return _emit_like(g, "Expand", [x, g.ints(target)], x, shape)


def _slice_bound(g: GraphMaker, d: int) -> int:
    k = g.int_(0, 7)
    return INT64_MAX if k == 6 else INT64_MIN if k == 7 else g.int_(-d - 2, d + 2)


def slice_len(d: int, start: int, end: int, step: int) -> int:
    """Output length of ONNX Slice on a dim of size ``d`` (negative indices count from the end; for negative
    steps start is clamped to [0, d-1] and end to [-1, d-1], which is not Python's rule for start < -d)."""
    start, end = start + d if start < 0 else start, end + d if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), d), min(max(end, 0), d)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return max(0, -(-(start - end) // -step))


def slice_(g: GraphMaker):
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return None
    axes = g.permutation([a for a in range(x.rank) if g.flag()] or [x.rank - 1])
    shape, starts, ends, steps = list(x.shape), [], [], []
    for a in axes:
        d, step = x.shape[a], g.choice([1, 2, -1, 3, -2])
        start, end = _slice_bound(g, d), _slice_bound(g, d)
        if end == INT64_MAX and step < 0:
            end = INT64_MIN         # onnxruntime reads INT64_MAX as "to the far end" for negative steps too
        n = slice_len(d, start, end, step)
        if n == 0 and not g.allow_empty:
            start, end = (0, INT64_MAX) if step > 0 else (-1, INT64_MIN)
            n = slice_len(d, start, end, step)
        shape[a] = n
        starts.append(start)
        ends.append(end)
        steps.append(step)
    ins = [x, g.ints(starts), g.ints(ends)]
    if axes != list(range(len(axes))) or g.flag():
        ins.append(g.ints([a - x.rank if g.flag() else a for a in axes]))
        if steps != [1] * len(steps) or g.flag():
            ins.append(g.ints(steps))
    elif steps != [1] * len(steps):
        ins += [None, g.ints(steps)]
    return _emit_like(g, "Slice", ins, x, shape)


def concat(g: GraphMaker):
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return None
    axis = g.int_(-x.rank, x.rank - 1)
    a = axis % x.rank
    parts = [x]
    for _ in range(g.int_(1, 2)):
        how = g.choice(["const", "self", "pool", "input"])
        other = None
        if how == "self":
            other = x
        elif how == "pool":
            other = g.pick(lambda t: t.dtype == x.dtype and t.rank == x.rank
                           and all(d == e for i, (d, e) in enumerate(zip(t.shape, x.shape)) if i != a))
        if other is None:
            lo = 0 if g.allow_empty else 1
            shape = tuple(g.int_(lo, 3) if i == a else d for i, d in enumerate(x.shape))
            other = (g.input(x.dtype, shape, exact=g.flag()) if how == "input" else
                     g.random_const(x.dtype, shape, exact=x.grid is not None and g.flag()))
        parts.append(other)
    shape = list(x.shape)
    shape[a] = sum(p.shape[a] for p in parts)
    if not fits(tuple(shape)):
        return None
    grid = None if any(p.is_float and p.grid is None for p in parts) else min(
        (p.grid for p in parts if p.grid is not None), default=None)
    return g.emit("Concat", parts, x.dtype, shape, max(p.bound for p in parts), grid, any(p.loose for p in parts),
                  axis=axis)
