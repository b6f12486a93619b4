"""Reductions: REDUCERS (op type -> how to accumulate) and the two loop forms that evaluate them.

A reduction node becomes its own stage that writes a buffer (a temporary, or the kernel output).  Its input
expression is evaluated inside the accumulation loop, never materialized.

* inner form (the innermost input axis is reduced): loops over the kept axes outside, an accumulator in a
  register, the reduced axes inside.  Float sums carry the ``reassoc`` flag so LLVM vectorizes them into
  several partial sums (a tree-like order, more accurate than one running sum).
* outer form (the innermost axis is kept): the accumulator row lives in the destination (or a float32 buffer
  for float16 outputs); the input is streamed in memory order and every element updates out[proj(index)],
  so the inner loop is unit-stride over both.  Each thread owns a range of the first kept axis.

Empty reductions give the identity: 0 (Sum, Mean), 1 (Prod), -inf/INT_MIN (Max), +inf/INT_MAX (Min), as the
reference kernels (onnxruntime) do.  ReduceLogSumExp (needs a max pass) and integer L2/LogSum (computed in
float64 by the reference) are not lowered.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from ..ir.core import Node
from ..ir.dtype import DType
from .index import Index, one_row_block
from .loops import access_hints, loop_nest
from .types import F32, I32, I64, compute_type, constant, is_unsigned

OUTER_ALIGN = 64          # elements per chunk (a multiple) when the outer form's threads split the innermost axis
REDUCE_SHORT = 64         # reduced innermost extents below this get loop hints (_reduce_hints)


@dataclass(frozen=True)
class Reducer:
    combine: str                                      # add | mul | max | min
    pre: str | None = None                            # square | abs | exp applied to each element
    post: str | None = None                           # mean | sqrt | log applied to the result


REDUCERS: dict[str, Reducer] = {
    "ReduceSum": Reducer("add"),
    "ReduceMean": Reducer("add", post="mean"),
    "ReduceProd": Reducer("mul"),
    "ReduceMax": Reducer("max"),
    "ReduceMin": Reducer("min"),
    "ReduceSumSquare": Reducer("add", pre="square"),
    "ReduceL1": Reducer("add", pre="abs"),
    "ReduceL2": Reducer("add", pre="square", post="sqrt"),
    "ReduceLogSum": Reducer("add", post="log"),
}


# reductions evaluated with the accumulators in registers, the reduced axes innermost (any axes)
SPECIAL = frozenset({"ArgMax", "ArgMin", "ReduceLogSumExp"})
REDUCE_OPS = frozenset(REDUCERS) | SPECIAL


def lowerable(op: str, dtype: DType) -> bool:
    if op in ("ArgMax", "ArgMin"):
        return dtype is not DType.bool
    if op == "ReduceLogSumExp":
        return dtype.is_float
    red = REDUCERS.get(op)
    return red is not None and (dtype.is_float or red.post not in ("sqrt", "log"))


def reduce_axes(node: Node) -> tuple[int, ...] | None:
    """The sorted reduced axes (``()`` for empty axes with noop_with_empty_axes: only the per-element part)."""
    rank = len(node.inputs[0].shape)
    if node.op in ("ArgMax", "ArgMin"):
        return (int(node.attrs.get("axis", 0)) % max(rank, 1),)
    axes_in = node.inputs[1] if len(node.inputs) > 1 else None
    if axes_in is not None:
        axes = [int(a) for a in np.asarray(axes_in.const).reshape(-1)]
    else:
        axes = list(node.attrs.get("axes", ()) or ())
    if not axes:
        if node.attrs.get("noop_with_empty_axes", 0):
            return ()
        axes = list(range(rank))
    return tuple(sorted({a % rank for a in axes})) if rank else ()


def keepdims(node: Node) -> bool:
    return bool(node.attrs.get("keepdims", 1))


def acc_dtype(dtype: DType) -> DType:
    """Accumulator dtype: float16 accumulates in float32."""
    return DType.float32 if dtype is DType.float16 else dtype


def identity(red: Reducer, dtype: DType) -> ir.Constant:
    if red.combine == "add":
        return constant(dtype, 0)
    if red.combine == "mul":
        return constant(dtype, 1)
    if dtype is DType.bool:
        return constant(dtype, red.combine == "min")
    if dtype.is_float:
        return constant(dtype, -math.inf if red.combine == "max" else math.inf)
    info = np.iinfo(dtype.np)
    return constant(dtype, info.min if red.combine == "max" else info.max)


def _pre(em, red: Reducer, x: ir.Value, dtype: DType) -> ir.Value:
    b = em.b
    if red.pre == "square":
        return b.fmul(x, x) if dtype.is_float else b.mul(x, x)
    if red.pre == "abs":
        if dtype.is_float:
            return em.math.call1("llvm.fabs", x)
        if is_unsigned(dtype):
            return x
        return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.sub(ir.Constant(x.type, 0), x), x)
    if red.pre == "exp":
        return em.math.exp(x)
    return x


def combine(em, red: Reducer, acc: ir.Value, x: ir.Value, dtype: DType) -> ir.Value:
    b = em.b
    if dtype.is_float:
        if red.combine == "add":
            return b.fadd(acc, x, flags=("reassoc",))
        if red.combine == "mul":
            return b.fmul(acc, x, flags=("reassoc",))
        return em.math.call2("llvm.maximum" if red.combine == "max" else "llvm.minimum", acc, x)
    if red.combine == "add":
        return b.add(acc, x)
    if red.combine == "mul":
        return b.mul(acc, x)
    op = ">" if red.combine == "max" else "<"
    # bool computes as i1, where a signed compare would order true (-1) below false (0)
    unsigned = is_unsigned(dtype) or dtype is DType.bool
    cmp = b.icmp_unsigned(op, x, acc) if unsigned else b.icmp_signed(op, x, acc)
    return b.select(cmp, x, acc)


def finalize(em, red: Reducer, acc: ir.Value, count: int, dtype: DType) -> ir.Value:
    b = em.b
    if red.post == "mean":
        if dtype.is_float:
            return b.fdiv(acc, ir.Constant(acc.type, float(max(count, 1))))
        return b.sdiv(acc, ir.Constant(acc.type, max(count, 1)))
    if red.post == "sqrt":
        return em.math.call1("llvm.sqrt", acc) if dtype.is_float else acc
    if red.post == "log":
        return em.math.log(acc) if dtype.is_float else acc
    return acc


@dataclass
class ReduceStage:
    """One reduction node evaluated into ``dst`` (``acc`` = float32 accumulation buffer for float16, or None)."""
    node: Node
    axes: tuple[int, ...]
    dst: object                                       # lower.Buffer
    acc: object | None = None
    spill: list = field(default_factory=list)        # [(value, buffer)] also stored per element (reuse.py)
    cached: dict = field(default_factory=dict)       # values an earlier stage stored (reuse.py)

    @property
    def in_shape(self) -> tuple[int, ...]:
        return self.node.inputs[0].shape

    @property
    def inner(self) -> bool:
        shape = self.in_shape
        return not shape or (len(shape) - 1) in self.axes or not self.axes or self.node.op in SPECIAL

    @property
    def kept(self) -> list[int]:
        return [d for d in range(len(self.in_shape)) if d not in self.axes]

    @property
    def part_axis(self) -> int | None:
        """The input axis whose range is split between threads (a kept axis), or None."""
        kept = self.kept
        big = [d for d in kept if self.in_shape[d] > 1]
        return big[0] if big else (kept[0] if kept else None)

    @property
    def part_extent(self) -> int:
        p = self.part_axis
        return 1 if p is None else self.in_shape[p]

    @property
    def part_align(self) -> int:
        """Chunk sizes of the partition axis are multiples of this: OUTER_ALIGN elements when the outer form
        splits the innermost axis (a ReduceL2 over [H, W] of NHWC activations, ConvNeXt-V2's GRN: the threads
        share the channels), since every chunk streams the whole input for its channels (chunks of 6 of 384
        channels read each cache line ~3 times and ran 10x slower on 2 threads than on 1)."""
        p = self.part_axis
        return OUTER_ALIGN if not self.inner and p is not None and p == len(self.in_shape) - 1 else 1

    @property
    def work(self) -> int:
        n = 1
        for d in self.in_shape:
            n *= d
        return n

    def out_coords(self, in_coords: list[ir.Value], zero: ir.Value) -> list[ir.Value]:
        if keepdims(self.node):
            return [zero if d in self.axes else c for d, c in enumerate(in_coords)]
        return [c for d, c in enumerate(in_coords) if d not in self.axes]


def emit_reduce(em, st: ReduceStage, lo: ir.Value, hi: ir.Value) -> None:
    """Emits the loops of ``st`` into the current stage function (``[lo, hi)`` = this thread's range)."""
    node, red = st.node, REDUCERS.get(st.node.op, Reducer("add"))
    src = node.inputs[0]
    dtype = src.dtype
    adt = acc_dtype(dtype)
    shape = st.in_shape
    count = 1
    for d in st.axes:
        count *= shape[d]
    p = st.part_axis
    out_dtype = node.outputs[0].dtype
    zero = ir.Constant(ir.IntType(64), 0)
    b = em.b

    def extent(d):
        return (lo, hi) if d == p else (0, shape[d])

    def out_index(in_coords):
        return Index(b, node.outputs[0].shape, st.out_coords(in_coords, zero))

    def element(coords):
        return _pre(em, red, em.value_at(src, Index(b, shape, coords)), dtype)

    if node.op in SPECIAL:
        _emit_special(em, st, extent, out_index, element)
        return
    if st.inner:
        slot = em.alloca_entry(compute_type(adt))
        # float max/min: a NaN-ignoring max (one vmaxps) and a separate "saw a NaN" flag, instead of the
        # NaN-propagating llvm.maximum (six instructions per vector and a slow horizontal tail)
        fast_ext = dtype.is_float and red.combine in ("max", "min")
        # the flag is an i32, not an i1: LLVM 22's SLP vectoriser miscompiled i1 flags of several rows combined
        # (a softmax over [6, 4, 5] at opt_level 3 got one row's flag set; tests/codegen: test_reduce_nan_flags)
        nan_slot = em.alloca_entry(I32) if fast_ext else None
        kept = st.kept
        merged = _merged_trailing(st)
        block_view = merged and _block_view(em, st)
        with loop_nest(b, [extent(d) for d in kept], "k") as kc:
            b.store(identity(red, adt), slot)
            if fast_ext:
                b.store(ir.Constant(I32, 0), nan_slot)
            inner = [(0, count)] if merged else [extent(d) for d in st.axes]
            hints = _reduce_hints(count if merged else (shape[st.axes[-1]] if st.axes else 1), count)
            with loop_nest(b, inner, "r", hints) as rc, em.memo_scope():
                if merged:                 # one loop over the trailing block
                    if block_view:         # as one row: the kept coordinates stay exact
                        at = Index(b, shape, list(kc) + [zero] * (len(st.axes) - 1) + [rc[0]])
                    else:                  # linear offsets, unit stride
                        base = zero
                        for d, c in zip(kept, kc):
                            base = b.add(b.mul(base, ir.Constant(I64, shape[d])), c)
                        at = Index(b, shape, linear=b.add(b.mul(base, ir.Constant(I64, count)), rc[0]))
                    x = _pre(em, red, em.value_at(src, at), dtype)
                else:
                    coords = _merge(len(shape), kept, kc, st.axes, rc)
                    at = Index(b, shape, coords)
                    x = element(coords)
                if fast_ext:
                    b.store(b.or_(b.load(nan_slot), b.zext(b.fcmp_unordered("uno", x, x), I32)), nan_slot)
                    name = "llvm.maxnum" if red.combine == "max" else "llvm.minnum"
                    fn = em.math.intrinsic(name, x.type, 2)
                    b.store(b.call(fn, [b.load(slot), x], fastmath=("nnan", "nsz")), slot)
                else:
                    b.store(combine(em, red, b.load(slot), x, adt), slot)
                for v, buf in st.spill:
                    vi = at if merged else Index(b, v.shape, coords)
                    em.store_compute(buf, vi, em.value_at(v, vi))
            full = _merge(len(shape), kept, kc, st.axes, [zero] * len(st.axes))
            acc = b.load(slot)
            if fast_ext:
                acc = b.select(b.icmp_unsigned("!=", b.load(nan_slot), ir.Constant(I32, 0)),
                               ir.Constant(acc.type, math.nan), acc)
            result = finalize(em, red, acc, count, adt)
            em.store_compute(st.dst, out_index(full), _to_out(em, result, adt, out_dtype))
        return
    acc = st.acc if st.acc is not None else st.dst
    with loop_nest(b, [extent(d) for d in st.kept], "i") as oc, em.memo_scope():
        em.store_compute(acc, Index(b, node.outputs[0].shape, _out_from_kept(st, oc, zero)), identity(red, adt))
    with loop_nest(b, [extent(d) for d in range(len(shape))], "a") as coords, em.memo_scope():
        oi = out_index(coords)
        cur = em.load_compute(acc, oi)
        em.store_compute(acc, oi, combine(em, red, cur, element(coords), adt))
    if acc is not st.dst or red.post is not None:
        with loop_nest(b, [extent(d) for d in st.kept], "f") as oc, em.memo_scope():
            oi = Index(b, node.outputs[0].shape, _out_from_kept(st, oc, zero))
            v = finalize(em, red, em.load_compute(acc, oi), count, adt)
            em.store_compute(st.dst, oi, _to_out(em, v, adt, out_dtype))


def _merged_trailing(st: ReduceStage) -> bool:
    """The reduced axes are a trailing block of two or more axes (a spatial mean, ReduceSum over [H, W]) and
    every spilled value has the input's shape: one loop runs over the block with the elements' linear offsets
    (coordinates derived only for operands that broadcast).  Nested loops made LLVM unroll the short
    innermost axis and widen the outer one with gathers (16 x 32 x 32 mean: 15.8 us, one loop: 1.2)."""
    shape, axes = st.in_shape, tuple(st.axes)
    rank = len(shape)
    return (len(axes) >= 2 and axes == tuple(range(rank - len(axes), rank))
            and all(tuple(v.shape) == tuple(shape) for v, _ in st.spill))


def _block_view(em, st: ReduceStage) -> bool:
    """For a merged trailing block (``_merged_trailing``) whose values read through a Concat along a kept axis:
    whether the block may be indexed as one row (index.one_row_block).  From the linear offset, the Concat's
    coordinate came from divisions of every element's offset, and LLVM did not vectorize: MixNet's Concat ->
    BatchNorm -> SiLU -> the SE block's mean over H, W (240 x 28 x 28) took 637 us, 57 without the Concat."""
    shape = tuple(st.in_shape)
    ok, concat = one_row_block(em, [st.node.inputs[0]] + [v for v, _ in st.spill], shape,
                               len(shape) - len(st.axes))
    return ok and concat


def _reduce_hints(extent: int, count: int):
    """Loop hints of the innermost reduced axis when the whole reduction is short (LayerNorm over 32 channels):
    widened along the reduced axis, never fully unrolled (LLVM would then widen the kept axes with gathers) -
    when its accesses are contiguous (loops.access_hints).  Long reductions (``count`` elements per result) keep
    LLVM's order: a short inner axis widened alone would sum thousands of elements into one running sum."""
    if extent <= 1 or count >= REDUCE_SHORT:
        return None
    return access_hints(extent, REDUCE_SHORT, reduction=True)


def _emit_special(em, st: ReduceStage, extent, out_index, element) -> None:
    """ArgMax/ArgMin (first extreme index, last with select_last_index; NaN counts as extreme) and
    ReduceLogSumExp (m + log(sum(exp(x - m))), m the max or 0 when it is not finite), register accumulators."""
    b, node = em.b, st.node
    shape, dtype = st.in_shape, node.inputs[0].dtype
    kept = st.kept
    zero = ir.Constant(ir.IntType(64), 0)
    vty = compute_type(dtype)
    best = em.alloca_entry(vty)
    aux = em.alloca_entry(ir.IntType(64) if node.op != "ReduceLogSumExp" else vty)
    is_max = node.op in ("ArgMax", "ReduceLogSumExp")
    red = Reducer("max" if is_max else "min")
    with loop_nest(b, [extent(d) for d in kept], "k") as kc:
        b.store(identity(red, dtype), best)
        b.store(ir.Constant(aux.type.pointee, 0 if node.op != "ReduceLogSumExp" else 0.0), aux)
        with loop_nest(b, [extent(d) for d in st.axes], "r") as rc, em.memo_scope():
            coords = _merge(len(shape), kept, kc, st.axes, rc)
            x, cur = element(coords), b.load(best)
            if node.op == "ReduceLogSumExp":
                b.store(combine(em, red, cur, x, dtype), best)
            else:
                b.store(b.select(_takes(em, node, x, cur, dtype), x, cur), best)
                b.store(b.select(_takes(em, node, x, cur, dtype), rc[0], b.load(aux)), aux)
        if node.op == "ReduceLogSumExp":
            m = b.load(best)
            finite = b.fcmp_ordered("<", em.math.call1("llvm.fabs", m), ir.Constant(vty, math.inf))
            m = b.select(finite, m, ir.Constant(vty, 0.0))
            with loop_nest(b, [extent(d) for d in st.axes], "s") as rc, em.memo_scope():
                coords = _merge(len(shape), kept, kc, st.axes, rc)
                t = em.math.exp(b.fsub(element(coords), m))
                b.store(b.fadd(b.load(aux), t, flags=("reassoc",)), aux)
            result = b.fadd(em.math.log(b.load(aux)), m)
        else:
            result = b.load(aux)
        full = _merge(len(shape), kept, kc, st.axes, [zero] * len(st.axes))
        em.store_compute(st.dst, out_index(full), result)


def _takes(em, node: Node, x: ir.Value, cur: ir.Value, dtype: DType) -> ir.Value:
    """Whether element x replaces the current extreme ``cur`` of ArgMax/ArgMin."""
    b = em.b
    last = bool(node.attrs.get("select_last_index", 0))
    op = (">" if node.op == "ArgMax" else "<") + ("=" if last else "")
    if not dtype.is_float:
        return b.icmp_unsigned(op, x, cur) if is_unsigned(dtype) else b.icmp_signed(op, x, cur)
    x_nan, cur_nan = em.math.isnan(x), em.math.isnan(cur)
    better = b.and_(b.fcmp_ordered(op, x, cur), b.not_(cur_nan))
    nan_wins = x_nan if last else b.and_(x_nan, b.not_(cur_nan))
    return b.or_(better, nan_wins)


def _merge(rank: int, kept: list[int], kc: list, axes: tuple[int, ...], rc: list) -> list:
    coords = [None] * rank
    for d, c in zip(kept, kc):
        coords[d] = c
    for d, c in zip(axes, rc):
        coords[d] = c
    return coords


def _out_from_kept(st: ReduceStage, kc: list, zero) -> list:
    """Output coordinates from the coordinates of the kept axes."""
    if not keepdims(st.node):
        return list(kc)
    it = iter(kc)
    return [zero if d in st.axes else next(it) for d in range(len(st.in_shape))]


def _to_out(em, v: ir.Value, adt: DType, out_dtype: DType) -> ir.Value:
    """Accumulator scalar -> compute scalar of the output dtype (float16 accumulators are float32 already)."""
    if compute_type(out_dtype) == v.type:
        return v
    if v.type == F32 and out_dtype.is_float:
        return em.b.fpext(v, compute_type(out_dtype))
    return v

