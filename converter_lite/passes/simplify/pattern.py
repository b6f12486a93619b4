"""A tiny pattern matcher over the IR, used by the arithmetic-simplify rules and the named fusions.

Patterns are written with the same operator syntax as the math they match::

    x, y = Var("x"), Var("y")
    c1 = Const("c1")                         # any constant, bound by name
    x + 0                                    # Add(x, <constant whose elements are all 0>)
    op.Log(op.Exp(x))                        # any op type through the ``op`` namespace
    op.ReduceSum(-x, Opt("axes"), bind="r")  # Opt: an optional input; bind: name the matched node
    op.Div(x, c1) | op.Mul(x, c1)            # alternatives

Matching rules:

1. ``Var`` matches any value; a name used twice must match the same value (or equal constants).
2. ``Const`` matches a constant (``scalar=True``: of one element); a repeated name needs equal values.
3. A number ``k`` (``Lit``) matches a constant whose elements all equal ``k`` (``rtol`` for approximate).
4. ``op.X(...)`` matches output 0 of a node of type X with the same inputs (trailing omitted inputs are
   ``None``; a final ``...`` accepts further inputs); ``Add`` and ``Mul`` also match with swapped inputs.
   Keyword attributes must be equal to the node's attribute, or are predicates called with its value.
5. Matching never mutates the graph.

The same objects serve as rewrite templates (``instantiate``): variables and constants are replaced by their
bindings, numbers become constants of the root's dtype, and ops are emitted through a ``GraphBuilder``;
``like="r"`` copies the attributes of the bound node ``r``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ...ir.core import Node, Value
from ...ops.builder import GraphBuilder

COMMUTATIVE = frozenset({"Add", "Mul"})


class MatchResult:
    """The outcome of a ``check``: truthy on success, otherwise carries the reason it failed."""
    __slots__ = ("ok", "reason")

    def __init__(self, ok: bool = True, reason: str = ""):
        self.ok, self.reason = ok, reason

    def __bool__(self) -> bool:
        return self.ok

    @staticmethod
    def fail(reason: str) -> MatchResult:
        return MatchResult(False, reason)

    def __repr__(self) -> str:
        return "MatchResult(ok)" if self.ok else f"MatchResult.fail({self.reason!r})"


class Match:
    """Bindings of one successful match: ``m["x"]`` is a Value, ``m.node("r")`` a Node, ``m.root`` the
    root node, ``m.nodes`` every matched node (inputs before users) and ``m.graph`` the graph matched in
    (set by the rule driver before ``check`` runs)."""

    def __init__(self, values=None, named=None, nodes=None):
        self.values: dict[str, Value | None] = dict(values or {})
        self.named: dict[str, Node] = dict(named or {})
        self.nodes: list[Node] = list(nodes or [])
        self.graph = None

    def copy(self) -> Match:
        return Match(self.values, self.named, self.nodes)

    def __getitem__(self, name: str) -> Value | None:
        return self.values[name]

    def node(self, name: str) -> Node:
        return self.named[name]

    def const(self, name: str) -> np.ndarray:
        return self.values[name].const

    @property
    def root(self) -> Node:
        return self.nodes[-1]


class Pattern:
    """Base class; arithmetic operators build ``OpPattern`` trees."""

    def __add__(self, o): return OpPattern("Add", (self, lift(o)))
    def __radd__(self, o): return OpPattern("Add", (lift(o), self))
    def __sub__(self, o): return OpPattern("Sub", (self, lift(o)))
    def __rsub__(self, o): return OpPattern("Sub", (lift(o), self))
    def __mul__(self, o): return OpPattern("Mul", (self, lift(o)))
    def __rmul__(self, o): return OpPattern("Mul", (lift(o), self))
    def __truediv__(self, o): return OpPattern("Div", (self, lift(o)))
    def __rtruediv__(self, o): return OpPattern("Div", (lift(o), self))
    def __pow__(self, o): return OpPattern("Pow", (self, lift(o)))
    def __neg__(self): return OpPattern("Neg", (self,))
    def __or__(self, o): return Alt(self, lift(o))

    def match(self, v: Value | None, m: Match) -> Iterator[Match]:
        raise NotImplementedError

    def root_ops(self) -> tuple[str, ...]:
        """Op types a matching root node can have (empty: not rooted at an op)."""
        return ()


def lift(x: Any) -> Pattern:
    if isinstance(x, Pattern):
        return x
    if isinstance(x, (int, float, np.number)):
        return Lit(float(x))
    raise TypeError(f"cannot use {x!r} in a pattern")


def _same(a: Value, b: Value) -> bool:
    if a is b:
        return True
    return (a.is_const and b.is_const and a.const.dtype == b.const.dtype and a.const.shape == b.const.shape
            and bool(np.array_equal(a.const, b.const, equal_nan=True)))


class Var(Pattern):
    def __init__(self, name: str):
        self.name = name

    def match(self, v, m):
        if v is None:
            return
        old = m.values.get(self.name)
        if old is None and self.name not in m.values:
            m = m.copy()
            m.values[self.name] = v
            yield m
        elif old is not None and _same(old, v):
            yield m

    def __repr__(self) -> str:
        return self.name


class Opt(Var):
    """An optional input: matches an omitted input (bound to None) or any value."""

    def match(self, v, m):
        if v is None:
            if self.name not in m.values:
                m = m.copy()
                m.values[self.name] = None
                yield m
            elif m.values[self.name] is None:
                yield m
            return
        yield from super().match(v, m)


class Const(Var):
    def __init__(self, name: str, scalar: bool = False):
        super().__init__(name)
        self.scalar = scalar

    def match(self, v, m):
        if v is None or not v.is_const or (self.scalar and v.const.size != 1):
            return
        yield from super().match(v, m)


class Lit(Pattern):
    def __init__(self, value: float, rtol: float = 0.0):
        self.value, self.rtol = value, rtol

    def match(self, v, m):
        if v is None or not v.is_const or v.const.size == 0 or v.const.dtype == np.bool_:
            return
        data = v.const.astype(np.float64)
        if self.rtol:
            ok = np.allclose(data, self.value, rtol=self.rtol, atol=0.0)
        else:
            ok = bool(np.all(data == self.value))
        if ok:
            yield m

    def __repr__(self) -> str:
        return repr(self.value)


class Alt(Pattern):
    def __init__(self, *alternatives: Pattern):
        self.alternatives = alternatives

    def match(self, v, m):
        for a in self.alternatives:
            yield from a.match(v, m)

    def root_ops(self):
        return tuple(o for a in self.alternatives for o in a.root_ops())


class OpPattern(Pattern):
    def __init__(self, op: str | tuple[str, ...], inputs: tuple, attrs: dict | None = None,
                 bind: str | None = None, like: str | None = None):
        self.ops = (op,) if isinstance(op, str) else tuple(op)
        self.rest = bool(inputs) and inputs[-1] is Ellipsis
        self.inputs = tuple(lift(i) for i in (inputs[:-1] if self.rest else inputs))
        self.attrs = dict(attrs or {})
        self.bind, self.like = bind, like

    def root_ops(self):
        return self.ops

    def match(self, v, m):
        node = v.producer if v is not None else None
        if node is None or node.op not in self.ops or v.index != 0:
            return
        ins = list(node.inputs)
        while ins and ins[-1] is None:
            ins.pop()
        if len(ins) > len(self.inputs) and not self.rest:
            return
        ins += [None] * (len(self.inputs) - len(ins))
        for key, want in self.attrs.items():
            have = node.attrs.get(key)
            if not (want(have) if callable(want) else have == want):
                return
        if self.bind is not None:
            if self.bind in m.named and m.named[self.bind] is not node:
                return
            m = m.copy()
            m.named[self.bind] = node
        orders = [self.inputs]
        if node.op in COMMUTATIVE and len(self.inputs) == 2:
            orders.append(self.inputs[::-1])
        for pats in orders:
            for done in _match_all(pats, ins, m):
                if node not in done.nodes:
                    done = done.copy()
                    done.nodes.append(node)
                yield done

    def __repr__(self) -> str:
        return f"{'|'.join(self.ops)}({', '.join(map(repr, self.inputs))}{', ...' if self.rest else ''})"


def _match_all(pats, values, m: Match) -> Iterator[Match]:
    if not pats:
        yield m
        return
    for m1 in pats[0].match(values[0], m):
        yield from _match_all(pats[1:], values[1:], m1)


class _OpNamespace:
    """``op.Sqrt(x)`` -> OpPattern("Sqrt", (x,)); keyword arguments are attributes, except ``bind``/``like``."""

    def __getattr__(self, name: str) -> Callable[..., OpPattern]:
        if name.startswith("_"):
            raise AttributeError(name)

        def make(*inputs, bind: str | None = None, like: str | None = None, **attrs) -> OpPattern:
            return OpPattern(name, inputs, attrs, bind=bind, like=like)
        return make


op = _OpNamespace()


def match(pattern: Pattern, v: Value) -> Iterator[Match]:
    """Every way ``pattern`` matches ``v`` (lazily; the first is the preferred one)."""
    return pattern.match(v, Match())


def instantiate(template: Pattern, m: Match, b: GraphBuilder, like: Value) -> Value | None:
    """Builds ``template`` with the bindings of ``m``; numbers become constants of ``like``'s dtype."""
    if isinstance(template, Var):
        return m.values[template.name]
    if isinstance(template, Lit):
        return b.const(template.value, like.type.dtype)
    if isinstance(template, OpPattern):
        ins = [instantiate(t, m, b, like) for t in template.inputs]
        while ins and ins[-1] is None:
            ins.pop()
        attrs = dict(m.named[template.like].attrs) if template.like else {}
        attrs.update({k: (a(m) if callable(a) else a) for k, a in template.attrs.items()})
        return b.node(template.ops[0], *ins, **attrs).outputs[0]
    raise TypeError(f"{template!r} cannot be used as a rewrite template")
