"""Runtime implementations of common ops that write into pre-allocated buffers (the plan's fast path).

``FAST`` maps an op type to a factory ``f(ctx: program.NodeCtx) -> Impl | ViewOf | None``; None means "use
the reference kernel" (an unsupported dtype or attribute combination).  Each implementation computes exactly
what the reference kernel in ``converter_lite.ops`` computes, with the same numpy operations in the same order
where the reference defines the rounding (Softmax, LayerNormalization, Gemm), so results are identical; the
tests in tests/runtime compare every entry with its reference kernel.

* views (no step): Reshape, Flatten, Squeeze, Unsqueeze, Identity, same-type Cast, same-shape Expand, and
  Slice/Split parts that are contiguous in their input;
* data movement: Transpose, Concat, Split, Slice, Expand, Gather, Cast;
* elementwise (``out=`` numpy ufuncs, in place when the planner allows): the unary/binary tables below,
  Clip, Where, Sigmoid, Erf;
* ReduceSum/Mean/Max/Min (reduce.py) and LSTM (rnn.py): the ones a model with dynamic dims leaves unfused;
* Softmax, LayerNormalization (norm.py), MatMul/Gemm (linalg.py), Conv (conv.py; patch
  embeddings, kernel = stride, as one GEMM in patch.py, and ConvTranspose with kernel = stride there too), pooling
  (pooling.py, MaxPool in maxpool.py) and Pad (pad.py), DepthToSpace/SpaceToDepth on a native driver
  (space.py), Resize (nearest)/DepthToSpace/SpaceToDepth/Tile as precomputed gathers (gather.py) otherwise.
* copies of strided views whose trailing axes are contiguous (Transpose keeping them, Slice/Split parts, Pad's
  interior) move one contiguous run per memcpy (runs.py).
"""
from __future__ import annotations

import itertools
import math
from functools import partial

import numpy as np

from ...kernels.transpose.abi import SYMBOL as TRANSPOSE_SYMBOL
from ...kernels.transpose.bind import transpose_step
from ...ops import erf_math
from ...ops.registry import KernelError, normalize_axis
from ...ops.tensor import slice_params, split_sizes, transpose_perm
from ..program import Impl, NodeCtx, ViewOf
from .conv import CONV_FAST
from .gather import GATHER_FAST
from .linalg import LINALG_FAST
from .norm import NORM_FAST
from .patch import conv_transpose_patches, patch_conv
from .pooling import POOL_FAST
from .quantized import QUANTIZED_FAST
from .reduce import REDUCE_FAST
from .resize import linear_resize, nearest_resize
from .rnn import RNN_FAST
from .runs import run_copy
from .space import depth_to_space

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _same_dtype(ctx: NodeCtx, positions, kinds="f") -> bool:
    """Inputs ``positions`` and output 0 share one dtype of ``kinds`` ("f": float32/64), and the output has the
    inputs' broadcast shape (a model declaring another shape gets the reference kernel, which reports it)."""
    dt = ctx.out().dtype
    if dt is None or (dt not in FLOATS if kinds == "f" else dt.kind not in kinds):
        return False
    if not all(ctx.value(i) is not None and ctx.dtype(i) == dt for i in positions):
        return False
    return _broadcasts_to(ctx, positions)


def _broadcasts_to(ctx: NodeCtx, positions) -> bool:
    try:
        return tuple(np.broadcast_shapes(*[ctx.shape(i) for i in positions])) == ctx.out().shape
    except ValueError:
        return False


# -- views -------------------------------------------------------------------------------------------------
def _reshape_view(ctx: NodeCtx):
    """Output 0 has input 0's elements in the same order: a view (when the declared types agree)."""
    x, y = ctx.value(0), ctx.out()
    if x.dtype == y.dtype and x.nbytes == y.nbytes:
        return ViewOf(((0, 0),))
    return None


def _cast(ctx: NodeCtx):
    x, y = ctx.value(0), ctx.out()
    if x.dtype == y.dtype:
        return ViewOf(((0, 0),))
    # int/float -> float32/float64 and int -> wider int are plain numpy casts in the reference (cast_to); a cast
    # to float8e5m2 (an ml_dtypes type of numpy kind "f") is not: it saturates
    if y.dtype in (np.float32, np.float64) and x.dtype.kind in "iuf" or \
            (x.dtype.kind in "iu" and y.dtype.kind in "iu" and y.dtype.itemsize >= x.dtype.itemsize):
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(np.copyto, outs[0], ins[0], casting="unsafe"))
    return None


def _expand(ctx: NodeCtx):
    x, y = ctx.value(0), ctx.out()
    if x.dtype != y.dtype:
        return None
    if x.shape == y.shape:
        return ViewOf(((0, 0),))
    return Impl(bind=lambda ins, outs, ws, nt=1: partial(np.copyto, outs[0], ins[0]))


