"""The fuzz op table: one emitter per family of fusable ONNX ops (opset 21 forms).

An emitter reads tensors from the GraphMaker's pool (or makes constants/inputs of compatible shapes), appends
one or a few nodes and returns the last output, or None when the pool has nothing it can use.  Each keeps the
invariants of ``fuzz_graph.T``: bounded magnitudes (inputs are clipped first where needed), step functions
(Cast to int/bool, Equal, Floor/Ceil/Round) only on exact values, no division by zero, no Log/Sqrt of
negatives, no integer overflow.
"""
from __future__ import annotations

import math

import onnx
from fuzz_graph import (
    FLOAT_LIMIT,
    INT_LIMIT,
    INTS,
    NUMERIC,
    GraphMaker,
    T,
    broadcast,
    fits,
)

TO = {"float32": onnx.TensorProto.FLOAT, "float16": onnx.TensorProto.FLOAT16, "int32": onnx.TensorProto.INT32,
      "int64": onnx.TensorProto.INT64, "bool": onnx.TensorProto.BOOL}


def _limit_of(t: T) -> float:
    return FLOAT_LIMIT if t.is_float else INT_LIMIT


def _min_grid(*ts: T) -> float | None:
    grids = [t.grid for t in ts]
    return None if any(g is None for g in grids) else min(grids)


def partner(g: GraphMaker, a: T, pred=lambda t: True, exact: bool = False, nonzero: bool = False) -> T:
    """A second operand of ``a``'s dtype whose shape broadcasts with ``a``: a pool tensor (shared
    subexpression), a new constant of a compatible shape, or a new graph input."""
    how = g.choice(["const", "pool", "input"])
    if how == "pool" and not nonzero:
        b = g.pick(lambda t: t.dtype == a.dtype and pred(t) and (t.exact or not exact)
                   and fits(broadcast(a.shape, t.shape)))
        if b is not None:
            return b
    shape = g.partner_shape(a.shape)
    if how == "input" and not nonzero:
        return g.input(a.dtype, shape, exact=exact or g.flag())
    return g.random_const(a.dtype, shape, exact=exact or (a.grid is not None and g.flag()), nonzero=nonzero)


def positive(g: GraphMaker, x: T, offset: float) -> T:
    """Abs(x) + offset (>= offset > 0)."""
    a = g.emit("Abs", [x], x.dtype, x.shape, x.bound, x.grid, x.loose)
    c = g.scalar(offset, x.dtype)
    return g.emit("Add", [a, c], x.dtype, x.shape, x.bound + offset, _min_grid(a, c), x.loose)


# -- elementwise --------------------------------------------------------------------------------------------
def unary_float(g: GraphMaker):
    op = g.choice(["Relu", "Abs", "Neg", "Sigmoid", "Tanh", "Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Floor",
                   "Ceil", "Round", "Sign", "IsNaN", "IsInf"])
    if op in ("Floor", "Ceil", "Round"):
        x = g.pick(lambda t: t.is_float and t.exact)
    else:
        x = g.pick(lambda t: t.is_float)
    if x is None:
        return None
    d, s, lo = x.dtype, x.shape, x.loose
    if op in ("Relu", "Abs", "Neg"):
        return g.emit(op, [x], d, s, x.bound, x.grid, lo)
    if op in ("Sigmoid", "Tanh", "Erf"):
        return g.emit(op, [x], d, s, 1.0, None, lo)
    if op == "Exp":
        x = g.limit(x, 3)
        return g.emit(op, [x], d, s, math.exp(x.bound), None, lo)
    if op == "Log":
        c = g.choice([1.0, 0.5, 2.0])
        p = positive(g, x, c)
        return g.emit(op, [p], d, s, max(abs(math.log(c)), math.log(p.bound)), None, lo)
    if op == "Sqrt":
        a = g.emit("Abs", [x], d, s, x.bound, x.grid, lo)
        return g.emit(op, [a], d, s, math.sqrt(x.bound), None, lo)
    if op == "Reciprocal":
        return g.emit(op, [positive(g, x, 1.0)], d, s, 1.0, None, lo)
    if op in ("Floor", "Ceil", "Round"):
        return g.emit(op, [x], d, s, x.bound + 1, 1.0, lo)
    if op == "Sign":
        return g.emit(op, [x], d, s, 1.0, 1.0, lo)
    return g.emit(op, [x], "bool", s)                       # IsNaN / IsInf


def unary_int(g: GraphMaker):
    op = g.choice(["Abs", "Neg", "Sign", "Relu", "BitwiseNot"])
    x = g.pick(lambda t: t.dtype in (("int32",) if op == "Relu" else INTS))
    if x is None:
        return None
    return g.emit(op, [x], x.dtype, x.shape, x.bound + 1)


