"""Reference kernel of ``SwiGLU`` (opset 28): ``Y = Swish_alpha(A) * B = A * Sigmoid(alpha * A) * B`` with A, B of
identical shape and type (no broadcasting).  The gate is the registered ``Swish`` kernel, so both ops round
alike.  OPAQUE (a composite: only an expander may turn it into fusible basic ops).
"""
from __future__ import annotations

from .registry import KernelError, evaluate, infer_same, reference


def _check(a, b) -> None:
    if a.shape != b.shape or a.dtype != b.dtype:
        raise KernelError(f"SwiGLU: A {list(a.shape)} and B {list(b.shape)} must have the same shape and type")


def _infer_swiglu(node):
    _check(node.inputs[0].type, node.inputs[1].type)
    return infer_same(node)


@reference("SwiGLU", infer=_infer_swiglu)
def swiglu(attrs, a, b):
    _check(a, b)
    gate = evaluate("Swish", {"alpha": float(attrs.get("alpha", 1.0))}, [a])[0]
    return (gate * b).astype(a.dtype, copy=False)
