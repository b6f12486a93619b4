"""The depthwise convolution driver: float32 NCHW depthwise 2-D Conv (``group == C == M``) vectorised along
output rows, over flattened planes, or (small planes) over channels (a support function).

    void cl_dwconv_v3_f32(i8* desc, i64 nthreads)

**Rows** (other geometries): per channel plane, per block of ``VL`` = 16 output columns, per group of ``ROWS``
output rows:

    acc[r] = bias[c]                                                       (r < ROWS: independent FMA chains)
    for ky < kh:  for r:  iy = (oy + r)*sh - pt + ky*dh   (a row outside the image reads zeros)
        for kx < kw (unrolled):  acc[r] += w[c, ky, kx] * x[c, iy, ox*sw - pl + kx*dw]      (16 lanes)
    acc[r] += residual[c, oy + r, ox]  (when given);  min(max(acc[r], lo), hi)  (when clamped)  or
    acc[r] * min(max(acc[r] * lo + hi, 0), 1)  (a gate: HardSwish);  store

(one accumulator chain per output vector made it wait on FMA latency: 96 x 40 x 40 3x3 took 70 us, like the
fused tap kernel, against onnxruntime's ~45 us);

Input columns left of 0 or right of ``w`` (the padding) and lanes past ``ow`` are masked loads that read zeros,
the masks computed once per column block (they depend on ``ox`` and ``kx`` only), and rows above or below the
image read a static zero row, so there is no padded copy and no border/interior split (the runtime only sends
rows of at most ``MAX_WIDTH`` columns and taps within ``ZERO_MARGIN`` of the row); stride 2 loads 32 consecutive columns and keeps the even lanes.  One plane
function per (kernel width 1..``MAX_KW``, column stride 1 or 2), chosen per call from a table.  Chunks of the
pool are runs of planes (images x channels), about ``CHUNKS_PER_THREAD`` per thread.

**Flat planes** (``coords`` != 0): a stride-1 Conv with a square kernel whose output rows are as wide as its
input rows (``ow == w``, "same" padding, any dilation) reads every tap at a constant offset from the output
position in the flattened plane: ``y[p] = bias + sum_t w[t] * x[p + off[t]]`` over ``p < oh*ow``, whatever the
row length.  The plane is cut into 16-lane vectors of ``p`` regardless of rows (a 5x5 plane is two vectors, not
five masked rows).  Which lanes may read a tap (its row and column inside the image) are compares of the
lanes' coordinates, which do not depend on the channel: the runtime tabulates them once, at load
(``coords[j]``: columns, rows).  Per tap row ky a partial sum over kx (k independent FMA chains).  Vectors
whose windows stay inside the tensor (all but the edges of its first and last plane) use two plain loads per
tap row and make the row's other taps by lane shifts of them (one two-source permute each; 3x3: unaligned
loads, ``ROW_TAPS``), with the columns
outside the image masked in the FMA and the rows outside it in the row's addition; the others (and column
dilations other than 1) use one masked load per tap.  One function per kernel size 1..``MAX_KW``.  Measured
on mobilenet_v2_half's shapes (one thread, the Conv alone): 96 x 40 x 40 3x3 in 32 us against 65 for the
fused tap kernel, 96 x 20 x 20 in 8 against 21, 192 x 10 x 10 in 6 against 7, 480 x 5 x 5 in 7.5 against 10.

**Channels** (chosen here, from the geometry, before the other two: ``_chan_form``): a square kernel of at least
5 (at stride 1; 3 when strided) on a plane of at most ``CHAN_IN`` pixels with its padding runs 16 channels per
vector: a block's planes are transposed once into a zero-padded ``[hp][wp][16]`` scratch, each output pixel is
``k*k`` FMAs of plain loads and per-channel weight vectors (``CHAN_PIXELS`` pixels at a time), and the outputs
are transposed back with the epilogue (``chan_function``).  No masks, no lane shifts, any stride: the flat form
spent ~20 two-source permutes per vector on a 5x5 kernel's shifts, competing with its FMAs, and stride 2 took
the row form's 32-column loads.  One thread, the Conv alone, builds alternated in one process: 256 x 14 x 14 5x5
64-82 -> 44-46 us, 512 x 7 x 7 5x5 52-65 -> 27, 256 x 14 x 14 5x5 stride 2 (-> 7 x 7) 74-76 -> 17,
128 x 28 x 28 5x5 113-146 -> 89, 128 x 14 x 14 3x3 stride 2 14 -> 6.3, 128 x 28 x 28 3x3 stride 2 26 -> 21
(onnxruntime, the whole session: 69, 37, 27, 118, 14, 36).  Chunks are then blocks of 16 channels of an image.

Record (i64 fields, ``FIELDS``): ``n c h w oh ow kh kw sh sw dh dw pt pl`` geometry, ``x y wt bias`` addresses
(``wt``: ``[C][kh*kw]`` floats; ``bias``: ``[C]`` floats, zeros when the Conv has none), ``residual`` (0 or an
array shaped like ``y``), ``clamp lo hi`` (lo/hi as float64 bit patterns), ``coords nvec jlo jhi`` (the
flat-plane coordinate table, 0 for the row form; vectors per plane; the vectors whose windows stay inside the
plane); then one word the entry point writes (planes per chunk).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import constant_table, driver_entry, internal_function
from ...codegen.loops import for_range
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR_PTR, F32, F64, I1, I32, I64, VOID
from ...codegen.vector import (
    FP,
    I64P,
    MODE_CLAMP,
    MODE_GATE,
    VEC,
    VECP,
    VL,
    cdiv,
    clamp_lanes,
    gate_lanes,
    smin,
    splat,
    splat_bool,
    splat_i32,
    transpose,
    vector_intrinsics,
)
from .abi import FIELDS, MAX_KW, MAX_WIDTH, ZERO_MARGIN
from .abi import SYMBOL as DEPTHWISE_SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
ROWS = 4                           # output rows computed together: independent FMA chains
# one pool chunk per thread, as conv_direct.py: each thread computes the same part of every convolution
# (mobilenet_v2_half, 2 threads, builds alternated in one process: 4 chunks -> 1.10 ms, 1 -> 1.05 on a busy
# host; depthwise alone made no difference on a quiet one)
CHUNKS_PER_THREAD = 1
# flat form, vectors inside the plane: how a row's taps kx > 0 are read, by kernel size (default "shift": lane
# shifts of the row's two plain loads, which LLVM emits as vpermt2ps here).  Unaligned plain loads keep the
# permutes off the FP pipes that the FMAs use: one thread, the Conv alone, builds alternated in one process: 64 x 56 x 56 105 -> 83 us,
# 128 x 28 x 28 49 -> 40, 16 x 112 x 112 93 -> 76.  For 5x5 loads were slower (256 x 14 x 14: 84 -> 98 us
# with two of the four taps loaded, 81 -> 108 with all four; 512 x 7 x 7: 64 -> 76 with all four)
ROW_TAPS = {3: "load"}

# channel form (``chan_function``): square kernels at least CHAN_MIN_K[strided] wide (3x3 at stride 1 keeps the
# flat form: 160 x 10 x 10 8.9 -> 11.2 us in the channel form, 480 x 5 x 5 11.9 -> 12.5), padded input planes of
# at most CHAN_IN pixels and output planes of at most CHAN_OUT (scratch on chan_function's stack: 74 + 66 KB; 28 x 28
# with a 5x5 kernel's padding is 1024; 32 x 56 x 56 5x5 gained 107 -> 94 us with 430 KB, left out for the stack)
CHAN_MIN_K = {False: 5, True: 3}
CHAN_IN = 1156
CHAN_OUT = 1024
# output pixels computed together (independent FMA chains), taken from the plane flattened (a table of their
# windows) so that only a plane's last group repeats pixels: 7 (no repeats on 7 x 7 and 14 x 14 planes) against 4
# per row: 256 x 14 x 14 5x5 50 -> 45.6 us, 512 x 7 x 7 29.8 -> 27.7, 96 x 16 x 16 22.3 -> 21.7 (7 per row: 26.9)
CHAN_PIXELS = 7

IVEC = ir.VectorType(I32, VL)
# plane(x, y, res, wt, bias, h, w, oh, ow, kh, sh, dh, dw, pt, pl, has_res, clamp, gate, lo, hi)
PLANE_TYPE = ir.FunctionType(VOID, [FP, FP, FP, FP, F32, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I1, I1,
                                    I1, F32, F32])
# flat(x, y, res, wt, bias, coords, nvec, jlo, jhi, before, after, h, w, oh, dh, dw, pt, pl, has_res, clamp, gate,
#      lo, hi)
FLAT_TYPE = ir.FunctionType(VOID, [FP, FP, FP, FP, F32, I32.as_pointer()] + [I64] * 12 + [I1, I1, I1, F32, F32])

# chan(x, y, res, wt, bias, u0, u1, c, h, w, oh, ow, sh, sw, dh, dw, pt, pl, wp, padded, has_res, clamp, gate, lo,
#      hi)
CHAN_TYPE = ir.FunctionType(VOID, [FP] * 5 + [I64] * 15 + [I1, I1, I1, F32, F32])


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def plane_function(module: ir.Module, kw: int, sw: int) -> ir.Function:
    """``cl_dwconv.plane_k<kw>_s<sw>`` (PLANE_TYPE): one channel plane."""
    fn = internal_function(module, f"cl_dwconv.plane_k{kw}_s{sw}", PLANE_TYPE, noalias=(0, 1, 2, 3))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = vector_intrinsics(module)
    x, y, res, wt, bias, h, w, oh, ow, kh, sh, dh, dw, pt, pl, has_res, clamp, gate, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(VEC, None)
    zero_row = b.gep(b.bitcast(_zeros(module), FP), [c64(ZERO_MARGIN)])
    iota = ir.Constant(IVEC, list(range(VL)))
    wv, owv = splat_i32(b, w), splat_i32(b, ow)
    lov, hiv = splat(b, lo), splat(b, hi)
    nblk = cdiv(b, ow, c64(VL))
    with for_range(b, 0, nblk, "blk") as blk:
        ox0 = b.mul(blk, c64(VL))
        out_ok = b.icmp_signed("<", b.add(splat_i32(b, ox0), iota), owv)
        # per tap column kx: the input columns of the 16 (or 32, stride 2) lanes and which of them are inside
        taps = []
        for kx in range(kw):
            ix0 = b.add(b.sub(b.mul(ox0, c64(sw)), pl), b.mul(c64(kx), dw))
            lanes = []
            for half in range(sw):
                cols = b.add(splat_i32(b, b.add(ix0, c64(half * VL))), iota)
                inside = b.and_(b.icmp_signed(">=", cols, ir.Constant(IVEC, [0] * VL)),
                                b.icmp_signed("<", cols, wv))
                if sw == 1:
                    inside = b.and_(inside, out_ok)
                else:                                  # lane i of half k is output column (16k + i) / 2
                    outcol = b.add(splat_i32(b, b.add(ox0, c64(half * VL // 2))),
                                   ir.Constant(IVEC, [i // 2 for i in range(VL)]))
                    inside = b.and_(inside, b.icmp_signed("<", outcol, owv))
                lanes.append((b.add(ix0, c64(half * VL)), inside))
            taps.append(lanes)
        with for_range(b, 0, cdiv(b, oh, c64(ROWS)), "oyb") as oyb:
            oy0 = b.mul(oyb, c64(ROWS))
            binit = splat(b, bias)
            pre = b.block
            head = b.append_basic_block("ky.head")
            body = b.append_basic_block("ky.body")
            done = b.append_basic_block("ky.done")
            b.branch(head)
            b.position_at_end(head)
            ky = b.phi(I64, "ky")
            ky.add_incoming(c64(0), pre)
            acc = []
            for r in range(ROWS):
                acc.append(b.phi(VEC, f"acc{r}"))
                acc[r].add_incoming(binit, pre)
            b.cbranch(b.icmp_signed("<", ky, kh), body, done)
            b.position_at_end(body)
            wrow = b.gep(wt, [b.mul(ky, c64(kw))])
            wk = [splat(b, b.load(b.gep(wrow, [c64(kx)]))) for kx in range(kw)]
            for r in range(ROWS):                      # ROWS independent FMA chains
                iy = b.add(b.sub(b.mul(b.add(oy0, c64(r)), sh), pt), b.mul(ky, dh))
                ok = b.and_(b.icmp_signed(">=", iy, c64(0)), b.icmp_signed("<", iy, h))
                # a row outside the image reads the zero row (no branch, no extra mask per load)
                row = b.select(ok, b.gep(x, [b.mul(iy, w)]), zero_row)
                a = acc[r]
                for kx in range(kw):
                    loaded = [b.call(mload, [b.bitcast(b.gep(row, [start]), VECP), ir.Constant(I32, 4),
                                             mask, zero]) for start, mask in taps[kx]]
                    v = loaded[0] if sw == 1 else b.shuffle_vector(
                        loaded[0], loaded[1], ir.Constant(IVEC, [2 * i for i in range(VL)]))
                    a = b.call(fma, [v, wk[kx], a])
                acc[r].add_incoming(a, body)
            ky.add_incoming(b.add(ky, c64(1)), body)
            b.branch(head)
            b.position_at_end(done)
            for r in range(ROWS):
                oy = b.add(oy0, c64(r))
                with b.if_then(b.icmp_signed("<", oy, oh)):
                    off = b.add(b.mul(oy, ow), ox0)
                    v = _finish(b, mload, acc[r], b.gep(res, [off]), out_ok, lov, hiv, has_res, clamp, gate)
                    b.call(mstore, [v, b.bitcast(b.gep(y, [off]), VECP), ir.Constant(I32, 4), out_ok])
    b.ret_void()
    return fn


def _when(b: ir.IRBuilder, flag: ir.Value, v: ir.Value, make) -> ir.Value:
    """``make(v)`` if ``flag`` else ``v``, as a branch (a phi after it)."""
    before = b.block
    with b.if_then(flag):
        done = make(v)
        after = b.block
    merged = b.phi(VEC)
    merged.add_incoming(v, before)
    merged.add_incoming(done, after)
    return merged


def _finish(b: ir.IRBuilder, mload, acc: ir.Value, res: ir.Value, mask: ir.Value, lov, hiv, has_res: ir.Value,
            do_clamp: ir.Value, do_gate: ir.Value) -> ir.Value:
    """acc + residual (masked load over ``mask``) when ``has_res``, then the clamp (NaN stays NaN) when
    ``do_clamp``: branches on the two uniform flags, so an epilogue that is off costs a predicted branch, not a
    masked load, an add, two compares and three blends per vector as selects did."""
    def add_residual(v):
        return b.fadd(v, b.call(mload, [b.bitcast(res, VECP), ir.Constant(I32, 4), mask, ir.Constant(VEC, None)]))

    v = _when(b, do_clamp, _when(b, has_res, acc, add_residual), lambda v: clamp_lanes(b, v, lov, hiv))
    return _when(b, do_gate, v, lambda v: gate_lanes(b, v, lov, hiv))


def flat_function(module: ir.Module, k: int) -> ir.Function:
    """``cl_dwconv.flat_k<k>`` (FLAT_TYPE): one channel plane of a k x k stride-1 "same" Conv, flattened."""
    fn = internal_function(module, f"cl_dwconv.flat_k{k}", FLAT_TYPE, noalias=(0, 1, 2, 3, 5))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = vector_intrinsics(module)
    x, y, res, wt, bias, coords, nvec, jlo, jhi, before, after, h, w, oh, dh, dw, pt, pl, has_res, clamp, gate, lo, hi = \
        fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    zero = ir.Constant(VEC, None)
    wk = [splat(b, b.load(b.gep(wt, [c64(t)]))) for t in range(k * k)]
    dys = [b.sub(b.mul(c64(ky), dh), pt) for ky in range(k)]
    dxs = [b.sub(b.mul(c64(kx), dw), pl) for kx in range(k)]
    off = [[b.add(b.mul(dy, w), dx) for dx in dxs] for dy in dys]
    dyv = [splat_i32(b, d) for d in dys]
    dxv = [splat_i32(b, d) for d in dxs]
    hv, wv, ohv = splat_i32(b, h), splat_i32(b, w), splat_i32(b, oh)
    lov, hiv = splat(b, lo), splat(b, hi)
    binit = splat(b, bias)
    cvec = b.bitcast(coords, IVEC.as_pointer())

    def one(j, shifted):
        """Output vector ``j``: per tap row ky a partial sum over kx (k independent FMA chains).  Masked loads
        (lanes whose tap lies outside the image read zeros), or with ``shifted`` (vectors [jlo, jhi): every
        window inside the plane, unit column dilation) two plain loads per tap row, the row's other taps by
        lane shifts of them (valignd; or unaligned loads, ``ROW_TAPS``), the columns outside the image masked in
        the FMA and the rows outside it in the row's addition: a seventh of the vector loads for 7x7, no mask table
        (the masks are compares of the lanes' coordinates, which the runtime tabulates once)."""
        p0 = b.mul(j, c64(VL))
        xs = b.load(b.gep(cvec, [b.mul(j, c64(2))]), align=64)
        ys = b.load(b.gep(cvec, [b.add(b.mul(j, c64(2)), c64(1))]), align=64)
        col = [b.icmp_unsigned("<", b.add(xs, d), wv) for d in dxv]
        row = [b.icmp_unsigned("<", b.add(ys, d), hv) for d in dyv]
        acc = binit
        for ky in range(k):
            part = zero
            if shifted:
                base = b.gep(x, [b.add(p0, off[ky][0])])
                win = [b.load(b.bitcast(b.gep(base, [c64(i * VL)]), VECP), align=4) for i in range(2)]
            for kx in range(k):
                t = ky * k + kx
                if shifted:
                    if kx == 0:
                        v = win[0]
                    elif ROW_TAPS.get(k, "shift") == "load":
                        v = b.load(b.bitcast(b.gep(base, [c64(kx)]), VECP), align=4)
                    else:
                        v = b.shuffle_vector(win[0], win[1], ir.Constant(IVEC, list(range(kx, kx + VL))))
                    part = b.select(col[kx], b.call(fma, [v, wk[t], part]), part)
                else:
                    v = b.call(mload, [b.bitcast(b.gep(x, [b.add(p0, off[ky][kx])]), VECP), ir.Constant(I32, 4),
                                       b.and_(row[ky], col[kx]), zero])
                    part = b.call(fma, [v, wk[t], part])
            acc = b.fadd(acc, b.select(row[ky], part, zero) if shifted else part)
        out_ok = b.icmp_unsigned("<", ys, ohv)
        v = _finish(b, mload, acc, b.gep(res, [p0]), out_ok, lov, hiv, has_res, clamp, gate)
        b.call(mstore, [v, b.bitcast(b.gep(y, [p0]), VECP), ir.Constant(I32, 4), out_ok])

    # windows may reach into the neighbouring planes (their lanes are masked off), not outside the tensor:
    # [jlo, jhi) is where they stay inside this plane; with room enough before / after it (``before`` /
    # ``after`` elements of the tensor), every vector up to the plane's first / last reads plain loads
    unit = b.icmp_signed("==", dw, c64(1))
    reach_lo = b.sub(c64(0), off[0][0])
    reach_hi = b.add(b.add(b.mul(b.sub(nvec, c64(1)), c64(VL)), off[k - 1][0]), c64(2 * VL))
    jlo = b.select(b.and_(unit, b.icmp_signed("<=", reach_lo, before)), c64(0), jlo)
    jhi = b.select(b.and_(unit, b.icmp_signed("<=", reach_hi, b.add(b.mul(h, w), after))), nvec, jhi)
    jhi = b.select(b.icmp_signed("<", jhi, jlo), jlo, jhi)
    with for_range(b, 0, jlo, "j0") as j:
        one(j, False)
    with for_range(b, jlo, jhi, "j1") as j:
        one(j, True)
    with for_range(b, jhi, nvec, "j2") as j:
        one(j, False)
    b.ret_void()
    return fn


def chan_function(module: ir.Module, k: int) -> ir.Function:
    """``cl_dwconv.chan_k<k>`` (CHAN_TYPE): blocks ``[u0, u1)`` of 16 channels (block u: image ``u // ceil(c /
    16)``) of a k x k Conv, any stride, 16 channels per vector.  A block's planes are transposed (registers,
    ``transpose``) into ``scr``, a zero-padded ``[hp][wp][16]`` plane of channel vectors (``padded`` = hp * wp
    pixels) on this function's stack, whose padding is zeroed once per call; then each output pixel is ``k*k``
    FMAs of a plain load and a per-channel weight vector (no masks, no lane shifts, strides are address
    arithmetic), ``CHAN_PIXELS`` pixels of the flattened plane at a time (``tab``: each pixel's window in
    ``scr``; the last group repeats the plane's last pixel), into ``oscr`` (``[oh*ow][16]``), transposed back 16
    flattened output pixels at a time, with the epilogue.  Input rows are transposed 16 columns at a time: the
    columns past ``w`` are zeros (masked loads) stored over the row's right padding, the next row (written
    after) and the 16 spare vectors past the plane, so the padding stays zero from block to block."""
    fn = internal_function(module, f"cl_dwconv.chan_k{k}", CHAN_TYPE, noalias=(0, 1, 2, 3, 4))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = vector_intrinsics(module)
    xt, yt, rt, wt, bias, u0, u1, c, h, w, oh, ow, sh, sw, dh, dw, pt, pl, wp, padded, has_res, clamp, gate, lo, \
        hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    scr = b.bitcast(b.alloca(ir.ArrayType(VEC, CHAN_IN + VL)), FP)
    oscr = b.bitcast(b.alloca(ir.ArrayType(VEC, CHAN_OUT + VL)), FP)
    tab = b.bitcast(b.alloca(ir.ArrayType(I32, CHAN_OUT)), I32.as_pointer())  # output pixel -> its window in scr
    zero = ir.Constant(VEC, None)
    iota = ir.Constant(IVEC, list(range(VL)))
    lov, hiv = splat(b, lo), splat(b, hi)
    hw, ohw = b.mul(h, w), b.mul(oh, ow)
    with for_range(b, 0, b.add(padded, c64(VL)), "z") as z:
        b.store(zero, b.bitcast(b.gep(scr, [b.mul(z, c64(VL))]), VECP), align=64)
    taps = k * k
    offs = [b.mul(b.add(b.mul(b.mul(c64(ky), dh), wp), b.mul(c64(kx), dw)), c64(VL))     # tap offsets in scr
            for ky in range(k) for kx in range(k)]
    with for_range(b, 0, oh, "oy") as oy, for_range(b, 0, ow, "ox") as ox:
        at = b.mul(b.add(b.mul(b.mul(oy, sh), wp), b.mul(ox, sw)), c64(VL))
        b.store(b.trunc(at, I32), b.gep(tab, [b.add(b.mul(oy, ow), ox)]))
    last = b.sub(ohw, c64(1))
    wvp, ohwv = splat_i32(b, w), splat_i32(b, ohw)
    nb = cdiv(b, c, c64(VL))
    with for_range(b, u0, u1, "u") as u:
        img, c0 = b.sdiv(u, nb), b.mul(b.srem(u, nb), c64(VL))
        x = b.gep(xt, [b.mul(img, b.mul(c, hw))])
        y = b.gep(yt, [b.mul(img, b.mul(c, ohw))])
        res = b.gep(rt, [b.mul(img, b.mul(c, ohw))])
        live = b.sub(c, c0)                                 # channels of this block (<= 16)
        ch_ok = [b.icmp_signed("<", c64(i), live) for i in range(VL)]
        wv = []
        for t0 in range(0, taps, VL):                       # weights [c][taps] -> one vector per tap
            tmask = b.icmp_signed("<", iota, ir.Constant(IVEC, [taps - t0] * VL))
            rows = [b.call(mload, [b.bitcast(b.gep(wt, [b.add(b.mul(b.add(c0, c64(i)), c64(taps)), c64(t0))]),
                                             VECP), ir.Constant(I32, 4), b.and_(tmask, splat_bool(b, ch_ok[i])), zero])
                    for i in range(VL)]
            wv += transpose(b, rows)
        wv = wv[:taps]
        binit = b.call(mload, [b.bitcast(b.gep(bias, [c0]), VECP), ir.Constant(I32, 4),
                               b.icmp_signed("<", iota, splat_i32(b, live)), zero])
        with for_range(b, 0, h, "iy") as iy:
            dst = b.add(b.mul(b.add(iy, pt), wp), pl)
            with for_range(b, 0, cdiv(b, w, c64(VL)), "ixb") as ixb:
                ix0 = b.mul(ixb, c64(VL))
                cmask = b.icmp_signed("<", b.add(splat_i32(b, ix0), iota), wvp)
                src = b.gep(x, [b.add(b.mul(iy, w), ix0)])
                rows = [b.call(mload, [b.bitcast(b.gep(src, [b.mul(b.add(c0, c64(i)), hw)]), VECP),
                                       ir.Constant(I32, 4), b.and_(cmask, splat_bool(b, ch_ok[i])), zero])
                        for i in range(VL)]
                for j, v in enumerate(transpose(b, rows)):
                    pix = b.add(b.add(dst, ix0), c64(j))
                    b.store(v, b.bitcast(b.gep(scr, [b.mul(pix, c64(VL))]), VECP), align=64)
        with for_range(b, 0, cdiv(b, ohw, c64(CHAN_PIXELS)), "g") as g:
            qs = [smin(b, b.add(b.mul(g, c64(CHAN_PIXELS)), c64(r)), last) for r in range(CHAN_PIXELS)]
            bases = [b.gep(scr, [b.sext(b.load(b.gep(tab, [q])), I64)]) for q in qs]
            acc = [binit] * CHAN_PIXELS
            for t in range(taps):
                for r in range(CHAN_PIXELS):
                    v = b.load(b.bitcast(b.gep(bases[r], [offs[t]]), VECP), align=64)
                    acc[r] = b.call(fma, [v, wv[t], acc[r]])
            for r in range(CHAN_PIXELS):
                b.store(acc[r], b.bitcast(b.gep(oscr, [b.mul(qs[r], c64(VL))]), VECP), align=64)
        with for_range(b, 0, cdiv(b, ohw, c64(VL)), "qb") as qb:
            q0 = b.mul(qb, c64(VL))
            qmask = b.icmp_signed("<", b.add(splat_i32(b, q0), iota), ohwv)
            rows = [b.load(b.bitcast(b.gep(oscr, [b.mul(b.add(q0, c64(j)), c64(VL))]), VECP), align=64)
                    for j in range(VL)]
            for i, v in enumerate(transpose(b, rows)):
                off = b.add(b.mul(b.add(c0, c64(i)), ohw), q0)
                mask = b.and_(qmask, splat_bool(b, ch_ok[i]))
                v = _finish(b, mload, v, b.gep(res, [off]), mask, lov, hiv, has_res, clamp, gate)
                b.call(mstore, [v, b.bitcast(b.gep(y, [off]), VECP), ir.Constant(I32, 4), mask])
    b.ret_void()
    return fn


def _zeros(module: ir.Module) -> ir.GlobalVariable:
    """``ZERO_MARGIN + MAX_WIDTH + ZERO_MARGIN`` zero floats (bss): the row read in place of rows outside the
    image; a tap reads columns ``[-ZERO_MARGIN, w + ZERO_MARGIN)`` of it."""
    g = module.globals.get("cl_dwconv.zeros")
    if g is None:
        ty = ir.ArrayType(F32, MAX_WIDTH + 2 * ZERO_MARGIN)
        g = ir.GlobalVariable(module, ty, "cl_dwconv.zeros")
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = ir.Constant(ty, None)
        g.align = 64
    return g


def _table(module: ir.Module) -> ir.GlobalVariable:
    """Plane functions indexed ``[(sw - 1) * MAX_KW + kw - 1]``."""
    entries = [plane_function(module, kw, sw) for sw in (1, 2) for kw in range(1, MAX_KW + 1)]
    return constant_table(module, "cl_dwconv.table", PLANE_TYPE.as_pointer(), entries)


def _flat_table(module: ir.Module) -> ir.GlobalVariable:
    """Flat plane functions indexed ``[k - 1]``."""
    entries = [flat_function(module, k) for k in range(1, MAX_KW + 1)]
    return constant_table(module, "cl_dwconv.flat_table", FLAT_TYPE.as_pointer(), entries)


def _chan_table(module: ir.Module) -> ir.GlobalVariable:
    """Channel-form functions indexed ``[k - CHAN_MIN_K[True]]``."""
    entries = [chan_function(module, k) for k in range(CHAN_MIN_K[True], MAX_KW + 1)]
    return constant_table(module, "cl_dwconv.chan_table", CHAN_TYPE.as_pointer(), entries)


def _chan_form(b: ir.IRBuilder, get) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(whether the channel form applies (``CHAN_MIN_K``, ``CHAN_IN``, ``CHAN_OUT``), the padded plane's row
    length ``wp`` and its pixels ``hp * wp``)."""
    h, w, oh, ow, kh, kw = (get(k) for k in ("h", "w", "oh", "ow", "kh", "kw"))
    sh, sw, dh, dw, pt, pl = (get(k) for k in ("sh", "sw", "dh", "dw", "pt", "pl"))

    def reach(o, s, d, k, pad, n):                      # max(pad + n, (o - 1) * s + (k - 1) * d + 1)
        a, e = b.add(pad, n), b.add(b.add(b.mul(b.sub(o, c64(1)), s), b.mul(b.sub(k, c64(1)), d)), c64(1))
        return b.select(b.icmp_signed(">", a, e), a, e)
    wp = reach(ow, sw, dw, kw, pl, w)
    padded = b.mul(reach(oh, sh, dh, kh, pt, h), wp)
    strided = b.icmp_signed("!=", b.mul(sh, sw), c64(1))
    min_k = b.select(strided, c64(CHAN_MIN_K[True]), c64(CHAN_MIN_K[False]))
    ok = b.and_(b.icmp_signed("==", kh, kw), b.icmp_signed(">=", kw, min_k))
    ok = b.and_(ok, b.icmp_signed("<=", padded, c64(CHAN_IN)))
    return b.and_(ok, b.icmp_signed("<=", b.mul(oh, ow), c64(CHAN_OUT))), wp, padded


def _emit_planes(module: ir.Module, table: ir.GlobalVariable, flat_table: ir.GlobalVariable,
                 chan_table: ir.GlobalVariable) -> ir.Function:
    """Chunk body: planes [chunk * per, ...) of the n * c planes, or (the channel form) blocks of 16 channels
    [chunk * per, ...) of the n * ceil(c / 16)."""
    fn = ir.Function(module, BODY_TYPE, f"{DEPTHWISE_SYMBOL}.planes")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = b.bitcast(fn.args[0], I64P)

    def get(name):
        return b.load(b.gep(d, [c64(_F[name])]), name=name)

    def ptr(name):
        return b.inttoptr(get(name), FP)
    per = b.load(b.gep(d, [c64(len(FIELDS))]))
    chan, wp, padded = _chan_form(b, get)
    c, h, w, oh, ow, kh, kw = (get(k) for k in ("c", "h", "w", "oh", "ow", "kh", "kw"))
    sh, sw, dh, dw, pt, pl = (get(k) for k in ("sh", "sw", "dh", "dw", "pt", "pl"))
    x, y, wt, bias = ptr("x"), ptr("y"), ptr("wt"), ptr("bias")
    resi = get("residual")
    has_res = b.icmp_unsigned("!=", resi, c64(0))
    clamp = b.icmp_signed("==", get("clamp"), c64(MODE_CLAMP))
    gate = b.icmp_signed("==", get("clamp"), c64(MODE_GATE))
    lo = b.fptrunc(b.bitcast(get("lo"), F64), F32)
    hi = b.fptrunc(b.bitcast(get("hi"), F64), F32)
    tptr = b.bitcast(table, PLANE_TYPE.as_pointer().as_pointer())
    plane_fn = b.load(b.gep(tptr, [b.add(b.mul(b.sub(sw, c64(1)), c64(MAX_KW)), b.sub(kw, c64(1)))]))
    coords = get("coords")
    flat = b.icmp_unsigned("!=", coords, c64(0))
    ftptr = b.bitcast(flat_table, FLAT_TYPE.as_pointer().as_pointer())
    flat_fn = b.load(b.gep(ftptr, [b.select(flat, b.sub(kw, c64(1)), c64(0))]))
    cptr, nvec, jlo, jhi = b.inttoptr(coords, I32.as_pointer()), get("nvec"), get("jlo"), get("jhi")
    planes = b.mul(get("n"), c)
    p0 = b.mul(fn.args[1], per)
    with b.if_then(chan):
        ctptr = b.bitcast(chan_table, CHAN_TYPE.as_pointer().as_pointer())
        chan_fn = b.load(b.gep(ctptr, [b.sub(kw, c64(CHAN_MIN_K[True]))]))
        u1 = smin(b, b.add(p0, per), b.mul(get("n"), cdiv(b, c, c64(VL))))
        rt = b.select(has_res, b.inttoptr(resi, FP), y)                    # y: never read
        b.call(chan_fn, [x, y, rt, wt, bias, p0, u1, c, h, w, oh, ow, sh, sw, dh, dw, pt, pl, wp, padded, has_res,
                         clamp, gate, lo, hi])
        b.ret_void()
    with for_range(b, p0, smin(b, b.add(p0, per), planes), "p") as p:
        ch = b.srem(p, c)
        xin = b.gep(x, [b.mul(p, b.mul(h, w))])
        off = b.mul(p, b.mul(oh, ow))
        yout = b.gep(y, [off])
        rin = b.select(has_res, b.gep(b.inttoptr(resi, FP), [off]), yout)      # yout: never read
        wch, bch = b.gep(wt, [b.mul(ch, b.mul(kh, kw))]), b.load(b.gep(bias, [ch]))
        with b.if_else(flat) as (then, otherwise):
            with then:
                before = b.mul(p, b.mul(h, w))
                after = b.mul(b.sub(b.sub(planes, p), c64(1)), b.mul(h, w))
                b.call(flat_fn, [xin, yout, rin, wch, bch, cptr, nvec, jlo, jhi, before, after, h, w, oh, dh, dw, pt,
                                 pl, has_res, clamp, gate, lo, hi])
            with otherwise:
                b.call(plane_fn, [xin, yout, rin, wch, bch, h, w, oh, ow, kh, sh, dh, dw, pt, pl, has_res, clamp,
                                  gate, lo, hi])
    b.ret_void()
    return fn


def emit_conv_depthwise(module: ir.Module) -> ir.Function:
    """Defines ``DEPTHWISE_SYMBOL`` (see the module doc) in ``module``."""
    planes_fn = _emit_planes(module, _table(module), _flat_table(module), _chan_table(module))
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, DEPTHWISE_SYMBOL)
    d = b.bitcast(desc, I64P)

    def get(name):
        return b.load(b.gep(d, [c64(_F[name])]))
    c = get("c")
    chan = _chan_form(b, get)[0]
    planes = b.mul(get("n"), b.select(chan, cdiv(b, c, c64(VL)), c))     # units: planes or channel blocks
    per = cdiv(b, planes, b.mul(nt, c64(CHUNKS_PER_THREAD)))
    per = b.select(b.icmp_signed("<", per, c64(1)), c64(1), per)
    b.store(per, b.gep(d, [c64(len(FIELDS))]))
    b.call(pool, [planes_fn, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, planes, per), nt])
    b.ret_void()
    return fn


EMITTERS = {DEPTHWISE_SYMBOL: emit_conv_depthwise}
