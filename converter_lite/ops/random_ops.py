"""Random generators: RandomNormal, RandomUniform, RandomNormalLike, RandomUniformLike, Bernoulli, Multinomial.

Registered with ``deterministic=False`` so no pass folds or deduplicates them.  Each call draws from a numpy
``Generator`` seeded from the ``seed`` attribute when the node has one (the same node then gives the same
numbers on every run, though not onnxruntime's numbers) and from fresh OS entropy otherwise.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, reference


def generator(attrs) -> np.random.Generator:
    """A numpy Generator seeded by the bits of the float ``seed`` attribute (unseeded without it)."""
    seed = attrs.get("seed")
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(int(np.array(seed, np.float64).view(np.uint64)))


def _float_dtype(attrs, default: DType) -> DType:
    dt = DType(attrs["dtype"]) if attrs.get("dtype") is not None else default
    if not dt.is_float:
        raise KernelError(f"random values of type {dt.name} are not supported (float types only)")
    return dt


def _shape_attr(attrs) -> tuple[int, ...]:
    if "shape" not in attrs:
        raise KernelError("RandomNormal/RandomUniform need the shape attribute")
    shape = tuple(int(d) for d in attrs["shape"])
    if any(d < 0 for d in shape):
        raise KernelError(f"random shape {list(shape)} has a negative dim")
    return shape


def _draw(op: str, attrs, shape, dtype: DType) -> np.ndarray:
    rng = generator(attrs)
    if op == "normal":
        out = rng.normal(attrs.get("mean", 0.0), attrs.get("scale", 1.0), size=shape)
    else:
        out = rng.uniform(attrs.get("low", 0.0), attrs.get("high", 1.0), size=shape)
    return out.astype(dtype.np)


def _infer_fixed(node):
    return [TensorType(_float_dtype(node.attrs, DType.float32), _shape_attr(node.attrs))]


def _infer_like(node):
    t = node.inputs[0].type
    return [TensorType(_float_dtype(node.attrs, t.dtype), t.shape)]


@reference("RandomNormal", infer=_infer_fixed, deterministic=False)
def random_normal(attrs):
    return _draw("normal", attrs, _shape_attr(attrs), _float_dtype(attrs, DType.float32))


@reference("RandomUniform", infer=_infer_fixed, deterministic=False)
def random_uniform(attrs):
    return _draw("uniform", attrs, _shape_attr(attrs), _float_dtype(attrs, DType.float32))


@reference("RandomNormalLike", infer=_infer_like, deterministic=False)
def random_normal_like(attrs, x):
    return _draw("normal", attrs, x.shape, _float_dtype(attrs, DType.from_np(x.dtype)))


@reference("RandomUniformLike", infer=_infer_like, deterministic=False)
def random_uniform_like(attrs, x):
    return _draw("uniform", attrs, x.shape, _float_dtype(attrs, DType.from_np(x.dtype)))


def _bernoulli_dtype(attrs, default: DType) -> DType:
    return DType(attrs["dtype"]) if attrs.get("dtype") is not None else default


@reference("Bernoulli", deterministic=False, infer=lambda n: [
    TensorType(_bernoulli_dtype(n.attrs, n.inputs[0].dtype), n.inputs[0].shape)])
def bernoulli(attrs, p):
    """1 with probability p (elementwise), else 0."""
    draws = generator(attrs).random(p.shape) < p
    return draws.astype(_bernoulli_dtype(attrs, DType.from_np(p.dtype)).np)


def _multinomial_type(attrs, in_type: TensorType) -> TensorType:
    if in_type.rank != 2:
        raise KernelError(f"Multinomial input must be [batch, classes], got rank {in_type.rank}")
    dt = DType(attrs.get("dtype", int(DType.int32)))
    if dt not in (DType.int32, DType.int64):
        raise KernelError(f"Multinomial dtype must be int32 or int64, got {dt.name}")
    return TensorType(dt, (in_type.shape[0], int(attrs.get("sample_size", 1))))


@reference("Multinomial", deterministic=False, infer=lambda n: [_multinomial_type(n.attrs, n.inputs[0].type)])
def multinomial(attrs, logits):
    """``sample_size`` class indices per batch row, drawn from softmax(logits) (unnormalized log-probabilities)."""
    t = _multinomial_type(attrs, TensorType.of(logits))
    z = logits.astype(np.float64)
    z = np.exp(z - z.max(axis=1, keepdims=True))
    cdf = np.cumsum(z / z.sum(axis=1, keepdims=True), axis=1)
    u = generator(attrs).random(t.shape)
    picks = np.stack([np.searchsorted(cdf[b], u[b], side="right") for b in range(t.shape[0])]) if t.shape[0] else u
    return np.minimum(picks, logits.shape[1] - 1).astype(t.dtype.np).reshape(t.shape)