def _contiguous_offset(in_shape, slices, out_shape, itemsize: int) -> int | None:
    """Byte offset of ``x[slices]`` inside ``x`` when that view is C-contiguous, else None."""
    strides, acc = [], itemsize
    for d in reversed(in_shape):
        strides.append(acc)
        acc *= d
    strides.reverse()
    offset, expect = 0, itemsize
    for ax in range(len(in_shape) - 1, -1, -1):
        s = slices[ax] if ax < len(slices) else slice(None)
        start, _, step = s.indices(in_shape[ax])
        if out_shape[ax] > 1 and strides[ax] * step != expect:
            return None
        offset += start * strides[ax] if out_shape[ax] else 0
        expect *= out_shape[ax]
    return offset


def _slice(ctx: NodeCtx):
    args = [ctx.const(i) for i in range(1, 5)]
    if args[0] is None or args[1] is None or any(ctx.value(i) is not None and a is None
                                                 for i, a in zip(range(3, 5), args[2:])):
        return None
    x = ctx.value(0)
    try:
        slices, shape = slice_params(x.shape, *args)
    except KernelError:
        return None
    if tuple(shape) != ctx.out().shape:
        return None
    if math.prod(shape):
        off = _contiguous_offset(x.shape, slices, shape, x.dtype.itemsize)
        if off is not None:
            return ViewOf(((0, off),))
    return Impl(bind=lambda ins, outs, ws, nt=1: run_copy(outs[0], ins[0][slices]))


def _split(ctx: NodeCtx):
    x = ctx.value(0)
    if ctx.value(1) is not None and ctx.const(1) is None:
        return None
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(x.shape), "Split axis")
    try:
        sizes = split_sizes(x.shape[axis], ctx.const(1), ctx.attrs.get("num_outputs"))
    except KernelError:
        return None
    if len(sizes) != len(ctx.outs):
        return None
    bounds = np.cumsum([0] + sizes)
    parts = [(slice(None),) * axis + (slice(int(a), int(b)),) for a, b in itertools.pairwise(bounds)]
    shapes = [x.shape[:axis] + (s,) + x.shape[axis + 1:] for s in sizes]
    offs = [_contiguous_offset(x.shape, p, s, x.dtype.itemsize) if math.prod(s) else None
            for p, s in zip(parts, shapes)]
    if all(o is not None for o in offs):
        return ViewOf(tuple((0, o) for o in offs))

    def bind(ins, outs, ws, nt=1):
        copies = [run_copy(o, ins[0][p]) for o, p in zip(outs, parts)]

        def run():
            for c in copies:
                c()
        return run
    return Impl(bind=bind)


# -- data movement -------------------------------------------------------------------------------------------
def _transpose(ctx: NodeCtx):
    try:
        perm = transpose_perm(len(ctx.shape(0)), ctx.attrs.get("perm"))
    except KernelError:
        return None
    if tuple(ctx.shape(0)[p] for p in perm) != ctx.out().shape or ctx.dtype(0) != ctx.out().dtype:
        return None
    address = ctx.native(TRANSPOSE_SYMBOL)
    if address:       # the native copy (kernels/transpose), one of the runner's native steps; numpy where it declines
        return Impl(bind=lambda ins, outs, ws, nt=1: transpose_step(address, ins[0], outs[0], perm, nt)
                    or run_copy(outs[0], ins[0].transpose(perm)))
    return Impl(bind=lambda ins, outs, ws, nt=1: run_copy(outs[0], ins[0].transpose(perm)))


def _concat(ctx: NodeCtx):
    present = [i for i in range(len(ctx.ins)) if ctx.value(i) is not None]
    if not present or "axis" not in ctx.attrs or any(ctx.dtype(i) != ctx.out().dtype for i in present):
        return None
    axis = normalize_axis(ctx.attrs["axis"], len(ctx.out().shape), "Concat axis")
    shapes = [ctx.shape(i) for i in present]
    want = list(shapes[0])
    want[axis] = sum(sh[axis] for sh in shapes)
    if any(len(sh) != len(want) or any(a != b for j, (a, b) in enumerate(zip(sh, want)) if j != axis)
           for sh in shapes) or tuple(want) != ctx.out().shape:
        return None
    return Impl(bind=lambda ins, outs, ws, nt=1: partial(np.concatenate, [a for a in ins if a is not None],
                                                   axis=axis, out=outs[0]))


FEW_INDICES = 64     # a Gather with at most this many indices checks them inside np.take


