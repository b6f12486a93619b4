"""Miscellaneous ops: Det, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (all OPAQUE).

Other misc families live in their own modules: ``quantize`` (QuantizeLinear, ...), ``random_ops``
(random generators), ``signal_ops`` (DFT, STFT, windows, MelWeightMatrix), ``rnn`` (RNN, GRU, LSTM),
``detection`` (NonMaxSuppression, RoiAlign), ``rotary`` (RotaryEmbedding).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from .registry import KernelError, reference


# -- Det -------------------------------------------------------------------------------------------------------
def _det_infer(node):
    t = node.inputs[0].type
    if t.rank < 2 or t.shape[-1] != t.shape[-2]:
        raise KernelError(f"Det needs [..., M, M] matrices, got {list(t.shape)}")
    return [TensorType(t.dtype, t.shape[:-2])]


@reference("Det", infer=_det_infer)
def det(attrs, x):
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise KernelError(f"Det needs [..., M, M] matrices, got {list(x.shape)}")
    return np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)


# -- losses ----------------------------------------------------------------------------------------------------
_REDUCTIONS = ("none", "sum", "mean")


def _loss_type(node, what: str) -> TensorType:
    x, t = node.inputs[0].type, node.inputs[1].type
    if x.rank < 2 or t.shape != (x.shape[0],) + x.shape[2:]:
        raise KernelError(f"{what}: input {list(x.shape)} and target {list(t.shape)} do not match")
    reduction = node.attrs.get("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise KernelError(f"{what} reduction {reduction!r} is not one of {_REDUCTIONS}")
    return TensorType(x.dtype, t.shape if reduction == "none" else ())


def nll_loss(attrs, log_prob: np.ndarray, target: np.ndarray, weight=None, what="NegativeLogLikelihoodLoss"):
    """loss[n, d..] = -log_prob[n, target[n, d..], d..] * weight[target]; entries whose target is
    ``ignore_index`` count 0 and do not enter the weighted mean."""
    reduction = attrs.get("reduction", "mean")
    if reduction not in _REDUCTIONS:
        raise KernelError(f"{what} reduction {reduction!r} is not one of {_REDUCTIONS}")
    if log_prob.ndim < 2 or target.shape != (log_prob.shape[0],) + log_prob.shape[2:]:
        raise KernelError(f"{what}: input {list(log_prob.shape)} and target {list(target.shape)} do not match")
    classes = log_prob.shape[1]
    target = target.astype(np.int64)
    keep = np.ones(target.shape, bool) if "ignore_index" not in attrs else target != attrs["ignore_index"]
    safe = np.where(keep, target, 0)
    if ((safe < 0) | (safe >= classes)).any():
        raise KernelError(f"{what}: target outside [0, {classes})")
    picked = np.take_along_axis(log_prob.astype(np.float64), safe[:, None], axis=1)[:, 0]
    w = np.ones(classes) if weight is None else weight.astype(np.float64)
    wt = np.where(keep, w[safe], 0.0)
    loss = -picked * wt
    if reduction == "none":
        out = loss
    elif reduction == "sum":
        out = loss.sum()
    else:
        with np.errstate(all="ignore"):
            out = loss.sum() / wt.sum()
    return np.asarray(out).astype(log_prob.dtype)


@reference("NegativeLogLikelihoodLoss", infer=lambda n: [_loss_type(n, "NegativeLogLikelihoodLoss")])
def negative_log_likelihood_loss(attrs, x, target, weight=None):
    return nll_loss(attrs, x, target, weight)


def _sce_infer(node):
    return [_loss_type(node, "SoftmaxCrossEntropyLoss"), node.inputs[0].type]


@reference("SoftmaxCrossEntropyLoss", infer=_sce_infer)
def softmax_cross_entropy_loss(attrs, scores, labels, weights=None):
    """NegativeLogLikelihoodLoss of log_softmax(scores) over axis 1; the second output is that log_softmax."""
    z = scores.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True) if z.size else z
    log_prob = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = nll_loss(attrs, log_prob, labels, weights, "SoftmaxCrossEntropyLoss")
    return loss.astype(scores.dtype), log_prob.astype(scores.dtype)
