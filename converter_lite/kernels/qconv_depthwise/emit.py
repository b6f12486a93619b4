"""The int8 depthwise convolution driver (a support function; abi.py gives the record).

    void cl_qdwconv2d_v1(i64* desc, i64 nthreads)

Chunks of channel planes (images x channels) across the thread pool, one chunk per thread, each with its own
scratch (``scratch + chunk * sstride``).  Per plane:

1. **The input**, read one of two ways:

   * **direct** (``dmask`` != 0; bind.py ``direct_pays``: a uint8 input, equal strides): where it is.  With the
     output's flat index ``g = oy * w + ox`` over the input's width, ``s * g`` is the input offset of the output's
     first tap, so every tap ``(ky, k)`` is one offset (``toff``) from it, and the loads take their bytes under a
     mask of the taps inside the image (``dmask``, per block, tap and sum vector, tabulated at bind), the zero
     point (what a float zero quantizes to: the padding) elsewhere.  No copy, and at stride 1 the outputs' order
     is the output tensor's: one store per block.
   * **copied**: the scratch filled with the zero point, then each input row's bytes written into it (the uint8
     input as it is, or ``saturate(round_half_even(x / scale) + zero_point)`` of a float32 one, NaN -> 0:
     QuantizeLinear's arithmetic), padded row ``i`` in row phase ``i % sh`` at row ``i // sh`` (rows of ``wpp``
     bytes), as kernels/qconv/ splits its planes: the taps of kernel row ``ky`` then start at one offset from
     ``sw * g``, ``g = oy * pitch + ox`` (``pitch = wpp / sw``).  The next plane is copied into a second buffer
     before this one's sums: 64-byte loads of bytes stored just before (16 at a time: no store forwarding) waited
     for the stores to reach the cache, a quarter of a 5 x 5 plane's time.

   Either way the plane is a flat run (the columns past ``ow`` computed and not stored), and small planes (10 x
   10, 5 x 5) fill the vectors over their rows.
2. **Sums**, blocks of ``BLOCK`` = 64 flat outputs: an int32 lane read at byte ``sw * g + toff + 4 * lane`` holds
   the four pixels of a kernel row's taps ``4k .. 4k + 3`` for one output -- column stride 1: the output ``4 *
   lane``, so four loads one byte apart (phases) give 64 consecutive outputs; stride 2: ``2 * lane``, two loads two
   bytes apart give 32 -- and one ``vpdpbusd`` with the tap row's four int8 weights broadcast (zeros past ``kw``)
   adds the four products (u8 x s8 in int32, exact), from ``-comp`` (the zero point x the channel's weight sum).  A
   3x3 kernel is 12 loads and 12 ``vpdpbusd`` per 64 outputs, no packing of the taps (no channel reduction to add
   up here, as the dense driver's); float FMAs of the values took 9 per 16 outputs and 4x the float driver's time.
   Without VNNI the same sums from the bytes unpacked (kernels/qgemm/emit.py ``_dot4``).
3. **Epilogue** on the four vectors, the dense driver's arithmetic (kernels/qconv/emit.py, emit_epilogue.py's
   helpers): ``float(sum) * scale[c] + bias[c]`` (``scale`` = input scale x weight scale), the clamp, the output's
   round trip (``oscale`` != 0), SiLU (``silu_pass``, with the sigmoid's and the product's pairs); then the phases
   interleaved back into the 64 outputs' order (one byte shuffle for a uint8 output), stored as float32 or
   (``yu8``) as the uint8 bytes of the output's last pair, one masked store per output row the block touches.  A
   uint8 output without SiLU (``fast``, the hand-off's case) takes a short form: ``rint(v * (1 / s))`` where that
   is provably ``rint(v / s)`` (``NEAR_HALF``), the clamp left out where the quantization saturates it (bind.py).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import driver_entry
from ...codegen.loops import for_range
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR, BYTE_PTR_PTR, F32, F64, I1, I32, VOID
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
)
from ..qconv.emit_epilogue import (
    BYTES,
    FLAG_PFQ,
    FLAG_SFQ,
    FLAG_U8,
    _mload,
    bytes_of,
    module_rint,
    quantize_out,
    silu_pass,
    store_bytes,
)
from ..qgemm.emit import VNNI_FEATURES, _dot4
from .abi import BLOCK, EXTRA, FIELDS, QUAD, SYMBOL

IVEC = ir.VectorType(I32, VL)
IVECP = IVEC.as_pointer()
PHASES = BLOCK // VL                             # vectors of sums a block
B64 = ir.VectorType(ir.IntType(8), BLOCK)        # a block's outputs as bytes
F64V = ir.VectorType(F32, BLOCK)                 # ... as float32
M64 = ir.VectorType(I1, BLOCK)
FPT = F32.as_pointer()
I32P = I32.as_pointer()
_F = {name: i for i, name in enumerate(FIELDS)}
# t = fl(v * fl(1 / s)) is within 3 * 2**-24 * |t| of fl(v / s); where |t - rint(t)| < NEAR_HALF no tie lies
# between them for |t| < 2**11, and past that both saturate the uint8 output the same way: rint(t) is rint(v / s)
NEAR_HALF = 0.5 - 2.0 ** -10


def _fields(b: ir.IRBuilder, desc: ir.Value) -> tuple[ir.Value, dict]:
    d = b.bitcast(desc, I64P)
    return d, {name: b.load(b.gep(d, [c64(i)]), name=name) for name, i in _F.items()}


def _intrinsic(module: ir.Module, name: str, fnty: ir.FunctionType) -> ir.Function:
    return module.globals.get(name) or ir.Function(module, fnty, name)


def _scalar(b: ir.IRBuilder, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(whether the float64-bits word is set, its value as float32, 1.0 when not set)."""
    on = b.icmp_unsigned("!=", word, c64(0))
    return on, b.select(on, b.fptrunc(b.bitcast(word, F64), F32), ir.Constant(F32, 1.0))


