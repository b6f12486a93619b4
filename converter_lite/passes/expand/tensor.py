"""Data-movement composites.

* Tile(x, repeats) -> Expand(x, shape) when the tiling is a broadcast: on every axis either the dimension
  is 1 or the repeat count is 1 (MindSpore ``tile`` expander); otherwise declined.  All repeats 1 -> x.
* Identity(x) -> x, and Dropout(x) -> x in inference (no ``training_mode``, or a false constant) when its
  ``mask`` output is unused: the node disappears.
* Expand has no expander: it is kept as a broadcast index map that clusters can contain.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Node
from ...ops.builder import GraphBuilder
from .emit import const_input, input_value, output_used
from .registry import Declined, expander


@expander("Tile")
def expand_tile(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    repeats = [int(r) for r in np.ravel(const_input(node, 1))]
    if len(repeats) != x.type.rank:
        raise Declined("repeats do not match the rank")
    if any(d != 1 and r != 1 for d, r in zip(x.shape, repeats)):
        raise Declined("not a broadcast (an axis of size > 1 is repeated)")
    if all(r == 1 for r in repeats):
        return [x]
    shape = tuple(d * r for d, r in zip(x.shape, repeats))
    return [b.op("Expand", x, b.const(np.asarray(shape, np.int64)))]


@expander("Identity")
def expand_identity(b: GraphBuilder, node: Node) -> list:
    return [input_value(b, node, 0)]


@expander("Dropout")
def expand_dropout(b: GraphBuilder, node: Node) -> list:
    training = const_input(node, 2)
    if training is not None and bool(np.ravel(training)[0]):
        raise Declined("training_mode is true")
    if output_used(b, node, 1):
        raise Declined("the mask output is used")
    return [input_value(b, node, 0)] + [None] * (len(node.outputs) - 1)
