"""The plan of one fused kernel, shared by the lowering (lower.py) and its storage reuse (reuse.py): buffers,
map stages over an index space, and the kernel plan holding them."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.core import Graph, Value
from ..ir.dtype import DType
from .index import _numel

FLAT_ALIGN = 64          # a thread's share of a flat loop starts on a multiple of this many elements


@dataclass
class Buffer:
    slot: int                                  # position in the kernel's buffer list: inputs, outputs, temps
    dtype: DType
    shape: tuple[int, ...]
    kind: str                                  # input | output | temp

    @property
    def numel(self) -> int:
        return _numel(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * storage_type_size(self.dtype)


def storage_type_size(dtype: DType) -> int:
    return 1 if dtype is DType.bool else dtype.itemsize


@dataclass
class MapStage:
    """Computes ``items`` = [(value, buffer)] over the index space ``shape``."""
    shape: tuple[int, ...]
    items: list[tuple[Value, Buffer]]
    flat: bool
    cached: dict[int, Buffer] = field(default_factory=dict)   # values an earlier stage stored (reuse.py)

    @property
    def part_axis(self) -> int | None:
        big = [d for d, n in enumerate(self.shape) if n > 1]
        return big[0] if big else None

    @property
    def part_extent(self) -> int:
        if self.flat:
            return _numel(self.shape)
        p = self.part_axis
        return 1 if p is None else self.shape[p]

    @property
    def part_align(self) -> int:
        return FLAT_ALIGN if self.flat else 1

    @property
    def work(self) -> int:
        return _numel(self.shape) * len(self.items)


@dataclass
class KernelPlan:
    graph: Graph
    buffers: list[Buffer] = field(default_factory=list)
    value_buf: dict[int, Buffer] = field(default_factory=dict)
    stages: list = field(default_factory=list)

    @property
    def temps(self) -> list[Buffer]:
        return [b for b in self.buffers if b.kind == "temp"]

    @property
    def work(self) -> int:
        return max((s.work for s in self.stages), default=0)
