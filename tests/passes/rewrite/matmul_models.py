"""The MatMul [+ bias] [+ activation] models shared by the matmul_elem_* fusion tests."""
from __future__ import annotations

import numpy as np

from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph

from .fusion_testing import feeds, model, node, ops, run

RNG = np.random.default_rng(4)
W = RNG.normal(size=(8, 5)).astype(np.float32)
BIAS = RNG.normal(size=5).astype(np.float32)
INPUTS = {"x": (2, 3, 8)}


def mm(bias=True, act=None, bias_shape=(5,), approximate=None, extra_use=False):
    nodes = [node("MatMul", ["x", "w"], ["m"])]
    cur = "m"
    if bias:
        nodes.append(node("Add", [cur, "b"], ["mb"]))
        cur = "mb"
    if act:
        attrs = {"approximate": approximate} if approximate else {}
        nodes.append(node(act, [cur], ["y"], **attrs))
        cur = "y"
    b = np.resize(BIAS, bias_shape).astype(np.float32)
    return model(nodes, INPUTS, [cur] + (["m"] if extra_use else []), {"w": W, "b": b})


def check_after_biasadd(act: str, pass_name: str) -> None:
    """The activation fusion also extends a FusedMatMul made by matmul_elem_biasadd_fusion."""
    data = feeds(INPUTS)
    g = import_model(mm(True, act), fold=False)
    want = eval_graph(g, data)
    assert run("matmul_elem_biasadd_fusion", g) and run(pass_name, g)
    assert ops(g) == ["FusedMatMul"] and g.nodes[0].attrs["activation"] == act
    np.testing.assert_allclose(eval_graph(g, data)[0], want[0], rtol=1e-5, atol=1e-6)