def _gather(ctx: NodeCtx):
    x, idx = ctx.value(0), ctx.value(1)
    if x.dtype != ctx.out().dtype or idx.dtype.kind not in "iu" or not x.shape:
        return None
    axis = normalize_axis(ctx.attrs.get("axis", 0), len(x.shape), "Gather axis")
    dim = x.shape[axis]
    if x.shape[:axis] + idx.shape + x.shape[axis + 1:] != ctx.out().shape:
        return None
    const = ctx.const(1)
    if const is not None:
        if const.size and (const.min() < -dim or const.max() >= dim):
            return None                                   # the reference kernel reports the error
        fixed = np.where(const < 0, const + dim, const).astype(np.intp)
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(ins[0].take, fixed, axis=axis, out=outs[0],
                                                       mode="clip"))

    def bind(ins, outs, ws, nt=1):
        data, ids, out = ins[0], ins[1], outs[0]
        if ids.size == 1 and out.flags.c_contiguous:
            # one index (a token in a decoding loop): the slice at it assigned to the output seen without the
            # index's unit dims, 0.35 us where ``take`` with "raise" takes 1.1 (it buffers its output)
            row = out.reshape(x.shape[:axis] + x.shape[axis + 1:])
            lead = (slice(None),) * axis

            def run_one():
                i = ids.item()
                if not -dim <= i < dim:
                    raise KernelError(f"Gather: index {i} out of range for dim {dim}")
                row[...] = data[lead + (i,)]
            return run_one
        if ids.size <= FEW_INDICES:
            # numpy's "raise" mode checks [-dim, dim) itself (one pass, no min/max); it buffers the output,
            # which costs nothing for a few rows (a token in a decoding loop); the array's own method, not np.take
            # (whose dispatch wrapper cost 1.5 of 2.7 us a call)
            checked = partial(data.take, ids, axis=axis, out=out, mode="raise")

            def run_few():
                try:
                    checked()
                except IndexError as e:
                    raise KernelError(f"Gather: index out of range for dim {dim}: {e}") from None
            return run_few
        take = partial(data.take, ids, axis=axis, out=out, mode="wrap")

        def run():
            if ids.size and (ids.min() < -dim or ids.max() >= dim):
                raise KernelError(f"Gather: index out of range for dim {dim}")
            take()
        return run
    return Impl(bind=bind)


# -- elementwise ---------------------------------------------------------------------------------------------
UNARY = {"Neg": np.negative, "Abs": np.absolute, "Sqrt": np.sqrt, "Exp": np.exp, "Log": np.log,
         "Tanh": np.tanh, "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil, "Sin": np.sin,
         "Cos": np.cos}
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power}
INT_OK = {"Add", "Sub", "Mul", "Neg", "Abs"}
COMPARE = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
           "GreaterOrEqual": np.greater_equal}


def _unary(ufunc):
    def factory(ctx: NodeCtx):
        if not _same_dtype(ctx, (0,), "iuf" if ctx.node.op in INT_OK else "f"):
            return None
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(ufunc, ins[0], out=outs[0]), inplace=(0,))
    return factory


def _binary(ufunc):
    def factory(ctx: NodeCtx):
        if not _same_dtype(ctx, (0, 1), "iuf" if ctx.node.op in INT_OK else "f"):
            return None
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(ufunc, ins[0], ins[1], out=outs[0]), inplace=(0, 1))
    return factory


def _compare(ufunc):
    def factory(ctx: NodeCtx):
        if ctx.dtype(0) != ctx.dtype(1) or ctx.dtype(0).kind not in "iufb" or ctx.out().dtype != np.bool_ \
                or not _broadcasts_to(ctx, (0, 1)):
            return None
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(ufunc, ins[0], ins[1], out=outs[0]))
    return factory


def _relu(ctx: NodeCtx):
    if not _same_dtype(ctx, (0,), "iuf"):
        return None
    return Impl(bind=lambda ins, outs, ws, nt=1: partial(np.maximum, ins[0], 0, out=outs[0]), inplace=(0,))


def _minmax(ufunc):
    def factory(ctx: NodeCtx):
        if len(ctx.ins) != 2 or not _same_dtype(ctx, (0, 1)):
            return None
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(ufunc, ins[0], ins[1], out=outs[0]), inplace=(0, 1))
    return factory


def _clip(ctx: NodeCtx):
    dt = ctx.dtype(0)
    if not _same_dtype(ctx, (0,)):
        return None
    bounds = []
    for i, fn in ((1, np.maximum), (2, np.minimum)):
        if ctx.value(i) is None:
            continue
        c = ctx.const(i)
        if c is None or c.size != 1:
            return None
        bounds.append((fn, np.asarray(c).reshape(()).astype(dt)))

    def bind(ins, outs, ws, nt=1):
        x, o = ins[0], outs[0]
        if not bounds:
            return partial(np.copyto, o, x)
        calls = [partial(bounds[0][0], x, bounds[0][1], out=o)] + [partial(fn, o, b, out=o) for fn, b in bounds[1:]]

        def run():
            for c in calls:
                c()
        return run
    return Impl(bind=bind, inplace=(0,))


