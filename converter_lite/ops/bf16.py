"""``MatMulBf16`` (converter_lite's own op, made by ``--bf16=on``: passes/bf16.py) and the bfloat16 rounding.

    MatMulBf16(A float32 [..., K], B uint16 [K, N], bias float32 [N] or one?) -> float32 [..., N]

``B`` holds bfloat16 bit patterns (the upper half of a float32).  The product is ``to_bf16(A) @ B + bias``
accumulated in float32, what AVX-512 BF16 computes (kernels/bgemm/: ``vcvtne2ps2bf16`` then ``vdpbf16ps``): the
product of two bfloat16 values is exact in float32, so the only differences from this reference are the
order of the float32 additions (the tests compare with a tolerance of bfloat16's precision).

``to_bf16`` is ``vcvtne2ps2bf16``'s rounding, per element:

=================  ===============================================================
float32 input      bfloat16 bits
=================  ===============================================================
zero, denormal     signed zero (denormals are flushed)
infinity           the upper 16 bits (infinity)
NaN                the upper 16 bits with the quiet bit (0x0040) set
normal             round to nearest even: ``(x + 0x7FFF + bit16(x)) >> 16`` (may overflow to infinity)
=================  ===============================================================
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, reference


def to_bf16(x) -> np.ndarray:
    """float32 ``x`` rounded to bfloat16 as uint16 bit patterns (the table above)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    mag = bits & np.uint32(0x7FFFFFFF)
    rne = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    out = np.where(mag > np.uint32(0x7F800000), (bits >> np.uint32(16)) | np.uint32(0x40), rne)
    out = np.where(mag < np.uint32(0x00800000), bits >> np.uint32(16) & np.uint32(0x8000), out)
    return out.astype(np.uint16)


def bf16_to_float(bits) -> np.ndarray:
    """uint16 bfloat16 bit patterns as float32 (exact)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _infer(node):
    a, w = node.inputs[0].type, node.inputs[1].type
    if a.shape is None or w.shape is None:
        return [TensorType(DType.float32, None)]
    if len(w.shape) != 2 or not a.shape or a.shape[-1] != w.shape[0]:
        raise KernelError(f"MatMulBf16: A {list(a.shape)} and B {list(w.shape)} do not multiply")
    return [TensorType(DType.float32, tuple(a.shape[:-1]) + (w.shape[1],))]


@reference("MatMulBf16", infer=_infer)
def matmul_bf16(attrs, a, b, bias=None):
    if np.asarray(b).dtype != np.uint16 or np.ndim(b) != 2:
        raise KernelError(f"MatMulBf16: B must be uint16 [K, N] bfloat16 bits, got {np.asarray(b).dtype}"
                          f"{list(np.shape(b))}")
    x = bf16_to_float(to_bf16(a))
    y = np.matmul(x, bf16_to_float(b))
    if bias is not None:
        y = y + np.asarray(bias, np.float32).reshape(-1)
    return y.astype(np.float32, copy=False)
