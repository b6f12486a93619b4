"""No-op elimination (run by the constant_folding pass): cases 1-5 of noop.py."""
from __future__ import annotations

import numpy as np
import pytest

from converter_lite.passes.simplify.noop import remove_noops

from .simplify_testing import (
    check_numerics,
    clone,
    feeds_for,
    make_graph,
    ops,
    run_pass,
)

CASES = {
    "identity": lambda b, x: b.op("Identity", x),
    "cast": lambda b, x: b.op("Cast", x, to=1),
    "concat": lambda b, x: b.op("Concat", x, axis=0),
    "sum": lambda b, x: b.op("Sum", x),
    "dropout": lambda b, x: b.op("Dropout", x),
    "expand": lambda b, x: b.op("Expand", x, b.const(np.array([1, 3], np.int64))),
    "tile": lambda b, x: b.op("Tile", x, b.const(np.array([1, 1], np.int64))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_noop_is_bypassed(case):
    g = make_graph(lambda b, x, *_: b.op("Exp", CASES[case](b, b.op("Neg", x))), shapes=((2, 3),))
    before = clone(g)
    assert remove_noops(g) == 1 and ops(g) == ["Exp", "Neg"]
    check_numerics(before, g, feeds_for(g))


@pytest.mark.parametrize("build", [
    lambda b, x: b.op("Cast", x, to=11),
    lambda b, x: b.op("Expand", x, b.const(np.array([4, 2, 3], np.int64))),
    lambda b, x: b.op("Dropout", x, b.const(np.float32(0.5)), b.const(np.bool_(True))),
])
def test_real_work_is_kept(build):
    g = make_graph(lambda b, x, *_: b.op("Exp", build(b, b.op("Neg", x))), shapes=((2, 3),))
    assert remove_noops(g) == 0 and len(g.nodes) == 3


def test_graph_output_of_an_input_keeps_its_node():
    g = make_graph(lambda b, x, *_: b.op("Identity", x), shapes=((2,),))
    assert remove_noops(g) == 0 and ops(g) == ["Identity"]


def test_constant_folding_pass_runs_it():
    g = make_graph(lambda b, x, *_: b.op("Exp", b.op("Identity", b.op("Neg", x))), shapes=((2,),))
    changed, _ = run_pass("constant_folding", g)
    assert changed and ops(g) == ["Exp", "Neg"]
