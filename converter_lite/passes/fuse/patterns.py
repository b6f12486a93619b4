"""Fusion patterns of the split model, applied in MindSpore's CPU order (``SplitModelCpu``).

Each pattern is a named object: ``check(dom)`` says whether the dominant area qualifies, ``match(dom,
reach)`` returns the neighbouring areas to fuse with it and the direction, without changing anything
(the driver in ``split_model.py`` applies the result).  Only fusible areas are ever returned, and every
candidate is cycle-checked with the reach table (``has_circle``).

1. ``reshape``: an index-map area (RESHAPE) fuses with the neighbour (user or input) of the lowest pattern
   <= BROADCAST.
2. ``elemwise_fwd_depth`` / ``_width``: an ELEMWISE area pulls ELEMWISE inputs over injective edges with the
   same compute size (depth: single input area with a single user).
3. ``epilogue``: an area <= BROADCAST reading the output of a MatMul/Gemm/Conv (which stays outside) pulls
   every user that is <= BROADCAST with the same compute size: bias add, activation and residual add form
   one kernel right after the heavy op (the slot of MindSpore's CPU ``conv`` pattern).
4. ``elemwise_broadcast_fwd_depth`` / ``_width``: as 2 for ELEMWISE/BROADCAST areas and inputs.
5. ``reduce_fwd_depth`` / ``_width``: a REDUCE area pulls inputs <= BROADCAST over injective edges whose size
   is at most ``reduce_fuse_depth``.  (MindSpore's newest rule takes only ELEMWISE inputs, an AKG schedule
   limit; on the CPU a reduction reading a broadcast operand is just an index map, so BROADCAST inputs are
   taken too, e.g. ``d = x - mean`` into LayerNorm's variance.)
6. ``elemwise_broadcast_bwd_depth`` / ``_width``: an ELEMWISE/BROADCAST area that is not a graph output and
   has at most ``BROADCAST_FUSE_DEPTH`` nodes is pulled into ALL its users if they are <= REDUCE (a REDUCE
   user only for an ELEMWISE area over an injective edge; width: users of equal compute size; never into a
   user reading it through a Pad: a window kernel would recompute it for every tap).
7. ``isolate_reshape``: a lone index map joins an adjacent fusible area.

No pattern fuses an area into a user that reads it through a Pad (a window, fuse/window.py): the window
kernel would recompute it for every tap, or read a transpose with gathers.

A reduction is never followed by its elementwise consumers here: that is stitch fusion (opt_level 3).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from .area import Area, Pattern, ReachTable, Relation

# MindSpore kBroadcastFusionDepth: the largest area the backward patterns push into its users.
BROADCAST_FUSE_DEPTH = 20
# Ops whose elementwise consumers form an epilogue kernel (category set; the ops stay outside clusters).
EPILOGUE_HOSTS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "FusedMatMul", "MatMulInteger"})


class Direction(enum.Enum):
    FORWARD = "Forward"      # the dominant area absorbs its inputs
    BACKWARD = "Backward"    # the dominant area is absorbed by its users


class FuseType(enum.Enum):
    DEPTH = "depth"
    WIDTH = "width"


@dataclass
class Match:
    areas: list[Area]
    direction: Direction


def _sorted(neighbours: dict[Area, Relation]) -> list[tuple[Area, Relation]]:
    return sorted(neighbours.items(), key=lambda item: item[0].id)


class FusePattern:
    """Base class: ``run`` = ``check`` then ``match`` for fusible dominant areas."""
    name: ClassVar[str] = "pattern"

    def check(self, dom: Area) -> bool:
        raise NotImplementedError

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        raise NotImplementedError

    def run(self, dom: Area, reach: ReachTable) -> Match | None:
        if not (dom.alive and dom.fusible and self.check(dom)):
            return None
        return self.match(dom, reach)

    def __repr__(self) -> str:
        return self.name


class FuseReshape(FusePattern):
    name = "reshape"

    def check(self, dom: Area) -> bool:
        return dom.pattern == Pattern.RESHAPE

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        best: tuple[Area, Direction] | None = None
        candidates = [(u, Direction.BACKWARD, (dom, u)) for u, _ in _sorted(dom.users)
                      if not _reads_through_pad(u, dom)] + \
                     [(i, Direction.FORWARD, (i, dom)) for i, _ in _sorted(dom.inputs)]
        for a, direction, pair in candidates:
            if a.fusible and a.pattern <= Pattern.BROADCAST and not reach.has_circle(*pair) and \
                    (best is None or a.pattern < best[0].pattern):
                best = (a, direction)
        return None if best is None else Match([best[0]], best[1])


class FuseFwd(FusePattern):
    """Elementwise (and broadcast) areas pull their inputs forward (MindSpore ``FuseElemwiseBroadcastFwd``;
    with ``max_pattern=ELEMWISE`` the elementwise-only ``FuseElemwiseFwd``)."""

    def __init__(self, fuse_type: FuseType, max_pattern: Pattern = Pattern.BROADCAST):
        self.fuse_type, self.max_pattern = fuse_type, max_pattern
        prefix = "elemwise_broadcast" if max_pattern == Pattern.BROADCAST else "elemwise"
        self.name = f"{prefix}_fwd_{fuse_type.value}"

    def check(self, dom: Area) -> bool:
        if not Pattern.ELEMWISE <= dom.pattern <= self.max_pattern:
            return False
        return self.fuse_type == FuseType.WIDTH or dom.input_num == 1

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        found = []
        for a, r in _sorted(dom.inputs):
            if self.fuse_type == FuseType.DEPTH and a.user_num != 1:
                continue
            if not (a.fusible and a.pattern <= self.max_pattern and r == Relation.INJECTIVE):
                continue
            if a.compute_size == dom.compute_size and not reach.has_circle(a, dom):
                found.append(a)
        return Match(found, Direction.FORWARD) if found else None


class FuseEpilogue(FusePattern):
    name = "epilogue"

    def check(self, dom: Area) -> bool:
        if dom.pattern > Pattern.BROADCAST:
            return False
        return any(not a.fusible and a.size == 1 and a.dom.op in EPILOGUE_HOSTS and
                   a.compute_size == dom.compute_size for a in dom.inputs)

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        found = [u for u, _ in _sorted(dom.users)
                 if u.fusible and u.pattern <= Pattern.BROADCAST and u.compute_size == dom.compute_size
                 and not reach.has_circle(dom, u) and not _reads_through_pad(u, dom)]
        return Match(found, Direction.BACKWARD) if found else None


class FuseReduceFwd(FusePattern):
    def __init__(self, fuse_type: FuseType, size_limit: int):
        self.fuse_type, self.size_limit = fuse_type, size_limit
        self.name = f"reduce_fwd_{fuse_type.value}"

    def check(self, dom: Area) -> bool:
        return dom.pattern == Pattern.REDUCE and (self.fuse_type == FuseType.WIDTH or dom.input_num == 1)

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        found = []
        for a, r in _sorted(dom.inputs):
            if self.fuse_type == FuseType.DEPTH and a.user_num != 1:
                continue
            if a.size > self.size_limit or not a.fusible:
                continue
            if a.pattern <= Pattern.BROADCAST and r == Relation.INJECTIVE and not reach.has_circle(a, dom):
                found.append(a)
        return Match(found, Direction.FORWARD) if found else None


class FuseBwd(FusePattern):
    """MindSpore ``FuseElemwiseBroadcastBwd``: push a small elementwise area into ALL its users."""

    def __init__(self, fuse_type: FuseType, size_limit: int):
        self.fuse_type, self.size_limit = fuse_type, size_limit
        self.name = f"elemwise_broadcast_bwd_{fuse_type.value}"

    def check(self, dom: Area) -> bool:
        if not Pattern.ELEMWISE <= dom.pattern <= Pattern.BROADCAST or dom.is_output:
            return False
        if self.fuse_type == FuseType.DEPTH and dom.user_num > 1:
            return False
        return dom.size <= self.size_limit

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        found: list[Area] = []
        for a, r in _sorted(dom.users):
            if not a.fusible or a.pattern > Pattern.REDUCE or _reads_through_pad(a, dom):
                return None
            if self.fuse_type == FuseType.DEPTH and a.input_num != 1:
                return None
            if self.fuse_type == FuseType.WIDTH:
                if found and found[0].compute_size != a.compute_size:
                    return None
                if reach.has_circle(dom, a):
                    continue
            if a.pattern == Pattern.REDUCE and not (dom.pattern == Pattern.ELEMWISE and r == Relation.INJECTIVE):
                return None
            found.append(a)
        return Match(found, Direction.BACKWARD) if found and len(found) == dom.user_num else None


def _reads_through_pad(user: Area, dom: Area) -> bool:
    """``user`` reads ``dom``'s output through a Pad (a window, fuse/window.py): pushed into it, ``dom``
    would be recomputed for every tap of the window."""
    mine = {id(n) for n in dom.nodes}
    return any(n.op == "Pad" and n.inputs[0].producer is not None and id(n.inputs[0].producer) in mine
               for n in user.nodes)


class FuseIsolateReshape(FusePattern):
    name = "isolate_reshape"

    def check(self, dom: Area) -> bool:
        return dom.pattern == Pattern.RESHAPE and dom.size == 1

    def match(self, dom: Area, reach: ReachTable) -> Match | None:
        for u, _ in _sorted(dom.users):
            if u.fusible and u.pattern <= Pattern.REDUCE and not reach.has_circle(dom, u) \
                    and not _reads_through_pad(u, dom):
                return Match([u], Direction.BACKWARD)
        for i, _ in _sorted(dom.inputs):
            if i.fusible and i.pattern <= Pattern.REDUCE and not reach.has_circle(i, dom):
                return Match([i], Direction.FORWARD)
        return None


def cpu_patterns(reduce_fuse_depth: int) -> list[FusePattern]:
    """The patterns in the order MindSpore Lite's CPU split model runs them (``epilogue`` in the slot of its
    ``conv`` pattern)."""
    return [
        FuseReshape(),
        FuseFwd(FuseType.DEPTH, Pattern.ELEMWISE),
        FuseFwd(FuseType.WIDTH, Pattern.ELEMWISE),
        FuseEpilogue(),
        FuseFwd(FuseType.DEPTH),
        FuseFwd(FuseType.WIDTH),
        FuseReduceFwd(FuseType.DEPTH, reduce_fuse_depth),
        FuseReduceFwd(FuseType.WIDTH, reduce_fuse_depth),
        FuseBwd(FuseType.DEPTH, BROADCAST_FUSE_DEPTH),
        FuseBwd(FuseType.WIDTH, BROADCAST_FUSE_DEPTH),
        FuseIsolateReshape(),
    ]
