"""What a run of a plan needs around its steps, read from the steps (runtime/plan.py decides with these):

* numpy's BLAS limited to the run's threads while it runs, when a step's kernel may call it (``BLAS_OPS``, unless
  the step is bound to native code only: ``step_blas_free``);
* one thread for a tiny plan, whose products (``product_work``) are all below ``TINY_PRODUCT`` multiply-adds;
* ``np.errstate`` around it, unless no step can raise a floating-point warning (``step_quiet``).
"""
from __future__ import annotations

import math

from ..ir.core import Node

TINY_PRODUCT = 1 << 17          # multiply-adds (~2 us on one core)
# ops whose kernels (fast or reference) call numpy's BLAS: only plans with one limit its threads during a run
BLAS_OPS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "FusedMatMul", "FusedAttention",
                      "Attention", "MatMulInteger", "QLinearMatMul", "QLinearConv", "ConvInteger", "DeformConv",
                      "LSTM", "GRU", "RNN", "Col2Im", "DFT", "STFT", "MelWeightMatrix", "TfIdfVectorizer"})

# ops whose kernels (fast and reference) do no float arithmetic, so no numpy floating-point warning: they move,
# pick or compare values (a comparison with NaN is a value, not a warning; Cast is not here: float -> int warns)
QUIET_OPS = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
                       "Slice", "Gather", "Shape", "Size", "ArgMax", "ArgMin", "Equal", "Not", "And", "Or"})


def step_quiet(st, call) -> bool:
    """Whether step ``st``, bound as ``call``, can raise no floating-point warning: it runs native code only,
    moves, picks or compares values (``QUIET_OPS``), or runs control-flow bodies whose plans are quiet."""
    bodies = st.impl.bodies
    if bodies:
        return all(p.quiet(p.run_threads) for p in bodies.values())
    return st.impl.native or getattr(call, "native", None) is not None or st.node.op in QUIET_OPS


def step_blas_free(st, call) -> bool:
    """Whether step ``st``, bound as ``call``, never calls numpy's BLAS: its op is no ``BLAS_OPS`` one, or it runs
    native code only (a fused kernel, or a fast kernel whose bound call is one foreign call: runlist ``tag``).
    Setting and restoring OpenBLAS's thread count around a run costs ~1.4 us (two locked ctypes calls), a
    twentieth of a 30 us model's run, whose MatMuls all run as native steps."""
    if st.impl.bodies:
        return not any(p.blas_inside for p in st.impl.bodies.values())
    return st.node.op not in BLAS_OPS or st.impl.native or getattr(call, "native", None) is not None


def product_work(node: Node) -> float:
    """Multiply-adds of a MatMul/Gemm/FusedMatMul/Conv/ConvTranspose ``node`` from its static types (output
    elements x reduction length); infinity for other ops or unknown shapes."""
    try:
        out = node.outputs[0].type.shape
        x, w = node.inputs[0].type.shape, node.inputs[1].type.shape
        if node.op in ("MatMul", "FusedMatMul"):
            k = x[-1]
        elif node.op == "Gemm":
            k = x[0] if node.attrs.get("transA", 0) else x[-1]
        elif node.op == "Conv":
            k = math.prod(w[1:])
        elif node.op == "ConvTranspose":
            k = int(w[0]) * math.prod(w[2:]) // max(1, int(out[1]))
        else:
            return float("inf")
        return float(math.prod([int(d) for d in out])) * int(k)
    except (AttributeError, IndexError, TypeError, ValueError):
        return float("inf")
