"""The step runner: a run of consecutive native steps of an execution plan in one foreign call (a support
function).

    void cl_run_steps_v1(i64* table, i64 n)

calls, in order, the ``n`` steps of ``table``: records of ``RUN_FIELDS`` i64 words ``(fn, nargs, a0, a1, a2)``,
each the call ``fn(a0, a1)`` (``nargs == 2``: a fused kernel ``(args, num_threads)``, a convolution driver
``(desc, num_threads)``) or ``fn(a0, a1, a2)`` (``nargs == 3``: the GEMM tile driver ``(tiles, ntiles,
num_threads)``), ``a0`` passed as a pointer.  A Python-level step costs ~0.3-0.5 us of interpreter and ctypes
work around its kernel; a run of native steps bound into one table costs one such call in all
(bind.py builds the tables).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.loops import for_range
from ...codegen.types import BYTE_PTR, I64, VOID
from .abi import RUN_FIELDS, RUN_SYMBOL


def emit_runlist(module: ir.Module) -> ir.Function:
    """Defines ``RUN_SYMBOL`` (see the module doc) in ``module``."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I64.as_pointer(), I64]), RUN_SYMBOL)
    table, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    two = ir.FunctionType(VOID, [BYTE_PTR, I64]).as_pointer()
    three = ir.FunctionType(VOID, [BYTE_PTR, I64, I64]).as_pointer()
    with for_range(b, 0, n, "s") as s:
        rec = b.gep(table, [b.mul(s, ir.Constant(I64, RUN_FIELDS))])
        word = [b.load(b.gep(rec, [ir.Constant(I64, k)])) for k in range(RUN_FIELDS)]
        ptr = b.inttoptr(word[2], BYTE_PTR)
        with b.if_else(b.icmp_signed("==", word[1], ir.Constant(I64, 3))) as (three_args, two_args):
            with three_args:
                b.call(b.inttoptr(word[0], three), [ptr, word[3], word[4]])
            with two_args:
                b.call(b.inttoptr(word[0], two), [ptr, word[3]])
    b.ret_void()
    return fn


EMITTERS = {RUN_SYMBOL: emit_runlist}