def halve(g: GraphMaker):
    """x * 0.5 or x / 2 of exact floats: exact halves, the inputs Round's half-to-even rule is about."""
    x = g.pick(lambda t: t.is_float and t.exact)
    if x is None:
        return None
    op = g.choice(["Mul", "Div"])
    c = g.scalar(0.5 if op == "Mul" else 2.0, x.dtype)
    return g.emit(op, [x, c], x.dtype, x.shape, x.bound / 2, x.grid / 2)


def arith(g: GraphMaker):
    op = g.choice(["Add", "Sub", "Mul", "Max", "Min"])
    a = g.pick(lambda t: t.dtype in NUMERIC)
    if a is None:
        return None
    lim = math.sqrt(_limit_of(a)) if op == "Mul" else _limit_of(a) / 2
    a = g.limit(a, lim)
    b = g.limit(partner(g, a), lim)
    shape = broadcast(a.shape, b.shape)
    if op == "Mul":
        bound, grid = a.bound * b.bound, (None if _min_grid(a, b) is None else a.grid * b.grid)
    else:
        bound = a.bound + b.bound if op in ("Add", "Sub") else max(a.bound, b.bound)
        grid = _min_grid(a, b)
    return g.emit(op, [a, b], a.dtype, shape, bound, grid, a.loose or b.loose)


def div(g: GraphMaker):
    """Float or integer Div (integer Div truncates towards zero) by a non-zero constant or |b| + 1."""
    a = g.pick(lambda t: t.dtype in NUMERIC)
    if a is None:
        return None
    if g.flag():
        b = partner(g, a, nonzero=True)
        a = g.limit(a, _limit_of(a) / 2)
        bound = a.bound * 2
    else:
        b = positive(g, g.limit(partner(g, a), _limit_of(a)), 1)
        bound = a.bound
    return g.emit("Div", [a, b], a.dtype, broadcast(a.shape, b.shape), bound, None, a.loose or b.loose)


def pow_(g: GraphMaker):
    a = g.pick(lambda t: t.dtype in NUMERIC)
    if a is None:
        return None
    if a.dtype in INTS:
        a = g.limit(a, 10)
        e = g.scalar(g.choice([2, 0, 1, 3]), a.dtype)
        return g.emit("Pow", [a, e], a.dtype, a.shape, 1000)
    if g.flag():
        k = g.choice([2.0, 3.0])
        a = g.limit(a, 4)
        e = g.scalar(k, a.dtype)
        grid = 1.0 if a.grid == 1.0 else None
        return g.emit("Pow", [a, e], a.dtype, a.shape, a.bound ** k, grid, a.loose)
    base = positive(g, g.limit(a, 4), 0.5)
    e = g.limit(partner(g, a), 2)
    return g.emit("Pow", [base, e], a.dtype, broadcast(base.shape, e.shape), base.bound ** 2, None,
                  a.loose or e.loose)


def mod(g: GraphMaker):
    a = g.pick(lambda t: t.dtype in NUMERIC)
    if a is None:
        return None
    fmod = 1 if a.is_float else g.choice([0, 1])
    if g.flag() or a.is_float:
        b = partner(g, a, nonzero=True, exact=True)
    else:
        b = positive(g, g.limit(partner(g, a), INT_LIMIT), 1)
        if g.flag():
            b = g.emit("Neg", [b], b.dtype, b.shape, b.bound)
    grid = a.grid if a.grid is not None and b.grid is not None and b.grid >= a.grid else None
    return g.emit("Mod", [a, b], a.dtype, broadcast(a.shape, b.shape), a.bound, grid, a.loose, fmod=fmod)


