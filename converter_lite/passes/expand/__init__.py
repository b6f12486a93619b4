"""Op expanders: complex ops rewritten into basic (clusterable) ops, MindSpore's graph-kernel expanders.

``EXPANDERS`` maps an op type to its expander (one module per family: gelu, sigmoid, relu, norm,
batch_norm, softmax, reduce, arith, tensor, depthwise_conv (Conv, depthwise only), conv_transpose
(ConvTranspose with kernel == stride), quantize (QuantizeLinear, DequantizeLinear), pool (AveragePool,
MaxPool)); ``ExpandOpsPass``
(``graph_kernel_expander``) applies them to the ops of ``config.expand_ops(DEFAULT_EXPAND)``.
"""
from .expand_pass import DEFAULT_EXPAND, ExpandError, ExpandOpsPass
from .registry import EXPANDERS, Declined, expander

__all__ = ["DEFAULT_EXPAND", "EXPANDERS", "Declined", "ExpandError", "ExpandOpsPass", "expander"]
