"""The pass contract.

A pass is a class with a stable ``name`` (snake_case, used by ``enable_pass``/``disable_pass`` and dumps) and a
``run(graph, ctx) -> bool`` that rewrites ``graph`` in place and returns whether it changed anything.  Passes
read configuration only from ``ctx.config`` (a frozen ``GraphKernelConfig``) and write diagnostics only through
``ctx`` — never from the environment or a global.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..ir.core import Graph


@dataclass
class PassContext:
    config: Any                                  # converter_lite.config.GraphKernelConfig
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("converter_lite"))
    dump_dir: str | None = None                  # where dump_as_text output goes (graph_kernel_dump/)
    stats: dict[str, int] = field(default_factory=dict)   # pass name -> number of rewrites
    records: dict[str, list[str]] = field(default_factory=dict)  # dump file name -> text records
    artifacts: dict[str, bytes] = field(default_factory=dict)    # extra .ms sections (native code, ...)

    def count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n

    def record(self, file: str, text: str) -> None:
        """Appends a text record for ``graph_kernel_dump/<file>`` (written when dump_as_text is on)."""
        self.records.setdefault(file, []).append(text)


class Pass:
    name: ClassVar[str] = "unnamed"
    # False: the manager runs the pass on the main graph and on every control-flow body, each on its own
    # (Graph.all_graphs); True: once, on the main graph, and the pass walks the bodies itself (the build)
    whole_model: ClassVar[bool] = False

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        raise NotImplementedError
