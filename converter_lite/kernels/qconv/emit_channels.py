"""The int8 convolution's channel-lane body, for small output planes (phase 2 of emit.py when the record's
``wc`` is set; bind.py decides).

The pixel-lane body runs its 16 int32 lanes over output pixels, so a 5 x 5 output fills 25 of 32 lanes at
best (35 flat positions of 64 lanes with a 3 x 3 kernel).  Here the lanes run over OUTPUT CHANNELS: a sum
vector is 16 output channels of one output pixel, and every tap ``t = (c/4, ky, kx)`` broadcasts the pixel's
word (four uint8 input channels, read from the packed input ``xq`` of phase 1 at the same ``koff[t]`` offsets)
and ``vpdpbusd``-s it against a 64-byte weight vector of 16 output channels x 4 input channels (``wc
[m/16][kq][16][4]``, bind.py, zeros past ``m``): every lane is useful whatever the plane, when ``m`` is a
multiple of 16.

A unit is a group of up to ``PIX`` consecutive output pixels (an image's ``oh * ow`` split into near-equal
groups) times a block of up to ``CV`` channel vectors (``m/16`` split into near-equal blocks); the units of
one block come one after the other, so a thread's chunk reads a block's weights (the bulk of the data on a
small plane) while they are in cache.  ``cl_qconv.ck<p>x<v>`` keeps ``p x v`` sums in registers (8 x 3: 24
sums, 3 weight vectors and a broadcast of 32 registers) over the taps and leaves them in a stack tile; one
shared epilogue ``cl_qconv.cepi`` then applies ``float(sum - comp) * scale + bias`` with per-channel vectors,
transposes each vector's 8 pixels x 16 channels into 8 vectors of two channels x 8 pixels (three stages of
two-source shuffles) and finishes those as the pixel-lane body does (residual, clamp, the output's round trip,
SiLU: emit_epilogue.py's ``quantize_out`` and ``silu_pass``, or ``looked_up`` in its table), each half stored
as 8 consecutive floats (or, with FLAG_U8, bytes) of its channel's NCHW plane.  The transpose beats
``llvm.masked.scatter`` of each sum vector to ``y[o * oh * ow + pixel]`` (and a gather of the residual) on this
Zen 4, where the epilogue weighs most, in 1x1 convolutions: time against the pixel-lane body's, one thread,
0.76 transposed / 0.97 scattered (160->1280 at 5 x 5), 0.78 / 1.11 (80->480 at 5 x 5), 0.85 / 1.33 (32->192 at
10 x 10); 0.55 / 0.56 for 3x3 256->256 at 5 x 5.
SiLU runs as a pass of its own over the unit's values (kept on the stack for it): its call inside the loop made
LLVM keep the loop's vectors on the stack, and the 1x1 ratios above were 0.98 and 1.17 (160->1280, 32->192) that
way.

There is a kernel for every ``p`` in 1..8 and ``v`` in 1..3 (24 small loops, 7 KB), so a 5 x 5 plane's groups
of 7, 6, 6 and 6 pixels and 256 channels' blocks of 3, 3, 3, 3, 2 and 2 vectors compute no idle lane;
256->256 3x3 on 5 x 5 (14.7 M products) takes 68 us on one thread, about 0.9 ``vpdpbusd`` a cycle.  The units are cut into
``SPLIT`` chunks a thread, claimed one at a time: in two halves, the first thread of 256->256 on 5 x 5 would
get blocks of 3 + 3 + 3 vectors and the second 3 + 2 + 2.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import constant_table, internal_function
from ...codegen.loops import for_range, loop_id
from ...codegen.types import BYTE_PTR, F32, I32, I64, VOID
from ...codegen.vector import (
    I64P,
    MASK,
    VEC,
    VL,
    c64,
    cdiv,
    smin,
    splat,
    splat_i32,
    tap_loop_head,
)
from ..qgemm.emit import _dot4

from . import emit_epilogue as emit
from .abi import QUAD

PIX = 8                               # output pixels per unit (broadcast words a tap)
CV = 3                                # channel vectors (16 output channels each) per unit
SPLIT = 4                             # chunks of units per thread
HALF = ir.VectorType(F32, PIX)
HBYTES = ir.VectorType(ir.IntType(8), PIX)
HMASK = ir.VectorType(ir.IntType(1), PIX)
IVEC = ir.VectorType(I32, VL)
IVECP = IVEC.as_pointer()
I32P = I32.as_pointer()
FPT = F32.as_pointer()
VBYTES = VL * QUAD                    # bytes of a weight vector (16 output channels x 4 input channels)
ACC_TYPE = ir.FunctionType(VOID, [BYTE_PTR, I64P, I64P, I64, BYTE_PTR, I64, IVECP])
# accumulate(xb, pix, koff, kq, wc, wstride, tile): the sums of the pixels at byte offsets pix[i] of xb and the
# channel vectors at wc + j * wstride, over the kq taps, to tile[j * PIX + i]
EPI_TYPE = ir.FunctionType(VOID, [IVECP, I64, I64, I64, FPT, I64, I32P, FPT, FPT, FPT, I64] + [F32] * 8 + [I64])
# epilogue(tile, npix, nvec, mrem, y, ystride, comp, scale, bias, res, flags, lo, hi, osc, ozp, ssc, szp, psc,
# pzp, lut): nvec channel vectors of npix pixels, mrem output channels left from the block's first (y, comp, ...
# there; res at the same offset as y)


def _splat_word(b: ir.IRBuilder, word: ir.Value) -> ir.Value:
    one = b.insert_element(ir.Constant(IVEC, None), word, ir.Constant(I32, 0))
    return b.shuffle_vector(one, ir.Constant(IVEC, None), ir.Constant(IVEC, [0] * VL))


def accumulate(module: ir.Module, p: int, v: int, vnni: bool) -> ir.Function:
    """``cl_qconv.ck<p>x<v>``: ``p`` pixels x ``v`` channel vectors, summed over every tap."""
    fn = internal_function(module, f"cl_qconv.ck{p}x{v}", ACC_TYPE, noalias=(0, 4, 6))
    if not fn.is_declaration:
        return fn
    dot4 = _dot4(module, vnni)
    xb, pix, koff, kq, wc, wstride, tile = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("t.head", "t.body", "t.done"))
    b = ir.IRBuilder(entry)
    xp = [b.gep(xb, [b.load(b.gep(pix, [c64(i)]))]) for i in range(p)]
    wrows = [b.bitcast(b.gep(wc, [b.mul(c64(j), wstride)]), IVECP) for j in range(v)]
    t, acc = tap_loop_head(b, head, entry, {(i, j): ir.Constant(IVEC, None) for i in range(p) for j in range(v)})
    b.cbranch(b.icmp_signed("<", t, kq), body, done)
    b.position_at_end(body)
    off = b.load(b.gep(koff, [t]))
    words = [_splat_word(b, b.load(b.bitcast(b.gep(xp[i], [off]), I32P), align=4)) for i in range(p)]
    wv = [b.load(b.gep(wrows[j], [t]), align=64) for j in range(v)]
    for i in range(p):
        for j in range(v):
            acc[i, j].add_incoming(dot4(b, acc[i, j], words[i], wv[j]), body)
    t.add_incoming(b.add(t, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    for (i, j), a in acc.items():
        b.store(a, b.gep(tile, [c64(j * PIX + i)]), align=64)
    b.ret_void()
    return fn


def _intrinsic(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, fnty, name)


def _zip(b: ir.IRBuilder, x: ir.Value, y: ir.Value, high: int) -> ir.Value:
    """Lanes ``8 high .. 8 high + 7`` of ``x`` and ``y`` interleaved: x[k], y[k], x[k + 1], ..."""
    lanes = [k + s * VL for k in range(high * PIX, high * PIX + PIX) for s in (0, 1)]
    return b.shuffle_vector(x, y, ir.Constant(IVEC, lanes))


def transpose_pairs(b: ir.IRBuilder, rows: list) -> list:
    """``PIX`` vectors (pixel i: 16 channel lanes) -> ``PIX`` vectors, vector q holding channel 2q in lanes 0..7
    and channel 2q + 1 in lanes 8..15 (pixel i at lane i, 8 + i): three stages of zips, on the pixel index's
    bits 2, 1, 0 in turn, each moving that bit into the lane index's lowest bit."""
    rows = list(rows)
    for s in (4, 2, 1):
        out = list(rows)
        for i in range(PIX):
            if not i & s:
                out[i], out[i | s] = _zip(b, rows[i], rows[i | s], 0), _zip(b, rows[i], rows[i | s], 1)
        rows = out
    return rows


