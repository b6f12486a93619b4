"""The pointwise convolution driver: 1x1, stride 1, unpadded float32 Conv as a register-tiled product vectorised
over pixels (a support function).

    void cl_conv1x1_v1_f32(i8* desc, i64 nthreads)

A 1x1 convolution of an NCHW image is ``Y[m, p] = bias[m] + sum_c W[m, c] * X[c, p]`` over the ``P = H*W``
contiguous pixels of each channel plane.  The weights are packed (by the runtime, once) in blocks of ``MR``
output channels, ``wpk[g][mblock][c][MR]`` (zero rows past the group's channels), and a *microkernel* keeps
``MR x NV`` vectors of 16 pixels in registers:

    for c in 0..C/G:   x_v = X[c, p0 + 16v ...]                (NV vector loads)
                       for i < mr: acc[i][v] += W[m0+i, c] * x_v  (broadcast scalar, mr * NV FMAs)

then adds the residual (an array shaped like Y, when present), clamps (Relu/Clip; NaN stays NaN) and stores
straight into the NCHW output: no transposes, unlike the channel-vectorised direct driver (conv_direct.py)
whose epilogue dominates when a 1x1 convolution has few input channels.  A block of pixels stays in L1 while
every output-channel block reads it.  The last pixel block of a plane uses a masked microkernel of as
many vectors as its pixels need (1 .. ``NV``).
``wide`` (AVX-512: 32 registers) selects ``NV = 4`` (64 pixels), else 1.  Chunks of the pool are runs of
pixels (multiples of 16; and of channel blocks, on small images) of one (image, group), about
``CHUNKS_PER_THREAD`` per thread.

Record (i64 fields, ``FIELDS``): ``n c m group p`` (p = H*W), ``x y wpk bpk`` addresses (bpk: ``[g][nmb*MR]``
floats, zeros when there is no bias), ``nmb`` channel blocks per group, ``residual`` (0 or an address),
``clamp lo hi`` (float64 bit patterns), ``wide``; then two words the entry point writes (pixels and output
channel blocks per chunk: an image with fewer pixel blocks than the chunks wanted is split by channel blocks too).
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import constant_table, driver_entry, internal_function
from ...codegen.loops import for_range, loop_id
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR_PTR, F32, F64, I32, I64, VOID
from ...codegen.vector import (
    FP,
    I64P,
    VEC,
    VECP,
    VL,
    cdiv,
    epilogue_flags,
    flag_versions,
    smin,
    splat,
    tap_loop_head,
    vector_intrinsics,
)
from .abi import EXTRA, FIELDS, MR
from .abi import SYMBOL as POINTWISE_SYMBOL

_F = {name: i for i, name in enumerate(FIELDS)}
NV = {True: 4, False: 1}            # wide -> pixel vectors per tile
# one pool chunk per thread, as conv_direct.py: each thread computes the same part of every convolution
# (mobilenet_v2_half, 2 threads, builds alternated in one process: 4 chunks -> 1.10 ms, 1 -> 1.05 on a busy
# host; depthwise alone made no difference on a quiet one)
CHUNKS_PER_THREAD = 1

MK_TYPE = ir.FunctionType(VOID, [FP, I64, FP, I64, FP, FP, FP, I64, F32, F32, I64])
# microkernel(x, P, w, K, bias, y, res, flags, lo, hi, npix)


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def microkernel(module: ir.Module, mr: int, nv: int, masked: bool) -> ir.Function:
    """``cl_conv1x1.mk<mr>x<nv>[m]``: ``mr`` output channels x ``nv`` vectors of pixels (masked to ``npix``
    pixels when ``masked``)."""
    fn = internal_function(module, f"cl_conv1x1.mk{mr}x{nv}{'m' if masked else ''}", MK_TYPE,
                           noalias=(0, 2, 4, 5, 6))
    if not fn.is_declaration:
        return fn
    fma, mload, mstore = vector_intrinsics(module)
    x, pp, w, kk, bias, y, res, flags, lo, hi, npix = fn.args
    entry = fn.append_basic_block("entry")
    head, body, done = (fn.append_basic_block(n) for n in ("k.head", "k.body", "k.done"))
    b = ir.IRBuilder(entry)
    iota = ir.Constant(ir.VectorType(I32, VL), list(range(VL)))
    n32 = b.trunc(npix, I32)
    nsplat = b.shuffle_vector(b.insert_element(ir.Constant(ir.VectorType(I32, VL), None), n32, ir.Constant(I32, 0)),
                              ir.Constant(ir.VectorType(I32, VL), None),
                              ir.Constant(ir.VectorType(I32, VL), [0] * VL))
    masks = [b.icmp_signed("<", b.add(iota, ir.Constant(ir.VectorType(I32, VL), [v * VL] * VL)), nsplat)
             for v in range(nv)] if masked else None
    zero = ir.Constant(VEC, None)
    init = [splat(b, b.load(b.gep(bias, [c64(i)]))) for i in range(mr)]
    k, accs = tap_loop_head(b, head, entry, {(i, v): init[i] for i in range(mr) for v in range(nv)})
    b.cbranch(b.icmp_signed("<", k, kk), body, done)
    b.position_at_end(body)
    row = b.gep(x, [b.mul(k, pp)])

    def vload(base, v, mask_ok=True):
        ptr = b.bitcast(b.gep(base, [c64(v * VL)]), VECP)
        if masked and mask_ok:
            return b.call(mload, [ptr, ir.Constant(I32, 4), masks[v], zero])
        return b.load(ptr, align=4)

    xv = [vload(row, v) for v in range(nv)]
    wk = b.gep(w, [b.mul(k, c64(MR))])
    for i in range(mr):
        s = splat(b, b.load(b.gep(wk, [c64(i)])))
        for v in range(nv):
            accs[i, v].add_incoming(b.call(fma, [s, xv[v], accs[i, v]]), body)
    k.add_incoming(b.add(k, c64(1), flags=("nsw", "nuw")), body)
    b.branch(head).set_metadata("llvm.loop", loop_id(module, {"llvm.loop.unroll.disable": None}))
    b.position_at_end(done)
    lov, hiv = splat(b, lo), splat(b, hi)

    def emit(eb, res_on, act, exit_block):
        for i in range(mr):
            yrow, rrow = eb.gep(y, [eb.mul(c64(i), pp)]), eb.gep(res, [eb.mul(c64(i), pp)])
            for v in range(nv):
                val = accs[i, v]
                if res_on:
                    rptr = eb.bitcast(eb.gep(rrow, [c64(v * VL)]), VECP)
                    rv = (eb.call(mload, [rptr, ir.Constant(I32, 4), masks[v], zero]) if masked
                          else eb.load(rptr, align=4))
                    val = eb.fadd(val, rv)
                val = act(eb, val, lov, hiv)
                dst = eb.bitcast(eb.gep(yrow, [c64(v * VL)]), VECP)
                if masked:
                    eb.call(mstore, [val, dst, ir.Constant(I32, 4), masks[v]])
                else:
                    eb.store(val, dst, align=4)
        eb.branch(exit_block)

    flag_versions(fn, b, flags, emit)
    b.ret_void()
    return fn


def _table(module: ir.Module) -> ir.GlobalVariable:
    """Microkernel pointers indexed ``[slot][mr - 1]``: slots ``[wide][masked]`` (0-3: 1 or ``NV[True]`` vectors,
    masked or not), then the masked tiles of 2 .. ``NV[True] - 1`` vectors (``TAIL_SLOTS``; one vector is slot 1)."""
    entries = [microkernel(module, mr, NV[wide], masked)
               for wide in (False, True) for masked in (False, True) for mr in range(1, MR + 1)]
    entries += [microkernel(module, mr, nv, True) for nv in range(2, NV[True]) for mr in range(1, MR + 1)]
    return constant_table(module, "cl_conv1x1.table", MK_TYPE.as_pointer(), entries)


TAIL_SLOTS = 4                   # the first slot of the masked tiles of 2 .. NV[True] - 1 vectors


def _masked_slot(b: ir.IRBuilder, npix: ir.Value, wide: ir.Value) -> ir.Value:
    """The first table index (``_table``) of the masked microkernel for a last tile of ``npix`` pixels: as many
    vectors as they need.  With one masked 64-pixel tile for any tail, a 28 x 28 plane (12 tiles and 16
    pixels) paid 13 tiles: the orientation classifier's 1x1 Convs 64 -> 128 and 128 -> 128 at 28 x 28 went
    127 -> 117 us and 247 -> 230 us on one thread (``pointwise_pays`` still counts whole tiles)."""
    nvec = cdiv(b, npix, c64(VL))
    full = b.select(wide, c64(NV[True]), c64(NV[False]))
    wide_masked = c64((2 + 1) * MR)
    middle = b.mul(b.add(b.sub(nvec, c64(2)), c64(TAIL_SLOTS)), c64(MR))
    return b.select(b.icmp_signed("==", nvec, c64(1)), c64(MR),
                    b.select(b.icmp_signed(">=", nvec, full), wide_masked, middle))


def _field(b: ir.IRBuilder, d: ir.Value, name: str) -> ir.Value:
    return b.load(b.gep(d, [c64(_F[name])]), name=name)


def _emit_body(module: ir.Module, table: ir.GlobalVariable) -> ir.Function:
    fn = ir.Function(module, BODY_TYPE, f"{POINTWISE_SYMBOL}.blocks")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = b.bitcast(fn.args[0], I64P)
    f = {name: _field(b, d, name) for name in FIELDS}
    wide = b.icmp_signed("!=", f["wide"], c64(0))
    pix = b.select(wide, c64(NV[True] * VL), c64(NV[False] * VL))
    pp, group = f["p"], f["group"]
    ppc = b.load(b.gep(d, [c64(len(FIELDS))]))                          # pixels per chunk
    mpc = b.load(b.gep(d, [c64(len(FIELDS) + 1)]))                      # channel blocks per chunk
    nmb = f["nmb"]
    cpm = cdiv(b, nmb, mpc)
    cpu = b.mul(cdiv(b, pp, ppc), cpm)
    chunk = fn.args[1]
    rem, unit = b.srem(chunk, cpu), b.sdiv(chunk, cpu)
    ci, mj = b.sdiv(rem, cpm), b.srem(rem, cpm)
    g, n = b.srem(unit, group), b.sdiv(unit, group)
    cg, mg = b.sdiv(f["c"], group), b.sdiv(f["m"], group)
    xg = b.gep(b.inttoptr(f["x"], FP), [b.mul(b.add(b.mul(n, f["c"]), b.mul(g, cg)), pp)])
    yoff = b.mul(b.add(b.mul(n, f["m"]), b.mul(g, mg)), pp)
    yg = b.gep(b.inttoptr(f["y"], FP), [yoff])
    has_res = b.icmp_unsigned("!=", f["residual"], c64(0))
    rg = b.select(has_res, b.gep(b.inttoptr(f["residual"], FP), [yoff]), yg)      # yg: never read
    wg = b.gep(b.inttoptr(f["wpk"], FP), [b.mul(b.mul(g, nmb), b.mul(cg, c64(MR)))])
    bg = b.gep(b.inttoptr(f["bpk"], FP), [b.mul(b.mul(g, nmb), c64(MR))])
    flags = epilogue_flags(b, f["clamp"], has_res)
    lo = b.fptrunc(b.bitcast(f["lo"], F64), F32)
    hi = b.fptrunc(b.bitcast(f["hi"], F64), F32)
    tab = b.bitcast(table, MK_TYPE.as_pointer().as_pointer())
    base = b.select(wide, c64(2 * MR), c64(0))
    start = b.mul(ci, ppc)
    end = smin(b, b.add(start, ppc), pp)
    with for_range(b, 0, cdiv(b, b.sub(end, start), pix), "pb") as pb:
        p0 = b.add(start, b.mul(pb, pix))
        npix = smin(b, pix, b.sub(end, p0))
        masked = b.icmp_signed("<", npix, pix)
        slot = b.select(masked, _masked_slot(b, npix, wide), base)
        xin = b.gep(xg, [p0])
        with for_range(b, b.mul(mj, mpc), smin(b, b.mul(b.add(mj, c64(1)), mpc), nmb), "mb") as mb:
            m0 = b.mul(mb, c64(MR))
            mr = smin(b, c64(MR), b.sub(mg, m0))
            idx = b.add(slot, b.sub(mr, c64(1)))
            mk = b.load(b.gep(tab, [idx]))
            off = b.add(b.mul(m0, pp), p0)
            b.call(mk, [xin, pp, b.gep(wg, [b.mul(mb, b.mul(cg, c64(MR)))]), cg, b.gep(bg, [m0]),
                        b.gep(yg, [off]), b.gep(rg, [off]), flags, lo, hi, npix])
    b.ret_void()
    return fn


def emit_conv_pointwise(module: ir.Module) -> ir.Function:
    """Defines ``cl_conv1x1_v1_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    body = _emit_body(module, _table(module))
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, POINTWISE_SYMBOL)
    d = b.bitcast(desc, I64P)
    wide = b.icmp_signed("!=", _field(b, d, "wide"), c64(0))
    pix = b.select(wide, c64(NV[True] * VL), c64(NV[False] * VL))
    pp = _field(b, d, "p")
    npb = cdiv(b, pp, pix)
    units = b.mul(_field(b, d, "n"), _field(b, d, "group"))
    per_unit = cdiv(b, b.mul(nt, c64(CHUNKS_PER_THREAD)), units)
    per_unit = b.select(b.icmp_signed("<", per_unit, c64(1)), c64(1), per_unit)
    # pixel blocks first; an image with fewer pixel blocks than chunks wanted (7x7, 14x14) is split by output
    # channel blocks too (the 160 -> 960 1x1 at 7x7 ran on one thread: 85 us on 2, onnxruntime 41)
    pparts = smin(b, per_unit, npb)
    nmb = _field(b, d, "nmb")
    mparts = smin(b, cdiv(b, per_unit, pparts), nmb)
    # a chunk's pixels are a multiple of VL, not of the block: 784 pixels in 64-pixel blocks split 448/336,
    # in 16-pixel vectors 400/384 (the chunk's last block is masked; 96 -> 96 1x1 at 28x28 on 2 threads
    # measured within noise of before, 43-47 us)
    ppc = b.mul(cdiv(b, cdiv(b, pp, pparts), c64(VL)), c64(VL))
    mpc = cdiv(b, nmb, mparts)
    b.store(ppc, b.gep(d, [c64(len(FIELDS))]))
    b.store(mpc, b.gep(d, [c64(len(FIELDS) + 1)]))
    chunks = b.mul(units, b.mul(cdiv(b, pp, ppc), cdiv(b, nmb, mpc)))
    b.call(pool, [body, b.bitcast(desc, BYTE_PTR_PTR), chunks, nt])
    b.ret_void()
    return fn


assert EXTRA == 2                         # pixels and channel blocks per chunk, written by the entry point
EMITTERS = {POINTWISE_SYMBOL: emit_conv_pointwise}
