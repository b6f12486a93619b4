"""Transposes read in place: a batched MatMul reads its operand through a strided view, not a copy.

Attention splits its heads with ``Transpose(q.reshape(b, s, h, d), (0, 2, 1, 3))`` and transposes K for
``Q @ K^T``.  A model converted with fixed shapes folds those into its GEMMs' strides (the transpose passes); a
model with dynamic dims knows its shapes only when a plan is made for them (shape_plans.py), so its plan ran
each as a copy (GPT-2-style at 1x8: 8 Transpose copies where the fixed-shape plan has 2).  The GEMM driver
reads any batch strides and a row- or column-contiguous matrix in place (kernels/gemm/bind.py
``gemm_records``), and ``np.matmul`` takes strided operands, so the copy is not needed when every reader is a
batched MatMul (runtime/fast/linalg.py ``bind_batched``: both operands of rank 3 or more; a MatMul by a 2-D
weight reshapes its input, which would copy a strided one once, at bind time).

The rule, per Transpose step: one input, a buffer or a contiguous view of one computed by a step (not a graph
input: zero-copy I/O may point that at the caller's array; not a constant; static), one output of rank 3 or
more that is not a graph output, no view of it, and every step reading it a MatMul whose operands are both of
rank 3 or more.  Then the output becomes a view of the input with ``perm`` (program.PValue: the executor makes
its array as the base's array transposed) and the step is dropped.  A Transpose of a Transpose that only it
reads (K's head split, then K transposed) becomes one view of the first one's input, the permutations
composed, and both steps go.  The arena keeps the input's buffer alive
until the last MatMul reading the view (``arena.plan_memory`` follows views to their root), and no step
writes over it in place meanwhile (MatMuls take nothing over).
"""
from __future__ import annotations

from ..ops.registry import KernelError
from ..ops.tensor import transpose_perm
from .program import Program, drop_unused_kernels


def transpose_views(prog: Program) -> int:
    """Makes the output of every Transpose step that qualifies (see the module doc) a strided view of its input
    and drops the step; returns how many were dropped."""
    readers: dict[int, list] = {}
    for st in prog.steps:
        for v in st.inputs:
            if v is not None:
                readers.setdefault(v, []).append(st)
    viewed = {v.base for v in prog.values if v.base is not None}
    inputs = {prog.root(v) for v in prog.inputs}
    outputs = set(prog.outputs)
    writer = {st.outputs[0]: k for k, st in enumerate(prog.steps) if len(st.outputs) == 1}
    dropped = set()
    for k, st in enumerate(prog.steps):
        if st.node.op != "Transpose" or len(st.inputs) != 1 or len(st.outputs) != 1 or st.inputs[0] is None:
            continue
        src, out = st.inputs[0], st.outputs[0]
        sv, ov = prog.values[src], prog.values[out]
        # a Transpose of a Transpose only it reads (K's head split, then K^T): one view of the first's input
        a = writer.get(src)
        first = prog.steps[a] if a is not None else None
        if (first is not None and first.node.op == "Transpose" and a not in dropped and len(first.inputs) == 1
                and first.inputs[0] is not None and readers.get(src) == [st] and src not in outputs
                and src not in viewed and len(ov.shape or ()) >= 3 and _all_batched(prog, readers.get(out))):
            try:
                inner = transpose_perm(len(prog.values[first.inputs[0]].shape),
                                       first.node.attrs.get("perm"))
                outer = transpose_perm(len(sv.shape), st.node.attrs.get("perm"))
            except KernelError:
                inner = None
            base = first.inputs[0]
            rb = prog.root(base)
            if inner is not None and rb is not None and rb not in inputs and prog.values[base].perm is None \
                    and out not in outputs and out not in viewed and prog.is_buffer(out):
                perm = tuple(inner[p] for p in outer)
                if tuple(prog.values[base].shape[p] for p in perm) == ov.shape and prog.values[base].dtype == ov.dtype:
                    ov.base, ov.offset, ov.perm = base, 0, perm
                    dropped.update((a, k))
                    continue
        r = prog.root(src)
        if (r is None or r in inputs or sv.perm is not None or sv.shape is None or ov.shape is None
                or len(ov.shape) < 3 or out in outputs or out in viewed or not prog.is_buffer(out)
                or not _all_batched(prog, readers.get(out))):
            continue
        try:
            perm = transpose_perm(len(sv.shape), st.node.attrs.get("perm"))
        except KernelError:
            continue
        if tuple(sv.shape[p] for p in perm) != ov.shape or sv.dtype != ov.dtype:
            continue
        ov.base, ov.offset, ov.perm = src, 0, tuple(perm)
        dropped.add(k)
    if dropped:
        prog.steps = [st for k, st in enumerate(prog.steps) if k not in dropped]
        drop_unused_kernels(prog)
    return len(dropped)


def _all_batched(prog: Program, steps: list | None) -> bool:
    return bool(steps) and all(_batched_matmul(prog, rd) for rd in steps)


def _batched_matmul(prog: Program, st) -> bool:
    if st.node.op != "MatMul" or len(st.inputs) != 2 or any(v is None for v in st.inputs):
        return False
    return all(prog.values[v].shape is not None and len(prog.values[v].shape) >= 3 for v in st.inputs)
