"""The int8 convolution driver (a support function; abi.py gives the record).

    void cl_qconv2d_v1(i64* desc, i64 nthreads)

Two phases, each across the thread pool:

1. **Quantize and pack** (chunks of padded rows, or of planes when the rows are narrow): the float32 input ``x
   [n][c][h][w]`` becomes ``xq [n][c/4][sh][sw][hps][wps][4]`` uint8 -- four consecutive input channels per int32
   word, the borders (and the channels past ``c``) holding the zero point, which is what a zero of the float input
   quantizes to.  With strides ``sh x sw`` the padded plane is split into ``sh * sw`` phase planes (padded row
   ``i`` and column ``j`` in phase plane ``(i % sh, j % sw)`` at ``(i // sh, j // sw)``; column stride 2 writes the
   two shuffled halves of each 16-pixel vector), so at every tap the pixels of an output row, and output rows one
   after the other, are consecutive words: a strided convolution reads like a stride-1 one.  Each value is
   ``saturate(round_half_even(x / scale) + zero_point)`` (NaN -> 0), QuantizeLinear's arithmetic; 16 pixels of four
   channel rows become one 64-byte store.  A uint8 input (``xu8``: the previous int8 convolution quantized it
   already, the uint8 hand-off) is only interleaved: 64 bytes of each channel row, no division (its own pool
   body, ``.pack_u8``).
2. **Convolve** (chunks of units: a pixel run times a block of up to ``MR`` output channels; a run is one output
   row's segment of up to 32 pixels, or, for a small plane (``flat``), 32 consecutive words of the phase plane over
   rows, the columns past ``ow`` computed and not stored); a microkernel keeps the ``mr x 32`` int32 sums in
   registers over every tap ``t = (c/4, ky, kx)``: it loads the two 64-byte pixel vectors at ``koff[t]`` (the
   padded, phase-split input makes every tap an offset, dilation included) and, per output channel, broadcasts the
   channel's four weights of the tap -- one ``vpdpbusd`` (AVX-512 VNNI, u8 pixels x s8 weights) per channel and
   vector; without VNNI the same sums from the bytes unpacked with shifts (kernels/qgemm/emit.py ``_dot4``).  The
   epilogue (``_epilogue``, one function for all): ``float(sum - comp[o]) * scale[o] + bias[o]`` (``comp`` = zero
   point x the channel's weight sum, so the zero point is taken off once per channel; ``scale`` = input scale x the
   channel's weight scale), plus the residual (``residual`` != 0), clamped (``clamp`` = 1: to [lo, hi]), quantized
   and dequantized again with the output's scale and zero point (``oscale`` != 0: a QDQ model's next QuantizeLinear
   -> DequantizeLinear pair, taken into the epilogue), then (``silu`` = 1) times its sigmoid (codegen/mathfn.py's
   float32 sigmoid), the sigmoid and the product each through their own pair when ``sscale`` / ``pscale`` != 0 (a
   QDQ model's SiLU) -- or, after the output's round trip with the product quantized, the product's byte looked up
   in the 256-entry table the entry point fills once a call (``lut``, emit_epilogue.py ``silu_table``) -- stored
   NCHW with masked stores (one per output row a run touches): float32, or (``yu8``) the uint8 bytes of the
   output's last quantization pair instead of its round trip (the next int8 convolution reads them as they are).

   Or, when the record's ``wc`` is set (bind.py's ``channel_lanes_pay``: where it fills more lanes than the
   pixel vectors above, e.g. on a 5 x 5 or 10 x 10 plane), emit_channels.py's channel-lane body: the lanes run over 16
   output channels of a pixel instead, each tap's pixel word broadcast against the weights of 16 channels (``wc``,
   packed for it), the same epilogue arithmetic.

Column strides 1 and 2 (abi.STRIDES), any row stride.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import constant_table, driver_entry, internal_function
from ...codegen.loops import for_range, loop_id
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR, BYTE_PTR_PTR, F32, F64, I32, I64, VOID
from ...codegen.vector import (
    I64P,
    MASK,
    VEC,
    VECP,
    VL,
    c64,
    cdiv,
    clamp_lanes,
    smin,
    splat,
    splat_i32,
    tap_loop_head,
)
from ..qgemm.emit import VNNI_FEATURES, _dot4, _masked_store
from . import emit_channels
from .abi import EXTRA, FIELDS, QCONV_SYMBOL, QUAD
from .emit_epilogue import (
    BYTES,
    FLAG_BIAS,
    FLAG_CLAMP,
    FLAG_FQ,
    FLAG_LUT,
    FLAG_PFQ,
    FLAG_RES,
    FLAG_SFQ,
    FLAG_SILU,
    FLAG_U8,
    VBMI_FEATURES,
    _mload,
    bytes_of,
    looked_up,
    lut_bytes,
    lut_value,
    quantize_out,
    silu_pass,
    silu_table,
    store_bytes,
)
from .emit_pack import (
    FPT,
    I32P,
    IVEC,
    IVECP,
    pack_body,
    pack_units,
    record_fields,
)

MR = 12                           # output channels per block (2 * MR sums + 2 pixel vectors + 1 broadcast)
NPIX = 2 * VL                     # pixels per segment (two vectors)
I8 = ir.IntType(8)
MK_TYPE = ir.FunctionType(VOID, [BYTE_PTR, I64P, I64, BYTE_PTR, I64, FPT, I64, I64, I32P, FPT, FPT, FPT, I64,
                                 F32, F32, I64, I64, I64, F32, F32, F32, F32, F32, F32, I64])
# microkernel(xbase, koff, kq, wq, wstride, y, ystride, npix, comp, scale, bias, res, flags, lo, hi, wp, ow, total):
# wp = 0: one output row, its first ``npix`` pixels at y; wp > 0 (flat mode): ``npix`` is the first flat index f of
# the block (f = oy * wp + ox over the padded width; y, res at the plane's start), ``total`` = oh * wp; then the
# output's quantization scale and zero point (FLAG_FQ: the stored value is DequantizeLinear(QuantizeLinear(v))),
# SiLU's two pairs, the SiLU table's address (FLAG_LUT)
def microkernel(module: ir.Module, mr: int, nv: int, vnni: bool, vbmi: bool) -> ir.Function:
    """``cl_qconv.mk<mr>x<nv>``: ``mr`` output channels x ``16 * nv`` pixels of one output row (or flat run): the
    sums over the taps in registers, then ``_epilogue`` on them."""
    fn = internal_function(module, f"cl_qconv.mk{mr}x{nv}", MK_TYPE, noalias=(0, 3, 5))
    if not fn.is_declaration:
        return fn
    dot4 = _dot4(module, vnni)
    xb, koff, kq, wq, wstride = fn.args[:5]
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("t.head", "t.body", "t.done"))
    b = ir.IRBuilder(entry)
    tile = b.alloca(IVEC, MR * 2)
    tile.align = 64
    wrows = [b.bitcast(b.gep(wq, [b.mul(c64(i), wstride)]), I32P) for i in range(mr)]
    t, acc = tap_loop_head(b, head, entry, {(i, v): ir.Constant(IVEC, None) for i in range(mr) for v in range(nv)})
    b.cbranch(b.icmp_signed("<", t, kq), body, done)
    b.position_at_end(body)
    at = b.gep(xb, [b.load(b.gep(koff, [t]))])
    pv = [b.load(b.bitcast(b.gep(at, [c64(v * VL * 4)]), IVECP), align=4) for v in range(nv)]
    for i in range(mr):
        wv = splat_i32(b, b.load(b.gep(wrows[i], [t]), align=4))
        for v in range(nv):
            acc[i, v].add_incoming(dot4(b, acc[i, v], pv[v], wv), body)
    t.add_incoming(b.add(t, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    for (i, v), a in acc.items():
        b.store(a, b.gep(tile, [c64(2 * i + v)]), align=64)
    b.call(_epilogue(module, vbmi), [tile, c64(mr), c64(nv)] + list(fn.args[5:]))
    b.ret_void()
    return fn


def _epilogue(module: ir.Module, vbmi: bool) -> ir.Function:
    """``cl_qconv.epi(tile, mr, nv, y, ystride, npix, comp, ...)`` (the microkernels' arguments from ``y`` on):
    the ``mr x nv`` sums of ``tile [MR][2]`` finished and stored: scale, bias, residual, clamp, the output's
    round trip or quantization, the masked stores (in flat mode one per output row the vector touches, its masks
    computed once for the ``mr`` channels); with SiLU in three loops over a vector's ``mr`` channels, the values,
    SiLU over them (emit_epilogue.py ``silu_pass``, one call), the stores.  One function for every microkernel:
    inlined in each of the 24, the epilogue was most of the driver's code (205 KB; 63 KB now, emit_channels.py's
    body included), at no cost in time (one thread, new / old: 0.99 for 1x1 64->64 on 20 x 20, flat; 0.98 for 3x3
    64->64 on 20 x 20; 0.78 for 1x1 16->96 on 40 x 40)."""
    fnty = ir.FunctionType(VOID, [IVECP, I64, I64] + list(MK_TYPE.args[5:]))
    fn = internal_function(module, "cl_qconv.epi", fnty, noalias=(0, 3))
    if not fn.is_declaration:
        return fn
    fn.attributes.add("noinline")
    tile, mr, nv, y, ystride, npix, comp, scale, bias, res, flags, lo, hi, fwp, fow, ftotal, \
        osc, ozp, ssc, szp, psc, pzp, lut = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    mload, fstore, bstore = _mload(module), _masked_store(module, VEC), store_bytes(module)
    iota = ir.Constant(IVEC, list(range(VL)))
    on = lambda bit: b.icmp_unsigned("!=", b.and_(flags, c64(bit)), c64(0))
    has_bias, has_res, has_clamp = on(FLAG_BIAS), on(FLAG_RES), on(FLAG_CLAMP)
    has_fq, has_silu, has_u8, has_lut = on(FLAG_FQ), on(FLAG_SILU), on(FLAG_U8), on(FLAG_LUT)
    u8_plain = b.and_(has_u8, b.not_(has_silu))          # a uint8 output quantized with the output's pair
    lov, hiv = splat(b, lo), splat(b, hi)
    ybytes = b.bitcast(y, BYTE_PTR)
    vals, qvals = b.alloca(VEC, MR), b.alloca(VEC, MR)       # one vector's mr channels: values, quantized lanes
    vals.align = qvals.align = 64
    zero = ir.Constant(VEC, None)
    bias_at = b.select(has_bias, bias, scale)                       # (a readable address either way)
    res_on = b.select(has_res, ir.Constant(MASK, [1] * VL), ir.Constant(MASK, [0] * VL))
    table = lut_bytes(b, has_lut, lut, vbmi)

    def parts(v, body):
        """``body(offset, mask)`` for each part of vector ``v`` in y (offsets from channel 0's plane): the row's
        segment, or in flat mode each output row the vector's lanes touch."""
        fs = b.add(npix, b.mul(v, c64(VL)))
        with b.if_else(b.icmp_signed("==", fwp, c64(0))) as (rowwise, flat):
            with rowwise:
                body(b.mul(v, c64(VL)), b.icmp_signed("<", iota, splat_i32(b, b.sub(npix, b.mul(v, c64(VL))))))
            with flat:
                # lane j is flat index f = fs + j, output (f // wp, f % wp) when f % wp < ow and f < total: the
                # lanes of one output row r are contiguous in y, so each row the vector touches is one masked
                # store at y + r * ow + (f - r * wp), i.e. at base fs + r * (ow - wp) with the lane offset
                last = smin(b, b.add(fs, c64(VL - 1)), b.sub(ftotal, c64(1)))
                with b.if_then(b.icmp_signed("<=", fs, last)), \
                        for_range(b, b.sdiv(fs, fwp), b.add(b.sdiv(last, fwp), c64(1)), "row") as r:
                    lo_lane = b.sub(b.mul(r, fwp), fs)
                    hi_lane = smin(b, b.add(lo_lane, fow), b.sub(ftotal, fs))
                    body(b.add(fs, b.mul(r, b.sub(fow, fwp))),
                         b.and_(b.icmp_signed(">=", iota, splat_i32(b, lo_lane)),
                                b.icmp_signed("<", iota, splat_i32(b, hi_lane))))

    def add_residual(off, mask):
        with for_range(b, 0, mr, "i") as i:
            at = b.gep(res, [b.add(b.mul(i, ystride), off)])
            rv = b.call(mload, [b.bitcast(at, VECP), ir.Constant(I32, 4), mask, zero])
            b.store(b.fadd(b.load(b.gep(vals, [i])), rv), b.gep(vals, [i]))

    def store(off, mask):
        with for_range(b, 0, mr, "i") as i:
            at = b.add(b.mul(i, ystride), off)
            with b.if_else(has_u8) as (as_bytes, as_floats):
                with as_bytes:
                    b.call(bstore, [bytes_of(b, b.load(b.gep(qvals, [i]))),
                                    b.bitcast(b.gep(ybytes, [at]), BYTES.as_pointer()), ir.Constant(I32, 1), mask])
                with as_floats:
                    b.call(fstore, [b.load(b.gep(vals, [i])), b.bitcast(b.gep(y, [at]), VECP), ir.Constant(I32, 4),
                                    mask])

    def sums(i, v):
        """Channel i's vector v of the tile, as float32 with the bias."""
        acc = b.load(b.gep(tile, [b.add(b.mul(i, c64(2)), v)]), align=64)
        bi = b.select(has_bias, splat(b, b.load(b.gep(bias_at, [i]))), zero)
        return b.fadd(b.fmul(b.sitofp(b.sub(acc, splat_i32(b, b.load(b.gep(comp, [i])))), VEC),
                             splat(b, b.load(b.gep(scale, [i])))), bi)

    def finish(v, off, mask):
        """Without SiLU (or with it looked up): the ``mr`` channels of vector ``v``'s part at ``off`` each computed
        and stored in one go (in registers: three loops over a stack tile made small 1x1 convolutions 1.5x
        slower)."""
        with for_range(b, 0, mr, "i") as i:
            at = b.add(b.mul(i, ystride), off)
            rv = b.call(mload, [b.bitcast(b.gep(res, [at]), VECP), ir.Constant(I32, 4), b.and_(mask, res_on), zero])
            out = sums(i, v)
            out = b.select(has_res, b.fadd(out, rv), out)
            out = b.select(has_clamp, clamp_lanes(b, out, lov, hiv), out)
            out, t = looked_up(b, out, has_fq, u8_plain, osc, ozp, has_lut, lut, table)
            with b.if_else(has_u8) as (as_bytes, as_floats):
                with as_bytes:
                    b.call(bstore, [b.trunc(t, BYTES), b.bitcast(b.gep(ybytes, [at]), BYTES.as_pointer()),
                                    ir.Constant(I32, 1), mask])
                with as_floats:
                    b.call(fstore, [lut_value(b, out, t, has_lut, psc, pzp), b.bitcast(b.gep(y, [at]), VECP),
                                    ir.Constant(I32, 4), mask])

    with b.if_else(b.and_(has_silu, b.not_(has_lut))) as (with_silu, plain):
        with plain, for_range(b, 0, nv, "v") as v:
            parts(v, lambda off, mask: finish(v, off, mask))
        with with_silu, for_range(b, 0, nv, "v") as v:
            with for_range(b, 0, mr, "i") as i:
                b.store(sums(i, v), b.gep(vals, [i]))
            with b.if_then(has_res):
                parts(v, add_residual)
            with for_range(b, 0, mr, "i") as i:             # the clamp, the output's round trip
                out = b.load(b.gep(vals, [i]))
                out = b.select(has_clamp, clamp_lanes(b, out, lov, hiv), out)
                b.store(quantize_out(b, out, has_fq, u8_plain, osc, ozp)[0], b.gep(vals, [i]))
            b.call(silu_pass(module), [vals, qvals, mr, flags, ssc, szp, psc, pzp])
            parts(v, store)
    b.ret_void()
    return fn


def _epilogue_args(b: ir.IRBuilder, f: dict) -> tuple:
    """The epilogues' arguments from the record: (flags, lo, hi, osc, ozp, ssc, szp, psc, pzp, lut)."""
    yu8 = b.icmp_unsigned("!=", f["yu8"], c64(0))
    has_silu = b.icmp_signed("!=", f["silu"], c64(0))
    has_bias = b.icmp_unsigned("!=", f["bias"], c64(0))
    has_res = b.icmp_unsigned("!=", f["residual"], c64(0))
    flags = b.or_(b.or_(b.select(has_bias, c64(FLAG_BIAS), c64(0)), b.select(has_res, c64(FLAG_RES), c64(0))),
                  b.select(b.icmp_signed("==", f["clamp"], c64(1)), c64(FLAG_CLAMP), c64(0)))
    has_fq = b.icmp_unsigned("!=", f["oscale"], c64(0))
    # a uint8 output's last pair (the product's with a SiLU, else the output's) quantizes it: no round trip
    last_fq, last_pfq = b.and_(yu8, b.not_(has_silu)), b.and_(yu8, has_silu)
    flags = b.or_(flags, b.select(b.and_(has_fq, b.not_(last_fq)), c64(FLAG_FQ), c64(0)))
    flags = b.or_(flags, b.select(has_silu, c64(FLAG_SILU), c64(0)))
    flags = b.or_(flags, b.select(yu8, c64(FLAG_U8), c64(0)))
    scales = {}
    for name, flag, last in (("sscale", FLAG_SFQ, ir.Constant(ir.IntType(1), 0)), ("pscale", FLAG_PFQ, last_pfq)):
        on_ = b.icmp_unsigned("!=", f[name], c64(0))
        flags = b.or_(flags, b.select(b.and_(on_, b.not_(last)), c64(flag), c64(0)))
        scales[name] = b.select(on_, b.fptrunc(b.bitcast(f[name], F64), F32), ir.Constant(F32, 1.0))
    szp, pzp = b.sitofp(f["szp"], F32), b.sitofp(f["pzp"], F32)
    osc = b.select(has_fq, b.fptrunc(b.bitcast(f["oscale"], F64), F32), ir.Constant(F32, 1.0))
    ozp = b.sitofp(f["ozp"], F32)
    lo = b.fptrunc(b.bitcast(f["lo"], F64), F32)
    hi = b.fptrunc(b.bitcast(f["hi"], F64), F32)
    # SiLU looked up where it follows the output's round trip and the record gives the table's words
    has_lut = b.and_(b.and_(has_silu, b.and_(has_fq, b.icmp_unsigned("!=", f["lut"], c64(0)))),
                     b.or_(yu8, b.icmp_unsigned("!=", f["pscale"], c64(0))))
    flags = b.or_(flags, b.select(has_lut, c64(FLAG_LUT), c64(0)))
    return (flags, lo, hi, osc, ozp, scales["sscale"], szp, scales["pscale"], pzp, f["lut"])


def _conv_body(module: ir.Module, vnni: bool, vbmi: bool) -> ir.Function:
    """The pool body of phase 2: output rows ``[chunk * per, ...)`` of ``n * oh``, or (``flat``) segments of
    ``NPIX`` flat indices ``oy * wps + ox`` of each image's phase plane width: the pixels of consecutive rows are
    consecutive words of the packed input at every tap, so a small plane (5 x 5) fills the vectors with its rows
    instead of leaving 11 of 16 lanes idle; the columns past ``ow`` are computed and not stored.  Or (``wc``)
    emit_channels.py's units."""
    entries = [microkernel(module, mr, nv, vnni, vbmi) for nv in (1, 2) for mr in range(1, MR + 1)]
    table = constant_table(module, "cl_qconv.table", MK_TYPE.as_pointer(), entries)
    fn = ir.Function(module, BODY_TYPE, f"{QCONV_SYMBOL}.rows")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d, f = record_fields(b, fn.args[0])
    per = b.load(b.gep(d, [c64(len(FIELDS) + 1)]))
    rows = _phase2_units(b, f)
    r0 = b.mul(fn.args[1], per)
    r1 = smin(b, rows, b.add(r0, per))
    m, oh, ow, wps, kq = f["m"], f["oh"], f["ow"], f["wps"], f["kq"]
    xq = b.inttoptr(f["xq"], BYTE_PTR)
    wq = b.inttoptr(f["wq"], BYTE_PTR)
    koff = b.inttoptr(f["koff"], I64P)
    comp, scale = b.inttoptr(f["comp"], I32P), b.inttoptr(f["scale"], FPT)
    y, ybytes = b.inttoptr(f["y"], FPT), b.inttoptr(f["y"], BYTE_PTR)
    yu8 = b.icmp_unsigned("!=", f["yu8"], c64(0))

    def y_at(at):
        """Output element ``at`` (float32, or uint8 with ``yu8``) as the float pointer the epilogues take."""
        return b.select(yu8, b.bitcast(b.gep(ybytes, [at]), FPT), b.gep(y, [at]))
    has_bias = b.icmp_unsigned("!=", f["bias"], c64(0))
    has_res = b.icmp_unsigned("!=", f["residual"], c64(0))
    bias = b.inttoptr(b.select(has_bias, f["bias"], f["scale"]), FPT)
    res = b.inttoptr(b.select(has_res, f["residual"], f["y"]), FPT)
    tail = _epilogue_args(b, f)
    wstride = b.mul(kq, c64(QUAD))
    ystride = b.mul(oh, ow)
    image_bytes = b.mul(b.mul(f["cq"], f["plane"]), c64(QUAD))
    nblk = cdiv(b, m, c64(MR))
    base_ch, extra = b.sdiv(m, nblk), b.srem(m, nblk)
    tptr = b.bitcast(table, MK_TYPE.as_pointer().as_pointer())
    flat = b.icmp_signed("!=", f["flat"], c64(0))
    total = b.mul(oh, wps)
    nseg = cdiv(b, total, c64(NPIX))
    zero64 = c64(0)
    space = emit_channels.scratch(b)

    def block(blk, xb, ybase, npix, count, wp_arg, ow_arg, total_arg):
        """Output-channel block ``blk`` of one pixel segment (``count`` pixels)."""
        nv = b.select(b.icmp_signed(">", count, c64(VL)), c64(2), c64(1))
        row0 = b.mul(b.sub(nv, c64(1)), c64(MR))
        o0 = b.add(b.mul(blk, base_ch), smin(b, blk, extra))
        mr = b.add(base_ch, b.select(b.icmp_signed("<", blk, extra), c64(1), c64(0)))
        mk = b.load(b.gep(tptr, [b.add(row0, b.sub(mr, c64(1)))]))
        at = b.add(ybase, b.mul(o0, ystride))
        b.call(mk, [xb, koff, kq, b.gep(wq, [b.mul(o0, wstride)]), wstride, y_at(at), ystride,
                    npix, b.gep(comp, [o0]), b.gep(scale, [o0]), b.gep(bias, [o0]), b.gep(res, [at])]
               + list(tail[:3]) + [wp_arg, ow_arg, total_arg] + list(tail[3:]))

    with b.if_else(b.icmp_unsigned("!=", f["wc"], zero64)) as (channel_lanes, pixel_lanes):
        with channel_lanes:
            emit_channels.emit_units(module, b, f, r0, r1, space, tail, vnni, vbmi, y_at)
        # units: (flat run or output row) x output-channel block, the block fastest (a chunk's units share pixels)
        with pixel_lanes, b.if_else(flat) as (flat_mode, row_mode):
            with flat_mode, for_range(b, r0, r1, "u") as u:
                blk, run = b.srem(u, nblk), b.sdiv(u, nblk)
                img, seg = b.sdiv(run, nseg), b.srem(run, nseg)
                f0 = b.mul(seg, c64(NPIX))
                xb = b.gep(xq, [b.add(b.mul(img, image_bytes), b.mul(f0, c64(QUAD)))])
                block(blk, xb, b.mul(img, b.mul(m, ystride)), f0, smin(b, c64(NPIX), b.sub(total, f0)), wps, ow,
                      total)
            with row_mode, for_range(b, r0, r1, "r") as u:
                blk, r = b.srem(u, nblk), b.sdiv(u, nblk)
                img, oy = b.sdiv(r, oh), b.srem(r, oh)
                xrow = b.gep(xq, [b.add(b.mul(img, image_bytes), b.mul(b.mul(oy, wps), c64(QUAD)))])
                yrow = b.add(b.mul(img, b.mul(m, ystride)), b.mul(oy, ow))
                with for_range(b, 0, cdiv(b, ow, c64(NPIX)), "seg") as seg:
                    ox = b.mul(seg, c64(NPIX))
                    npix = smin(b, c64(NPIX), b.sub(ow, ox))
                    block(blk, b.gep(xrow, [b.mul(ox, c64(QUAD))]), b.add(yrow, ox), npix, npix, zero64, zero64,
                          zero64)
    b.ret_void()
    return fn


def _phase2_units(b: ir.IRBuilder, f: dict) -> ir.Value:
    """Phase 2's units: output rows, or (``flat``) the flat runs of every image, times the blocks of output
    channels; or (``wc``) emit_channels.py's units."""
    pixels = b.select(b.icmp_signed("!=", f["flat"], c64(0)),
                      b.mul(f["n"], cdiv(b, b.mul(f["oh"], f["wps"]), c64(NPIX))), b.mul(f["n"], f["oh"]))
    return b.select(b.icmp_unsigned("!=", f["wc"], c64(0)), emit_channels.units(b, f),
                    b.mul(pixels, cdiv(b, f["m"], c64(MR))))


def emit_qconv(module: ir.Module, features: frozenset[str] = frozenset()) -> ir.Function:
    """Defines ``QCONV_SYMBOL`` in ``module`` (``vpdpbusd`` when ``features`` have AVX-512 VNNI, the SiLU table
    looked up with byte permutes when they have VBMI)."""
    packs = pack_body(module, False), pack_body(module, True)
    conv = _conv_body(module, VNNI_FEATURES <= features, VBMI_FEATURES <= features)
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, QCONV_SYMBOL)
    d, f = record_fields(b, desc)
    pack = b.select(b.icmp_unsigned("!=", f["xu8"], c64(0)), packs[1], packs[0])
    planes = pack_units(b, f)
    per = cdiv(b, planes, nt)
    b.store(per, b.gep(d, [c64(len(FIELDS))]))
    rows = _phase2_units(b, f)
    # (channel lanes: SPLIT chunks a thread, claimed one by one, so a thread the OS runs late leaves less behind)
    split = b.select(b.icmp_unsigned("!=", f["wc"], c64(0)), c64(emit_channels.SPLIT), c64(1))
    per_rows = cdiv(b, rows, b.mul(nt, split))
    b.store(per_rows, b.gep(d, [c64(len(FIELDS) + 1)]))
    with b.if_then(b.and_(b.icmp_signed(">", planes, c64(0)), b.icmp_signed(">", rows, c64(0)))):
        flags, _, _, osc, ozp, ssc, szp, psc, pzp, lut = _epilogue_args(b, f)
        with b.if_then(b.icmp_unsigned("!=", b.and_(flags, c64(FLAG_LUT)), c64(0))):    # SiLU's table, once
            b.call(silu_table(module), [b.inttoptr(lut, IVECP), flags, osc, ozp, ssc, szp, psc, pzp])
        b.call(pool, [pack, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, planes, per), nt])
        b.call(pool, [conv, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, rows, per_rows), nt])
    b.ret_void()
    return fn


EMITTERS = {QCONV_SYMBOL: emit_qconv}
assert EXTRA == 2
