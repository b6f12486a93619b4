"""GraphMaker: the pool of typed tensors a fuzz graph is built from, and the ONNX model it becomes.

Every tensor ``T`` carries what the generator needs to keep the graph valid and the comparison meaningful:

- ``dtype`` and the static ``shape``;
- ``bound``: |value| <= bound, so no op overflows and no float result loses all precision;
- ``grid``: float values are exact multiples of ``grid`` (1.0 integers, 0.5 halves) computed without rounding.
  Only such values may reach a step function (Cast to an integer type or bool, Equal, Floor/Ceil/Round): an
  ulp of difference between two correct implementations can never put them on different sides of a step;
- ``loose``: the values went through float16 arithmetic, so they are compared with float16 tolerances and never
  reach a step function.

Draws go through hypothesis (``self.draw``) so every choice shrinks: lists shrink towards the most recent
tensor, op choices towards the first entry of the op table, numbers towards 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
from helpers import IR_VERSION, OPSET
from hypothesis import strategies as st

FLOATS = ("float32", "float16")
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
MAX_ELEMS = 256                   # largest tensor a graph may hold (keeps compilation and ORT fast)
FLOAT_LIMIT = 64.0                # float ops clip their inputs so results stay within this bound
INT_LIMIT = 10_000                # integer ops never get near overflow
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@dataclass(frozen=True)
class T:
    """A tensor of the graph under construction (see the module docstring)."""
    name: str
    dtype: str
    shape: tuple[int, ...]
    bound: float = 1.0
    grid: float | None = None
    loose: bool = False

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS

    @property
    def exact(self) -> bool:
        """Safe input of a step function."""
        return not self.is_float or (self.grid is not None and not self.loose)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """Multidirectional (numpy) broadcast of ``shapes``, or None if they do not broadcast."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def fits(shape: tuple[int, ...] | None) -> bool:
    return shape is not None and math.prod(shape) <= MAX_ELEMS


