"""Column kernels: fused kernels whose innermost axis is dynamic (a model with dynamic dims), e.g. attention's
scale -> mask -> softmax over the key axis of ``[batch, heads, seq, seq]``.

The sub-graph (passes/fuse/dynamic.py) gives every value the same rank ``n``: the *pattern* of its shape, where
a dim is 1 when the value broadcasts along it (a mask ``[1, 1, S, T]`` against scores ``[B, H, S, T]``) and any
other number otherwise (the numbers only tell which dims broadcast: the sizes come at run time).  Its ops are
elementwise ones (scalar.py) and reductions over the last axis with kept dims (softmax expanded: max, sum).

    void <symbol>(void **args, int64_t num_threads);   // args: inputs, outputs, then an int64[n]: the shape

The kernel walks the ``R`` rows of the output shape (all axes but the last) and, in each row, first every
reduction over the ``C`` columns (its result a register, read by what follows through the emitter's memo),
then the outputs column by column.  Each operand's address is its row offset (from the row's coordinates and
the strides of its run-time shape, computed once per row) plus the column (or 0 for one that broadcasts over
the columns).  Float sums carry ``reassoc`` so the column loops vectorize.  Rows are split between threads
through the pool when there is enough work.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.core import Graph
from .errors import UnsupportedOpError
from .lower import StageEmitter
from .reduce import REDUCERS, _pre, acc_dtype, combine, identity, keepdims, reduce_axes
from .scalar import SCALAR_EMITTERS
from .schedule import CHUNKS, _ptrs
from .stages import Buffer, KernelPlan
from .threadpool import declare_pool
from .types import (
    BYTE_PTR,
    BYTE_PTR_PTR,
    I64,
    VOID,
    compute_type,
    storage_type,
    to_storage,
)

I64P = I64.as_pointer()


def check_columns(graph: Graph, kernel: str = "") -> int:
    """The rank of the column kernel ``graph``; UnsupportedOpError when it is not one."""
    rank = len(graph.outputs[0].shape) if graph.outputs else 0
    if rank < 1:
        raise UnsupportedOpError("GraphKernel", kernel, "a column kernel needs outputs of rank >= 1")
    for v in [*graph.inputs, *graph.outputs]:
        if len(v.shape) != rank:
            raise UnsupportedOpError("GraphKernel", kernel, f"value {v.name!r} is not of rank {rank}")
    for node in graph.nodes:
        if node.op in REDUCERS:
            if _last_axis_reduction(node, rank):
                continue
            raise UnsupportedOpError(node.op, kernel, "a column kernel reduces its last axis only, keeping it")
        if node.op not in SCALAR_EMITTERS:
            raise UnsupportedOpError(node.op, kernel, "not an elementwise op")
    return rank


def _last_axis_reduction(node, rank: int) -> bool:
    return keepdims(node) and reduce_axes(node) == (rank - 1,)


class _RowIndex:
    """The index of one element in a column kernel, for StageEmitter: ``shape`` the pattern of the value read,
    ``col`` the column (None: the row-level element of a value that broadcasts over the columns)."""

    def __init__(self, rows: _Rows, shape: tuple, col: ir.Value | None):
        self.rows, self.shape, self.col = rows, tuple(shape), col

    def key(self):
        return self.shape, (None if self._row_level() else id(self.col))

    def _row_level(self) -> bool:
        return self.col is None or not self.shape or self.shape[-1] == 1

    def broadcast_to(self, shape) -> _RowIndex:
        return _RowIndex(self.rows, tuple(shape), self.col)

    def linear(self) -> ir.Value:
        base = self.rows.base(self.shape)
        return base if self._row_level() else self.rows.b.add(base, self.col)


class _Rows:
    """Per-row address arithmetic: the run-time extents ``dims`` of the output, each pattern's strides (once per
    call), the row's coordinates and each pattern's row offset (once per row)."""

    def __init__(self, b: ir.IRBuilder, dims: list[ir.Value], rank: int):
        self.b, self.dims, self.rank = b, dims, rank
        self._strides: dict[tuple, list] = {}
        self._base: dict[tuple, ir.Value] = {}
        self.coords: list[ir.Value] = []

    def _pattern_dims(self, shape: tuple) -> list:
        pad = (1,) * (self.rank - len(shape)) + tuple(shape)
        return [None if p == 1 else d for p, d in zip(pad, self.dims)]

    def strides(self, shape: tuple) -> list:
        got = self._strides.get(shape)
        if got is None:
            b, acc, got = self.b, ir.Constant(I64, 1), []
            for d in reversed(self._pattern_dims(shape)):
                got.append(None if d is None else acc)
                if d is not None:
                    acc = b.mul(acc, d)
            got = self._strides[shape] = list(reversed(got))
        return got

    def start_row(self, r: ir.Value, patterns) -> None:
        """The row's coordinates and the row offsets of ``patterns`` (emitted here, so that they dominate every
        column loop of the row)."""
        b, coords = self.b, []
        for d in reversed(self.dims[:-1]):
            coords.append(b.srem(r, d))
            r = b.sdiv(r, d)
        self.coords = list(reversed(coords))
        self._base = {}
        for p in patterns:
            self._base[p] = self._offset(p)

    def _offset(self, shape: tuple) -> ir.Value:
        b, off = self.b, ir.Constant(I64, 0)
        strides = self.strides(shape)
        for c, s in zip(self.coords, strides[:-1]):        # strides of the shape padded to the kernel's rank
            if s is not None:
                off = b.add(off, b.mul(c, s))
        return off

    def base(self, shape: tuple) -> ir.Value:
        got = self._base.get(shape)
        return got if got is not None else self._offset(shape)


def lower_column_kernel(graph: Graph, sym: str, *, threshold: int = 1 << 15, kernel: str = "",
                        features: frozenset[str] = frozenset()) -> ir.Module:
    rank = check_columns(graph, kernel)
    module = ir.Module(name=sym)
    plan = KernelPlan(graph)
    for v in graph.inputs:
        buf = Buffer(len(plan.buffers), v.dtype, tuple(v.shape), "input")
        plan.buffers.append(buf)
        plan.value_buf[id(v)] = buf
    outs = []
    for v in graph.outputs:
        buf = Buffer(len(plan.buffers), v.dtype, tuple(v.shape), "output")
        plan.buffers.append(buf)
        outs.append((v, buf))
    reductions = [n for n in graph.nodes if n.op in REDUCERS]

    # the row range: void sym.rows(T0* noalias buf0, ..., i64* dims, i64 lo, i64 hi)
    ptypes = [storage_type(buf.dtype).as_pointer() for buf in plan.buffers]
    fn = ir.Function(module, ir.FunctionType(VOID, ptypes + [I64P, I64, I64]), f"{sym}.rows")
    fn.linkage = "internal"
    for a in fn.args[:len(ptypes)]:
        a.add_attribute("noalias")
    ptrs = list(fn.args[:len(ptypes)])
    dims_p, lo, hi = fn.args[len(ptypes):]
    em = StageEmitter(module, fn, plan, ptrs, kernel, {}, features)
    b = em.b
    dims = [b.load(b.gep(dims_p, [ir.Constant(I64, i)])) for i in range(rank)]
    start = fn.append_basic_block("body")
    b.branch(start)
    b.position_at_end(start)
    rows = _Rows(b, dims, rank)
    for _, buf in outs:
        rows.strides(buf.shape)
    for v in graph.inputs:
        rows.strides(tuple(v.shape))
    ncols = dims[-1]
    from .loops import for_range
    patterns = {tuple(v.shape) for v in [*graph.inputs, *graph.outputs]} | {
        tuple(v.shape) for n in graph.nodes for v in n.inputs if v is not None and v.const is not None}
    with for_range(b, lo, hi, "r") as r, em.memo_scope():
        rows.start_row(r, sorted(patterns))
        for node in reductions:
            red, v = REDUCERS[node.op], node.outputs[0]
            x = node.inputs[0]
            adt = acc_dtype(v.dtype)
            acc_slot = em.alloca_entry(compute_type(adt))
            b.store(identity(red, adt), acc_slot)
            with for_range(b, 0, ncols, "c") as c, em.memo_scope():
                val = _pre(em, red, em.value_at(x, _RowIndex(rows, tuple(x.shape), c)), x.dtype)
                b.store(combine(em, red, b.load(acc_slot), val, adt), acc_slot)
            res = b.load(acc_slot)
            if red.post == "mean":
                res = b.fdiv(res, b.sitofp(ncols, res.type)) if adt.is_float else b.sdiv(res, ncols)
            elif red.post is not None:
                from .reduce import finalize
                res = finalize(em, red, res, 1, adt)
            em._memo[-1][(id(v), _RowIndex(rows, tuple(v.shape), None).key())] = res
        row_level = [(v, buf) for v, buf in outs if buf.shape[-1] == 1]
        for v, buf in row_level:
            idx = _RowIndex(rows, buf.shape, None)
            b.store(to_storage(b, em.value_at(v, idx), buf.dtype), b.gep(ptrs[buf.slot], [rows.base(buf.shape)]))
        cols = [(v, buf) for v, buf in outs if buf.shape[-1] != 1]
        if cols:
            with for_range(b, 0, ncols, "c") as c, em.memo_scope():
                for v, buf in cols:
                    idx = _RowIndex(rows, buf.shape, c)
                    b.store(to_storage(b, em.value_at(v, idx), buf.dtype),
                            b.gep(ptrs[buf.slot], [idx.linear()]))
    b.ret_void()

    # pool chunk body: void sym.rc(i8** table, i64 chunk); table = bufs..., dims, rows, chunk size
    nb = len(plan.buffers)
    body = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), f"{sym}.rc")
    body.linkage = "internal"
    bb = ir.IRBuilder(body.append_basic_block("entry"))
    table, chunk_i = body.args
    dims_t = bb.bitcast(bb.load(bb.gep(table, [ir.Constant(I64, nb)])), I64P)
    nrows = bb.ptrtoint(bb.load(bb.gep(table, [ir.Constant(I64, nb + 1)])), I64)
    chunk = bb.ptrtoint(bb.load(bb.gep(table, [ir.Constant(I64, nb + 2)])), I64)
    first = bb.mul(chunk_i, chunk)
    last = bb.add(first, chunk)
    last = bb.select(bb.icmp_signed("<", last, nrows), last, nrows)
    bb.call(fn, _ptrs(bb, plan, table) + [dims_t, first, last])
    bb.ret_void()

    entry = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR_PTR, I64]), sym)
    args, nthreads = entry.args
    eb = ir.IRBuilder(entry.append_basic_block("entry"))
    tbl = eb.bitcast(eb.alloca(ir.ArrayType(BYTE_PTR, nb + 3)), BYTE_PTR_PTR)
    for i in range(nb):
        eb.store(eb.load(eb.gep(args, [ir.Constant(I64, i)])), eb.gep(tbl, [ir.Constant(I64, i)]))
    dims_arg = eb.load(eb.gep(args, [ir.Constant(I64, nb)]))
    eb.store(dims_arg, eb.gep(tbl, [ir.Constant(I64, nb)]))
    dims_e = eb.bitcast(dims_arg, I64P)
    nrows = ir.Constant(I64, 1)
    for i in range(rank - 1):
        nrows = eb.mul(nrows, eb.load(eb.gep(dims_e, [ir.Constant(I64, i)])))
    ncols_e = eb.load(eb.gep(dims_e, [ir.Constant(I64, rank - 1)]))
    eb.store(eb.inttoptr(nrows, BYTE_PTR), eb.gep(tbl, [ir.Constant(I64, nb + 1)]))
    passes = len(reductions) + 1
    work = eb.mul(eb.mul(nrows, ncols_e), ir.Constant(I64, passes))
    big = eb.and_(eb.icmp_signed(">", nthreads, ir.Constant(I64, 1)),
                  eb.icmp_signed(">=", work, ir.Constant(I64, threshold)))
    pool = declare_pool(module)
    with eb.if_else(big) as (then, otherwise):
        with then:
            chunk = eb.sdiv(eb.add(nrows, ir.Constant(I64, CHUNKS - 1)), ir.Constant(I64, CHUNKS))
            eb.store(eb.inttoptr(chunk, BYTE_PTR), eb.gep(tbl, [ir.Constant(I64, nb + 2)]))
            nchunks = eb.sdiv(eb.add(nrows, eb.sub(chunk, ir.Constant(I64, 1))), chunk)
            eb.call(pool, [body, tbl, nchunks, nthreads])
        with otherwise:
            eb.call(fn, _ptrs(eb, plan, tbl) + [dims_e, ir.Constant(I64, 0), nrows])
    eb.ret_void()
    return module
