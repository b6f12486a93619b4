"""MatMul, MatMulInteger, Gemm and Einsum reference kernels against onnxruntime (and their inference)."""
from __future__ import annotations

import numpy as np
import pytest

from test_nn_oracle import check, check_rejects, check_via_f32, ours, randn

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((7,), (7,)),
    ((5,), (2, 5, 3)),
    ((2, 3, 5), (5,)),
    ((3, 1, 4, 5), (2, 5, 6)),         # batch broadcasting both ways
    ((1, 1), (1, 1)),
    ((0, 3, 4), (4, 2)),               # empty batch
    ((2, 0), (0, 3)),                  # empty contraction -> zeros
    ((13, 17), (17, 11)),
]


@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES)
def test_matmul_float32(rng, a_shape, b_shape):
    check("MatMul", {"a": randn(rng, *a_shape), "b": randn(rng, *b_shape)})


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_matmul_other_floats(rng, dtype):
    check("MatMul", {"a": randn(rng, 2, 3, 6, dtype=dtype), "b": randn(rng, 6, 4, dtype=dtype)})


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_matmul_integers(rng, dtype):
    a = rng.integers(0, 20, (2, 3, 4)).astype(dtype)
    b = rng.integers(0, 20, (4, 5)).astype(dtype)
    check("MatMul", {"a": a, "b": b})


def test_matmul_rejects_mismatched_inner_dims(rng):
    check_rejects("MatMul", {"a": randn(rng, 3, 4), "b": randn(rng, 5, 2)})


@pytest.mark.parametrize("b_zp", [None, "scalar", "per_column"])
@pytest.mark.parametrize("b_dtype", [np.uint8, np.int8])
def test_matmul_integer(rng, b_zp, b_dtype):
    a = rng.integers(0, 256, (2, 3, 5)).astype(np.uint8)
    info = np.iinfo(b_dtype)
    b = rng.integers(info.min, info.max + 1, (5, 4)).astype(b_dtype)
    zps = {None: None, "scalar": np.array(3, b_dtype), "per_column": np.arange(4).astype(b_dtype)}
    inputs = {"a": a, "b": b, "a_zero_point": np.array(7, np.uint8), "b_zero_point": zps[b_zp]}
    check("MatMulInteger", inputs)


def test_matmul_integer_per_row_a_zero_point(rng):
    # onnxruntime only takes a scalar a_zero_point; the per-row form is checked against numpy
    a = rng.integers(0, 256, (3, 5)).astype(np.uint8)
    b = rng.integers(0, 256, (5, 2)).astype(np.uint8)
    zp = np.array([1, 2, 3], np.uint8)
    (got,) = ours("MatMulInteger", {"a": a, "b": b, "azp": zp})
    np.testing.assert_array_equal(got, (a.astype(np.int32) - zp[:, None]) @ b.astype(np.int32))
    assert got.dtype == np.int32


GEMM_CASES = [
    dict(),
    dict(transA=1),
    dict(transB=1),
    dict(transA=1, transB=1, alpha=0.5, beta=2.0),
    dict(alpha=-1.5, beta=0.0),
]


@pytest.mark.parametrize("attrs", GEMM_CASES)
@pytest.mark.parametrize("c_shape", [None, (), (5,), (3, 1), (3, 5)])
def test_gemm(rng, attrs, c_shape):
    a = randn(rng, *((7, 3) if attrs.get("transA") else (3, 7)))
    b = randn(rng, *((5, 7) if attrs.get("transB") else (7, 5)))
    c = None if c_shape is None else randn(rng, *c_shape)
    check("Gemm", {"a": a, "b": b, "c": c}, **attrs)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_gemm_other_floats(rng, dtype):
    check("Gemm", {"a": randn(rng, 4, 6, dtype=dtype), "b": randn(rng, 5, 6, dtype=dtype),
                   "c": randn(rng, 5, dtype=dtype)}, transB=1, alpha=0.25)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_gemm_integers_via_numpy(rng, dtype):
    # onnxruntime has no integer Gemm on CPU
    a, b, c = (rng.integers(-9, 9, s).astype(dtype) for s in ((3, 4), (4, 2), (2,)))
    (got,) = ours("Gemm", {"a": a, "b": b, "c": c})
    np.testing.assert_array_equal(got, a @ b + c)
    assert got.dtype == dtype


def test_gemm_rejects_bad_c(rng):
    check_rejects("Gemm", {"a": randn(rng, 3, 4), "b": randn(rng, 4, 5), "c": randn(rng, 2, 5)})


EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),                 # implicit output
    ("ii->i", [(4, 4)]),                         # diagonal
    ("ii", [(4, 4)]),                            # trace (implicit, scalar)
    ("ij->", [(3, 5)]),
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),   # broadcasting ellipsis
    ("i,j->ij", [(3,), (4,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 7, 8)]),
    ("a b c, c d -> a b d", [(2, 3, 4), (4, 5)]),  # spaces
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),             # upper-case labels
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES)
def test_einsum(rng, equation, shapes):
    inputs = {f"x{i}": randn(rng, *s) for i, s in enumerate(shapes)}
    check("Einsum", inputs, equation=equation)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64])
def test_einsum_dtypes(rng, dtype):
    a = (rng.standard_normal((2, 3, 4)) * 5).astype(dtype)
    b = (rng.standard_normal((4, 3)) * 5).astype(dtype)
    check("Einsum", {"a": a, "b": b}, equation="bij,jk->bik")


def test_einsum_float16_via_float32(rng):
    a, b = randn(rng, 3, 4, dtype=np.float16), randn(rng, 4, 2, dtype=np.float16)
    check_via_f32("Einsum", {"a": a, "b": b}, rtol=1e-2, atol=1e-2, equation="ij,jk->ik")


def test_einsum_rejects_mismatched_labels(rng):
    check_rejects("Einsum", {"a": randn(rng, 3, 4), "b": randn(rng, 5, 2)}, equation="ij,jk->ik")
