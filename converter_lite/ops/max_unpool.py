"""Reference kernel of ``MaxUnpool(X, I, output_shape?)``: the partial inverse of MaxPool.  Y is zero except
``Y.flat[I.flat[j]] = X.flat[j]`` (I holds row-major linear indices into the whole output, as MaxPool's
second output does).  Y's shape is ``output_shape`` (a constant input, the full N, C, D... shape) when given,
else ``N, C`` and ``(in - 1) * stride + kernel - pad_begin - pad_end`` per spatial axis.

With ``output_shape`` larger than the default, the indices address the larger output directly (as
onnxruntime and PyTorch do; onnx's reference scatters into the default shape and pads it instead).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from .nn_window import int_tuple, prod
from .registry import KernelError, reference


def _output_shape(attrs: dict, x_shape, i_shape, output_shape) -> tuple[int, ...]:
    if len(x_shape) < 3 or tuple(i_shape) != tuple(x_shape):
        raise KernelError(f"MaxUnpool: X {list(x_shape)} must have rank >= 3 and I the same shape, got "
                          f"{list(i_shape)}")
    n = len(x_shape) - 2
    if "kernel_shape" not in attrs:
        raise KernelError("MaxUnpool: attribute kernel_shape is required")
    kernel = int_tuple(attrs, "kernel_shape", (), n, "MaxUnpool")
    strides = int_tuple(attrs, "strides", (1,) * n, n, "MaxUnpool")
    pads = int_tuple(attrs, "pads", (0,) * (2 * n), 2 * n, "MaxUnpool")
    if output_shape is not None:
        shape = tuple(int(d) for d in np.ravel(output_shape))
        if len(shape) != len(x_shape) or shape[:2] != tuple(x_shape[:2]) or min(shape) < 0:
            raise KernelError(f"MaxUnpool: output_shape {list(shape)} does not fit X {list(x_shape)}")
        return shape
    spatial = tuple((d - 1) * s + k - pads[i] - pads[i + n]
                    for i, (d, s, k) in enumerate(zip(x_shape[2:], strides, kernel)))
    if min(spatial) < 0:
        raise KernelError(f"MaxUnpool: negative output size {list(spatial)}")
    return tuple(x_shape[:2]) + spatial


def _infer_max_unpool(node):
    ins = list(node.inputs) + [None]
    x, i, shape = ins[:3]
    out = _output_shape(node.attrs, x.type.shape, i.type.shape, None if shape is None else shape.const)
    return [TensorType(x.type.dtype, out)]


@reference("MaxUnpool", infer=_infer_max_unpool, static_inputs=(2,))
def max_unpool(attrs, x, indices, output_shape=None):
    shape = _output_shape(attrs, x.shape, indices.shape, output_shape)
    flat = np.asarray(indices, np.int64).reshape(-1)
    total = prod(shape)
    if flat.size and (flat.min() < 0 or flat.max() >= total):
        raise KernelError(f"MaxUnpool: an index is outside the output of {total} elements")
    y = np.zeros(total, x.dtype)
    y[flat] = x.reshape(-1)
    return y.reshape(shape)
