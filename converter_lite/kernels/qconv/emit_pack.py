"""Phase 1 of the int8 convolution driver (emit.py): the pool body that quantizes and packs the input, four
channels per int32 word into the padded, phase-split planes (or interleaves a uint8 input's bytes), and the
record's fields as the driver's functions read them."""
from __future__ import annotations

from llvmlite import ir

from ...codegen.loops import for_range
from ...codegen.threadpool import BODY_TYPE
from ...codegen.types import BYTE_PTR, F32, I32
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
)
from ..qgemm.emit import _masked_store
from .abi import FIELDS, QCONV_SYMBOL, QUAD
from .emit_epilogue import (
    BYTES,
    _mload,
)

WIDE = 4 * VL                     # pixels of a uint8 input row packed at a time (four vectors of words)
WBYTES = ir.VectorType(ir.IntType(8), WIDE)
WMASK = ir.VectorType(ir.IntType(1), WIDE)
IVEC = ir.VectorType(I32, VL)
IVECP = IVEC.as_pointer()
I32P = I32.as_pointer()
FPT = F32.as_pointer()
_F = {name: i for i, name in enumerate(FIELDS)}


def record_fields(b: ir.IRBuilder, desc: ir.Value) -> tuple[ir.Value, dict]:
    d = b.bitcast(desc, I64P)
    return d, {name: b.load(b.gep(d, [c64(i)]), name=name) for name, i in _F.items()}


def flat_pack(b: ir.IRBuilder, f: dict) -> ir.Value:
    """Whether phase 1 packs whole channel-quad planes (stride 1, input rows narrower than a vector)."""
    return b.and_(b.and_(b.icmp_signed("==", f["sh"], c64(1)), b.icmp_signed("==", f["sw"], c64(1))),
                  b.icmp_signed("<", f["w"], c64(VL)))


def pack_units(b: ir.IRBuilder, f: dict) -> ir.Value:
    """Phase 1's units: the ``n * cq`` planes (``flat_pack``) or their ``hp`` padded rows each."""
    planes = b.mul(f["n"], f["cq"])
    return b.select(flat_pack(b, f), planes, b.mul(planes, f["hp"]))