def epilogue(module: ir.Module, vbmi: bool) -> ir.Function:
    """``cl_qconv.cepi``: the epilogue of a unit's tile (see the module docstring)."""
    fn = internal_function(module, "cl_qconv.cepi", EPI_TYPE, noalias=(0, 4))
    if not fn.is_declaration:
        return fn
    fn.attributes.add("noinline")
    tile, npix, nvec, mrem, y, ystride, comp, scale, bias, res, flags, lo, hi, osc, ozp, ssc, szp, psc, pzp, \
        lut = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    iload = _intrinsic(module, "llvm.masked.load.v16i32.p0v16i32",
                       ir.FunctionType(IVEC, [IVECP, I32, MASK, IVEC]))
    fload = _intrinsic(module, "llvm.masked.load.v16f32.p0v16f32",
                       ir.FunctionType(VEC, [VEC.as_pointer(), I32, MASK, VEC]))
    hload = _intrinsic(module, "llvm.masked.load.v8f32.p0v8f32",
                       ir.FunctionType(HALF, [HALF.as_pointer(), I32, HMASK, HALF]))
    hstore = _intrinsic(module, "llvm.masked.store.v8f32.p0v8f32",
                        ir.FunctionType(VOID, [HALF, HALF.as_pointer(), I32, HMASK]))
    bstore = _intrinsic(module, "llvm.masked.store.v8i8.p0v8i8",
                        ir.FunctionType(VOID, [HBYTES, HBYTES.as_pointer(), I32, HMASK]))
    on = lambda bit: b.icmp_unsigned("!=", b.and_(flags, c64(bit)), c64(0))
    has_bias, has_res, has_clamp, has_fq, has_silu, has_u8 = (
        on(x) for x in (emit.FLAG_BIAS, emit.FLAG_RES, emit.FLAG_CLAMP, emit.FLAG_FQ, emit.FLAG_SILU, emit.FLAG_U8))
    u8_plain = b.and_(has_u8, b.not_(has_silu))          # a uint8 output quantized with the output's pair
    has_lut = on(emit.FLAG_LUT)
    has_silu = b.and_(has_silu, b.not_(has_lut))         # (SiLU computed: not looked up)
    ybytes = b.bitcast(y, BYTE_PTR)
    vals, qvals = b.alloca(VEC, PIX), b.alloca(VEC, PIX)      # SiLU's input and its quantized lanes
    vals.align = qvals.align = 64
    table = emit.lut_bytes(b, has_lut, lut, vbmi, once=False)
    lov, hiv = splat(b, lo), splat(b, hi)
    zero, izero, hzero = ir.Constant(VEC, None), ir.Constant(IVEC, None), ir.Constant(HALF, None)
    iota = ir.Constant(IVEC, list(range(VL)))
    pmask = b.icmp_signed("<", ir.Constant(ir.VectorType(I32, PIX), list(range(PIX))),
                          b.shuffle_vector(splat_i32(b, npix), ir.Constant(IVEC, None),
                                           ir.Constant(ir.VectorType(I32, PIX), [0] * PIX)))
    none = ir.Constant(HMASK, [0] * PIX)
    halves = [ir.Constant(ir.VectorType(I32, PIX), list(range(h * PIX, h * PIX + PIX))) for h in (0, 1)]

    def store(out, o0, q, masks, u8):
        """Channels ``o0 + 2q`` (lanes 0..7) and ``o0 + 2q + 1`` (lanes 8..15) of ``out`` into y: floats, or
        (``u8``: ``out`` is 16 bytes) bytes."""
        for h in (0, 1):
            at = b.mul(b.add(o0, c64(2 * q + h)), ystride)
            if u8:
                part = b.shuffle_vector(out, ir.Constant(emit.BYTES, None), halves[h])
                b.call(bstore, [part, b.bitcast(b.gep(ybytes, [at]), HBYTES.as_pointer()), ir.Constant(I32, 1),
                                masks[h]])
            else:
                part = b.shuffle_vector(out, ir.Constant(VEC, None), halves[h])
                b.call(hstore, [part, b.bitcast(b.gep(y, [at]), HALF.as_pointer()), ir.Constant(I32, 4), masks[h]])

    with for_range(b, 0, nvec, "j") as j:
        left = b.sub(mrem, b.mul(j, c64(VL)))                       # channels of this vector that exist
        cmask = b.icmp_signed("<", iota, splat_i32(b, left))
        o0 = b.mul(j, c64(VL))
        masks = [[b.select(b.icmp_signed(">", left, c64(2 * q + h)), pmask, none) for h in (0, 1)] for q in range(PIX)]
        cv = b.call(iload, [b.bitcast(b.gep(comp, [o0]), IVECP), ir.Constant(I32, 4), cmask, izero])
        sv = b.call(fload, [b.bitcast(b.gep(scale, [o0]), VEC.as_pointer()), ir.Constant(I32, 4), cmask, zero])
        bv = b.call(fload, [b.bitcast(b.gep(bias, [o0]), VEC.as_pointer()), ir.Constant(I32, 4),
                            b.and_(cmask, b.select(has_bias, ir.Constant(MASK, [1] * VL), ir.Constant(MASK, [0] * VL))),
                            zero])
        rows = [b.fadd(b.fmul(b.sitofp(b.sub(b.load(b.gep(tile, [b.add(b.mul(j, c64(PIX)), c64(i))]), align=64),
                                             cv), VEC), sv), bv) for i in range(PIX)]
        for q, out in enumerate(transpose_pairs(b, rows)):
            rat = [b.gep(res, [b.mul(b.add(o0, c64(2 * q + h)), ystride)]) for h in (0, 1)]
            rv = [b.call(hload, [b.bitcast(rat[h], HALF.as_pointer()), ir.Constant(I32, 4),
                                 b.select(has_res, masks[q][h], none), hzero]) for h in (0, 1)]
            out = b.select(has_res, b.fadd(out, b.shuffle_vector(rv[0], rv[1], iota)), out)
            clamped = b.select(b.fcmp_ordered("<", out, lov), lov, out)
            clamped = b.select(b.fcmp_ordered(">", clamped, hiv), hiv, clamped)
            out = b.select(has_clamp, clamped, out)
            out, t = emit.looked_up(b, out, has_fq, u8_plain, osc, ozp, has_lut, lut, table)
            with b.if_then(has_silu):                               # (SiLU's input, for the pass below)
                b.store(out, b.gep(vals, [c64(q)]))
            with b.if_then(b.not_(has_silu)), b.if_else(has_u8) as (as_bytes, as_floats):
                with as_bytes:
                    store(b.trunc(t, emit.BYTES), o0, q, masks[q], True)
                with as_floats:
                    store(emit.lut_value(b, out, t, has_lut, psc, pzp), o0, q, masks[q], False)
        # SiLU (rare) as a pass of its own: its call inside the loop above made LLVM keep the loop's vectors on the
        # stack
        with b.if_then(has_silu):
            b.call(emit.silu_pass(module), [vals, qvals, c64(PIX), flags, ssc, szp, psc, pzp])
            for q in range(PIX):
                with b.if_else(has_u8) as (as_bytes, as_floats):
                    with as_bytes:        # (the product's pair quantizes it)
                        store(emit.bytes_of(b, b.load(b.gep(qvals, [c64(q)]))), o0, q, masks[q], True)
                    with as_floats:
                        store(b.load(b.gep(vals, [c64(q)])), o0, q, masks[q], False)
    b.ret_void()
    return fn