def bitwise(g: GraphMaker):
    op = g.choice(["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
    a = g.pick(lambda t: t.dtype in INTS)
    if a is None:
        return None
    b = partner(g, a)
    return g.emit(op, [a, b], a.dtype, broadcast(a.shape, b.shape), 2 * max(a.bound, b.bound) + 1)


def compare(g: GraphMaker):
    op = g.choice(["Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual"])
    ok_dtypes = NUMERIC + (("bool",) if op == "Equal" else ())

    def usable(t: T) -> bool:
        return t.dtype in ok_dtypes and (t.exact or (op != "Equal" and not t.loose))
    a = g.pick(usable)
    if a is None:
        return None
    b = partner(g, a, pred=usable, exact=op == "Equal" or a.exact)
    return g.emit(op, [a, b], "bool", broadcast(a.shape, b.shape))


def logical(g: GraphMaker):
    op = g.choice(["And", "Or", "Xor", "Not"])
    a = g.pick(lambda t: t.dtype == "bool")
    if a is None:
        return None
    if op == "Not":
        return g.emit(op, [a], "bool", a.shape)
    b = partner(g, a)
    return g.emit(op, [a, b], "bool", broadcast(a.shape, b.shape))


def where(g: GraphMaker):
    x = g.pick(lambda t: t.dtype in NUMERIC)
    if x is None:
        return None
    y = partner(g, x)
    xy = broadcast(x.shape, y.shape)
    c = g.pick(lambda t: t.dtype == "bool" and fits(broadcast(xy, t.shape)))
    if c is None:
        c = g.random_const("bool", g.partner_shape(xy), exact=True)
    return g.emit("Where", [c, x, y], x.dtype, broadcast(c.shape, xy), max(x.bound, y.bound), _min_grid(x, y),
                  x.loose or y.loose)


def cast(g: GraphMaker):
    x = g.pick()
    if x is None:
        return None
    if not x.exact:
        to = g.choice(["float32", "float16"])          # not a step function: only between float types
        return g.emit("Cast", [x], to, x.shape, x.bound, None, x.loose or to == "float16", to=TO[to])
    to = g.choice(["float32", "int64", "float16", "int32", "bool"])
    if to == "float16":
        x = g.limit(x, 1024)
    if to == "bool":
        return g.emit("Cast", [x], to, x.shape, to=TO[to])
    grid = 1.0 if not x.is_float else x.grid
    if to in INTS:
        grid = None
    return g.emit("Cast", [x], to, x.shape, x.bound, grid, False, to=TO[to])


def clip(g: GraphMaker):
    x = g.pick(lambda t: t.dtype in NUMERIC)
    if x is None:
        return None
    vals = [-2, -1, 0, 1, 2, 3] if x.dtype in INTS else [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0]
    lo = g.scalar(g.choice(vals), x.dtype) if g.flag() else None
    hi = g.scalar(g.choice(vals), x.dtype) if g.flag() else None
    bound = x.bound if hi is None or lo is None else max(lo.bound, hi.bound)
    grid = None if x.grid is None else min(x.grid, 0.5)
    return g.emit("Clip", [x, lo, hi], x.dtype, x.shape, bound, grid, x.loose)


# -- reductions and normalizations -------------------------------------------------------------------------
def reduce(g: GraphMaker):
    op = g.choice(["ReduceSum", "ReduceMax", "ReduceMean", "ReduceMin"])
    ok = NUMERIC + (("bool",) if op in ("ReduceMax", "ReduceMin") else ())
    x = g.pick(lambda t: t.dtype in ok and (t.size > 0 or op == "ReduceSum"))
    if x is None:
        return None
    r = x.rank
    axes = [a for a in range(r) if g.flag()]
    # negative axes only on non-empty tensors: onnxruntime mis-shapes e.g. ReduceSum(axes=[-4]) of [0,0,0,0]
    axes = [a - r if g.flag() and x.size else a for a in g.permutation(axes)] if axes else axes
    keepdims = g.choice([1, 0])
    noop = 1 if not axes and g.int_(0, 3) == 0 else 0
    attrs = {"keepdims": keepdims, **({"noop_with_empty_axes": 1} if noop else {})}
    given = bool(axes) or g.flag()
    reduced = {a % r for a in axes} if axes else (set() if noop else set(range(r)))
    count = math.prod(x.shape[a] for a in reduced)
    if op == "ReduceSum" and x.bound * count > 4 * _limit_of(x):
        x = g.limit(x, max(1, 4 * _limit_of(x) // max(count, 1)))
    shape = tuple(1 if a in reduced else d for a, d in enumerate(x.shape) if keepdims or a not in reduced)
    bound = x.bound * max(count, 1) if op == "ReduceSum" else x.bound
    grid = None if op == "ReduceMean" else x.grid
    ins = [x, g.ints(axes)] if given else [x]
    return g.emit(op, ins, x.dtype, shape, bound, grid, x.loose, **attrs)


def softmax(g: GraphMaker):
    x = g.pick(lambda t: t.is_float and t.rank >= 1)
    if x is None:
        return None
    return g.emit("Softmax", [x], x.dtype, x.shape, 1.0, None, x.loose, axis=g.int_(-x.rank, x.rank - 1))


def layer_norm(g: GraphMaker):
    x = g.pick(lambda t: t.is_float and t.rank >= 1 and t.size > 0)
    if x is None:
        return None
    axis = g.int_(-x.rank, x.rank - 1)
    norm = x.shape[axis:]
    rng = g.rng()
    scale = g.const(rng.uniform(0.5, 1.5, norm).astype(x.dtype))
    bias = g.const(rng.uniform(-1, 1, norm).astype(x.dtype)) if g.flag() else None
    # epsilon >= 1e-3: on a row of equal values (common after Expand/Where) x - mean is float32 rounding noise
    # divided by sqrt(epsilon); onnxruntime accumulates the mean in double, so with 1e-5 a few ulps of our float32
    # mean exceed atol without any bug (and the float64 twin cannot see it)
    eps = g.choice([1e-3, 1e-2])
    bound = 1.5 * math.sqrt(math.prod(norm)) + 1
    return g.emit("LayerNormalization", [x, scale, bias], x.dtype, x.shape, bound, None, x.loose, axis=axis,
                  epsilon=eps)