def _where(ctx: NodeCtx):
    if ctx.dtype(0) != np.bool_ or ctx.dtype(1) != ctx.out().dtype or ctx.dtype(2) != ctx.out().dtype \
            or not _broadcasts_to(ctx, (0, 1, 2)):
        return None

    def bind(ins, outs, ws, nt=1):
        c, x, y, o = ins[0], ins[1], ins[2], outs[0]

        def run():
            np.copyto(o, y)
            np.copyto(o, x, where=c)
        return run
    return Impl(bind=bind, inplace=(2,))


def _sigmoid(ctx: NodeCtx):
    """1 / (1 + exp(-|x|)), times exp(-|x|) where x < 0 (the reference's formula, step by step)."""
    if not _same_dtype(ctx, (0,)):
        return None
    y = ctx.out()
    n = math.prod(y.shape)

    zero, one = np.zeros((), y.dtype), np.ones((), y.dtype)     # (a Python 0 or 1 costs ~0.4 us a call to convert)

    def bind(ins, outs, ws, nt=1):
        x, o = ins[0], outs[0]
        e = ws[:y.nbytes].view(y.dtype).reshape(y.shape)
        neg = ws[y.nbytes:y.nbytes + n].view(np.bool_).reshape(y.shape)
        less, absolute, negative, exp, add, divide, multiply, copyto = (
            np.less, np.absolute, np.negative, np.exp, np.add, np.divide, np.multiply, np.copyto)

        def run():
            less(x, zero, neg)
            absolute(x, e)
            negative(e, e)
            exp(e, e)
            add(e, one, o)
            divide(one, o, o)
            multiply(e, o, e)
            copyto(o, e, where=neg)
        return run
    return Impl(bind=bind, inplace=(0,), workspace=y.nbytes + n + 64)


def _erf(ctx: NodeCtx):
    if not _same_dtype(ctx, (0,)) or ctx.dtype(0) != np.float32:
        return None
    return Impl(bind=lambda ins, outs, ws, nt=1: lambda: np.copyto(outs[0], erf_math.erf(ins[0]), casting="unsafe"),
                inplace=(0,))


def _arg_extreme(method: str):
    """ArgMax/ArgMin straight into the output buffer (numpy's: first index, NaN counts as extreme, as the
    reference kernel) by the array's own method (``np.argmax``'s dispatch wrapper cost 1.7 of 2.2 us a call: a
    decoding loop runs one per token); select_last_index and empty axes are left to the reference kernel."""
    def factory(ctx: NodeCtx):
        shape = ctx.shape(0)
        if not shape or ctx.attrs.get("select_last_index", 0) or ctx.out().dtype != np.int64:
            return None
        axis = normalize_axis(ctx.attrs.get("axis", 0), len(shape))
        if shape[axis] == 0:
            return None
        kept = tuple(1 if i == axis else d for i, d in enumerate(shape))
        return Impl(bind=lambda ins, outs, ws, nt=1: partial(getattr(ins[0], method), axis=axis,
                                                             out=outs[0].reshape(kept), keepdims=True))
    return factory


FAST = {
    "ArgMax": _arg_extreme("argmax"), "ArgMin": _arg_extreme("argmin"),
    **{op: _reshape_view for op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")},
    "Cast": _cast, "Expand": _expand, "Slice": _slice, "Split": _split, "Transpose": _transpose,
    "Concat": _concat, "Gather": _gather, "Relu": _relu, "Clip": _clip, "Where": _where, "Sigmoid": _sigmoid,
    "Erf": _erf, "Max": _minmax(np.maximum), "Min": _minmax(np.minimum),
    **{op: _unary(fn) for op, fn in UNARY.items()},
    **{op: _binary(fn) for op, fn in BINARY.items()},
    **{op: _compare(fn) for op, fn in COMPARE.items()},
    **NORM_FAST, **REDUCE_FAST, **RNN_FAST, **LINALG_FAST, **CONV_FAST, **POOL_FAST, **GATHER_FAST, **QUANTIZED_FAST,
    "Conv": patch_conv(CONV_FAST["Conv"]), "ConvTranspose": conv_transpose_patches,
    "Resize": lambda ctx: linear_resize(ctx) or nearest_resize(ctx) or GATHER_FAST["Resize"](ctx),
    "DepthToSpace": lambda ctx: depth_to_space(ctx) or GATHER_FAST["DepthToSpace"](ctx),
    "SpaceToDepth": lambda ctx: depth_to_space(ctx) or GATHER_FAST["SpaceToDepth"](ctx),
}
