"""The step runner's ABI: one foreign call runs a table of native steps in order.

    void cl_run_steps_v1(i64* table, i64 n)

``table`` holds ``n`` records of ``RUN_FIELDS`` i64 words ``(fn, nargs, a0, a1, a2)``: each is the call
``fn(a0, a1)`` (``nargs == 2``: a fused kernel ``(args, num_threads)``, a convolution driver ``(desc,
num_threads)``) or ``fn(a0, a1, a2)`` (``nargs == 3``: the GEMM tile driver ``(tiles, ntiles, num_threads)``),
``a0`` passed as a pointer.
"""
RUN_SYMBOL = "cl_run_steps_v1"
RUN_FIELDS = 5
SYMBOLS = (RUN_SYMBOL,)
OPS: tuple[str, ...] = ()
ALWAYS = True                      # linked into every model with native code: the plan runs its steps through it


def select(node) -> tuple[str, ...]:
    return ()
