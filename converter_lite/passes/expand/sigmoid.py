"""The sigmoid/softplus family of activations -> basic ops.

* Sigmoid(x)     = 1 / (1 + exp(-x))                                   (MindSpore ``sigmoid`` expander)
* HardSigmoid(x) = max(0, min(1, alpha * x + beta))      alpha=0.2, beta=0.5   (ONNX)
* HardSwish(x)   = x * max(0, min(1, x / 6 + 0.5))                     (arXiv:1905.02244, ONNX)
* Swish(x)       = x * sigmoid(alpha * x)                alpha=1: SiLU   (arXiv:1710.05941)
* Softplus(x)    = log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|))   (overflow-free form)
* Mish(x)        = x * tanh(softplus(x))                                (arXiv:1908.08681)
* Softsign(x)    = x / (1 + |x|)                                        (MindSpore ``softsign`` expander)

A SiLU exported from PyTorch is already ``x * Sigmoid(x)`` in ONNX; the Sigmoid expander covers it.
"""
from __future__ import annotations

from ...ir.core import Node
from ...ops.builder import BValue, GraphBuilder
from .emit import (
    abs_,
    input_value,
    maximum,
    minimum,
    require_float,
    sigmoid,
    softplus,
    tanh,
)
from .registry import expander

HARD_SIGMOID_ALPHA, HARD_SIGMOID_BETA = 0.2, 0.5      # ONNX defaults
HARD_SWISH_ALPHA = 1.0 / 6.0


def _float_input(b: GraphBuilder, node: Node) -> BValue:
    x = input_value(b, node, 0)
    require_float(x, node.op)
    return x


def _hard_sigmoid(x: BValue, alpha: float, beta: float) -> BValue:
    return minimum(maximum(x * alpha + beta, 0.0), 1.0)


@expander("Sigmoid")
def expand_sigmoid(b: GraphBuilder, node: Node) -> list:
    return [sigmoid(_float_input(b, node))]


@expander("HardSigmoid")
def expand_hard_sigmoid(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    alpha = float(node.attrs.get("alpha", HARD_SIGMOID_ALPHA))
    beta = float(node.attrs.get("beta", HARD_SIGMOID_BETA))
    return [_hard_sigmoid(x, alpha, beta)]


@expander("HardSwish")
def expand_hard_swish(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    return [x * _hard_sigmoid(x, HARD_SWISH_ALPHA, HARD_SIGMOID_BETA)]


@expander("Swish")
def expand_swish(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    alpha = float(node.attrs.get("alpha", 1.0))
    return [x * sigmoid(x if alpha == 1.0 else x * alpha)]


@expander("Softplus")
def expand_softplus(b: GraphBuilder, node: Node) -> list:
    return [softplus(_float_input(b, node))]


@expander("Mish")
def expand_mish(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    return [x * tanh(softplus(x))]


@expander("Softsign")
def expand_softsign(b: GraphBuilder, node: Node) -> list:
    x = _float_input(b, node)
    return [x / (abs_(x) + 1.0)]
