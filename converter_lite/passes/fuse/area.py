"""Areas of the split model: groups of nodes that become one fused kernel, and the reach table that keeps
fusions acyclic (MindSpore ``split_model/area`` and ``ReachTable``).

Node patterns (MindSpore ``NodePattern``, derived from the op table's ``OpKind``)::

    RESHAPE(1)   index maps that move every element once: Reshape, Transpose, Squeeze, Unsqueeze, Flatten
    ELEMWISE(2)  ELEMWISE/BROADCAST op kinds whose operands all have the output's shape (size-1 constants
                 are immediates and do not count)
    BROADCAST(3) the same ops with a broadcast operand, and the other index maps (Expand, Slice, Concat, Pad)
    REDUCE(4)    reductions
    OPAQUE(5)    everything else; such nodes keep an area (for the reach table) but never fuse

Edge relation of ``value -> node``: BROADCAST when ``node`` is elementwise or a broadcasting index map and
the value's shape (left-padded with 1s) differs from the output shape, else INJECTIVE (a reduction reads its
input elementwise).  An area's pattern is the max of its nodes'; fusing an ELEMWISE area over a BROADCAST
edge makes it BROADCAST.  The dominant node (``nodes[0]``) is the one of the greater pattern.
"""
from __future__ import annotations

import enum

from ...ir.core import Node, Value
from ...ops.registry import OPS, OpKind


class Pattern(enum.IntEnum):
    RESHAPE = 1
    ELEMWISE = 2
    BROADCAST = 3
    REDUCE = 4
    OPAQUE = 5


class Relation(enum.IntEnum):
    INJECTIVE = 0
    BROADCAST = 1


