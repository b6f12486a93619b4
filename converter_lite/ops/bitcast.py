"""Reference kernel of ``BitCast`` (opset 26): the input's bytes reinterpreted as the type ``to`` (an ONNX
type code) of the same width, shape unchanged (little endian, as numpy on every supported host).  Strings
are rejected.  A bool result is normalised to 0/1 (any non-zero byte is true).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, OpKind, reference


def _target(attrs: dict, source: DType) -> DType:
    if "to" not in attrs:
        raise KernelError("BitCast: attribute 'to' is required")
    try:
        to = DType(int(attrs["to"]))
    except ValueError:
        raise KernelError(f"BitCast: unsupported target type code {attrs['to']}") from None
    if DType.string in (to, source):
        raise KernelError("BitCast: string tensors cannot be bit-cast")
    if to.itemsize != source.itemsize:
        raise KernelError(f"BitCast: {source.name} and {to.name} differ in width")
    return to


def _infer_bitcast(node):
    t = node.inputs[0].type
    return [TensorType(_target(node.attrs, t.dtype), t.shape)]


@reference("BitCast", kind=OpKind.OPAQUE, infer=_infer_bitcast)
def bitcast(attrs, x):
    to = _target(attrs, DType.from_np(x.dtype))
    x = np.asarray(x)
    y = (x if x.flags.c_contiguous else x.copy()).view(to.np)
    return y.view(np.uint8) != 0 if to is DType.bool else y