def scratch(b: ir.IRBuilder) -> tuple[ir.Value, ir.Value]:
    """The conv body's stack tile (``CV * PIX`` sum vectors) and pixel offsets (``PIX`` i64), allocated in its
    entry block."""
    tile = b.alloca(IVEC, CV * PIX)
    tile.align = 64
    return tile, b.alloca(I64, PIX)


def units(b: ir.IRBuilder, f: dict) -> ir.Value:
    """The units: every image's pixel groups times the blocks of channel vectors."""
    groups = cdiv(b, b.mul(f["oh"], f["ow"]), c64(PIX))
    return b.mul(b.mul(f["n"], groups), cdiv(b, cdiv(b, f["m"], c64(VL)), c64(CV)))


def emit_units(module: ir.Module, b: ir.IRBuilder, f: dict, r0: ir.Value, r1: ir.Value, space, tail, vnni: bool,
               vbmi: bool, y_at):
    """Units ``[r0, r1)`` of the body (``tail``: flags, lo, hi, osc, ozp, ssc, szp, psc, pzp, lut as the pixel-lane
    microkernels take them; ``space``: scratch(); ``y_at(e)``: output element e's address)."""
    table = constant_table(module, "cl_qconv.ctable", ACC_TYPE.as_pointer(),
                           [accumulate(module, p, v, vnni) for p in range(1, PIX + 1) for v in range(1, CV + 1)])
    epi = epilogue(module, vbmi)
    tile, pix = space
    tptr = b.bitcast(table, ACC_TYPE.as_pointer().as_pointer())
    m, ow, wps, kq = f["m"], f["ow"], f["wps"], f["kq"]
    ohw = b.mul(f["oh"], ow)
    xq, wc = b.inttoptr(f["xq"], BYTE_PTR), b.inttoptr(f["wc"], BYTE_PTR)
    koff = b.inttoptr(f["koff"], I64P)
    comp, scale = b.inttoptr(f["comp"], I32P), b.inttoptr(f["scale"], FPT)
    bias = b.inttoptr(b.select(b.icmp_unsigned("!=", f["bias"], c64(0)), f["bias"], f["scale"]), FPT)
    res = b.inttoptr(b.select(b.icmp_unsigned("!=", f["residual"], c64(0)), f["residual"], f["y"]), FPT)
    image_bytes = b.mul(b.mul(f["cq"], f["plane"]), c64(QUAD))
    groups = cdiv(b, ohw, c64(PIX))
    gbase, gextra = b.sdiv(ohw, groups), b.srem(ohw, groups)
    nvecs = cdiv(b, m, c64(VL))
    nblk = cdiv(b, nvecs, c64(CV))
    vbase, vextra = b.sdiv(nvecs, nblk), b.srem(nvecs, nblk)
    wstride = b.mul(kq, c64(VBYTES))
    runs = b.mul(f["n"], groups)
    with for_range(b, r0, r1, "cu") as u:
        blk, run = b.sdiv(u, runs), b.srem(u, runs)
        img, g = b.sdiv(run, groups), b.srem(run, groups)
        p0 = b.add(b.mul(g, gbase), smin(b, g, gextra))
        npix = b.add(gbase, b.select(b.icmp_signed("<", g, gextra), c64(1), c64(0)))
        oy, ox = b.sdiv(p0, ow), b.srem(p0, ow)
        word = b.add(b.mul(oy, wps), ox)
        for i in range(PIX):                # the pixels' words (past npix: the last pixel again, not stored)
            b.store(b.mul(word, c64(QUAD)), b.gep(pix, [c64(i)]))
            ox = b.add(ox, c64(1))
            wrap = b.icmp_signed("==", ox, ow)                   # the next row: wps - ow + 1 words on
            step = b.select(wrap, b.sub(wps, b.sub(ow, c64(1))), c64(1))
            word = b.select(b.icmp_signed("<", c64(i + 1), npix), b.add(word, step), word)
            ox = b.select(wrap, c64(0), ox)
        v0 = b.add(b.mul(blk, vbase), smin(b, blk, vextra))
        nv = b.add(vbase, b.select(b.icmp_signed("<", blk, vextra), c64(1), c64(0)))
        o0 = b.mul(v0, c64(VL))
        acc = b.load(b.gep(tptr, [b.add(b.mul(b.sub(npix, c64(1)), c64(CV)), b.sub(nv, c64(1)))]))
        b.call(acc, [b.gep(xq, [b.mul(img, image_bytes)]), pix, koff, kq, b.gep(wc, [b.mul(v0, wstride)]),
                     wstride, tile])
        at = b.add(b.mul(b.add(b.mul(img, m), o0), ohw), p0)
        b.call(epi, [tile, npix, nv, b.sub(m, o0), y_at(at), ohw, b.gep(comp, [o0]), b.gep(scale, [o0]),
                     b.gep(bias, [o0]), b.gep(res, [at])] + list(tail))