def _aligned(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """``shape`` left-padded with 1s equals ``out``."""
    pad = len(out) - len(shape)
    return pad >= 0 and all(d == 1 for d in out[:pad]) and tuple(out[pad:]) == tuple(shape)


def _is_immediate(v: Value) -> bool:
    return v.const is not None and v.const.size == 1


def base_pattern(node: Node) -> Pattern:
    """The node's pattern ignoring its operands' shapes (ELEMWISE for any elementwise op)."""
    kind = OPS[node.op].kind
    if kind <= OpKind.BROADCAST:
        return Pattern.ELEMWISE
    if kind == OpKind.INJECTIVE:
        data = node.inputs[0]
        moves_once = len(node.outputs) == 1 and data is not None and data.type.size == node.outputs[0].type.size
        return Pattern.RESHAPE if moves_once else Pattern.BROADCAST
    if kind == OpKind.REDUCE:
        return Pattern.REDUCE
    return Pattern.OPAQUE


def edge_relation(node: Node, v: Value) -> Relation:
    """Relation of the edge ``v -> node`` (see the module docstring)."""
    if base_pattern(node) in (Pattern.ELEMWISE, Pattern.BROADCAST):
        return Relation.INJECTIVE if _aligned(v.type.shape, node.outputs[0].type.shape) else Relation.BROADCAST
    return Relation.INJECTIVE


def node_pattern(node: Node) -> Pattern:
    p = base_pattern(node)
    if p == Pattern.ELEMWISE and any(v is not None and not _is_immediate(v) and
                                     edge_relation(node, v) == Relation.BROADCAST for v in node.inputs):
        return Pattern.BROADCAST
    return p


class Area:
    """A set of nodes fused together (one node at first).

    ``inputs``/``users`` map neighbouring areas to the relation of the edge between them (the greater one
    when several edges connect the same two areas); graph inputs and constants are not areas.
    """

    def __init__(self, aid: int, node: Node, fusible: bool, is_output: bool):
        self.id = aid
        self.nodes: list[Node] = [node]
        self.pattern = node_pattern(node) if fusible else Pattern.OPAQUE
        self.fusible = fusible
        self.is_output = is_output
        self.alive = True
        self.inputs: dict[Area, Relation] = {}
        self.users: dict[Area, Relation] = {}
        self.epilogue_of: Node | None = None      # the heavy op this area is the epilogue of

    # -- queries ---------------------------------------------------------------------------------------
    @property
    def dom(self) -> Node:
        return self.nodes[0]

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def compute_size(self) -> int:
        """Element count of the dominant node's first output (-1 when its shape is only known at run time)."""
        t = self.dom.outputs[0].type
        return t.size if t is not None and t.is_static else -1

    @property
    def input_num(self) -> int:
        return len(self.inputs)

    @property
    def user_num(self) -> int:
        return len(self.users)

    def __hash__(self) -> int:
        return self.id

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        return f"<{self.id}:{'-'.join(n.name or n.op for n in self.nodes)}>"

    # -- fusion ----------------------------------------------------------------------------------------
    def fuse_input(self, other: Area) -> None:
        """Absorbs ``other``, which must be an input area of this one (MindSpore ``Area::FuseInput``)."""
        relation = self.inputs.pop(other)
        other.users.pop(self)
        if self.pattern < other.pattern:
            self.nodes = other.nodes + self.nodes
        else:
            self.nodes = self.nodes + other.nodes
        self.pattern = max(self.pattern, other.pattern)
        if self.pattern == Pattern.ELEMWISE and relation == Relation.BROADCAST:
            self.pattern = Pattern.BROADCAST
        self.is_output = self.is_output or other.is_output
        self.epilogue_of = self.epilogue_of or other.epilogue_of
        for a, r in other.inputs.items():
            del a.users[other]
            _link(a, self, r)
        for u, r in other.users.items():
            del u.inputs[other]
            _link(self, u, r)
        other.inputs.clear()
        other.users.clear()
        other.nodes = []
        other.alive = False


def _link(src: Area, dst: Area, relation: Relation) -> None:
    """Records the edge src -> dst, keeping the greater relation."""
    if src is dst:
        return
    r = max(relation, dst.inputs.get(src, relation))
    dst.inputs[src] = r
    src.users[dst] = r


def link_nodes(areas_of: dict[int, Area], node: Node) -> None:
    """Creates the edges from the areas producing ``node``'s inputs to ``node``'s area."""
    dst = areas_of[id(node)]
    for v in node.inputs:
        if v is None or v.producer is None or id(v.producer) not in areas_of:
            continue
        _link(areas_of[id(v.producer)], dst, edge_relation(node, v) if dst.fusible else Relation.INJECTIVE)


class ReachTable:
    """Transitive reachability between areas (bitsets; an area reaches itself).  Updated on every fusion,
    so ``has_circle`` answers for the current, partly fused graph."""

    def __init__(self, areas: list[Area]):
        self.reach: list[int] = [1 << a.id for a in areas]
        for a in reversed(areas):            # areas are in topological order: users come later
            for u in a.users:
                self.reach[a.id] |= self.reach[u.id]
        self.alive: dict[int, Area] = {a.id: a for a in areas}

    def reachable(self, src: Area, dst: Area) -> bool:
        return bool(self.reach[src.id] >> dst.id & 1)

    def fuse(self, target: Area, other: Area) -> None:
        """``other`` was merged into ``target``: whoever reached either now reaches what both reach."""
        merged = self.reach[target.id] | self.reach[other.id]
        mask = (1 << target.id) | (1 << other.id)
        reach = self.reach
        for i in self.alive:
            if reach[i] & mask:
                reach[i] |= merged
        reach[target.id] = merged
        del self.alive[other.id]

    def has_circle(self, a: Area, b: Area) -> bool:
        """Fusing the adjacent areas ``a`` and ``b`` would create a cycle: one reaches the other through an
        area outside both (MindSpore ``ReachTable::HasCircle``)."""
        if self.reachable(a, b):
            return any(i is not a and self.reachable(a, i) for i in b.inputs)
        return any(i is not b and self.reachable(b, i) for i in a.inputs)
