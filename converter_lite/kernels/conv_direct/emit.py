"""The direct convolution driver: register-tiled float32 2-D convolution without im2col (a support function).

    void cl_conv2d_direct_v2_f32(i8* desc, i64 nthreads)

Vectorised over output channels, not pixels: the weights are packed (by the runtime, once) in blocks of
``VL`` = 16 output channels, ``wpk[g][block][k][16]`` with ``k = (c, ky, kx)`` over the group's input channels
and kernel taps (zero-padded channels), and a *microkernel* keeps an ``ocv x rows x cols`` tile of outputs in
vector registers (``ocv`` blocks of 16 channels, ``rows x cols`` output pixels of neighbouring output rows):

    for k in 0..K:   w_o = wpk[block o][k]                      (ocv vector loads)
                     for each pixel p: s = x[pixel p + koff[k]]  (one scalar, broadcast)
                                       acc[o][p] += s * w_o     (ocv * rows * cols FMAs)

``koff[k]`` is the input offset of tap ``k`` (``c*hp*wp + ky*dh*wp + kx*dw``, precomputed by the runtime), so
dilation is free and each tile row needs one base pointer (pixels ``q*sw`` apart, ``sw`` a constant of the
microkernel: 1, 2 or 4 -- ``STRIDES``; 4 for the 4x4 patch embeddings of ConvNeXt and Swin).  A padded
convolution reads a zero-bordered copy ``xp`` of its input: each pool chunk first copies the rows its own tiles
read (all channels of the image), so the thread that reads a row is the one that wrote it, into the first copy
(even row parts) or a second one right after it (odd row parts, ``xp_floats``), so that neighbouring parts
never write the same halo rows (chunks that split a group's channels instead share a padding phase split by
planes, in the first copy).  The accumulators start at the bias.  The epilogue
transposes each ``16 x cols`` block in registers (shuffles), then per output channel adds the residual (if any),
clamps (Relu/Clip, NaN stays NaN) and stores ``cols`` contiguous outputs (NCHW) with a masked store.

Pixel tiles (``pixel_kernel``; ``wide`` only, column stride 1, output rows that fill at least ``PIXEL_FILL`` of
their 16-lane vectors) turn this around: vectorised over up to 16 pixels of one output row, one 16-channel
block (the same packed weights, broadcast one by one), they read the input unpadded with masked loads (no
``xp`` copy) and store each channel's pixels as they are (no transpose).

Tiles: an output image is cut into row groups of ``R`` rows and column segments of ``Q`` (balanced) columns
with ``R * Q <= PMAX``; with ``wide`` (AVX-512: 32 vector registers) ``PMAX = 12`` and two channel blocks per
tile (``PMAX = SOLO = 16`` when a group has one block: at most 16 output channels, or for pixel tiles: one row,
one block), else (16 registers) ``PMAX = 6`` and one block.  Chunks of the pool are runs of tiles (rows) of one
image, about ``CHUNKS_PER_THREAD`` per thread, each computing them for every group and channel super-block in
turn: every thread computes the same rows of every convolution (see ``emit_conv_direct``).

Record (i64 fields, ``FIELDS``; addresses as integers): ``n c h w`` input, ``m group`` output channels and
groups, ``oh ow sh`` output size and row stride, ``sw`` column stride (``STRIDES``), ``pt pl`` top/left padding,
``hp wp`` the read extent of a padded plane, ``pad`` (1: copy into ``xp`` first), ``x xp y`` buffers,
``wpk bpk koff`` packed weights / bias (``[g][block][16]``, zeros when none) / tap offsets (``K`` i64),
``k nblk`` taps per group and 16-blocks per group, ``residual`` (0 or an array shaped like ``y``),
``clamp lo hi`` (lo/hi as float64 bit patterns), ``wide``.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import constant_table, driver_entry, internal_function, prefetch
from ...codegen.loops import for_range, loop_id
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR, BYTE_PTR_PTR, F32, F64, I32, I64, VOID
from ...codegen.vector import (
    FP,
    I64P,
    VEC,
    VECP,
    VL,
    c64,
    cdiv,
    epilogue_flags,
    flag_versions,
    smin,
    splat,
    splat_i32,
    tap_loop_head,
    transpose,
    vector_intrinsics,
)
from . import abi
from .abi import EXTRA, FIELDS, STRIDES
from .abi import SYMBOL as DIRECT_SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
TILES = {True: (2, 12, 4), False: (1, 6, 4)}     # wide -> (channel blocks per tile, pixels per tile, max rows)
# wide, one channel block per group (at most 16 output channels): pixels (and columns) per tile.  Fewer tiles,
# each transposed whole, for the same accumulator count: conv_net (five 16-channel 3x3 convolutions at 32 x 32)
# at one thread, builds alternated in one process: 203.3 -> 195.6 and 202.8 -> 193.8 us (16 x 32 x 32 3x3:
# 46-48 -> 44-45 us each, the 3-channel stem 11.5 -> 10.2); 24 pixels in two rows of 11 were slower (47-50 us)
SOLO = 16
# pool chunks per thread: one.  Each claim costs ~0.2 us of shared-counter traffic, and with one chunk each
# thread computes the same part of every convolution (the caller the first rows, the worker the rest), so a
# convolution finds most of its input in the cache of the core that wrote it.  conv_net at 2 threads (one
# process, builds alternated in blocks): quiet host 16 -> 92.6 us, 4 -> 75.8, 2 -> 70.8, 1 -> 67.4 (ORT ~62);
# when the host makes cross-core traffic expensive (it flips between the two states within minutes):
# 2 -> 151, 1 -> 108 (ORT ~85).  resnet_mini (quiet): 4 -> 603, 2 -> 594, 1 -> 593
CHUNKS_PER_THREAD = 1
# pixel tiles (``pixel_kernel``) when a row's pixels fill at least this fraction of the 16-lane vectors they
# take.  1 thread, one process, channel tiles -> pixel tiles: rows of whole vectors gain (16 x 32 x 32 3x3
# 51.8 -> 49.3 us, 32 x 32 x 112 x 112 3057 -> 2514, 64 x 64 x 64 x 64 2966 -> 2793, 128 x 128 x 16 x 16
# 671 -> 634; vad's 1 x 63 rows of 1 x 3 taps 8.9 -> 8.4), rows of 7/8 lose (28 and 56 pixels: 16 channels
# 39.9 -> 43.0 and 149 -> 159 us, 64 channels at 56 x 56 2402 -> 2592)
PIXEL_FILL = (15, 16)
ROWS_MIN_PIXELS = 512             # output images at least this large are split by rows (emit_conv_direct)
PF_AHEAD = 64                      # taps the microkernels prefetch their weights ahead (internal.prefetch)

MK_TYPE = ir.FunctionType(VOID, [FP, I64, FP, I64, I64P, I64, FP, FP, I64, I64, I64, FP, I64, F32, F32])
# microkernel(x, rowstride, w, wstride, koff, K, bias, y, ystride_m, ystride_r, nvalid, res, flags, lo, hi)


def _store_rows(module: ir.Module) -> ir.Function:
    """``cl_convd.store(t, count, q, y, ystride_m, res, flags, lo, hi)``: ``t`` holds ``q`` accumulator vectors
    (one per pixel, lanes = 16 channels); transposed in registers, then for channel lane i < count: the first q
    lanes of row i plus ``res[i*ystride_m ...]`` (flags bit 1), clamped to [lo, hi] (flags bit 0), stored at
    ``y + i*ystride_m`` (masked to q lanes)."""
    fn = internal_function(module, "cl_convd.store",
                           ir.FunctionType(VOID, [VECP, I64, I64, FP, I64, FP, I64, F32, F32]))
    if not fn.is_declaration:
        return fn
    _, mload, mstore = vector_intrinsics(module)
    fn.attributes.add("noinline")
    t, count, q, y, ys, res, flags, lo, hi = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    iota = ir.Constant(ir.VectorType(I32, VL), list(range(VL)))
    qv = b.shuffle_vector(b.insert_element(ir.Constant(ir.VectorType(I32, VL), None), b.trunc(q, I32),
                                           ir.Constant(I32, 0)),
                          ir.Constant(ir.VectorType(I32, VL), None), ir.Constant(ir.VectorType(I32, VL), [0] * VL))
    mask = b.icmp_signed("<", iota, qv)
    zero = ir.Constant(VEC, None)
    # pixel vectors q.. are not meaningful: zero them before the transpose
    cols = [b.select(b.icmp_signed("<", c64(i), q), b.load(b.gep(t, [c64(i)]), align=64), zero) for i in range(VL)]
    rows = transpose(b, cols)
    lov, hiv = splat(b, lo), splat(b, hi)

    # the rows stay in registers (a channel loop passed them through the stack; with the flags as selects
    # this epilogue was 12% of a 16-channel 3x3 conv)
    def emit(vb, res_on, act, done):
        for i, v in enumerate(rows):
            body = fn.append_basic_block(f"{vb.block.name}.ch{i}")
            vb.cbranch(vb.icmp_signed("<", c64(i), count), body, done)
            vb.position_at_end(body)
            dst = vb.bitcast(vb.gep(y, [vb.mul(c64(i), ys)]), VECP)
            if res_on:
                rv = vb.call(mload, [vb.bitcast(vb.gep(res, [vb.mul(c64(i), ys)]), VECP), ir.Constant(I32, 4),
                                     mask, zero])
                v = vb.fadd(v, rv)
            v = act(vb, v, lov, hiv)
            vb.call(mstore, [v, dst, ir.Constant(I32, 4), mask])
        vb.branch(done)

    flag_versions(fn, b, flags, emit)
    b.ret_void()
    return fn


def microkernel(module: ir.Module, ocv: int, rows: int, cols: int, sw: int) -> ir.Function:
    """``cl_convd.mk<ocv>_<rows>x<cols>_s<sw>`` (MK_TYPE): one tile of ``ocv`` channel blocks x ``rows`` x
    ``cols`` pixels, accumulated over every tap, then stored through ``cl_convd.store``."""
    fn = internal_function(module, f"cl_convd.mk{ocv}_{rows}x{cols}_s{sw}", MK_TYPE, noalias=(0, 2, 4, 6, 7, 11))
    if not fn.is_declaration:
        return fn
    fma, _, _ = vector_intrinsics(module)
    store = _store_rows(module)
    x, rowstride, w, wstride, koff, kk, bias, y, ys_m, ys_r, nvalid, res, flags, lo, hi = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("k.head", "k.body", "k.done"))
    b = ir.IRBuilder(entry)
    t = b.alloca(VEC, VL)
    t.align = 64
    bases = [b.gep(x, [b.mul(c64(r), rowstride)]) for r in range(rows)]
    wblk = [b.gep(w, [b.mul(c64(o), wstride)]) for o in range(ocv)]
    init = [b.load(b.bitcast(b.gep(bias, [c64(o * VL)]), VECP), align=4) for o in range(ocv)]
    k, accs = tap_loop_head(b, head, entry,
                            {(o, r, q): init[o] for o in range(ocv) for r in range(rows) for q in range(cols)})
    b.cbranch(b.icmp_signed("<", k, kk), body, done)
    b.position_at_end(body)
    off = b.load(b.gep(koff, [k]))
    wv = [b.load(b.bitcast(b.gep(wblk[o], [b.mul(k, c64(VL))]), VECP), align=4) for o in range(ocv)]
    for o in range(ocv):
        prefetch(module, b, b.gep(wblk[o], [b.mul(b.add(k, c64(PF_AHEAD)), c64(VL))]))
    for r in range(rows):
        base = b.gep(bases[r], [off])
        for q in range(cols):
            s = splat(b, b.load(b.gep(base, [c64(q * sw)])))
            for o in range(ocv):
                accs[o, r, q].add_incoming(b.call(fma, [s, wv[o], accs[o, r, q]]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    for o in range(ocv):
        count = smin(b, b.sub(nvalid, c64(o * VL)), c64(VL))
        with b.if_then(b.icmp_signed(">", count, c64(0))):
            for r in range(rows):
                for q in range(cols):
                    b.store(accs[o, r, q], b.gep(t, [c64(q)]), align=64)
                off_y = b.add(b.mul(c64(o * VL), ys_m), b.mul(c64(r), ys_r))
                b.call(store, [t, count, c64(cols), b.gep(y, [off_y]), ys_m, b.gep(res, [off_y]), flags, lo, hi])
    b.ret_void()
    return fn


PX_TYPE = ir.FunctionType(VOID, [FP, I64, I64P, I64P, I64P, I64, I64, I64, I64, I64, I64, FP, FP, FP, I64, I64, FP,
                                 I64, I64, F32, F32])
# pixel_kernel(x, plane, uoff, dy, dx, khkw, cg, iy0, ix0, h, w, wk, bias, y, ystride_m, nvalid, res, q, flags,
#              lo, hi)


def pixel_kernel(module: ir.Module) -> ir.Function:
    """``cl_convd.px``: one tile of ``q`` <= 16 neighbouring pixels of one output row (column stride 1) x the 16
    channels of one block, vectorised over the pixels, reading the input where it is, unpadded.

    ``x`` is the tile's first input pixel (input row ``iy0``, column ``ix0``: it may lie in the padding).  For
    each position ``j`` of the kernel window (input row and column offsets ``dy[j]``, ``dx[j]``, offset ``uoff[j]``
    in a plane) whose row is inside the image, and each input channel ``c``: one vector load of the ``q`` input
    pixels at ``x + c * plane + uoff[j]``, masked to the lanes inside the image, then ``acc[m] += w[c, j][m] *
    pixels`` for the 16 channels (a broadcast weight each).  Window positions outside, channels inside: the mask
    stays the same for a run of loads (masks that changed from load to load cost a 16 x 32 x 32 3x3
    convolution 44.8 us, more than padding a copy of the input first: 43.7), and the zero padding costs neither a
    copy (2.2 us of that convolution's 44.5 on the channel tiles) nor the multiply-adds of whole rows outside
    the image.  Each accumulator is a channel's row of pixels, stored as it is (NCHW): no transpose either
    (``cl_convd.store``'s 16 x 16 shuffle transpose, stack round trip and per-channel stores, 35% of a
    3-channel stem's 27-tap tile, 6% at 144 taps), at the price of idle lanes when the row does not fill whole
    vectors (``PIXEL_FILL``)."""
    fn = internal_function(module, "cl_convd.px", PX_TYPE, noalias=(0, 2, 3, 4, 11, 12, 13, 16))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = vector_intrinsics(module)
    x, plane, uoff, dyt, dxt, khkw, cg, iy0, ix0, h, w, wk, bias, y, ys, nvalid, res, q, flags, lo, hi = fn.args
    entry = fn.append_basic_block("entry")
    names = ("j.head", "j.body", "c.pre", "c.head", "c.body", "c.exit", "j.latch", "j.exit")
    jhead, jbody, cpre, chead, cbody, cexit, jlatch, jexit = (fn.append_basic_block(n) for n in names)
    b = ir.IRBuilder(entry)
    iota = ir.Constant(ir.VectorType(I32, VL), list(range(VL)))
    qmask = b.icmp_signed("<", iota, splat_i32(b, q))
    zero = ir.Constant(VEC, None)
    align4 = ir.Constant(I32, 4)
    init = [splat(b, b.load(b.gep(bias, [c64(m)]))) for m in range(VL)]
    wrow = b.mul(khkw, c64(VL))                            # floats from one channel's weights to the next's
    b.branch(jhead)
    b.position_at_end(jhead)                               # window positions
    j = b.phi(I64, "j")
    outer = [b.phi(VEC, f"acc{m}") for m in range(VL)]
    b.cbranch(b.icmp_signed("<", j, khkw), jbody, jexit)
    b.position_at_end(jbody)
    iy = b.add(iy0, b.load(b.gep(dyt, [j])))
    b.cbranch(b.icmp_unsigned("<", iy, h), cpre, jlatch)   # a row outside the image adds nothing
    b.position_at_end(cpre)
    cols = b.add(iota, splat_i32(b, b.add(ix0, b.load(b.gep(dxt, [j])))))
    mask = b.and_(qmask, b.icmp_unsigned("<", cols, splat_i32(b, w)))
    xj, wj = b.gep(x, [b.load(b.gep(uoff, [j]))]), b.gep(wk, [b.mul(j, c64(VL))])
    b.branch(chead)
    b.position_at_end(chead)                               # input channels
    c = b.phi(I64, "c")
    inner = [b.phi(VEC, f"acc{m}.c") for m in range(VL)]
    b.cbranch(b.icmp_signed("<", c, cg), cbody, cexit)
    b.position_at_end(cbody)
    xv = b.call(mload, [b.bitcast(b.gep(xj, [b.mul(c, plane)]), VECP), align4, mask, zero])
    wt = b.gep(wj, [b.mul(c, wrow)])
    summed = [b.call(fma, [splat(b, b.load(b.gep(wt, [c64(m)]))), xv, inner[m]]) for m in range(VL)]
    c.add_incoming(b.add(c, c64(1), flags=("nsw", "nuw")), cbody)
    b.branch(chead).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(cexit)
    b.branch(jlatch)
    b.position_at_end(jlatch)
    latch = [b.phi(VEC, f"acc{m}.j") for m in range(VL)]
    j.add_incoming(c64(0), entry)
    j.add_incoming(b.add(j, c64(1), flags=("nsw", "nuw")), jlatch)
    b.branch(jhead)
    c.add_incoming(c64(0), cpre)
    for m in range(VL):
        outer[m].add_incoming(init[m], entry)
        outer[m].add_incoming(latch[m], jlatch)
        inner[m].add_incoming(outer[m], cpre)
        inner[m].add_incoming(summed[m], cbody)
        latch[m].add_incoming(outer[m], jbody)
        latch[m].add_incoming(inner[m], cexit)
    b.position_at_end(jexit)
    count = smin(b, nvalid, c64(VL))
    lov, hiv = splat(b, lo), splat(b, hi)

    def emit(vb, res_on, act, exit_block):
        for m in range(VL):
            store = fn.append_basic_block(f"{vb.block.name}.ch{m}")
            vb.cbranch(vb.icmp_signed("<", c64(m), count), store, exit_block)
            vb.position_at_end(store)
            off = vb.mul(c64(m), ys)
            v = outer[m]
            if res_on:
                v = vb.fadd(v, vb.call(mload, [vb.bitcast(vb.gep(res, [off]), VECP), align4, qmask, zero]))
            vb.call(mstore, [act(vb, v, lov, hiv), vb.bitcast(vb.gep(y, [off]), VECP), align4, qmask])
        vb.branch(exit_block)

    flag_versions(fn, b, flags, emit)
    b.ret_void()
    return fn


def _table(module: ir.Module, sw: int) -> tuple[ir.GlobalVariable, int, int]:
    """Constant table of microkernel pointers indexed ``[(ocv-1)][rows-1][cols-1]`` for column stride sw
    (null where rows*cols exceeds the widest tile: SOLO pixels for one channel block, else TILES')."""
    ocv_max, rmax, qmax = TILES_MAX
    ptr = MK_TYPE.as_pointer()
    entries = []
    for ocv in range(1, ocv_max + 1):
        most = SOLO if ocv == 1 else max(t[1] for t in TILES.values())
        for r in range(1, rmax + 1):
            for q in range(1, qmax + 1):
                entries.append(microkernel(module, ocv, r, q, sw) if r * q <= most else ir.Constant(ptr, None))
    return constant_table(module, f"cl_convd.table_s{sw}", ptr, entries), rmax, qmax


class _Fields:
    def __init__(self, b: ir.IRBuilder, desc: ir.Value):
        self.b, self.d = b, b.bitcast(desc, I64P)

    def __getitem__(self, name: str) -> ir.Value:
        return self.b.load(self.b.gep(self.d, [c64(_F[name])]), name=name)

    def ptr(self, name: str) -> ir.Value:
        return self.b.inttoptr(self[name], FP)


def _tiling(b: ir.IRBuilder, f: _Fields):
    """(ocv_max, rows R, cols Q, column segments, row groups, super-blocks per group, pixel tiles) for this
    convolution.  Pixel tiles (``cl_convd.px``: one row of at most 16 pixels, one channel block, so super-blocks
    of one block) with wide vectors when the column stride is 1 and the row's pixels fill at least
    ``PIXEL_FILL`` of the 16-lane vectors they take; else channel tiles (``microkernel``)."""
    wide = b.icmp_signed("!=", f["wide"], c64(0))
    ow, oh = f["ow"], f["oh"]
    fill_num, fill_den = PIXEL_FILL
    vectors = b.mul(cdiv(b, ow, c64(VL)), c64(VL))
    fills = b.icmp_signed(">=", b.mul(ow, c64(fill_den)), b.mul(vectors, c64(fill_num)))
    pix = b.and_(b.and_(wide, b.icmp_signed("==", f["sw"], c64(1))), fills)
    ocv_max = b.select(b.and_(wide, b.not_(pix)), c64(TILES[True][0]), c64(TILES[False][0]))
    solo = b.and_(wide, b.or_(pix, b.icmp_signed("==", f["nblk"], c64(1))))
    pmax = b.select(solo, c64(SOLO), b.select(wide, c64(TILES[True][1]), c64(TILES[False][1])))
    rmax = b.select(wide, c64(TILES[True][2]), c64(TILES[False][2]))
    nseg = cdiv(b, ow, pmax)
    q = cdiv(b, ow, nseg)
    r = smin(b, smin(b, b.sdiv(pmax, q), rmax), oh)
    r = b.select(b.or_(pix, b.icmp_signed("<", r, c64(1))), c64(1), r)
    return ocv_max, r, q, nseg, cdiv(b, oh, r), cdiv(b, f["nblk"], ocv_max), pix


def _parts(b: ir.IRBuilder, nthreads: ir.Value, images: ir.Value) -> ir.Value:
    """Chunks per image: about CHUNKS_PER_THREAD per thread over all images, and a multiple of the thread count
    when the images do not share out evenly (3 images on 2 threads: each cut in two)."""
    want = b.mul(nthreads, c64(CHUNKS_PER_THREAD))
    per = cdiv(b, want, images)
    per = b.select(b.icmp_signed("<", per, c64(1)), c64(1), per)
    odd = b.icmp_signed("!=", b.srem(b.mul(images, per), nthreads), c64(0))
    return b.select(odd, b.mul(per, nthreads), per)


def _emit_compute(module: ir.Module, pad_rows: ir.Function) -> ir.Function:
    fn = ir.Function(module, BODY_TYPE, f"{DIRECT_SYMBOL}.tiles")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    f = _Fields(b, fn.args[0])
    chunk = fn.args[1]
    ocv_max, rr, qq, nseg, nrow, nsb, pix = _tiling(b, f)
    tiles = b.mul(nrow, nseg)
    words = b.bitcast(fn.args[0], I64P)
    tpc = b.load(b.gep(words, [c64(len(FIELDS))]))            # tiles per chunk, written by the entry point
    upc = b.load(b.gep(words, [c64(len(FIELDS) + 1)]))        # channel units (group, super-block) per chunk
    units = b.mul(f["group"], nsb)
    rparts, cparts = cdiv(b, tiles, tpc), cdiv(b, units, upc)
    cpu = b.mul(rparts, cparts)
    n, rem = b.sdiv(chunk, cpu), b.srem(chunk, cpu)
    ci, cj = b.sdiv(rem, cparts), b.srem(rem, cparts)
    u0 = b.mul(cj, upc)
    u1 = smin(b, b.add(u0, upc), units)
    cg, mg = b.sdiv(f["c"], f["group"]), b.sdiv(f["m"], f["group"])
    hp, wp, oh, ow, kk = f["hp"], f["wp"], f["oh"], f["ow"], f["k"]
    padded = b.icmp_signed("!=", f["pad"], c64(0))
    wstride = b.mul(kk, c64(VL))
    plane = b.mul(oh, ow)
    resi = f["residual"]
    has_res = b.icmp_unsigned("!=", resi, c64(0))
    koff = b.inttoptr(f["koff"], I64P)
    flags = epilogue_flags(b, f["clamp"], has_res)
    lo = b.fptrunc(b.bitcast(f["lo"], F64), F32)
    hi = b.fptrunc(b.bitcast(f["hi"], F64), F32)
    sh, sw = f["sh"], f["sw"]
    rowstride = b.mul(sh, wp)
    table = b.bitcast(module.globals["cl_convd.table_s1"], MK_TYPE.as_pointer().as_pointer())
    for s in STRIDES[1:]:
        ts = b.bitcast(module.globals[f"cl_convd.table_s{s}"], MK_TYPE.as_pointer().as_pointer())
        table = b.select(b.icmp_signed("==", sw, c64(s)), ts, table)
    _, rmax, pmax = TILES_MAX
    px = pixel_kernel(module)
    t0 = b.mul(ci, tpc)
    t1 = smin(b, b.add(t0, tpc), tiles)
    own_pad = b.and_(padded, b.not_(_shared_pad(b, f, upc, units, nsb, pix)))
    # odd row parts pad into the second copy (xp_copy): neighbouring parts never write the same halo lines
    odd = b.and_(own_pad, b.icmp_signed("!=", b.and_(ci, c64(1)), c64(0)))
    xp = b.select(odd, b.gep(f.ptr("xp"), [xp_copy(b, f)]), f.ptr("xp"))
    src = b.select(padded, xp, f.ptr("x"))
    h, w = f["h"], f["w"]
    # the pixel tiles' window (``pixel_kernel``): per position j (the taps of channel 0), its input row and column
    # offsets (koff holds them as offsets in a padded plane) and its offset in an input plane
    khkw = b.sdiv(kk, cg)
    uoff, dyt, dxt = (b.alloca(I64, size=khkw, name=n) for n in ("uoff", "dy", "dx"))
    with b.if_then(pix):
        with for_range(b, 0, khkw, "jt") as j:
            d = b.load(b.gep(koff, [j]))
            dy, dx = b.sdiv(d, wp), b.srem(d, wp)
            b.store(dy, b.gep(dyt, [j]))
            b.store(dx, b.gep(dxt, [j]))
            b.store(b.add(b.mul(dy, w), dx), b.gep(uoff, [j]))
    with b.if_then(b.and_(b.and_(own_pad, b.not_(pix)), b.icmp_signed("<", t0, t1))):
        # the padded input rows this chunk's tiles read, padded here, by the thread that reads them (a separate
        # pool phase split by channels made every compute chunk fetch half its input from the other core's
        # cache: resnet_mini's 32x40x40 3x3 took 104 us on 2 threads, 75 without the padding); neighbouring
        # chunks pad the same halo rows, each in its own copy: in one copy, written by both cores, they cost
        # conv_net's 16 x 32 x 32 3x3 convolutions 43.5 us each on 2 threads against 38.5 (builds alternated
        # in one process; when the other core is busy, the same: 2 threads then take as long as one)
        ya = b.mul(b.sdiv(t0, nseg), rr)
        yb = smin(b, b.mul(b.add(b.sdiv(b.sub(t1, c64(1)), nseg), c64(1)), rr), oh)
        span = b.sub(hp, b.mul(b.sub(oh, c64(1)), sh))          # padded rows one output row reads
        r0 = b.mul(ya, sh)
        r1 = smin(b, b.add(b.mul(b.sub(yb, c64(1)), sh), span), hp)
        p0 = b.add(b.mul(n, f["c"]), b.mul(b.sdiv(u0, nsb), cg))                # the planes of its groups
        p1 = b.add(b.mul(n, f["c"]), b.mul(b.add(b.sdiv(b.sub(u1, c64(1)), nsb), c64(1)), cg))
        b.call(pad_rows, [b.bitcast(fn.args[0], BYTE_PTR), xp, p0, p1, r0, r1])
    # each channel unit (group, super-block) of the chunk's in turn over its rows (a super-block's weights stay
    # in cache over the tiles; the rows stay in cache over the super-blocks), so the rows are padded once
    with for_range(b, u0, u1, "u") as u:
        g, sb = b.sdiv(u, nsb), b.srem(u, nsb)
        first_plane = b.add(b.mul(n, f["c"]), b.mul(g, cg))
        xbase = b.gep(src, [b.mul(first_plane, b.mul(hp, wp))])
        xraw = b.gep(f.ptr("x"), [b.mul(first_plane, b.mul(h, w))])        # (pixel tiles read it unpadded)
        blk = b.add(b.mul(g, f["nblk"]), b.mul(sb, ocv_max))
        wptr = b.gep(f.ptr("wpk"), [b.mul(blk, wstride)])
        bptr = b.gep(f.ptr("bpk"), [b.mul(blk, c64(VL))])
        m0 = b.mul(sb, b.mul(ocv_max, c64(VL)))
        ocv = smin(b, ocv_max, b.sub(f["nblk"], b.mul(sb, ocv_max)))
        nvalid = b.sub(mg, m0)
        yoff = b.mul(b.add(b.mul(n, f["m"]), b.add(b.mul(g, mg), m0)), plane)
        ybase = b.gep(f.ptr("y"), [yoff])
        rbase = b.select(has_res, b.gep(b.inttoptr(resi, FP), [yoff]), ybase)      # ybase: never read
        with for_range(b, t0, t1, "t") as t:
            rg, seg = b.sdiv(t, nseg), b.srem(t, nseg)
            oy0, ox0 = b.mul(rg, rr), b.mul(seg, qq)
            reff = smin(b, rr, b.sub(oh, oy0))
            qeff = smin(b, qq, b.sub(ow, ox0))
            xin = b.gep(xbase, [b.add(b.mul(oy0, rowstride), b.mul(ox0, sw))])
            opix = b.add(b.mul(oy0, ow), ox0)
            with b.if_else(pix) as (pixels, channels):
                with pixels:
                    iy0, ix0 = b.sub(b.mul(oy0, sh), f["pt"]), b.sub(ox0, f["pl"])
                    b.call(px, [b.gep(xraw, [b.add(b.mul(iy0, w), ix0)]), b.mul(h, w), uoff, dyt, dxt, khkw, cg,
                                iy0, ix0, h, w, wptr, bptr, b.gep(ybase, [opix]), plane, nvalid,
                                b.gep(rbase, [opix]), qeff, flags, lo, hi])
                with channels:
                    idx = b.add(b.mul(b.sub(ocv, c64(1)), c64(rmax * pmax)),
                                b.add(b.mul(b.sub(reff, c64(1)), c64(pmax)), b.sub(qeff, c64(1))))
                    mk = b.load(b.gep(table, [idx]))
                    b.call(mk, [xin, rowstride, wptr, wstride, koff, kk, bptr, b.gep(ybase, [opix]), plane, ow,
                                nvalid, b.gep(rbase, [opix]), flags, lo, hi])
    b.ret_void()
    return fn


TILES_MAX = (max(t[0] for t in TILES.values()), max(t[2] for t in TILES.values()),
             max(SOLO, *(t[1] for t in TILES.values())))


PAD_ROWS_TYPE = ir.FunctionType(VOID, [BYTE_PTR, FP, I64, I64, I64, I64])


def xp_copy(b: ir.IRBuilder, f: _Fields) -> ir.Value:
    """Floats from the first zero-bordered copy of the input to the second (``abi.xp_floats``)."""
    return b.mul(cdiv(b, b.mul(b.mul(f["n"], f["c"]), b.mul(f["hp"], f["wp"])), c64(VL)), c64(VL))


def _emit_pad(module: ir.Module) -> ir.Function:
    """``pad_rows(desc, xp, p0, p1, r0, r1)``: rows [r0, r1) of input planes [p0, p1) (of n*c planes) copied into
    the zero-bordered ``xp``, 16 columns at a time with masked vector loads/stores (no library call per row:
    rows are short)."""
    fn = ir.Function(module, PAD_ROWS_TYPE, f"{DIRECT_SYMBOL}.pad_rows")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    desc, xp, p0, p1, r0, r1 = fn.args
    f = _Fields(b, desc)
    _, mload, mstore = vector_intrinsics(module)
    h, w, hp, wp, pt, pl = f["h"], f["w"], f["hp"], f["wp"], f["pt"], f["pl"]
    x = f.ptr("x")
    ivec = ir.VectorType(I32, VL)
    iota = ir.Constant(ivec, list(range(VL)))

    def splat32(v):
        return splat_i32(b, v)

    zero = ir.Constant(VEC, None)
    wv, wpv, zv = splat32(w), splat32(wp), ir.Constant(ivec, [0] * VL)
    nvec = cdiv(b, wp, c64(VL))
    # rows [r0, i0) and [i1, r1) are above / below the image (zeros), rows [i0, i1) copy input rows
    i0 = smin(b, b.select(b.icmp_signed(">", pt, r0), pt, r0), r1)
    i1 = smin(b, b.add(pt, h), r1)
    i1 = b.select(b.icmp_signed("<", i1, i0), i0, i1)
    mask4 = ir.Constant(I32, 4)
    with for_range(b, p0, p1, "p") as p:
        dplane = b.gep(xp, [b.mul(p, b.mul(hp, wp))])
        splane = b.gep(x, [b.mul(b.sub(b.mul(p, h), pt), w)])           # input row r - pt at r * w
        # columns outer, rows inner: a column block's masks are computed once per plane, not once per row and
        # vector (conv_net, one thread, builds alternated in one process: 203.4 -> 201.3 and 203.5 -> 200.5 us
        # for the five convolutions; plain loads and stores for the whole vectors made no difference)
        with for_range(b, 0, nvec, "v") as v:
            j0 = b.mul(v, c64(VL))
            cols = b.add(splat32(j0), iota)                          # destination columns
            src = b.sub(cols, splat32(pl))                          # their source columns
            smask = b.and_(b.icmp_signed(">=", src, zv), b.icmp_signed("<", src, wv))
            dmask = b.icmp_signed("<", cols, wpv)
            dcol, scol = b.gep(dplane, [j0]), b.gep(splane, [b.sub(j0, pl)])
            for lo_, hi_ in ((r0, i0), (i1, r1)):
                with for_range(b, lo_, hi_, "rz") as r:
                    b.call(mstore, [zero, b.bitcast(b.gep(dcol, [b.mul(r, wp)]), VECP), mask4, dmask])
            with for_range(b, i0, i1, "r") as r:
                val = b.call(mload, [b.bitcast(b.gep(scol, [b.mul(r, w)]), VECP), mask4, smask, zero])
                b.call(mstore, [val, b.bitcast(b.gep(dcol, [b.mul(r, wp)]), VECP), mask4, dmask])
    b.ret_void()
    return fn


def _emit_pad_planes(module: ir.Module, pad_rows: ir.Function) -> ir.Function:
    """Pool body of the padding phase of chunks that split a group's channels (``_shared_pad``): chunk c pads
    every row of planes [c*per, (c+1)*per) (``per`` in the record's first extra word, until the compute
    phase's tiles per chunk replace it)."""
    fn = ir.Function(module, BODY_TYPE, f"{DIRECT_SYMBOL}.pad_planes")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    f = _Fields(b, fn.args[0])
    per = b.load(b.gep(b.bitcast(fn.args[0], I64P), [c64(len(FIELDS))]))
    p0 = b.mul(fn.args[1], per)
    b.call(pad_rows, [b.bitcast(fn.args[0], BYTE_PTR), f.ptr("xp"), p0,
                      smin(b, b.add(p0, per), b.mul(f["n"], f["c"])), c64(0), f["hp"]])
    b.ret_void()
    return fn


def _shared_pad(b: ir.IRBuilder, f: _Fields, upc: ir.Value, units: ir.Value, nsb: ir.Value, pix: ir.Value
                ) -> ir.Value:
    """Whether chunks split the channel super-blocks of a group (so several would pad the same input planes):
    then a padding phase split by planes runs first (never for pixel tiles: they read the input unpadded).
    Both chunks padding all 64 planes of a 20 x 20 image made resnet_mini's convolution take 178 us instead of
    81 when the host makes cross-core traffic slow."""
    return b.and_(b.and_(b.icmp_signed("!=", f["pad"], c64(0)), b.not_(pix)),
                  b.and_(b.icmp_signed("<", upc, units), b.icmp_signed(">", nsb, c64(1))))


def emit_conv_direct(module: ir.Module) -> ir.Function:
    """Defines ``cl_conv2d_direct_v2_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``.  The
    record has two i64 words after ``FIELDS`` that the entry point writes for its bodies: tiles per chunk and
    channel units (group, super-block) per chunk (the first word holds planes per chunk during a padding
    phase)."""
    for sw in STRIDES:
        _table(module, sw)
    pad_rows = _emit_pad(module)
    compute = _emit_compute(module, pad_rows)
    pad_planes = _emit_pad_planes(module, pad_rows)
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, DIRECT_SYMBOL)
    f = _Fields(b, desc)
    d = b.bitcast(desc, I64P)
    bufs = b.bitcast(desc, BYTE_PTR_PTR)
    ocv_max, _, _, nseg, nrow, nsb, pix = _tiling(b, f)
    tiles = b.mul(nrow, nseg)
    parts = _parts(b, nt, f["n"])
    units = b.mul(f["group"], nsb)
    # chunks are runs of rows of one image (every group and channel super-block of them) on large images, runs
    # of channel units (group, super-block) on small ones, unless that choice shares out much worse than the
    # other (7 rows of a 7x7 image on 2 threads: 4 + 3, where 24 super-blocks go 12 + 12; work of the largest
    # chunk in 16-channel blocks x tiles, "much": by more than 10%).  Rows keep a thread's reads in its own
    # cache (it wrote those rows of the previous convolution; split by channels, the next convolution read half
    # its input from the other core), but at every plane the two threads write the same cache line (where one's
    # rows end and the other's begin) and pad the same halo rows.  Both cost when the host makes cross-core
    # traffic slow (a line's round trip 240-600 ns instead of 80): then timm's repvgg_a0 (96 x 28 x 28,
    # 48 x 56 x 56) ran 8.84 -> 7.05 ms from channel units to rows (onnxruntime 6.62), while regnety_008's group
    # convolution 320 x 14 x 14 took 143 us in rows, 60 in channel halves (53 and 61 quiet)
    rows_work = b.mul(cdiv(b, tiles, parts), b.mul(f["group"], f["nblk"]))
    unit_work = b.mul(b.mul(cdiv(b, units, parts), smin(b, ocv_max, f["nblk"])), tiles)
    rows_fair = b.icmp_signed("<=", b.mul(rows_work, c64(100)), b.mul(unit_work, c64(110)))
    units_fair = b.icmp_signed("<=", b.mul(unit_work, c64(100)), b.mul(rows_work, c64(110)))
    large = b.icmp_signed(">=", b.mul(f["oh"], f["ow"]), c64(ROWS_MIN_PIXELS))
    rows = b.select(large, rows_fair, b.not_(units_fair))
    tpc = b.select(rows, cdiv(b, tiles, smin(b, parts, tiles)), tiles)
    upc = b.select(rows, units, cdiv(b, units, smin(b, parts, units)))
    with b.if_then(_shared_pad(b, f, upc, units, nsb, pix)):
        planes = b.mul(f["n"], f["c"])
        per = cdiv(b, planes, b.mul(nt, c64(2)))
        b.store(per, b.gep(d, [c64(len(FIELDS))]))
        b.call(pool, [pad_planes, bufs, cdiv(b, planes, per), nt])
    b.store(tpc, b.gep(d, [c64(len(FIELDS))]))
    b.store(upc, b.gep(d, [c64(len(FIELDS) + 1)]))
    chunks = b.mul(f["n"], b.mul(cdiv(b, tiles, tpc), cdiv(b, units, upc)))
    b.call(pool, [compute, bufs, chunks, nt])
    b.ret_void()
    return fn


assert abi.VL == VL and EXTRA == 2      # the record's block width; the two words the entry point writes
EMITTERS = {DIRECT_SYMBOL: emit_conv_direct}
