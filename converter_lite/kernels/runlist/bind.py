"""Runs of consecutive native steps as one foreign call (the runner emitted by emit.py).

A bound step is a zero-argument callable; one that does nothing but call native code carries that call as
its ``native`` attribute, ``(fn, nargs, a0, a1, a2)``: ``fn(a0, a1)`` or ``fn(a0, a1, a2)`` with ``a0`` an
address (``tag``).  ``batch(calls, runner)`` replaces every run of two or more such steps by one callable that
hands their records to the runner ``cl_run_steps_v1`` in one ctypes call: the interpreter and ctypes work of
the others (~0.3-0.5 us a step) goes.  Steps keep their order, so the plan's semantics do not change; numpy
steps between native ones end a run.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from .abi import RUN_FIELDS, RUN_SYMBOL  # noqa: F401  (RUN_SYMBOL: the plan looks the runner up by it)

_RUNNER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


def tag(run: Callable, fn: int, nargs: int, a0: int, a1: int, a2: int = 0) -> Callable:
    """Marks ``run`` (which calls ``fn(a0, a1[, a2])`` and nothing else) as a native step; returns it."""
    run.native = (int(fn), int(nargs), int(a0), int(a1), int(a2))     # type: ignore[attr-defined]
    return run


def batch(calls: list[Callable], runner: int | None) -> tuple[list[Callable], list[int]]:
    """(the steps with every run of >= 2 native steps merged into one, the index in ``calls`` of each new
    step's first step).  Without a ``runner`` address the steps are returned as they are."""
    if not runner:
        return list(calls), list(range(len(calls)))
    out: list[Callable] = []
    first: list[int] = []
    k = 0
    while k < len(calls):
        end = k
        while end < len(calls) and getattr(calls[end], "native", None) is not None:
            end += 1
        if end - k >= 2:
            out.append(_merged(runner, calls[k:end]))
            first.append(k)
            k = end
        else:
            out.append(calls[k])
            first.append(k)
            k += 1
    return out, first


def _merged(runner: int, steps: list[Callable]) -> Callable:
    table = np.array([s.native for s in steps], np.int64).reshape(len(steps), RUN_FIELDS)
    call = _RUNNER(runner)
    ptr, n = table.ctypes.data, len(steps)

    def run() -> None:
        call(ptr, n)
    run.table, run.steps = table, steps                       # the records and what they keep alive
    return run