def pack_body(module: ir.Module, u8: bool) -> ir.Function:
    """The pool body of phase 1: padded rows ``[chunk * per, ...)`` of ``n * cq * hp`` (image, channel quad,
    row): each row filled with the zero point's word (an input row of column stride 1: its borders only), then (an
    input row) its quantized pixels written; or (``flat_pack``) planes ``[chunk * per, ...)`` of ``n * cq`` at
    once: a row of 5 pixels quantized in a vector of its own left 11 of 16 lanes idle, and packing a 480-channel
    5 x 5 input took most of a 480->16 1x1 convolution's 10.8 us (one thread); 5.3 us flat (480->80: 14.4 ->
    9.0 us, 192->16 at 10 x 10: 10.2 -> 7.2 us).  ``u8``: the body for a uint8 input (``.pack_u8``), its bytes
    taken as they are."""
    fn = ir.Function(module, BODY_TYPE, f"{QCONV_SYMBOL}.pack_u8" if u8 else f"{QCONV_SYMBOL}.pack")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d, f = record_fields(b, fn.args[0])
    per = b.load(b.gep(d, [c64(len(FIELDS))]))
    c, h, w, hp, hps, wps, plane_words = f["c"], f["h"], f["w"], f["hp"], f["hps"], f["wps"], f["plane"]
    sh, sw = f["sh"], f["sw"]
    r0 = b.mul(fn.args[1], per)
    r1 = smin(b, pack_units(b, f), b.add(r0, per))
    x = b.inttoptr(f["x"], BYTE_PTR if u8 else FPT)
    xq = b.inttoptr(f["xq"], I32P)
    sx = splat(b, b.load(b.inttoptr(f["xscale"], FPT)))
    zp = f["xzp"]
    zf = splat(b, b.sitofp(zp, F32))
    zword = splat_i32(b, b.and_(b.mul(zp, c64(0x01010101)), c64(0xFFFFFFFF)))
    rint = module.globals.get("llvm.rint.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC]), "llvm.rint.v16f32")
    mload, istore = _mload(module), _masked_store(module, IVEC)
    bload = module.globals.get("llvm.masked.load.v16i8.p0v16i8") or ir.Function(
        module, ir.FunctionType(BYTES, [BYTES.as_pointer(), I32, MASK, BYTES]), "llvm.masked.load.v16i8.p0v16i8")
    iota = ir.Constant(IVEC, list(range(VL)))
    zero = ir.Constant(VEC, None)
    top = ir.Constant(VEC, [255.0] * VL)
    half = ir.Constant(IVEC, list(range(VL // 2)) + [VL // 2] * (VL // 2))
    evens = ir.Constant(IVEC, [2 * i for i in range(VL // 2)] + [0] * (VL // 2))
    odds = ir.Constant(IVEC, [2 * i + 1 for i in range(VL // 2)] + [1] * (VL // 2))
    phase0 = b.and_(f["pl"], c64(1))                 # column phase of lane 0 (ix steps by 16: fixed per conv)

    zbytes = b.trunc(splat_i32(b, zp), BYTES)
    zwide = b.shuffle_vector(zbytes, ir.Constant(BYTES, None), ir.Constant(ir.VectorType(I32, WIDE), [0] * WIDE))
    iota64 = ir.Constant(ir.VectorType(I32, WIDE), list(range(WIDE)))
    wload = module.globals.get("llvm.masked.load.v64i8.p0v64i8") or ir.Function(
        module, ir.FunctionType(WBYTES, [WBYTES.as_pointer(), I32, WMASK, WBYTES]), "llvm.masked.load.v64i8.p0v64i8")
    pairs = ir.Constant(ir.VectorType(I32, 2 * VL), [k // 2 + (k % 2) * VL for k in range(2 * VL)])
    quads = ir.Constant(ir.VectorType(I32, 4 * VL), [(k // 4) * 2 + k % 2 + (k % 4 // 2) * 2 * VL
                                                     for k in range(4 * VL)])

    def row_source(img, q, rr, at):
        """(whether channel ``QUAD * q + rr`` exists, the address of its pixel ``at`` in image ``img``; channel 0's
        for one past ``c``, whose lanes the caller masks off)."""
        ch = b.add(b.mul(q, c64(QUAD)), c64(rr))
        real = b.icmp_signed("<", ch, c)
        return real, b.gep(x, [b.add(b.mul(b.add(b.mul(img, c), b.select(real, ch, c64(0))), b.mul(h, w)), at)])

    def quad_words(img, q, at, mask):
        """The packed words of the input pixels ``at .. at + 15`` (offsets in a channel plane; lanes of ``mask``)
        of channel quad ``q`` of image ``img``: a uint8 input's four rows of 16 bytes interleaved by two byte
        shuffles (zero-extending each row to words and shifting them together, the packing took 1.15x as long:
        96->4 1x1 at 40 x 40, one thread)."""
        packed = ir.Constant(IVEC, None)
        rows = []
        for rr in range(QUAD):
            real, src = row_source(img, q, rr, at)
            lanes = b.and_(mask, b.select(real, ir.Constant(MASK, [1] * VL), ir.Constant(MASK, [0] * VL)))
            if u8:
                xv = b.call(bload, [b.bitcast(src, BYTES.as_pointer()), ir.Constant(I32, 1), lanes,
                                    ir.Constant(BYTES, None)])
                rows.append(b.select(real, xv, zbytes))
            else:
                # a channel past ``c`` (c = 3: the stem's fourth) is the zero point's byte, nothing computed for it
                # (the stem 3->16 at 320 x 320: 268 -> 249 us, one thread)
                zpv = splat_i32(b, zp)
                before = b.block
                with b.if_then(real):
                    xv = b.call(mload, [b.bitcast(src, VECP), ir.Constant(I32, 4), mask, zero])
                    tq = b.fadd(b.call(rint, [b.fdiv(xv, sx)]), zf)
                    tq = b.select(b.fcmp_unordered("uno", tq, tq), zero, tq)                 # NaN -> 0
                    tq = b.select(b.fcmp_ordered("<", tq, zero), zero, tq)
                    tq = b.select(b.fcmp_ordered(">", tq, top), top, tq)
                    qv = b.fptosi(tq, IVEC)
                    then = b.block
                word = b.phi(IVEC)
                word.add_incoming(qv, then)
                word.add_incoming(zpv, before)
                packed = b.or_(packed, b.shl(word, ir.Constant(IVEC, [8 * rr] * VL)))
        if u8:                          # bytes r0[i], r1[i], r2[i], r3[i] make word i
            low, high = b.shuffle_vector(rows[0], rows[1], pairs), b.shuffle_vector(rows[2], rows[3], pairs)
            packed = b.bitcast(b.shuffle_vector(low, high, quads), IVEC)
        return packed

    def wide_quad_words(img, q, at, count):
        """The four vectors of packed words of a uint8 input's pixels ``at .. at + 63`` (``count`` of them in the
        row, the rest not read) of channel quad ``q``: four rows of 64 bytes, interleaved by byte pairs, then by
        pairs of pairs."""
        mask = b.icmp_signed("<", iota64, b.shuffle_vector(splat_i32(b, count), ir.Constant(IVEC, None),
                                                           ir.Constant(ir.VectorType(I32, WIDE), [0] * WIDE)))
        rows = []
        for rr in range(QUAD):
            real, src = row_source(img, q, rr, at)
            lanes = b.and_(mask, b.select(real, ir.Constant(WMASK, [1] * WIDE), ir.Constant(WMASK, [0] * WIDE)))
            xv = b.call(wload, [b.bitcast(src, WBYTES.as_pointer()), ir.Constant(I32, 1), lanes,
                                ir.Constant(WBYTES, None)])
            rows.append(b.select(real, xv, zwide))
        words = []
        for j in range(QUAD):                       # pixels 16 j .. 16 j + 15
            lo, hi = (b.shuffle_vector(rows[a], rows[a + 1], ir.Constant(
                ir.VectorType(I32, 2 * VL), [16 * j + k // 2 + (k % 2) * WIDE for k in range(2 * VL)]))
                for a in (0, 2))
            words.append(b.bitcast(b.shuffle_vector(lo, hi, quads), IVEC))
        return words

    with b.if_else(flat_pack(b, f)) as (whole_planes, by_rows):
        with whole_planes, for_range(b, r0, r1, "pq") as plane:
            # stride 1, rows narrower than a vector (5 x 5): the plane filled with the zero point's word, then its
            # pixels 16 at a time (all lanes used, not 5 of 16 a row), each row a vector touches one masked store
            # whose lanes land at that row's words
            img, q = b.sdiv(plane, f["cq"]), b.srem(plane, f["cq"])
            base = b.gep(xq, [b.mul(plane, plane_words)])
            with for_range(b, 0, cdiv(b, plane_words, c64(VL)), "fill") as k:
                mask = b.icmp_signed("<", iota, splat_i32(b, b.sub(plane_words, b.mul(k, c64(VL)))))
                b.call(istore, [zword, b.bitcast(b.gep(base, [b.mul(k, c64(VL))]), IVECP), ir.Constant(I32, 4),
                                mask])
            hw = b.mul(h, w)
            with for_range(b, 0, cdiv(b, hw, c64(VL)), "pv") as v:
                p0 = b.mul(v, c64(VL))
                n = smin(b, c64(VL), b.sub(hw, p0))
                mask = b.icmp_signed("<", iota, splat_i32(b, n))
                packed = quad_words(img, q, p0, mask)
                with for_range(b, b.sdiv(p0, w), b.add(b.sdiv(b.add(p0, b.sub(n, c64(1))), w), c64(1)), "iy") as iy:
                    lo = b.sub(b.mul(iy, w), p0)                  # lane of the row's first pixel (may be < 0)
                    rmask = b.and_(mask, b.and_(b.icmp_signed(">=", iota, splat_i32(b, lo)),
                                                b.icmp_signed("<", iota, splat_i32(b, b.add(lo, w)))))
                    at = b.gep(base, [b.sub(b.add(b.mul(b.add(iy, f["pt"]), wps), f["pl"]), lo)])
                    b.call(istore, [packed, b.bitcast(at, IVECP), ir.Constant(I32, 4), rmask])
        with by_rows, for_range(b, r0, r1, "r") as r:
            plane, iyp = b.sdiv(r, hp), b.srem(r, hp)
            img, q = b.sdiv(plane, f["cq"]), b.srem(plane, f["cq"])
            # the row's words in its row phase: phase plane (iyp % sh, column phase), position iyp // sh
            phase_words = b.mul(hps, wps)
            row = b.gep(xq, [b.add(b.mul(plane, plane_words),
                                   b.add(b.mul(b.mul(b.srem(iyp, sh), sw), phase_words), b.mul(b.sdiv(iyp, sh), wps)))])
            iy = b.sub(iyp, f["pt"])
            inside = b.and_(b.icmp_signed(">=", iy, c64(0)), b.icmp_signed("<", iy, h))

            def fill(at, count):
                """The zero point's word at ``count`` words from ``at``."""
                with for_range(b, 0, cdiv(b, count, c64(VL)), "fill") as k:
                    mask = b.icmp_signed("<", iota, splat_i32(b, b.sub(count, b.mul(k, c64(VL)))))
                    b.call(istore, [zword, b.bitcast(b.gep(at, [b.mul(k, c64(VL))]), IVECP), ir.Constant(I32, 4),
                                    mask])
            # the zero point's word where no pixel goes: an input row of stride 1 only in its borders (filling it
            # whole first wrote its words twice: the packing took 1.15x as long with a uint8 input, 1.1x with a
            # float one, 96->4 1x1 at 40 x 40, one thread)
            with b.if_else(b.and_(inside, b.icmp_signed("==", sw, c64(1)))) as (borders, whole):
                with borders:
                    fill(row, f["pl"])
                    fill(b.gep(row, [b.add(f["pl"], w)]), b.sub(wps, b.add(f["pl"], w)))
                with whole, for_range(b, 0, sw, "cp") as cp:
                    fill(b.gep(row, [b.mul(cp, phase_words)]), wps)
            def put(packed, ix, count):
                """The packed words of the row's input pixels ``ix ..`` (``count`` of them left, 16 at most used)
                into their places."""
                mask = b.icmp_signed("<", iota, splat_i32(b, count))
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
            if u8:
                # 64 pixels of the four channel rows at a time (16 at a time, a 48 -> 1 1x1 convolution at 80 x 80,
                # mostly the packing, took 29.6 us against 25.7, 128 -> 1 at 40 x 40 24.3 against 21.1; one thread)
                with b.if_then(inside), for_range(b, 0, cdiv(b, w, c64(WIDE)), "ix") as ixb:
                    ix = b.mul(ixb, c64(WIDE))
                    count = b.sub(w, ix)
                    for j, words in enumerate(wide_quad_words(img, q, b.add(b.mul(iy, w), ix), count)):
                        with b.if_then(b.icmp_signed(">", count, c64(j * VL))):
                            put(words, b.add(ix, c64(j * VL)), b.sub(count, c64(j * VL)))
            else:
                with b.if_then(inside), for_range(b, 0, cdiv(b, w, c64(VL)), "ix") as ixb:
                    ix = b.mul(ixb, c64(VL))
                    count = b.sub(w, ix)
                    put(quad_words(img, q, b.add(b.mul(iy, w), ix), b.icmp_signed("<", iota, splat_i32(b, count))),
                        ix, count)
    b.ret_void()
    return fn
