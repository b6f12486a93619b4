"""Reference kernels: normalizations and LRN.  Channels are axis 1 of ``X[N, C, D...]``.

* ``BatchNormalization`` (inference form, ``training_mode=0``):
  ``Y = (X - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c]``.  With ``training_mode=1`` Y uses the
  batch statistics (mean and population variance of each channel over N and the spatial dims) instead, and
  the optional outputs are ``running_mean = mean * momentum + batch_mean * (1 - momentum)`` and likewise
  ``running_var`` (``momentum`` default 0.9), in the type of ``mean``/``var``.
* ``InstanceNormalization``: the same with mean/var of each ``(n, c)`` over the spatial dims.
* ``LayerNormalization``: mean/var over axes ``axis..rank-1``; ``Y = (X - mean) * InvStdDev * Scale + B``
  (Scale, B broadcast to X); optional outputs ``Mean`` and ``InvStdDev = 1 / sqrt(var + epsilon)`` of shape
  ``X.shape[:axis] + (1,) * (rank - axis)``, float32 when ``stash_type=1`` (default; onnxruntime's type even
  for float64 X), else X's type.
* ``GroupNormalization`` (opset 21): mean/var over each group of ``C / num_groups`` channels and the spatial
  dims, then per-channel ``scale[c]``, ``bias[c]``.
* ``RMSNormalization`` (opset 23): ``Y = X / sqrt(mean(X^2 over axis..) + epsilon) * scale``.
* ``LRN``: ``Y = X / (bias + alpha / size * sum_{c'} X[c']^2) ** beta`` over channels
  ``c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2)``.

Statistics are computed in float32 for float16 inputs and in float32/float64 for those types, except that
GroupNormalization with ``stash_type=1`` normalizes float64 in float32 (its ONNX function body, which
onnxruntime runs); LayerNormalization/RMSNormalization keep float64 (onnxruntime's kernels do).  Variance is
the population variance ``mean((X - mean)^2)``.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from ..ir.dtype import DType
from .nn_window import compute_dtype
from .registry import KernelError, infer_same, normalize_axis, reference


def _channel(v: np.ndarray, ndim: int, ct) -> np.ndarray:
    """A per-channel vector ``[C]`` shaped to broadcast along axis 1 of a rank-``ndim`` tensor."""
    return v.astype(ct, copy=False).reshape((1, -1) + (1,) * (ndim - 2))


def _check_rank(op: str, x, minimum: int) -> None:
    if x.ndim < minimum:
        raise KernelError(f"{op}: input rank {x.ndim} < {minimum}")


def _infer_batch_norm(node: Node) -> list[TensorType]:
    return [node.inputs[0].type, node.inputs[3].type, node.inputs[4].type][:len(node.outputs)]


@reference("BatchNormalization", infer=_infer_batch_norm)
def batch_normalization(attrs, x, scale, b, mean, var):
    _check_rank("BatchNormalization", x, 2)
    ct = compute_dtype(x.dtype)
    eps = float(attrs.get("epsilon", 1e-5))
    if attrs.get("training_mode", 0):
        return _batch_norm_training(attrs, x, scale, b, mean, var, ct, eps)
    inv = 1.0 / np.sqrt(_channel(var, x.ndim, ct) + np.asarray(eps, ct))
    y = (x.astype(ct, copy=False) - _channel(mean, x.ndim, ct)) * (inv * _channel(scale, x.ndim, ct))
    return (y + _channel(b, x.ndim, ct)).astype(x.dtype, copy=False)


def _batch_norm_training(attrs, x, scale, b, mean, var, ct, eps):
    """Y from the batch statistics, plus the updated running mean and variance."""
    xc = x.astype(ct, copy=False)
    axes = (0,) + tuple(range(2, x.ndim))
    bmean, bvar = _moments(xc, axes)
    y = (xc - bmean) / np.sqrt(bvar + np.asarray(eps, ct)) * _channel(scale, x.ndim, ct) + _channel(b, x.ndim, ct)
    m = float(attrs.get("momentum", np.float32(0.9)))      # a FLOAT attribute: 0.9 rounded to float32
    st = compute_dtype(mean.dtype)
    running_mean = mean.astype(st) * st.type(m) + bmean.reshape(-1).astype(st) * st.type(1 - m)
    running_var = var.astype(st) * st.type(m) + bvar.reshape(-1).astype(st) * st.type(1 - m)
    return y.astype(x.dtype, copy=False), running_mean.astype(mean.dtype), running_var.astype(var.dtype)


def _moments(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=axes, keepdims=True)
    d = x - mean
    return mean, (d * d).mean(axis=axes, keepdims=True)


@reference("InstanceNormalization", infer=infer_same)
def instance_normalization(attrs, x, scale, b):
    _check_rank("InstanceNormalization", x, 3)
    ct = compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)
    mean, var = _moments(xc, tuple(range(2, x.ndim)))
    eps = np.asarray(float(attrs.get("epsilon", 1e-5)), ct)
    y = (xc - mean) / np.sqrt(var + eps) * _channel(scale, x.ndim, ct) + _channel(b, x.ndim, ct)
    return y.astype(x.dtype, copy=False)


def _stats_dtype(attrs: dict, dt: DType) -> DType:
    return DType.float32 if attrs.get("stash_type", 1) == 1 else dt


def _infer_layer_norm(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    axis = normalize_axis(int(node.attrs.get("axis", -1)), x.rank)
    stats = TensorType(_stats_dtype(node.attrs, x.dtype), tuple(x.shape[:axis]) + (1,) * (x.rank - axis))
    return [x, stats, stats][:len(node.outputs)]


@reference("LayerNormalization", infer=_infer_layer_norm)
def layer_normalization(attrs, x, scale, b=None):
    axis = normalize_axis(int(attrs.get("axis", -1)), x.ndim)
    ct = compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)
    mean, var = _moments(xc, tuple(range(axis, x.ndim)))
    inv = 1.0 / np.sqrt(var + np.asarray(float(attrs.get("epsilon", 1e-5)), ct))
    y = (xc - mean) * inv * scale.astype(ct, copy=False)
    if b is not None:
        y = y + b.astype(ct, copy=False)
    sdt = _stats_dtype(attrs, DType.from_np(x.dtype)).np
    return y.astype(x.dtype, copy=False), mean.astype(sdt, copy=False), inv.astype(sdt, copy=False)


def _group_count(attrs: dict, shape) -> int:
    groups = int(attrs.get("num_groups", 0))
    if len(shape) < 2 or groups < 1 or shape[1] % groups:
        raise KernelError(f"GroupNormalization: num_groups {groups} does not divide the channels of {list(shape)}")
    return groups


def _infer_group_norm(node: Node) -> list[TensorType]:
    _group_count(node.attrs, node.inputs[0].type.shape)
    return [node.inputs[0].type]


@reference("GroupNormalization", infer=_infer_group_norm)
def group_normalization(attrs, x, scale, bias):
    groups = _group_count(attrs, x.shape)
    n, c = x.shape[:2]
    ct = compute_dtype(x.dtype)
    # stash_type=1 normalizes in float32 whatever X is (the ONNX function body; onnxruntime does the same)
    st = np.dtype(np.float32) if attrs.get("stash_type", 1) == 1 else ct
    xg = x.astype(st, copy=False).reshape((n, groups, c // groups * int(np.prod(x.shape[2:]))))
    mean, var = _moments(xg, (2,))
    eps = np.asarray(float(attrs.get("epsilon", 1e-5)), st)
    y = ((xg - mean) / np.sqrt(var + eps)).reshape(x.shape).astype(ct)
    return (y * _channel(scale, x.ndim, ct) + _channel(bias, x.ndim, ct)).astype(x.dtype, copy=False)


@reference("RMSNormalization", infer=infer_same)
def rms_normalization(attrs, x, scale):
    axis = normalize_axis(int(attrs.get("axis", -1)), x.ndim)
    ct = compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)
    ms = (xc * xc).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xc / np.sqrt(ms + np.asarray(float(attrs.get("epsilon", 1e-5)), ct)) * scale.astype(ct, copy=False)
    return y.astype(x.dtype, copy=False)


@reference("LRN", infer=infer_same)
def lrn(attrs, x):
    _check_rank("LRN", x, 2)
    if "size" not in attrs:
        raise KernelError("LRN: attribute size is required")
    size = int(attrs["size"])
    alpha, beta = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75))
    bias = float(attrs.get("bias", 1.0))
    ct = compute_dtype(x.dtype)
    xc = x.astype(ct, copy=False)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.pad(xc * xc, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    window_sum = sq[:, 0:c].copy()
    for i in range(1, size):
        window_sum += sq[:, i:i + c]
    return (xc / (bias + alpha / size * window_sum) ** beta).astype(x.dtype, copy=False)
