"""Einsum that is a (batched) matrix product -> Transpose/Reshape/MatMul (passes/expand/einsum.py), against
onnxruntime; other equations keep the op."""
import numpy as np
import pytest
from differential import LEVELS, run_converted
from helpers import assert_close, run_ort, single_op_model

from converter_lite.frontend.onnx_import import import_model
from converter_lite.ops.interpret import eval_graph

from .expand_testing import run_expander

PRODUCTS = [  # equation, shapes
    ("bhlk,bhtk->bhlt", (2, 3, 17, 8), (2, 3, 19, 8)),          # CvT attention scores: B read transposed
    ("bhlt,bhtv->bhlv", (2, 3, 17, 19), (2, 3, 19, 8)),         # CvT attention output: a plain batched product
    ("ij,jk->ik", (5, 7), (7, 3)),
    ("ik,jk->ij", (5, 7), (3, 7)),
    ("ki,kj->ij", (7, 5), (7, 3)),                               # A read transposed
    ("bnd,dh->bnh", (2, 6, 8), (8, 5)),                          # two free labels on the left, merged
    ("bqhd,bkhd->bhqk", (2, 5, 3, 4), (2, 6, 3, 4)),             # batch labels not leading in the operands
    ("abc,cd->dba", (2, 3, 4), (4, 5)),                          # output transposed
    ("ijk,jkl->il", (3, 4, 5), (4, 5, 6)),                       # two contracted labels, merged
    ("i,i->", (9,), (9,)),                                       # a dot product: no free labels
    ("i,j->ij", (4,), (3,)),                                     # an outer product: nothing contracted
    ("b i j, b j k -> b i k", (2, 3, 4), (2, 4, 5)),             # spaces
]


def _arr(rng, shape, dtype=np.float32):
    x = rng.standard_normal(shape).astype(dtype)
    if x.size >= 3:
        x.flat[:2] = [np.inf, -np.inf]
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("eq,sa,sb", PRODUCTS, ids=[p[0].replace(" ", "") for p in PRODUCTS])
def test_products_become_matmuls(rng, eq, sa, sb, dtype):
    feeds = {"a": _arr(rng, sa, dtype), "b": _arr(rng, sb, dtype)}
    model = single_op_model("Einsum", feeds, equation=eq)
    graph = import_model(model)
    assert run_expander(graph)
    ops = graph.op_counts()
    assert "Einsum" not in ops and ops.get("MatMul") == 1, ops
    want = run_ort(model, feeds)[0]
    got = eval_graph(graph, feeds)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    assert_close(got, want, rtol=1e-5, atol=1e-5)


DECLINED = [
    ("ij,jk", (3, 4), (4, 5)),                   # implicit output
    ("...ij,...jk->...ik", (2, 3, 4), (2, 4, 5)),
    ("ii,ij->ij", (3, 3), (3, 4)),               # a diagonal
    ("ij,jk->i", (3, 4), (4, 5)),                # k summed away in one operand only
    ("ij,ij->ij", (1, 4), (3, 4)),               # size-1 broadcasting
]


@pytest.mark.parametrize("eq,sa,sb", DECLINED, ids=[d[0] for d in DECLINED])
def test_other_equations_keep_the_op(rng, eq, sa, sb):
    feeds = {"a": _arr(rng, sa), "b": _arr(rng, sb)}
    graph = import_model(single_op_model("Einsum", feeds, equation=eq))
    run_expander(graph)
    assert graph.op_counts().get("Einsum") == 1


def test_three_operands_keep_the_op(rng):
    feeds = {"a": _arr(rng, (3, 4)), "b": _arr(rng, (4, 5)), "c": _arr(rng, (5, 2))}
    graph = import_model(single_op_model("Einsum", feeds, equation="ij,jk,kl->il"))
    run_expander(graph)
    assert graph.op_counts().get("Einsum") == 1


@pytest.mark.parametrize("eq,sa,sb", PRODUCTS[:2] + PRODUCTS[6:7], ids=["scores", "output", "bqhd"])
def test_converted_at_every_level(rng, tmp_path, eq, sa, sb):
    """The converted model (native GEMM from opt_level 1) against onnxruntime, NaN included."""
    feeds = {"a": _arr(rng, sa), "b": _arr(rng, sb)}
    feeds["a"].flat[5] = np.nan
    model = single_op_model("Einsum", feeds, equation=eq)
    want = run_ort(model, feeds)[0]
    for level in LEVELS:
        got = run_converted(model, feeds, level, str(tmp_path))["out0"]
        assert_close(got, want, rtol=1e-5, atol=1e-5, what=f"opt_level {level}")
