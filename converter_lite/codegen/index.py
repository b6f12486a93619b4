"""Index maps: where an element of an index-map op's output comes from, without materializing anything.

An ``Index`` names one element of a tensor of a static shape, by its coordinates, by its row-major linear
offset, or both; whichever is missing is computed on demand (coordinates from a linear offset by div/mod by
constants, a linear offset from coordinates by multiply-add).  Elementwise chains over same-shape tensors keep
the linear offset of the flat loop all the way to the loads (so LLVM sees unit-stride accesses and vectorizes);
broadcasts, transposes and slices work on coordinates, which are affine in the loop variables of a loop nest.

INDEX_MAPS: op type -> ``fn(em, node, value, index) -> scalar``; each maps the output index to its input's index
and asks the emitter ``em`` for the input element there:

    Reshape/Flatten/Squeeze/Unsqueeze   same linear offset (coordinates kept when only size-1 dims change)
    Expand                              numpy broadcasting: size-1 input dims read coordinate 0
    Transpose(perm)                     in[perm[i]] = out[i]
    Slice(starts, ends, axes, steps)    in[a] = start[a] + out[a] * step[a]      (ONNX clamping)
    Concat(axis), Split(axis, split)    the input whose range along ``axis`` holds the coordinate
    Tile(repeats)                       in[a] = out[a] mod in_dim[a]
    Pad(pads, constant_value, axes)     constant (select), edge (clamp), reflect (mirror), wrap (modulo)
    CenterCropPad(shape, axes)          centred crop/zero-pad per axis (select, no branch)
    Dropout (inference)                 the input, and an all-True mask
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from ..ir.core import Node, Value
from ..ops import tensor as tensor_ops
from ..ops.tensor_pad import pad_amounts
from ..tables import registrar
from .types import I64, constant


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _ckey(v: ir.Value):
    return ("k", v.constant) if isinstance(v, ir.Constant) else id(v)


class Index:
    """One element of a tensor of ``shape``; see the module docstring."""

    __slots__ = ("_coords", "_linear", "b", "shape")

    def __init__(self, b: ir.IRBuilder, shape: Sequence[int], coords: list[ir.Value] | None = None,
                 linear: ir.Value | None = None):
        self.b = b
        self.shape = tuple(shape)
        self._coords = coords
        self._linear = linear
        if coords is None and linear is None:
            raise ValueError("an Index needs coordinates or a linear offset")

    @staticmethod
    def zero(b: ir.IRBuilder, shape: Sequence[int]) -> Index:
        zero = ir.Constant(I64, 0)
        return Index(b, shape, [zero] * len(shape), zero)

    @property
    def has_linear(self) -> bool:
        return self._linear is not None

    def coords(self) -> list[ir.Value]:
        if self._coords is None:
            b, rem, out = self.b, self._linear, []
            for k in range(len(self.shape) - 1, -1, -1):
                d = self.shape[k]
                if d == 1:
                    out.append(ir.Constant(I64, 0))
                elif k == 0:
                    out.append(rem)
                else:
                    out.append(b.urem(rem, ir.Constant(I64, d)))
                    rem = b.udiv(rem, ir.Constant(I64, d))
            self._coords = out[::-1]
        return self._coords

    def linear(self) -> ir.Value:
        if self._linear is None:
            b, acc, stride = self.b, None, 1
            for c, d in zip(reversed(self._coords), reversed(self.shape)):
                if d != 1:
                    term = c if stride == 1 else b.mul(c, ir.Constant(I64, stride), flags=("nsw", "nuw"))
                    acc = term if acc is None else b.add(acc, term, flags=("nsw", "nuw"))
                stride *= d
            self._linear = acc if acc is not None else ir.Constant(I64, 0)
        return self._linear

    def key(self):
        if self._linear is not None:
            return ("L", _ckey(self._linear))
        return ("C",) + tuple(_ckey(c) for c in self._coords)

    # -- derived indices -----------------------------------------------------------------------------------
    def with_shape(self, shape: Sequence[int]) -> Index:
        """The same element of a tensor with the same data and a reshaped ``shape``."""
        shape = tuple(shape)
        if shape == self.shape:
            return self
        if self._coords is not None and [d for d in shape if d != 1] == [d for d in self.shape if d != 1]:
            kept = iter(c for c, d in zip(self._coords, self.shape) if d != 1)
            zero = ir.Constant(I64, 0)
            coords = [next(kept) if d != 1 else zero for d in shape]
            return Index(self.b, shape, coords, self._linear)
        if self._coords is not None and self._linear is None:
            coords = _regroup(self.b, self._coords, self.shape, shape)
            if coords is not None:
                return Index(self.b, shape, coords)
        return Index(self.b, shape, linear=self.linear())

    def broadcast_to(self, shape: Sequence[int]) -> Index:
        """The element of an input of ``shape`` that numpy broadcasting pairs with this element."""
        shape = tuple(shape)
        if shape == self.shape:
            return self
        n = _numel(shape)
        if n == 1:
            return Index.zero(self.b, shape)
        if n == _numel(self.shape):                  # only leading 1s differ: same data order
            return self.with_shape(shape)
        coords = self.coords()
        off = len(self.shape) - len(shape)
        zero = ir.Constant(I64, 0)
        return Index(self.b, shape, [coords[off + k] if d != 1 else zero for k, d in enumerate(shape)])


def _strides(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _regroup(b: ir.IRBuilder, coords: list[ir.Value], src: Sequence[int], dst: Sequence[int]
             ) -> list[ir.Value] | None:
    """The coordinates in ``dst`` of the element at ``coords`` of ``src`` (same data, reshaped), computed per
    dimension instead of from the linear offset, when the two shapes refine into common factors (every stride
    of either divides the next larger stride of both): GroupNorm's ``[C, H, W] <-> [G, C/G * H * W]`` splits
    only the channel coordinate (``c // (C/G)``, ``c % (C/G)``, outside the pixel loop), where the linear offset
    divided the flat index of every element.  None when there are no such factors."""
    total = _numel(src)
    if total != _numel(dst) or total == 0:
        return None
    s_str, d_str = _strides(src), _strides(dst)
    bounds = sorted({st for st, d in zip(s_str, src) if d != 1} | {st for st, d in zip(d_str, dst) if d != 1}
                    | {total})
    if any(hi % lo for lo, hi in itertools.pairwise(bounds)):
        return None
    fine: dict[int, ir.Value] = {}           # fine factor (by its stride) -> its coordinate
    for c, st, d in zip(coords, s_str, src):
        if d == 1:
            continue
        inside = [bd for bd in bounds if st <= bd < st * d]
        for k, bd in enumerate(inside):
            v = c if bd == st else b.udiv(c, ir.Constant(I64, bd // st))
            if k + 1 < len(inside):
                v = b.urem(v, ir.Constant(I64, inside[k + 1] // bd))
            fine[bd] = v
    zero = ir.Constant(I64, 0)
    out = []
    for st, d in zip(d_str, dst):
        if d == 1:
            out.append(zero)
            continue
        acc = None
        for bd in (bd for bd in bounds if st <= bd < st * d):
            term = fine[bd] if bd == st else b.mul(fine[bd], ir.Constant(I64, bd // st), flags=("nsw", "nuw"))
            acc = term if acc is None else b.add(acc, term, flags=("nsw", "nuw"))
        out.append(acc)
    return out


# -- the index-map ops ---------------------------------------------------------------------------------------
IndexMap = Callable[["object", Node, Value, Index], ir.Value]
INDEX_MAPS: dict[str, IndexMap] = {}
RESHAPE_LIKE = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


index_map = registrar(INDEX_MAPS, "index map of")


@index_map(*RESHAPE_LIKE)
def _reshape(em, node: Node, v: Value, idx: Index) -> ir.Value:
    src = node.inputs[0]
    return em.value_at(src, idx.with_shape(src.shape))


@index_map("Expand")
def _expand(em, node: Node, v: Value, idx: Index) -> ir.Value:
    src = node.inputs[0]
    return em.value_at(src, idx.broadcast_to(src.shape))


def transpose_perm(node: Node, rank: int) -> list[int]:
    """The Transpose's permutation (ops/tensor.py's, the reference kernel's own reading of ``perm``)."""
    return list(tensor_ops.transpose_perm(rank, node.attrs.get("perm")))


@index_map("Transpose")
def _transpose(em, node: Node, v: Value, idx: Index) -> ir.Value:
    src = node.inputs[0]
    perm = transpose_perm(node, len(src.shape))
    out = idx.coords()
    coords: list[ir.Value] = [None] * len(perm)  # type: ignore[list-item]
    for i, p in enumerate(perm):
        coords[p] = out[i]
    return em.value_at(src, Index(idx.b, src.shape, coords))


def _const_ints(v: Value | None) -> list[int] | None:
    return None if v is None else [int(x) for x in np.asarray(v.const).reshape(-1)]


def slice_params(node: Node) -> list[tuple[int, int]]:
    """(start, step) per input axis of a Slice with constant starts/ends/axes/steps, clamped as ONNX says by the
    reference kernel's own ``ops.tensor.slice_params``."""
    ins = list(node.inputs) + [None] * 5
    consts = [None if v is None else np.asarray(v.const) for v in ins[1:5]]
    slices, _ = tensor_ops.slice_params(node.inputs[0].shape, *consts)
    return [(0 if sl.start is None else int(sl.start), 1 if sl.step is None else int(sl.step)) for sl in slices]


@index_map("Slice")
def _slice(em, node: Node, v: Value, idx: Index) -> ir.Value:
    src = node.inputs[0]
    b = idx.b
    coords = []
    for c, (start, step) in zip(idx.coords(), slice_params(node)):
        if step != 1:
            c = b.mul(c, ir.Constant(I64, step))
        if start != 0:
            c = b.add(c, ir.Constant(I64, start))
        coords.append(c)
    return em.value_at(src, Index(b, src.shape, coords))


@index_map("Tile")
def _tile(em, node: Node, v: Value, idx: Index) -> ir.Value:
    src = node.inputs[0]
    b = idx.b
    coords = [c if d == od else b.urem(c, ir.Constant(I64, d))
              for c, d, od in zip(idx.coords(), src.shape, idx.shape)]
    return em.value_at(src, Index(b, src.shape, coords))


def one_row_block(em, values: list[Value], shape: tuple[int, ...], lead: int) -> tuple[bool, bool]:
    """(ok, through a Concat): whether a stage over ``shape`` may index its trailing axes ``shape[lead:]`` as
    one row -- coordinates ``(c_0, ..., c_{lead-1}, 0, ..., 0, r)``, ``r`` the offset in the block -- when
    computing ``values``.  Every offset is then linear in ``r`` and the leading coordinates stay exact.  Holds
    when every value below them spans the whole block or none of it (broadcast over it), and the only index
    maps are Concats along leading axes (whose pieces span the block)."""
    rank = len(shape)
    block = tuple(shape[lead:])
    if not block or block[-1] == 1:         # r must land on an axis Index.linear() does not skip (extent 1)
        return False, False
    stack, seen, concat = list(values), set(), False
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        full = (1,) * (rank - len(v.shape)) + tuple(v.shape)
        if len(full) != rank or (full[lead:] != block and any(d != 1 for d in full[lead:])):
            return False, False
        node = v.producer
        if em.buffered(v) or v.const is not None or node is None:
            continue
        if node.op == "Concat":
            if len(v.shape) != rank or int(node.attrs.get("axis", 0)) % rank >= lead:
                return False, False
            concat = True
        elif node.op in INDEX_MAPS:
            return False, False
        stack.extend(i for i in node.inputs if i is not None)
    return True, concat


SELECT_PIECES = 4          # concatenations of at most this many buffered pieces are read branch-free


def _pieces_along(em, pieces: list[tuple[Value, int]], axis: int, idx: Index, out_ty: ir.Type) -> ir.Value:
    """The element at ``idx`` of the concatenation of ``pieces`` = [(value, offset)] along ``axis``."""
    b = idx.b
    coords = idx.coords()                   # computed before branching so every branch may use them
    c = coords[axis]
    pieces = [(p, off) for p, off in pieces if p.shape[axis] > 0]
    if not pieces:                          # empty output: never evaluated
        return ir.Constant(out_ty, None)
    if 1 < len(pieces) <= SELECT_PIECES and all(em.buffered(p) for p, _ in pieces):
        return _pieces_selected(em, pieces, axis, coords, b)
    merge = b.append_basic_block("cat.end")
    incoming = []
    for k, (p, off) in enumerate(pieces):
        last = k == len(pieces) - 1
        if not last:
            inside = b.icmp_signed("<", c, ir.Constant(I64, off + p.shape[axis]))
            this_bb = b.append_basic_block(f"cat.{k}")
            next_bb = b.append_basic_block(f"cat.{k}.else")
            b.cbranch(inside, this_bb, next_bb)
            b.position_at_end(this_bb)
        local = list(coords)
        if off:
            local[axis] = b.sub(c, ir.Constant(I64, off))
        with em.memo_scope():
            val = em.value_at(p, Index(b, p.shape, local))
        incoming.append((val, b.block))
        b.branch(merge)
        if not last:
            b.position_at_end(next_bb)
    b.position_at_end(merge)
    phi = b.phi(out_ty)
    for val, bb in incoming:
        phi.add_incoming(val, bb)
    return phi


def _pieces_selected(em, pieces: list[tuple[Value, int]], axis: int, coords: list, b: ir.IRBuilder) -> ir.Value:
    """Branch-free form of ``_pieces_along`` for pieces read from buffers: every piece is loaded at the
    coordinate clamped into its range (so every load is in bounds) and selects pick the one that holds it.  A
    branch per element kept LLVM from vectorizing the loop: MixNet's Concat of two depthwise outputs -> BatchNorm
    -> SiLU -> the SE block's mean over H, W (240 x 28 x 28) took 637 us, 61 without the Concat (onnxruntime
    68 with it)."""
    c = coords[axis]
    val = None
    for k, (p, off) in enumerate(pieces):
        n = p.shape[axis]
        local = list(coords)
        lc = b.sub(c, ir.Constant(I64, off)) if off else c
        if off:
            lc = b.select(b.icmp_signed("<", lc, ir.Constant(I64, 0)), ir.Constant(I64, 0), lc)
        if k < len(pieces) - 1:
            lc = b.select(b.icmp_signed(">", lc, ir.Constant(I64, n - 1)), ir.Constant(I64, n - 1), lc)
        local[axis] = lc
        with em.memo_scope():
            here = em.value_at(p, Index(b, p.shape, local))
        val = here if val is None else b.select(b.icmp_signed("<", c, ir.Constant(I64, off)), val, here)
    return val


@index_map("Concat")
def _concat(em, node: Node, v: Value, idx: Index) -> ir.Value:
    axis = int(node.attrs.get("axis", 0)) % max(len(v.shape), 1)
    pieces, off = [], 0
    for p in node.inputs:
        if p is None:
            continue
        pieces.append((p, off))
        off += p.shape[axis]
    j = em.known_pieces.get(id(node))
    if j is not None:                       # a loop region reading one input (interior.py): no selection
        p, off = pieces[j]
        coords = list(idx.coords())
        if off:
            coords[axis] = idx.b.sub(coords[axis], ir.Constant(I64, off))
        return em.value_at(p, Index(idx.b, p.shape, coords))
    return _pieces_along(em, pieces, axis, idx, em.compute_type(v))


@index_map("Split")
def _split(em, node: Node, v: Value, idx: Index) -> ir.Value:
    src = node.inputs[0]
    axis = int(node.attrs.get("axis", 0)) % max(len(src.shape), 1)
    off = sum(o.shape[axis] for o in node.outputs[: v.index])
    coords = list(idx.coords())
    if off:
        coords[axis] = idx.b.add(coords[axis], ir.Constant(I64, off))
    return em.value_at(src, Index(idx.b, src.shape, coords))


@index_map("Dropout")
def _dropout(em, node: Node, v: Value, idx: Index) -> ir.Value:
    """Inference Dropout: output 0 is the input, output 1 (mask) is all True."""
    if v.index == 1:
        return ir.Constant(ir.IntType(1), 1)
    src = node.inputs[0]
    return em.value_at(src, idx.with_shape(src.shape))


def pad_plan(node: Node) -> list[tuple[int, int, int]]:
    """Per axis (crop begin, pad begin, cropped length): Pad crops negative amounts, then pads."""
    shape = node.inputs[0].shape
    ins = list(node.inputs) + [None] * 4
    amounts = pad_amounts(len(shape), _const_ints(ins[1]) or [], _const_ints(ins[3]))
    return [(max(-b, 0), max(b, 0), d - max(-b, 0) - max(-e, 0)) for d, (b, e) in zip(shape, amounts)]


@index_map("Pad")
def _pad(em, node: Node, v: Value, idx: Index) -> ir.Value:
    """constant: read the input where the coordinate falls inside it (clamped load + select, no branch; axes
    without padding, and guards ``em.free_guards`` names (interior.py), read directly); edge: clamp;
    reflect: mirror without repeating the edge; wrap: modulo the cropped length."""
    src = node.inputs[0]
    b = idx.b
    mode = node.attrs.get("mode", "constant")
    plan = pad_plan(node)
    ty = em.compute_type(v)
    fill = None
    if mode == "constant":
        cv = node.inputs[2] if len(node.inputs) > 2 else None
        value = 0 if cv is None or cv.const is None or np.size(cv.const) == 0 else np.asarray(cv.const).item()
        fill = constant(v.dtype, value)
        if any(n == 0 for _, _, n in plan):
            return fill
    zero = ir.Constant(I64, 0)
    coords, inside = [], None
    free = em.free_guards
    for ax, (c, (crop, before, n), d) in enumerate(zip(idx.coords(), plan, v.shape)):
        p = b.sub(c, ir.Constant(I64, before)) if before else c
        if mode == "constant" and ((before == 0 and d == n) or (id(node), ax) in free):
            coords.append(b.add(p, ir.Constant(I64, crop)) if crop else p)     # inside: no clamp, no select
            continue
        last = ir.Constant(I64, max(n - 1, 0))
        if mode == "reflect" and n > 1:
            period = ir.Constant(I64, 2 * (n - 1))
            r = b.srem(p, period)
            r = b.select(b.icmp_signed("<", r, zero), b.add(r, period), r)
            p = b.select(b.icmp_signed(">", r, last), b.sub(period, r), r)
        elif mode == "wrap":
            r = b.srem(p, ir.Constant(I64, n))
            p = b.select(b.icmp_signed("<", r, zero), b.add(r, ir.Constant(I64, n)), r)
        else:
            if mode == "constant":
                ok = b.and_(b.icmp_signed(">=", p, zero), b.icmp_signed("<=", p, last))
                inside = ok if inside is None else b.and_(inside, ok)
            p = b.select(b.icmp_signed("<", p, zero), zero, b.select(b.icmp_signed(">", p, last), last, p))
        coords.append(b.add(p, ir.Constant(I64, crop)) if crop else p)
    val = em.value_at(src, Index(b, src.shape, coords))
    if fill is None or inside is None:
        return val
    return b.select(inside, val, fill if fill.type == ty else ir.Constant(ty, fill.constant))


@index_map("CenterCropPad")
def _center_crop_pad(em, node: Node, v: Value, idx: Index) -> ir.Value:
    """out[o] = x[o - before + crop] where 0 <= o - before < min(n, d), else 0 (per listed axis)."""
    src = node.inputs[0]
    b = idx.b
    rank = len(src.shape)
    target = _const_ints(node.inputs[1]) or []
    axes = [a % rank for a in (node.attrs.get("axes") or range(rank))]
    plan = {a: (n, max(d - n, 0) // 2, max(n - d, 0) // 2, min(n, d))
            for a, n, d in ((a, n, src.shape[a]) for a, n in zip(axes, target))}
    if any(kept == 0 for _, _, _, kept in plan.values()):
        return constant(v.dtype, 0)
    zero = ir.Constant(I64, 0)
    coords, inside = [], None
    for a, c in enumerate(idx.coords()):
        if a not in plan:
            coords.append(c)
            continue
        _n, crop, before, kept = plan[a]
        p = b.sub(c, ir.Constant(I64, before)) if before else c
        ok = b.and_(b.icmp_signed(">=", p, zero), b.icmp_signed("<", p, ir.Constant(I64, kept)))
        inside = ok if inside is None else b.and_(inside, ok)
        p = b.select(ok, p, zero)
        coords.append(b.add(p, ir.Constant(I64, crop)) if crop else p)
    val = em.value_at(src, Index(b, src.shape, coords))
    return val if inside is None else b.select(inside, val, constant(v.dtype, 0))
