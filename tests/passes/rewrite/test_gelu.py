"""gelu_fusion: the erf and tanh GELU formulas, in the groupings exporters emit -> Gelu."""
from __future__ import annotations

import math

import numpy as np
import pytest

from .fusion_testing import check_fusion, check_no_fusion, feeds, model, node

INPUTS = {"x": (3, 7)}
C = {"sqrt2": np.float32(math.sqrt(2)), "inv_sqrt2": np.float32(1 / math.sqrt(2)), "one": np.float32(1),
     "half": np.float32(0.5), "k": np.float32(math.sqrt(2 / math.pi)), "a": np.float32(0.044715),
     "three": np.float32(3)}


def erf_gelu(grouping, divide=True):
    arg = node("Div", ["x", "sqrt2"], ["s"]) if divide else node("Mul", ["x", "inv_sqrt2"], ["s"])
    nodes = [arg, node("Erf", ["s"], ["e"]), node("Add", ["e", "one"], ["e1"])]
    if grouping == 0:      # (x * 0.5) * (1 + erf)
        nodes += [node("Mul", ["x", "half"], ["xh"]), node("Mul", ["xh", "e1"], ["y"])]
    elif grouping == 1:    # (x * (1 + erf)) * 0.5
        nodes += [node("Mul", ["x", "e1"], ["xe"]), node("Mul", ["xe", "half"], ["y"])]
    else:                  # x * ((1 + erf) * 0.5)
        nodes += [node("Mul", ["half", "e1"], ["he"]), node("Mul", ["x", "he"], ["y"])]
    return model(nodes, INPUTS, ["y"], C)


def tanh_gelu(cube="pow"):
    nodes = ([node("Pow", ["x", "three"], ["x3"])] if cube == "pow" else
             [node("Mul", ["x", "x"], ["x2"]), node("Mul", ["x2", "x"], ["x3"])])
    nodes += [node("Mul", ["a", "x3"], ["ax3"]), node("Add", ["x", "ax3"], ["inner"]),
              node("Mul", ["inner", "k"], ["arg"]), node("Tanh", ["arg"], ["t"]), node("Add", ["one", "t"], ["t1"]),
              node("Mul", ["x", "half"], ["xh"]), node("Mul", ["xh", "t1"], ["y"])]
    return model(nodes, INPUTS, ["y"], C)


@pytest.mark.parametrize("grouping", [0, 1, 2])
@pytest.mark.parametrize("divide", [True, False])
def test_erf_form(grouping, divide):
    g = check_fusion(erf_gelu(grouping, divide), "gelu_fusion", feeds(INPUTS), ["Gelu"])
    assert g.nodes[0].attrs.get("approximate", "none") == "none"


@pytest.mark.parametrize("cube", ["pow", "mul"])
def test_tanh_form(cube):
    g = check_fusion(tanh_gelu(cube), "gelu_fusion", feeds(INPUTS), ["Gelu"], rtol=1e-4, atol=1e-5)
    assert g.nodes[0].attrs["approximate"] == "tanh"


def test_wrong_constant_is_not_gelu():
    m = erf_gelu(0)
    for init in m.graph.initializer:
        if init.name == "half":
            init.float_data[:] = []
            init.raw_data = np.float32(0.25).tobytes()
    check_no_fusion(m, "gelu_fusion")


def test_intermediate_used_elsewhere():
    m = erf_gelu(0)
    m.graph.output.append(m.graph.output[0].__class__(name="e"))
    check_no_fusion(m, "gelu_fusion")
