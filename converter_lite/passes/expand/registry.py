"""The expander table: op type -> function rewriting one node of that op into basic ops.

    @expander("Softsign")
    def softsign(b: GraphBuilder, node: Node) -> list:
        \"\"\"Softsign(x) = x / (1 + |x|).\"\"\"
        x = b.wrap(node.inputs[0])
        return [x / (1.0 + abs_(x))]

An expander receives a ``GraphBuilder`` that inserts before ``node`` and returns one value per node output
(``BValue`` or ``Value``; an input value itself for ops that disappear, such as Identity).  It raises
``Declined(reason)`` when it cannot expand this node (unsupported attribute combination, non-constant axes,
an optional output in use that it does not compute); the pass then leaves the node alone and logs the reason
at DEBUG.  Output shape and dtype must equal the node's (checked by ``ExpandOpsPass`` for every expansion).
"""
from __future__ import annotations

from collections.abc import Callable

from ...ir.core import Node
from ...ops.builder import GraphBuilder
from ...tables import registrar

Expander = Callable[[GraphBuilder, Node], list]

EXPANDERS: dict[str, Expander] = {}


class Declined(Exception):
    """An expander does not handle this node; the message says why (logged, not an error)."""


expander = registrar(EXPANDERS, "expander of")   # registers ``fn`` as the expander of each op type given
