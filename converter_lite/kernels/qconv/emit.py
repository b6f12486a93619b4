"""The int8 convolution driver (a support function; abi.py gives the record).

    void cl_qconv2d_v1(i64* desc, i64 nthreads)

Two phases, each across the thread pool:

1. **Quantize and pack** (chunks of padded rows): the float32 input ``x [n][c][h][w]`` becomes ``xq
   [n][c/4][sh][sw][hps][wps][4]`` uint8 -- four consecutive input channels per int32 word, the borders (and
   the channels past ``c``) holding the zero point, which is what a zero of the float input quantizes to.  With
   strides ``sh x sw`` the padded plane is split into ``sh * sw`` phase planes (padded row ``i`` and column ``j``
   in phase plane ``(i % sh, j % sw)`` at ``(i // sh, j // sw)``; column stride 2 writes the two shuffled halves
   of each 16-pixel vector), so at every tap the pixels of an output row, and output rows one after the other,
   are consecutive words: a strided convolution reads like a stride-1 one.  Each value is
   ``saturate(round_half_even(x / scale) + zero_point)`` (NaN -> 0), QuantizeLinear's arithmetic; 16 pixels of
   four channel rows become one 64-byte store.
2. **Convolve** (chunks of units: a pixel run times a block of up to ``MR`` output channels; a run is one output
   row's segment of up to 32 pixels, or, for a small plane (``flat``), 32 consecutive words of the phase plane
   over rows, the columns past ``ow`` computed and not stored); a microkernel keeps the ``mr x 32`` int32 sums in registers over every tap ``t = (c/4, ky,
   kx)``: it loads the two 64-byte pixel vectors at ``koff[t]`` (the padded, phase-split input makes every tap
   an offset, dilation included) and, per output channel, broadcasts the channel's four weights of the tap -- one
   ``vpdpbusd`` (AVX-512 VNNI, u8 pixels x s8 weights) per channel and vector; without VNNI the same sums from
   the bytes unpacked with shifts (kernels/qgemm/emit.py ``_dot4``).  The epilogue: ``float(sum - comp[o]) *
   scale[o] + bias[o]`` (``comp`` = zero point x the channel's weight sum, so the zero point is taken off once
   per channel; ``scale`` = input scale x the channel's weight scale), plus the residual (``residual`` != 0),
   clamped (``clamp`` = 1: to [lo, hi]), quantized and dequantized again with the output's scale and zero point
   (``oscale`` != 0: a QDQ model's next QuantizeLinear -> DequantizeLinear pair, taken into the epilogue), then
   (``silu`` = 1) times its sigmoid (codegen/mathfn.py's float32 sigmoid), the sigmoid and the product each
   through their own pair when ``sscale`` / ``pscale`` != 0 (a QDQ model's SiLU), stored
   NCHW with masked stores (one per output row a run touches).

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
    smin,
    splat,
    splat_i32,
    tap_loop_head,
)
from ..qgemm.emit import VNNI_FEATURES, _dot4, _masked_store
from .abi import EXTRA, FIELDS, QCONV_SYMBOL, QUAD

MR = 12                           # output channels per block (2 * MR sums + 2 pixel vectors + 1 broadcast)
NPIX = 2 * VL                     # pixels per segment (two vectors)
IVEC = ir.VectorType(I32, VL)
IVECP = IVEC.as_pointer()
I8 = ir.IntType(8)
I32P = I32.as_pointer()
FPT = F32.as_pointer()
_F = {name: i for i, name in enumerate(FIELDS)}
MK_TYPE = ir.FunctionType(VOID, [BYTE_PTR, I64P, I64, BYTE_PTR, I64, FPT, I64, I64, I32P, FPT, FPT, FPT, I64,
                                 F32, F32, I64, I64, I64, F32, F32, F32, F32, F32, F32])
# microkernel(xbase, koff, kq, wq, wstride, y, ystride, npix, comp, scale, bias, res, flags, lo, hi, wp, ow, total):
# wp = 0: one output row, its first ``npix`` pixels at y; wp > 0 (flat mode): ``npix`` is the first flat index f of
# the block (f = oy * wp + ox over the padded width; y, res at the plane's start), ``total`` = oh * wp; then the
# output's quantization scale and zero point (FLAG_FQ: the stored value is DequantizeLinear(QuantizeLinear(v)))
FLAG_BIAS, FLAG_RES, FLAG_CLAMP, FLAG_FQ, FLAG_SILU, FLAG_SFQ, FLAG_PFQ = 1, 2, 4, 8, 16, 32, 64


_EXP_H = (1.0, 1.0, 0.4999999403953552, 0.1666652113199234, 0.04166839271783829, 0.00836874358355999,
          0.0013814526610076427)     # codegen/mathfn.py's float32 exp polynomial (|r| <= ln2 / 2)


def _vsplat(v: float) -> ir.Constant:
    return ir.Constant(VEC, [v] * VL)


def _sigmoid(module: ir.Module, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + exp(-x)) lane by lane, as codegen/mathfn.py computes it for float32 (exp(-|x|), the quotient, and
    e * s below 0; exp by Cody-Waite reduction and its degree-6 polynomial), with -|x| held above -87 so 2**n
    stays a normal float (the sigmoid is 1 or e there either way); NaN stays NaN."""
    fma = module.globals.get("llvm.fmuladd.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC, VEC, VEC]), "llvm.fmuladd.v16f32")
    rint = module.globals.get("llvm.rint.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC]), "llvm.rint.v16f32")
    fabs = module.globals.get("llvm.fabs.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC]), "llvm.fabs.v16f32")
    z = b.fneg(b.call(fabs, [x]))
    z = b.select(b.fcmp_ordered("<", z, _vsplat(-87.0)), _vsplat(-87.0), z)
    n = b.call(rint, [b.fmul(z, _vsplat(1.4426950408889634))])
    r = b.call(fma, [n, _vsplat(-0.693359375), z])
    r = b.call(fma, [n, _vsplat(2.12194440e-4), r])
    y = _vsplat(_EXP_H[-1])
    for k in _EXP_H[-2::-1]:
        y = b.call(fma, [y, r, _vsplat(k)])
    ivec = ir.VectorType(I32, VL)
    two_n = b.bitcast(b.shl(b.add(b.fptosi(n, ivec), ir.Constant(ivec, [127] * VL)), ir.Constant(ivec, [23] * VL)),
                      VEC)
    e = b.fmul(y, two_n)
    one = _vsplat(1.0)
    s = b.fdiv(one, b.fadd(one, e))
    return b.select(b.fcmp_ordered("<", x, ir.Constant(VEC, None)), b.fmul(e, s), s)


def _round_trip(b: ir.IRBuilder, v: ir.Value, sv: ir.Value, zv: ir.Value) -> ir.Value:
    """DequantizeLinear(QuantizeLinear(v)) with a uint8 zero point (scale ``sv``, zero point ``zv``: float32)."""
    rint = module_rint(b.module)
    zero, top = ir.Constant(VEC, None), ir.Constant(VEC, [255.0] * VL)
    sv, zv = splat(b, sv), splat(b, zv)
    t = b.fadd(b.call(rint, [b.fdiv(v, sv)]), zv)
    t = b.select(b.fcmp_unordered("uno", t, t), zero, t)
    t = b.select(b.fcmp_ordered("<", t, zero), zero, t)
    t = b.select(b.fcmp_ordered(">", t, top), top, t)
    return b.fmul(b.fsub(t, zv), sv)


def module_rint(module: ir.Module) -> ir.Function:
    return module.globals.get("llvm.rint.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC]), "llvm.rint.v16f32")


def _quant_tail(module: ir.Module) -> ir.Function:
    """``cl_qconv.silu(v, flags, ssc, szp, psc, pzp) -> v * s``: SiLU with the sigmoid's (FLAG_SFQ) and the
    product's (FLAG_PFQ) quantization round trips.  One function every microkernel calls, only for a
    convolution that has it: inlined, the sigmoid made the driver 2.5x larger (and the file of a small quantized
    model with it), and computed for every convolution it cost 1x1 ones 8%."""
    fnty = ir.FunctionType(VEC, [VEC, I64, F32, F32, F32, F32])
    fn = internal_function(module, "cl_qconv.silu", fnty)
    if not fn.is_declaration:
        return fn
    fn.attributes.add("noinline")
    v, flags, ssc, szp, psc, pzp = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    on = lambda bit: b.icmp_unsigned("!=", b.and_(flags, c64(bit)), c64(0))
    sig = _sigmoid(module, b, v)
    sig = b.select(on(FLAG_SFQ), _round_trip(b, sig, ssc, szp), sig)
    out = b.fmul(v, sig)
    b.ret(b.select(on(FLAG_PFQ), _round_trip(b, out, psc, pzp), out))
    return fn


def _mload(module: ir.Module):
    name = "llvm.masked.load.v16f32.p0v16f32"
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(VEC, [VECP, I32, MASK, VEC]), name)


def microkernel(module: ir.Module, mr: int, nv: int, vnni: bool) -> ir.Function:
    """``cl_qconv.mk<mr>x<nv>``: ``mr`` output channels x ``16 * nv`` pixels of one output row."""
    fn = internal_function(module, f"cl_qconv.mk{mr}x{nv}", MK_TYPE, noalias=(0, 3, 5))
    if not fn.is_declaration:
        return fn
    dot4 = _dot4(module, vnni)
    xb, koff, kq, wq, wstride, y, ystride, npix, comp, scale, bias, res, flags, lo, hi, fwp, fow, ftotal, \
        osc, ozp, ssc, szp, psc, pzp = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("t.head", "t.body", "t.done"))
    b = ir.IRBuilder(entry)
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
    mload, fstore = _mload(module), _masked_store(module, VEC)
    iota = ir.Constant(IVEC, list(range(VL)))
    masks = [b.icmp_signed("<", iota, splat_i32(b, b.sub(npix, c64(v * VL)))) for v in range(nv)]
    on = lambda bit: b.icmp_unsigned("!=", b.and_(flags, c64(bit)), c64(0))
    has_bias, has_res, has_clamp = on(FLAG_BIAS), on(FLAG_RES), on(FLAG_CLAMP)
    lov, hiv = splat(b, lo), splat(b, hi)
    quant_tail = _quant_tail(module)
    has_fq, has_silu = on(FLAG_FQ), on(FLAG_SILU)
    silu_slot = b.alloca(VEC)
    zero = ir.Constant(VEC, None)
    bias_at = b.select(has_bias, bias, scale)                       # (a readable address either way)
    res_at = b.select(has_res, res, y)
    none = ir.Constant(MASK, [0] * VL)
    res_on = b.select(has_res, ir.Constant(MASK, [1] * VL), none)
    outs = {}
    for i in range(mr):
        ci = splat_i32(b, b.load(b.gep(comp, [c64(i)])))
        si = splat(b, b.load(b.gep(scale, [c64(i)])))
        bi = b.select(has_bias, splat(b, b.load(b.gep(bias_at, [c64(i)]))), zero)
        for v in range(nv):
            outs[i, v] = b.fadd(b.fmul(b.sitofp(b.sub(acc[i, v], ci), VEC), si), bi)

    def finish(bb, out, off, mask):
        """The residual, the clamp, the output's quantization round trip (each as the flags say), a masked store
        at y + off."""
        rv = bb.call(mload, [bb.bitcast(bb.gep(res_at, [off]), VECP), ir.Constant(I32, 4), bb.and_(mask, res_on),
                             zero])
        out = bb.select(has_res, bb.fadd(out, rv), out)
        clamped = bb.select(bb.fcmp_ordered("<", out, lov), lov, out)
        clamped = bb.select(bb.fcmp_ordered(">", clamped, hiv), hiv, clamped)
        out = bb.select(has_clamp, clamped, out)
        out = bb.select(has_fq, _round_trip(bb, out, osc, ozp), out)      # the output's QuantizeLinear -> DQ
        bb.store(out, silu_slot)
        with bb.if_then(has_silu):                                        # SiLU (rare): one shared function
            bb.store(bb.call(quant_tail, [out, flags, ssc, szp, psc, pzp]), silu_slot)
        out = bb.load(silu_slot)
        bb.call(fstore, [out, bb.bitcast(bb.gep(y, [off]), VECP), ir.Constant(I32, 4), mask])

    with b.if_else(b.icmp_signed("==", fwp, c64(0))) as (rowwise, flat):
        with rowwise:
            for i in range(mr):
                for v in range(nv):
                    finish(b, outs[i, v], b.add(b.mul(c64(i), ystride), c64(v * VL)), masks[v])
        with flat:
            # lane j of vector v is flat index f = npix + 16 v + j, output (f // wp, f % wp) when f % wp < ow and
            # f < total: the lanes of one output row r are contiguous in y, so each row the vector touches is
            # one masked store at y + r * ow + (f - r * wp), i.e. at base fs + r * (ow - wp) with the lane offset
            for v in range(nv):
                fs = b.add(npix, c64(v * VL))
                last = smin(b, b.add(fs, c64(VL - 1)), b.sub(ftotal, c64(1)))
                with b.if_then(b.icmp_signed("<=", fs, last)), \
                        for_range(b, b.sdiv(fs, fwp), b.add(b.sdiv(last, fwp), c64(1)), f"row{v}") as r:
                    lo_lane = b.sub(b.mul(r, fwp), fs)
                    hi_lane = smin(b, b.add(lo_lane, fow), b.sub(ftotal, fs))
                    lane = iota
                    mask = b.and_(b.icmp_signed(">=", lane, splat_i32(b, lo_lane)),
                                  b.icmp_signed("<", lane, splat_i32(b, hi_lane)))
                    base = b.add(fs, b.mul(r, b.sub(fow, fwp)))
                    for i in range(mr):
                        finish(b, outs[i, v], b.add(b.mul(c64(i), ystride), base), mask)
    b.ret_void()
    return fn


def _fields(b: ir.IRBuilder, desc: ir.Value) -> tuple[ir.Value, dict]:
    d = b.bitcast(desc, I64P)
    return d, {name: b.load(b.gep(d, [c64(i)]), name=name) for name, i in _F.items()}


def _pack_body(module: ir.Module) -> ir.Function:
    """The pool body of phase 1: padded rows ``[chunk * per, ...)`` of ``n * cq * hp`` (image, channel quad,
    row): each row filled with the zero point's word, then (an input row) its quantized pixels written over."""
    fn = ir.Function(module, BODY_TYPE, f"{QCONV_SYMBOL}.pack")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d, f = _fields(b, fn.args[0])
    per = b.load(b.gep(d, [c64(len(FIELDS))]))
    c, h, w, hp, hps, wps, plane_words = f["c"], f["h"], f["w"], f["hp"], f["hps"], f["wps"], f["plane"]
    sh, sw = f["sh"], f["sw"]
    rows = b.mul(b.mul(f["n"], f["cq"]), hp)
    r0 = b.mul(fn.args[1], per)
    r1 = smin(b, rows, b.add(r0, per))
    x = b.inttoptr(f["x"], FPT)
    xq = b.inttoptr(f["xq"], I32P)
    sx = splat(b, b.load(b.inttoptr(f["xscale"], FPT)))
    zp = f["xzp"]
    zf = splat(b, b.sitofp(zp, F32))
    zword = splat_i32(b, b.and_(b.mul(zp, c64(0x01010101)), c64(0xFFFFFFFF)))
    rint = module.globals.get("llvm.rint.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC]), "llvm.rint.v16f32")
    mload, istore = _mload(module), _masked_store(module, IVEC)
    iota = ir.Constant(IVEC, list(range(VL)))
    zero = ir.Constant(VEC, None)
    top = ir.Constant(VEC, [255.0] * VL)
    half = ir.Constant(IVEC, list(range(VL // 2)) + [VL // 2] * (VL // 2))
    evens = ir.Constant(IVEC, [2 * i for i in range(VL // 2)] + [0] * (VL // 2))
    odds = ir.Constant(IVEC, [2 * i + 1 for i in range(VL // 2)] + [1] * (VL // 2))
    phase0 = b.and_(f["pl"], c64(1))                 # column phase of lane 0 (ix steps by 16: fixed per conv)
    with for_range(b, r0, r1, "r") as r:
        plane, iyp = b.sdiv(r, hp), b.srem(r, hp)
        img, q = b.sdiv(plane, f["cq"]), b.srem(plane, f["cq"])
        # the row's words in its row phase: phase plane (iyp % sh, column phase), position iyp // sh
        phase_words = b.mul(hps, wps)
        row = b.gep(xq, [b.add(b.mul(plane, plane_words),
                               b.add(b.mul(b.mul(b.srem(iyp, sh), sw), phase_words), b.mul(b.sdiv(iyp, sh), wps)))])
        with for_range(b, 0, sw, "cp") as cp, \
                for_range(b, 0, cdiv(b, wps, c64(VL)), "fill") as k:            # the zero point's word
            mask = b.icmp_signed("<", iota, splat_i32(b, b.sub(wps, b.mul(k, c64(VL)))))
            at = b.gep(row, [b.add(b.mul(cp, phase_words), b.mul(k, c64(VL)))])
            b.call(istore, [zword, b.bitcast(at, IVECP), ir.Constant(I32, 4), mask])
        iy = b.sub(iyp, f["pt"])
        inside = b.and_(b.icmp_signed(">=", iy, c64(0)), b.icmp_signed("<", iy, h))
        with b.if_then(inside), for_range(b, 0, cdiv(b, w, c64(VL)), "ix") as ixb:
            ix = b.mul(ixb, c64(VL))
            count = b.sub(w, ix)
            mask = b.icmp_signed("<", iota, splat_i32(b, count))
            packed = ir.Constant(IVEC, None)
            for rr in range(QUAD):
                ch = b.add(b.mul(q, c64(QUAD)), c64(rr))
                real = b.icmp_signed("<", ch, c)
                src = b.gep(x, [b.add(b.mul(b.add(b.mul(img, c), b.select(real, ch, c64(0))), b.mul(h, w)),
                                      b.add(b.mul(iy, w), ix))])
                lanes = b.and_(mask, b.select(real, ir.Constant(MASK, [1] * VL), ir.Constant(MASK, [0] * VL)))
                xv = b.call(mload, [b.bitcast(src, VECP), ir.Constant(I32, 4), lanes, zero])
                tq = b.fadd(b.call(rint, [b.fdiv(xv, sx)]), zf)
                tq = b.select(b.fcmp_unordered("uno", tq, tq), zero, tq)                 # NaN -> 0
                tq = b.select(b.fcmp_ordered("<", tq, zero), zero, tq)
                tq = b.select(b.fcmp_ordered(">", tq, top), top, tq)
                qv = b.select(real, b.fptosi(tq, IVEC), splat_i32(b, zp))
                packed = b.or_(packed, b.shl(qv, ir.Constant(IVEC, [8 * rr] * VL)))
            col = b.add(ix, f["pl"])                                   # padded column of lane 0
            with b.if_else(b.icmp_signed("==", f["sw"], c64(1))) as (one, split):
                with one:
                    b.call(istore, [packed, b.bitcast(b.gep(row, [col]), IVECP), ir.Constant(I32, 4), mask])
                with split:
                    # column stride 2: the row is its even padded columns then its odd ones; lanes 0, 2, ..
                    # (phase ``phase0``) and lanes 1, 3, .. (the other phase) go to 8 consecutive words each
                    for lanes_of, first in ((evens, 0), (odds, 1)):
                        part = b.shuffle_vector(packed, ir.Constant(IVEC, None), lanes_of)
                        ph = b.xor(phase0, c64(first))
                        pos = b.sdiv(b.add(col, c64(first)), c64(2))
                        n_part = b.sdiv(b.add(count, c64(1 - first)), c64(2))
                        pmask = b.icmp_signed("<", half, splat_i32(b, smin(b, n_part, c64(VL // 2))))
                        at = b.gep(row, [b.add(b.mul(ph, phase_words), pos)])
                        b.call(istore, [part, b.bitcast(at, IVECP), ir.Constant(I32, 4), pmask])
    b.ret_void()
    return fn


def _conv_body(module: ir.Module, vnni: bool) -> ir.Function:
    """The pool body of phase 2: output rows ``[chunk * per, ...)`` of ``n * oh``, or (``flat``) segments of
    ``NPIX`` flat indices ``oy * wps + ox`` of each image's phase plane width: the pixels of consecutive rows are
    consecutive words of the packed input at every tap, so a small plane (5 x 5) fills the vectors with its rows
    instead of leaving 11 of 16 lanes idle; the columns past ``ow`` are computed and not stored."""
    entries = [microkernel(module, mr, nv, vnni) for nv in (1, 2) for mr in range(1, MR + 1)]
    table = constant_table(module, "cl_qconv.table", MK_TYPE.as_pointer(), entries)
    fn = ir.Function(module, BODY_TYPE, f"{QCONV_SYMBOL}.rows")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d, f = _fields(b, fn.args[0])
    per = b.load(b.gep(d, [c64(len(FIELDS) + 1)]))
    rows = _phase2_units(b, f)
    r0 = b.mul(fn.args[1], per)
    r1 = smin(b, rows, b.add(r0, per))
    m, oh, ow, wps, kq = f["m"], f["oh"], f["ow"], f["wps"], f["kq"]
    xq = b.inttoptr(f["xq"], BYTE_PTR)
    wq = b.inttoptr(f["wq"], BYTE_PTR)
    koff = b.inttoptr(f["koff"], I64P)
    comp, scale = b.inttoptr(f["comp"], I32P), b.inttoptr(f["scale"], FPT)
    y = b.inttoptr(f["y"], FPT)
    has_bias = b.icmp_unsigned("!=", f["bias"], c64(0))
    has_res = b.icmp_unsigned("!=", f["residual"], c64(0))
    bias = b.inttoptr(b.select(has_bias, f["bias"], f["scale"]), FPT)
    res = b.inttoptr(b.select(has_res, f["residual"], f["y"]), FPT)
    flags = b.or_(b.or_(b.select(has_bias, c64(FLAG_BIAS), c64(0)), b.select(has_res, c64(FLAG_RES), c64(0))),
                  b.select(b.icmp_signed("==", f["clamp"], c64(1)), c64(FLAG_CLAMP), c64(0)))
    has_fq = b.icmp_unsigned("!=", f["oscale"], c64(0))
    flags = b.or_(flags, b.select(has_fq, c64(FLAG_FQ), c64(0)))
    flags = b.or_(flags, b.select(b.icmp_signed("!=", f["silu"], c64(0)), c64(FLAG_SILU), c64(0)))
    scales = {}
    for name, flag in (("sscale", FLAG_SFQ), ("pscale", FLAG_PFQ)):
        on_ = b.icmp_unsigned("!=", f[name], c64(0))
        flags = b.or_(flags, b.select(on_, c64(flag), c64(0)))
        scales[name] = b.select(on_, b.fptrunc(b.bitcast(f[name], F64), F32), ir.Constant(F32, 1.0))
    szp, pzp = b.sitofp(f["szp"], F32), b.sitofp(f["pzp"], F32)
    osc = b.select(has_fq, b.fptrunc(b.bitcast(f["oscale"], F64), F32), ir.Constant(F32, 1.0))
    ozp = b.sitofp(f["ozp"], F32)
    lo = b.fptrunc(b.bitcast(f["lo"], F64), F32)
    hi = b.fptrunc(b.bitcast(f["hi"], F64), F32)
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

    def block(blk, xb, ybase, npix, count, wp_arg, ow_arg, total_arg):
        """Output-channel block ``blk`` of one pixel segment (``count`` pixels)."""
        nv = b.select(b.icmp_signed(">", count, c64(VL)), c64(2), c64(1))
        row0 = b.mul(b.sub(nv, c64(1)), c64(MR))
        o0 = b.add(b.mul(blk, base_ch), smin(b, blk, extra))
        mr = b.add(base_ch, b.select(b.icmp_signed("<", blk, extra), c64(1), c64(0)))
        mk = b.load(b.gep(tptr, [b.add(row0, b.sub(mr, c64(1)))]))
        at = b.add(ybase, b.mul(o0, ystride))
        b.call(mk, [xb, koff, kq, b.gep(wq, [b.mul(o0, wstride)]), wstride, b.gep(y, [at]), ystride,
                    npix, b.gep(comp, [o0]), b.gep(scale, [o0]), b.gep(bias, [o0]), b.gep(res, [at]),
                    flags, lo, hi, wp_arg, ow_arg, total_arg, osc, ozp, scales["sscale"], szp,
                    scales["pscale"], pzp])

    # units: (flat run or output row) x output-channel block, the block fastest (a chunk's units share pixels)
    with b.if_else(flat) as (flat_mode, row_mode):
        with flat_mode, for_range(b, r0, r1, "u") as u:
            blk, run = b.srem(u, nblk), b.sdiv(u, nblk)
            img, seg = b.sdiv(run, nseg), b.srem(run, nseg)
            f0 = b.mul(seg, c64(NPIX))
            xb = b.gep(xq, [b.add(b.mul(img, image_bytes), b.mul(f0, c64(QUAD)))])
            block(blk, xb, b.mul(img, b.mul(m, ystride)), f0, smin(b, c64(NPIX), b.sub(total, f0)), wps, ow, total)
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
    channels (a 5 x 5 plane has two runs: its 256 channels' 22 blocks are what two threads share)."""
    pixels = b.select(b.icmp_signed("!=", f["flat"], c64(0)),
                      b.mul(f["n"], cdiv(b, b.mul(f["oh"], f["wps"]), c64(NPIX))), b.mul(f["n"], f["oh"]))
    return b.mul(pixels, cdiv(b, f["m"], c64(MR)))


def emit_qconv(module: ir.Module, features: frozenset[str] = frozenset()) -> ir.Function:
    """Defines ``QCONV_SYMBOL`` in ``module`` (``vpdpbusd`` when ``features`` have AVX-512 VNNI)."""
    pack, conv = _pack_body(module), _conv_body(module, VNNI_FEATURES <= features)
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, QCONV_SYMBOL)
    d, f = _fields(b, desc)
    planes = b.mul(b.mul(f["n"], f["cq"]), f["hp"])                    # (padded rows to pack)
    per = cdiv(b, planes, nt)
    b.store(per, b.gep(d, [c64(len(FIELDS))]))
    rows = _phase2_units(b, f)
    per_rows = cdiv(b, rows, nt)
    b.store(per_rows, b.gep(d, [c64(len(FIELDS) + 1)]))
    with b.if_then(b.and_(b.icmp_signed(">", planes, c64(0)), b.icmp_signed(">", rows, c64(0)))):
        b.call(pool, [pack, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, planes, per), nt])
        b.call(pool, [conv, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, rows, per_rows), nt])
    b.ret_void()
    return fn


EMITTERS = {QCONV_SYMBOL: emit_qconv}
assert EXTRA == 2