def phase_of(sw: int, a: int, lane: int) -> int:
    """The block output (0..63) that lane ``lane`` of sum vector ``a`` computes at column stride ``sw``."""
    return 4 * lane + a if sw == 1 else 32 * (a // 2) + 2 * lane + a % 2


def _order(sw: int) -> ir.Constant:
    """The shuffle putting the four sum vectors (concatenated) back in the outputs' order."""
    where = {phase_of(sw, a, i): a * VL + i for a in range(PHASES) for i in range(VL)}
    return ir.Constant(ir.VectorType(I32, BLOCK), [where[k] for k in range(BLOCK)])


def _concat(b: ir.IRBuilder, parts: list, sw: int) -> ir.Value:
    """The four 16-lane vectors as one 64-lane vector in the outputs' order at column stride ``sw``."""
    half = ir.Constant(ir.VectorType(I32, 2 * VL), list(range(2 * VL)))
    lo, hi = b.shuffle_vector(parts[0], parts[1], half), b.shuffle_vector(parts[2], parts[3], half)
    return b.shuffle_vector(lo, hi, _order(sw))


def _body(module: ir.Module, vnni: bool) -> ir.Function:
    fn = ir.Function(module, BODY_TYPE, f"{SYMBOL}.planes")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d, f = _fields(b, fn.args[0])
    per = b.load(b.gep(d, [c64(len(FIELDS))]))
    c, h, w, oh, ow = f["c"], f["h"], f["w"], f["oh"], f["ow"]
    sh, sw, hps, wpp, pitch, taps = f["sh"], f["sw"], f["hps"], f["wpp"], f["pitch"], f["taps"]
    p0 = b.mul(fn.args[1], per)
    p1 = smin(b, b.mul(f["n"], c), b.add(p0, per))
    dot4 = _dot4(module, vnni)
    mload, bstore, rint = _mload(module), store_bytes(module), module_rint(module)
    fabs = _intrinsic(module, "llvm.fabs.v16f32", ir.FunctionType(VEC, [VEC]))
    bload = _intrinsic(module, "llvm.masked.load.v16i8.p0v16i8",
                       ir.FunctionType(BYTES, [BYTES.as_pointer(), I32, MASK, BYTES]))
    store64b = _intrinsic(module, "llvm.masked.store.v64i8.p0v64i8",
                          ir.FunctionType(VOID, [B64, B64.as_pointer(), I32, M64]))
    load64b = _intrinsic(module, "llvm.masked.load.v64i8.p0v64i8",
                         ir.FunctionType(B64, [B64.as_pointer(), I32, M64, B64]))
    store64f = _intrinsic(module, "llvm.masked.store.v64f32.p0v64f32",
                          ir.FunctionType(VOID, [F64V, F64V.as_pointer(), I32, M64]))
    silu = silu_pass(module)
    iota = ir.Constant(IVEC, list(range(VL)))
    zero = ir.Constant(VEC, None)
    top = ir.Constant(VEC, [255.0] * VL)

    xu8 = b.icmp_unsigned("!=", f["xu8"], c64(0))
    yu8 = b.icmp_unsigned("!=", f["yu8"], c64(0))
    has_silu = b.icmp_unsigned("!=", f["silu"], c64(0))
    has_bias = b.icmp_unsigned("!=", f["bias"], c64(0))
    has_clamp = b.icmp_unsigned("!=", f["clamp"], c64(0))
    stride1 = b.icmp_signed("==", sw, c64(1))
    xf, xb = b.inttoptr(f["x"], FPT), b.inttoptr(f["x"], BYTE_PTR)
    yf, yb = b.inttoptr(f["y"], FPT), b.inttoptr(f["y"], BYTE_PTR)
    sx = splat(b, b.load(b.inttoptr(f["xscale"], FPT)))
    zp = f["xzp"]
    zf = splat(b, b.sitofp(zp, F32))
    zline = b.bitcast(splat_i32(b, b.and_(b.mul(zp, c64(0x01010101)), c64(0xFFFFFFFF))), B64)
    wq, toff = b.inttoptr(f["wq"], I32P), b.inttoptr(f["toff"], I64P)
    comp, scale = b.inttoptr(f["comp"], I32P), b.inttoptr(f["scale"], FPT)
    bias = b.inttoptr(b.select(has_bias, f["bias"], f["scale"]), FPT)       # (a readable address either way)
    lov, hiv = splat(b, b.fptrunc(b.bitcast(f["lo"], F64), F32)), splat(b, b.fptrunc(b.bitcast(f["hi"], F64), F32))
    # the epilogue's flags, as the dense driver sets them (kernels/qconv/emit.py): a uint8 output's last pair (the
    # product's with a SiLU, else the output's) quantizes it, with no round trip before
    has_o, osc = _scalar(b, f["oscale"])
    has_s, ssc = _scalar(b, f["sscale"])
    has_p, psc = _scalar(b, f["pscale"])
    u8_plain = b.and_(yu8, b.not_(has_silu))
    has_fq = b.and_(has_o, b.not_(u8_plain))
    ozp, szp, pzp = (b.sitofp(f[k], F32) for k in ("ozp", "szp", "pzp"))
    sflags = b.or_(b.or_(b.select(has_s, c64(FLAG_SFQ), c64(0)),
                         b.select(b.and_(has_p, b.not_(yu8)), c64(FLAG_PFQ), c64(0))),
                   b.select(yu8, c64(FLAG_U8), c64(0)))
    vals, qvals = b.alloca(VEC), b.alloca(VEC)
    vals.align = qvals.align = 64
    # byte offset of sum vector a's lane 0 from the block's first output's (sw * g0): its phase
    offs = [b.select(stride1, c64(phase_of(1, a, 0)), c64(2 * phase_of(2, a, 0))) for a in range(PHASES)]

    space = b.gep(b.inttoptr(f["scratch"], BYTE_PTR), [b.mul(fn.args[1], f["sstride"])])
    direct = b.icmp_unsigned("!=", f["dmask"], c64(0))
    dmask = b.inttoptr(f["dmask"], I64P)
    phase_bytes = b.mul(hps, wpp)
    nflat = b.mul(oh, pitch)
    blocks = cdiv(b, nflat, c64(BLOCK))

    def row_stores(g0, store_row):
        """``store_row(at, mask)`` for each output row the block from flat output ``g0`` touches: ``at`` its
        first lane's place in the plane, ``mask`` the row's lanes (as bits: two shifts, no vector compares)."""
        last = smin(b, b.sdiv(b.add(g0, c64(BLOCK - 1)), pitch), b.sub(oh, c64(1)))
        last = b.select(b.icmp_signed("==", pitch, ow), b.sdiv(g0, pitch), last)   # (rows back to back: one store)
        with for_range(b, b.sdiv(g0, pitch), b.add(last, c64(1)), "r") as r:
            lo = b.sub(b.mul(r, pitch), g0)
            first = b.select(b.icmp_signed("<", lo, c64(0)), c64(0), lo)
            end = smin(b, b.select(b.icmp_signed("==", pitch, ow), b.sub(nflat, g0), b.add(lo, ow)), c64(BLOCK))
            n = b.sub(end, first)                     # (none where the block starts past the row's last column)
            bits = b.shl(b.lshr(c64(-1), b.sub(c64(BLOCK), smin(b, n, c64(BLOCK)))), first)
            bits = b.select(b.icmp_signed(">", n, c64(0)), bits, c64(0))
            store_row(b.add(g0, b.mul(r, b.sub(ow, pitch))), b.bitcast(bits, M64))

    def blocks_loop(fast, cc, sc, bi, yplane, wrow, space, direct):
        """The blocks of one plane.  ``fast`` (bind.py sets it: a uint8 output of the output's pair, no SiLU, a
        finite bias): the epilogue as QuantizeLinear of ``clamp(sum * scale + bias)`` directly, ``rint(v / s) + z``
        saturated (no NaN to map: the sums are integers), no float output to keep."""
        with for_range(b, 0, blocks, "blk") as blk:
            g0 = b.mul(blk, c64(BLOCK))
            bases = [b.gep(space, [b.add(b.mul(sw, g0), o)]) for o in offs]
            pre = b.block
            head, body, done = (b.append_basic_block(n) for n in ("t.head", "t.body", "t.done"))
            b.branch(head)
            b.position_at_end(head)
            t = b.phi(ir.IntType(64))
            t.add_incoming(c64(0), pre)
            acc = [b.phi(IVEC) for _ in range(PHASES)]
            for a in acc:
                a.add_incoming(cc, pre)
            b.cbranch(b.icmp_signed("<", t, taps), body, done)
            b.position_at_end(body)
            wv = splat_i32(b, b.load(b.gep(wrow, [t])))
            off = b.load(b.gep(toff, [t]))
            if direct:
                masks = b.gep(dmask, [b.mul(b.add(b.mul(blk, taps), t), c64(PHASES))])
            for k, (base, a) in enumerate(zip(bases, acc)):
                at = b.gep(base, [off])
                if direct:
                    m = b.bitcast(b.load(b.gep(masks, [c64(k)])), M64)
                    pv = b.bitcast(b.call(load64b, [b.bitcast(at, B64.as_pointer()), ir.Constant(I32, 1), m, zline]),
                                   IVEC)
                else:
                    pv = b.load(b.bitcast(at, IVECP), align=1)
                a.add_incoming(dot4(b, a, pv, wv), body)
            t.add_incoming(b.add(t, c64(1)), body)
            b.branch(head)
            b.position_at_end(done)
            if fast:
                # rint(v / s) as rint(v * (1 / s)) where that is provably the same (``NEAR_HALF``), the division
                # only for a vector with a lane near a rounding tie (a sixth of the time went to the divisions)
                sv, zv, rv = splat(b, osc), splat(b, ozp), splat(b, b.fdiv(ir.Constant(F32, 1.0), osc))
                outs, ns, near = [], [], None
                for a in acc:
                    out = b.fadd(b.fmul(b.sitofp(a, VEC), sc), bi)
                    outs.append(b.select(has_clamp, clamp_lanes(b, out, lov, hiv), out))
                    t = b.fmul(outs[-1], rv)
                    ns.append(b.call(rint, [t]))
                    far = b.fcmp_ordered("<", b.call(fabs, [b.fsub(t, ns[-1])]), ir.Constant(VEC, [NEAR_HALF] * VL))
                    near = b.not_(far) if near is None else b.or_(near, b.not_(far))
                before = b.block
                with b.if_then(b.icmp_unsigned("!=", b.bitcast(near, ir.IntType(VL)), ir.Constant(ir.IntType(VL), 0))):
                    exact = [b.call(rint, [b.fdiv(out, sv)]) for out in outs]
                    from_div = b.block
                phis = [b.phi(VEC) for _ in ns]
                qs = []
                for q, n, e in zip(phis, ns, exact):
                    q.add_incoming(n, before)
                    q.add_incoming(e, from_div)
                    q = b.fadd(q, zv)
                    q = b.select(b.fcmp_ordered("<", q, zero), zero, q)
                    qs.append(b.select(b.fcmp_ordered(">", q, top), top, q))
                store_bytes_rows(g0, yplane, [bytes_of(b, q) for q in qs])
                return
            outs, qs = [], []
            for a in acc:
                out = b.fadd(b.fmul(b.sitofp(a, VEC), sc), bi)
                out = b.select(has_clamp, clamp_lanes(b, out, lov, hiv), out)
                out, tq = quantize_out(b, out, has_fq, u8_plain, osc, ozp)
                before = b.block
                with b.if_then(has_silu):
                    b.store(out, vals)
                    b.store(tq, qvals)
                    b.call(silu, [vals, qvals, c64(1), sflags, ssc, szp, psc, pzp])
                    out2, tq2 = b.load(vals), b.load(qvals)
                    after = b.block
                po, pq = b.phi(VEC), b.phi(VEC)
                po.add_incoming(out2, after)
                po.add_incoming(out, before)
                pq.add_incoming(tq2, after)
                pq.add_incoming(tq, before)
                outs.append(po)
                qs.append(pq)
            with b.if_else(yu8) as (as_bytes, as_floats):
                with as_bytes:
                    store_bytes_rows(g0, yplane, [bytes_of(b, q) for q in qs])
                with as_floats:
                    line = in_order(outs, F64V)
                    row_stores(g0, lambda at, mask: b.call(store64f, [
                        line, b.bitcast(b.gep(yf, [b.add(yplane, at)]), F64V.as_pointer()), ir.Constant(I32, 4),
                        mask]))

    def in_order(parts, ty):
        """The four vectors in the outputs' order (one shuffle per column stride)."""
        with b.if_else(stride1) as (s1, s2):
            with s1:
                v1 = _concat(b, parts, 1)
                from1 = b.block
            with s2:
                v2 = _concat(b, parts, 2)
                from2 = b.block
        line = b.phi(ty)
        line.add_incoming(v1, from1)
        line.add_incoming(v2, from2)
        return line

    def store_bytes_rows(g0, yplane, parts):
        line = in_order(parts, B64)
        row_stores(g0, lambda at, mask: b.call(store64b, [
            line, b.bitcast(b.gep(yb, [b.add(yplane, at)]), B64.as_pointer()), ir.Constant(I32, 1), mask]))

    def pack(p, buf):
        """Plane ``p``'s padded bytes into ``buf``."""
        with for_range(b, 0, b.sdiv(f["sfill"], c64(BLOCK)), "z") as k:
            b.store(zline, b.bitcast(b.gep(buf, [b.mul(k, c64(BLOCK))]), B64.as_pointer()), align=64)
        with for_range(b, 0, h, "iy") as iy:
            i = b.add(iy, f["pt"])
            row = b.add(b.add(b.mul(b.srem(i, sh), phase_bytes), b.mul(b.sdiv(i, sh), wpp)), f["pl"])
            with for_range(b, 0, cdiv(b, w, c64(VL)), "ix") as ixb:
                ix = b.mul(ixb, c64(VL))
                mask = b.icmp_signed("<", iota, splat_i32(b, b.sub(w, ix)))
                at = b.add(b.mul(p, b.mul(h, w)), b.add(b.mul(iy, w), ix))
                dst = b.bitcast(b.gep(buf, [b.add(row, ix)]), BYTES.as_pointer())
                with b.if_else(xu8) as (as_bytes, as_floats):
                    with as_bytes:
                        raw = b.call(bload, [b.bitcast(b.gep(xb, [at]), BYTES.as_pointer()), ir.Constant(I32, 1),
                                             mask, ir.Constant(BYTES, None)])
                        b.call(bstore, [raw, dst, ir.Constant(I32, 1), mask])
                    with as_floats:
                        xv = b.call(mload, [b.bitcast(b.gep(xf, [at]), VECP), ir.Constant(I32, 4), mask, zero])
                        t = b.fadd(b.call(rint, [b.fdiv(xv, sx)]), zf)
                        t = b.select(b.fcmp_unordered("uno", t, t), zero, t)                  # NaN -> 0
                        t = b.select(b.fcmp_ordered("<", t, zero), zero, t)
                        t = b.select(b.fcmp_ordered(">", t, top), top, t)
                        b.call(bstore, [bytes_of(b, t), dst, ir.Constant(I32, 1), mask])

    buffers = [space, b.gep(space, [f["sfill"]])]
    with b.if_then(b.and_(b.not_(direct), b.icmp_signed("<", p0, p1))):
        pack(p0, buffers[0])
    with for_range(b, p0, p1, "p") as p:
        ch = b.srem(p, c)
        # 1. the next plane packed into the other buffer first: the 64-byte loads of a plane packed just before
        # waited for its stores (of 16 bytes: no forwarding) to reach the cache, a quarter of a 5 x 5 plane's time
        even = b.icmp_signed("==", b.and_(b.sub(p, p0), c64(1)), c64(0))
        here = b.select(even, buffers[0], buffers[1])
        with b.if_then(b.and_(b.not_(direct), b.icmp_signed("<", b.add(p, c64(1)), p1))):
            pack(b.add(p, c64(1)), b.select(even, buffers[1], buffers[0]))
        # 2. the sums of each block of 64 flat outputs (from -comp: the zero point's part taken off), 3. its epilogue
        wrow = b.gep(wq, [b.mul(ch, taps)])
        cc = splat_i32(b, b.sext(b.neg(b.load(b.gep(comp, [ch]))), ir.IntType(64)))
        sc = splat(b, b.load(b.gep(scale, [ch])))
        bi = b.select(has_bias, splat(b, b.load(b.gep(bias, [ch]))), zero)
        yplane = b.mul(p, b.mul(oh, ow))
        xplane = b.gep(xb, [b.mul(p, b.mul(h, w))])
        with b.if_else(b.icmp_unsigned("!=", f["fast"], c64(0))) as (fast, general):
            with fast, b.if_else(direct) as (from_input, from_copy):
                with from_input:
                    blocks_loop(True, cc, sc, bi, yplane, wrow, xplane, True)
                with from_copy:
                    blocks_loop(True, cc, sc, bi, yplane, wrow, here, False)
            with general, b.if_else(direct) as (from_input, from_copy):
                with from_input:
                    blocks_loop(False, cc, sc, bi, yplane, wrow, xplane, True)
                with from_copy:
                    blocks_loop(False, cc, sc, bi, yplane, wrow, here, False)
    b.ret_void()
    return fn


def emit_qdwconv(module: ir.Module, features: frozenset[str] = frozenset()) -> ir.Function:
    """Defines ``SYMBOL`` in ``module`` (``vpdpbusd`` when ``features`` have AVX-512 VNNI): the planes cut into one
    chunk per thread."""
    body = _body(module, VNNI_FEATURES <= features)
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, SYMBOL)
    d, f = _fields(b, desc)
    planes = b.mul(f["n"], f["c"])
    per = cdiv(b, planes, nt)
    b.store(per, b.gep(d, [c64(len(FIELDS))]))
    with b.if_then(b.icmp_signed(">", planes, c64(0))):
        b.call(pool, [body, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, planes, per), nt])
    b.ret_void()
    return fn


EMITTERS = {SYMBOL: emit_qdwconv}
assert EXTRA == 1 and QUAD * PHASES == BLOCK // VL * QUAD