class GraphMaker:
    """Collects inputs, initializers and nodes; ``pool`` holds every tensor ops may read (not initializers)."""

    def __init__(self, draw, allow_empty: bool = False):
        self.draw = draw
        self.allow_empty = allow_empty
        self.nodes: list[onnx.NodeProto] = []
        self.node_outputs: list[T] = []            # the T each node produced (for duplicating nodes)
        self.inputs: list[tuple[T, str]] = []      # (tensor, data kind)
        self.inits: dict[str, np.ndarray] = {}
        self.pool: list[T] = []
        self._count = 0

    # -- names and draws ---------------------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def choice(self, options):
        return self.draw(st.sampled_from(list(options)))

    def flag(self) -> bool:
        return self.draw(st.booleans())

    def int_(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def permutation(self, items):
        return list(self.draw(st.permutations(list(items))))

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.draw(st.integers(0, 2**32 - 1)))

    def pick(self, pred=lambda t: True) -> T | None:
        """A pool tensor satisfying ``pred``: the most recent one (chains) or any (diamonds, shared values)."""
        cands = [t for t in reversed(self.pool) if pred(t)]
        if not cands:
            return None
        return cands[0] if self.flag() else cands[self.int_(0, len(cands) - 1)]

    # -- shapes -----------------------------------------------------------------------------------------
    def shape(self, max_rank: int = 4) -> tuple[int, ...]:
        rank = self.int_(0, max_rank)
        lo = 0 if self.allow_empty and self.int_(0, 5) == 0 else 1
        dims = tuple(self.int_(lo, 5) if lo == 0 else self.int_(1, 5) for _ in range(rank))
        return dims if fits(dims) else dims[-2:]

    def partner_shape(self, s: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with ``s``: drop leading dims, set some to 1, or grow 1-dims of ``s``."""
        k = self.int_(0, len(s))
        p = [1 if self.flag() else d for d in s[k:]]
        if self.flag():
            p = [self.int_(2, 3) if d == 1 and s[k + i] == 1 and self.flag() else d for i, d in enumerate(p)]
            if k == 0 and self.flag():
                p = [self.int_(1, 3)] + p
        p = tuple(p)
        return p if fits(broadcast(s, p)) else tuple(s[k:])

    # -- leaves -----------------------------------------------------------------------------------------
    def input(self, dtype: str, shape: tuple[int, ...], exact: bool = False) -> T:
        """A graph input; float inputs are uniform in [-3, 3] or (``exact``) integers in [-4, 4]."""
        kind = "int" if exact or dtype not in FLOATS else "real"
        t = T(self.fresh("in"), dtype, shape, bound=1 if dtype == "bool" else (3.0 if kind == "real" else 5),
              grid=1.0 if kind == "int" and dtype in FLOATS else None)
        self.inputs.append((t, kind))
        self.pool.append(t)
        return t

    def const(self, array: np.ndarray, grid: float | None = None) -> T:
        """An initializer (not in the pool: ops read it, outputs never are constants)."""
        array = np.asarray(array)
        name = self.fresh("c")
        self.inits[name] = array
        bound = float(np.max(np.abs(array.astype(np.float64)))) if array.size else 0.0
        return T(name, array.dtype.name, array.shape, bound=bound, grid=grid)

    def ints(self, values) -> T:
        """An int64 1-D initializer (axes, shapes, slice bounds)."""
        return self.const(np.array(list(values), dtype=np.int64))

    def random_const(self, dtype: str, shape: tuple[int, ...], exact: bool, nonzero: bool = False) -> T:
        rng = self.rng()
        if dtype == "bool":
            return self.const(np.asarray(rng.random(shape) < 0.5))
        if dtype in INTS or exact:
            vals = rng.integers(-3, 4, size=shape)
            if nonzero:
                vals = np.where(vals == 0, 2, vals)
            return self.const(np.asarray(vals).astype(dtype), grid=1.0 if dtype in FLOATS else None)
        vals = rng.uniform(-2, 2, size=shape)
        if nonzero:
            vals = np.where(np.abs(vals) < 0.5, np.copysign(0.5, vals), vals)
        return self.const(np.asarray(vals).astype(dtype))

    def scalar(self, value, dtype: str) -> T:
        grid = 0.5 if dtype in FLOATS and float(value) * 2 == int(float(value) * 2) else None
        return self.const(np.array(value, dtype=dtype), grid=grid)

    # -- nodes ------------------------------------------------------------------------------------------
    def emit(self, op: str, inputs: list, dtype: str, shape: tuple[int, ...], bound: float = 1.0,
             grid: float | None = None, loose: bool = False, **attrs) -> T:
        """Appends node ``op`` reading ``inputs`` (T, name or None = omitted) and returns its output."""
        names = ["" if x is None else (x if isinstance(x, str) else x.name) for x in inputs]
        while names and names[-1] == "":
            names.pop()
        # float16 arithmetic is loose: onnxruntime's CPU provider computes most float16 ops in float32 and
        # drops the float32 -> float16 -> float32 cast pairs around them, so it skips roundings we make
        loose = (loose or (dtype == "float16" and grid is None)) and dtype in FLOATS
        out = T(self.fresh("t"), dtype, tuple(shape), bound=float(bound),
                grid=grid if dtype in FLOATS else None, loose=loose)
        self.nodes.append(oh.make_node(op, names, [out.name], name=self.fresh(op.lower() + "_"), **attrs))
        self.node_outputs.append(out)
        self.pool.append(out)
        return out

    def duplicate(self) -> T | None:
        """Re-emits an existing node on the same inputs (a common subexpression)."""
        if not self.nodes:
            return None
        i = self.int_(0, len(self.nodes) - 1)
        node, out = self.nodes[-1 - i], self.node_outputs[-1 - i]
        new = replace(out, name=self.fresh("t"))
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = self.fresh("dup_")
        copy.output[0] = new.name
        self.nodes.append(copy)
        self.node_outputs.append(new)
        self.pool.append(new)
        return new

    def limit(self, x: T, bound: float) -> T:
        """``x`` clipped to [-bound, bound] when its bound is larger (Clip keeps exact values exact)."""
        if x.dtype == "bool" or x.bound <= bound:
            return x
        b = float(int(bound)) if bound >= 1 else bound
        lo, hi = self.scalar(-b, x.dtype), self.scalar(b, x.dtype)
        grid = x.grid if x.grid is not None and b % x.grid == 0 else None
        return self.emit("Clip", [x, lo, hi], x.dtype, x.shape, bound=b, grid=grid, loose=x.loose)

    # -- the model --------------------------------------------------------------------------------------
    def model(self, outputs: list[T]) -> onnx.ModelProto:
        def info(t: T):
            return oh.make_tensor_value_info(t.name, oh.np_dtype_to_tensor_dtype(np.dtype(t.dtype)),
                                             list(t.shape))
        graph = oh.make_graph(self.nodes, "fuzz", [info(t) for t, _ in self.inputs], [info(t) for t in outputs],
                              initializer=[onh.from_array(v, k) for k, v in self.inits.items()])
        return oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)], ir_version=IR_VERSION)

    def feeds(self, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        out = {}
        for t, kind in self.inputs:
            if t.dtype == "bool":
                a = rng.random(t.shape) < 0.5
            elif kind == "int":
                a = rng.integers(-4, 5, size=t.shape)
            else:
                a = rng.uniform(-3, 3, size=t.shape)
            out[t.name] = np.asarray(a).astype(t.dtype)
        return out
