"""The convolution tile driver: 2-D convolution as im2col tiles + one CBLAS GEMM per tile (a support function).

    void cl_conv2d_tiles_v<LAYOUT>_f32(i8* desc, i64 nthreads)       (and ..._f64: double, dgemm)

The symbols carry the record layout's version (``LAYOUT``), so a runtime never drives code that reads another
layout (a model converted before a change simply runs the numpy path).

``desc`` is a record of ``len(FIELDS)`` i64 fields (below) followed by ``nslots`` i64 slot flags, filled by the
runtime at bind time (bind.py), so a bound Conv step is one foreign call.  The output
``Y[N, M, OH, OW]`` is cut into *tiles*: for batch ``n``, group ``g``, a run of ``tile_p`` output pixels
(flat ``oh * OW + ow`` order, so a tile may start and end inside a row) and a block of ``tile_m`` output
channels of the group.  Tiles are the chunks of ``cl_pool_parallel_for`` (pool.py); per tile:

1. **im2col** of the tile's pixels into a scratch slot: ``cols[K, P]``, ``K = C/G * kh * kw`` rows ordered
   (channel, kernel row, kernel column) like the weights, ``P`` the tile's pixel count, rows ``row_stride(P)``
   apart.  Per channel, kernel row and output row (input row computed once), then per kernel column, the
   output columns are written VECTOR_BYTES at a time by masked vector loads (zero outside the input: the
   padding), contiguous for column stride 1, even lanes of a double-width load for stride 2, a scalar loop
   otherwise; a store may run past the segment into what is written next or the row's slack.  The slot is
   claimed with a compare-and-swap on its flag (``nslots`` slots of ``slot_bytes`` each at ``scratch``; the
   runtime gives one per thread, so a claim waits only if more workers than that run tiles at once) and
   released after the GEMM.  With ``direct`` (1x1 kernel, stride 1, no padding) the input itself is the column
   matrix (``ldb = OH*OW``) and no slot is used.
2. **GEMM** ``Y_tile[tile_m, P] = W[tile_m, K] @ cols[K, P]`` by numpy's own CBLAS ``sgemm``/``dgemm``
   (``gemm``, 64-bit integers when ``int64``), writing straight into ``Y`` (``ldc = OH*OW``).
3. **epilogue** while the tile is in cache: ``y += bias[m]`` (``bias`` != 0), ``y += residual[...]`` (an
   array shaped like ``Y``, when != 0), then ``y = min(max(y, lo), hi)`` when ``clamp`` (a Relu, Relu6/Clip;
   NaN stays NaN).

Chunk ``t`` is tile ``(n, g, pixel tile, channel tile)`` with the channel tile varying fastest.

**Shared mode** (``shared`` != 0; small images on several threads): per image ``(n, g)`` in turn (``cur``), the
threads first build the image's whole column matrix at ``scratch`` together (``n_cparts`` chunks of input
channels), then run its ``n_mtiles`` output-channel tiles (GEMM + epilogue) over all ``OH*OW`` pixels: two
pool calls per image, and the columns are built once however many channel tiles read them.

Fields (i64; addresses as integers):

====================  =======================================================================================
n c h w               input shape (NCHW, C-contiguous at ``x``)
m group kh kw         output channels, groups (C and M divisible by it), kernel size
sh sw dh dw pt pl     strides, dilations, top/left padding (the bottom/right padding follows from oh/ow)
oh ow                 output spatial size
x wt bias y residual  input, weights [M, C/G, kh, kw] (C-contiguous), bias [M] or 0, output, residual or 0
scratch slot_bytes    scratch slots (nslots of slot_bytes bytes each, >= K * row_stride(tile_p) elements)
tile_p tile_m         pixels and output channels per tile
n_ptiles n_mtiles     tiles per (n, g) along pixels / along the group's output channels
gemm int64            address of the CBLAS gemm, 1 when its integer arguments are 64-bit
direct clamp lo hi    see above (``lo``/``hi``: float64 bit patterns)
shared cur n_cparts   shared mode, its current image (written by the driver), channel chunks of its im2col
nslots                number of slot flags after the fields
====================  =======================================================================================
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.loops import for_range
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR, BYTE_PTR_PTR, F32, F64, I1, I8, I32, I64, VOID
from ..blas import NO_TRANS, ROW_MAJOR
from .abi import CONV_SYMBOLS, FIELDS, LAYOUT  # noqa: F401

_F = {name: i for i, name in enumerate(FIELDS)}
VECTOR_BYTES = 64                   # im2col vector width (masked loads; LLVM splits it where vectors are narrower)


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def smin(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _gemm_type(real: ir.Type, idx: ir.Type) -> ir.FunctionType:
    p = real.as_pointer()
    return ir.FunctionType(VOID, [I32, I32, I32, idx, idx, idx, real, p, idx, p, idx, real, p, idx])


class _Body:
    """Emits one chunk body (``kind``: "tile", or the shared mode's "cols" and "gemm") of one element type."""

    def __init__(self, module: ir.Module, real: ir.Type, symbol: str, kind: str):
        self.kind = kind
        self.module, self.real, self.es = module, real, 8 if real is F64 else 4
        self.fp = real.as_pointer()
        self.fn = fn = ir.Function(module, BODY_TYPE, f"{symbol}.{kind}")
        fn.linkage = "internal"
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.desc = self.b.bitcast(fn.args[0], I64.as_pointer())
        self.memset = module.declare_intrinsic("llvm.memset", [BYTE_PTR, I64])
        self.vl = VECTOR_BYTES // (8 if real is F64 else 4)
        self.vec, self.vec2 = ir.VectorType(real, self.vl), ir.VectorType(real, 2 * self.vl)
        self.vzero, self.vzero2 = ir.Constant(self.vec, None), ir.Constant(self.vec2, None)
        self.mload, self.mload2 = (self._masked_load(module, v) for v in (self.vec, self.vec2))
        pause = module.globals.get("llvm.x86.sse2.pause")
        self.pause = pause if pause is not None else ir.Function(module, ir.FunctionType(VOID, []),
                                                                 "llvm.x86.sse2.pause")

    @staticmethod
    def _masked_load(module: ir.Module, vec: ir.VectorType) -> ir.Function:
        tag = f"v{vec.count}{'f64' if vec.element is F64 else 'f32'}"
        name = f"llvm.masked.load.{tag}.p0{tag}"
        fn = module.globals.get(name)
        mask = ir.VectorType(I1, vec.count)
        return fn if fn is not None else ir.Function(module, ir.FunctionType(vec, [vec.as_pointer(), I32, mask, vec]),
                                                     name)

    def get(self, name: str) -> ir.Value:
        return self.b.load(self.b.gep(self.desc, [c64(_F[name])]), name=name)

    def ptr(self, name: str) -> ir.Value:
        return self.b.inttoptr(self.get(name), self.fp)

    def zero(self, dst, count) -> None:
        b = self.b
        with b.if_then(b.icmp_signed(">", count, c64(0))):
            b.call(self.memset, [b.bitcast(dst, BYTE_PTR), ir.Constant(I8, 0), b.mul(count, c64(self.es)),
                                 ir.Constant(I1, 0)])

    def emit(self) -> ir.Function:
        b = self.b
        f = {k: self.get(k) for k in FIELDS if k not in ("x", "wt", "bias", "y", "residual", "scratch")}
        chunk = self.fn.args[1]
        if self.kind == "tile":
            mt, rest = b.srem(chunk, f["n_mtiles"]), b.sdiv(chunk, f["n_mtiles"])
            pt, rest = b.srem(rest, f["n_ptiles"]), b.sdiv(rest, f["n_ptiles"])
        else:                                                # shared mode: image (n, g) = cur
            rest, mt, pt = f["cur"], chunk, c64(0)
        g, n = b.srem(rest, f["group"]), b.sdiv(rest, f["group"])
        cg, mg = b.sdiv(f["c"], f["group"]), b.sdiv(f["m"], f["group"])
        k = b.mul(cg, b.mul(f["kh"], f["kw"]))
        length, hw = b.mul(f["oh"], f["ow"]), b.mul(f["h"], f["w"])
        xbase = b.gep(self.ptr("x"), [b.mul(b.add(b.mul(n, f["c"]), b.mul(g, cg)), hw)])
        scratch = b.inttoptr(self.get("scratch"), BYTE_PTR)
        if self.kind == "cols":                              # channels [c0, c1) of the image's columns
            per = b.sdiv(b.add(cg, b.sub(f["n_cparts"], c64(1))), f["n_cparts"])
            c0 = b.mul(chunk, per)
            self.im2col(f, b.bitcast(scratch, self.fp), xbase, c0, smin(b, b.add(c0, per), cg), hw, c64(0), length,
                        self.row_stride(length))
            b.ret_void()
            return self.fn
        p0 = b.mul(pt, f["tile_p"])
        p1 = smin(b, b.add(p0, f["tile_p"]), length)
        np_ = b.sub(p1, p0)
        m0 = b.mul(mt, f["tile_m"])
        nm = b.sub(smin(b, b.add(m0, f["tile_m"]), mg), m0)
        mrow = b.add(b.mul(g, mg), m0)                                   # first output channel of the tile
        a = b.gep(self.ptr("wt"), [b.mul(mrow, k)])
        yoff = b.add(b.mul(b.add(b.mul(n, f["m"]), mrow), length), p0)
        cmat = b.gep(self.ptr("y"), [yoff])
        if self.kind == "gemm":                              # the columns of the whole image are at scratch
            self.gemm(f, nm, np_, k, a, b.bitcast(scratch, self.fp), self.row_stride(length), cmat, length)
            self.epilogue(f, cmat, nm, np_, length, mrow, yoff)
            b.ret_void()
            return self.fn
        bptr, ldb, slot = b.alloca(self.fp), b.alloca(I64), b.alloca(I64)
        with b.if_else(b.icmp_signed("!=", f["direct"], c64(0))) as (direct, cols_):
            with direct:
                b.store(b.gep(xbase, [p0]), bptr)
                b.store(length, ldb)
                b.store(c64(-1), slot)
            with cols_:
                s = self.claim(f["nslots"])
                cols = b.bitcast(b.gep(scratch, [b.mul(s, f["slot_bytes"])]), self.fp)
                rs = self.row_stride(np_)
                self.im2col(f, cols, xbase, c64(0), cg, hw, p0, p1, rs)
                b.store(cols, bptr)
                b.store(rs, ldb)
                b.store(s, slot)
        self.gemm(f, nm, np_, k, a, b.load(bptr), b.load(ldb), cmat, length)
        s = b.load(slot)
        with b.if_then(b.icmp_signed(">=", s, c64(0))):
            b.store_atomic(c64(0), b.gep(self.desc, [b.add(s, c64(len(FIELDS)))]), "release", 8)
        self.epilogue(f, cmat, nm, np_, length, mrow, yoff)
        b.ret_void()
        return self.fn

    def claim(self, nslots) -> ir.Value:
        """Index of a free scratch slot, taken (tried from slot 0 on, pausing between rounds)."""
        b = self.b
        pre = b.block
        head, retry, done = (b.append_basic_block(x) for x in ("claim.head", "claim.retry", "claim.done"))
        b.branch(head)
        b.position_at_end(head)
        s = b.phi(I64, name="slot")
        s.add_incoming(c64(0), pre)
        flag = b.gep(self.desc, [b.add(s, c64(len(FIELDS)))])
        ok = b.extract_value(b.cmpxchg(flag, c64(0), c64(1), "acquire", "monotonic"), 1)
        b.cbranch(ok, done, retry)
        b.position_at_end(retry)
        b.call(self.pause, [])
        nxt = b.add(s, c64(1))
        s.add_incoming(b.select(b.icmp_signed("<", nxt, nslots), nxt, c64(0)), retry)
        b.branch(head)
        b.position_at_end(done)
        return s

    def row_stride(self, np_: ir.Value) -> ir.Value:
        """Elements between rows of ``cols`` for ``np_`` pixels: at least ``np_ + vl - 1`` (the last vector store
        of a row may run past it), a multiple of 16."""
        b = self.b
        return b.mul(b.sdiv(b.add(np_, c64(self.vl - 1 + 15)), c64(16)), c64(16))

    def im2col(self, f, cols, xbase, c0, c1, hw, p0, p1, np_) -> None:
        """Rows of channels [c0, c1) of ``cols[K, np_]`` (``np_``: the row stride) for output pixels [p0, p1).
        Loops: channel, kernel row, output row (the input row and the row's part of the tile computed once),
        kernel column; each kernel column's in-bounds output columns [lo, hi) are computed once per call."""
        b = self.b
        ow, sw, kw = f["ow"], f["sw"], f["kw"]
        los, his = self.lo_hi(f)
        oh_first, oh_last = b.sdiv(p0, ow), b.sdiv(b.sub(p1, c64(1)), ow)
        with for_range(b, c0, c1, "c") as c:
            xc = b.gep(xbase, [b.mul(c, hw)])
            with for_range(b, 0, f["kh"], "i") as i:
                ihoff = b.sub(b.mul(i, f["dh"]), f["pt"])
                rows = b.gep(cols, [b.mul(b.mul(b.add(b.mul(c, f["kh"]), i), kw), np_)])   # tap (c, i, 0)
                with for_range(b, oh_first, b.add(oh_last, c64(1)), "r") as r:
                    rbase = b.mul(r, ow)
                    s0, s1 = _max(b, p0, rbase), smin(b, p1, b.add(rbase, ow))
                    ow0, ow1 = b.sub(s0, rbase), b.sub(s1, rbase)
                    dst0 = b.gep(rows, [b.sub(s0, p0)])
                    ih = b.add(b.mul(r, f["sh"]), ihoff)
                    nblk = b.sdiv(b.add(b.sub(ow1, ow0), c64(self.vl - 1)), c64(self.vl))
                    with b.if_else(b.icmp_unsigned("<", ih, f["h"])) as (inside, outside):
                        with inside:
                            src0 = b.gep(xc, [b.sub(b.mul(ih, f["w"]), f["pl"])])
                            with for_range(b, 0, kw, "j") as j:
                                src = b.gep(src0, [b.mul(j, f["dw"])])
                                lo, hi = b.load(b.gep(los, [j])), b.load(b.gep(his, [j]))
                                self.segment(b.gep(dst0, [b.mul(j, np_)]), src, ow0, ow1, nblk, lo, hi, sw)
                        with outside, for_range(b, 0, kw, "j") as j:
                            dst = b.gep(dst0, [b.mul(j, np_)])
                            with for_range(b, 0, nblk, "z") as z:
                                self.vstore(self.vzero, dst, b.mul(z, c64(self.vl)))

    def lo_hi(self, f):
        """Per kernel column j: the output columns [lo, hi) whose input column ``q*sw + j*dw - pl`` is in
        [0, W), in two stack arrays."""
        b, sw = self.b, f["sw"]
        los, his = b.alloca(I64, f["kw"]), b.alloca(I64, f["kw"])
        with for_range(b, 0, f["kw"], "jl") as j:
            off = b.sub(b.mul(j, f["dw"]), f["pl"])                      # input column of output column 0
            neg = b.icmp_signed("<", off, c64(0))
            b.store(b.select(neg, b.sdiv(b.add(b.sub(c64(0), off), b.sub(sw, c64(1))), sw), c64(0)), b.gep(los, [j]))
            t = b.sub(b.sub(f["w"], c64(1)), off)
            b.store(b.select(b.icmp_signed(">=", t, c64(0)), b.add(b.sdiv(t, sw), c64(1)), c64(0)), b.gep(his, [j]))
        return los, his

    def vstore(self, v, base, at) -> None:
        b = self.b
        b.store(v, b.bitcast(b.gep(base, [at]), self.vec.as_pointer())).align = self.es

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        b = self.b
        ty = ir.VectorType(I32, lanes)
        one = b.insert_element(ir.Constant(ty, None), b.trunc(v, I32), ir.Constant(I32, 0))
        return b.shuffle_vector(one, ir.Constant(ty, None), ir.Constant(ty, [0] * lanes))

    def segment(self, dst, src, ow0, ow1, nblk, lo, hi, sw) -> None:
        """``dst[q - ow0] = src[q * sw]`` if ``lo <= q < hi`` else 0, for q in [ow0, ow1): whole vectors of
        ``vl`` lanes with masked loads (a store may run up to ``vl - 1`` elements past the segment: into the
        part of ``cols`` written next, or the slot's slack)."""
        b, vl = self.b, self.vl
        with b.if_else(b.icmp_signed("==", sw, c64(1))) as (unit, other):
            with unit:
                lov, hiv = self.splat(lo, vl), self.splat(hi, vl)
                iota = ir.Constant(ir.VectorType(I32, vl), list(range(vl)))
                with for_range(b, 0, nblk, "v") as v:
                    q0 = b.add(ow0, b.mul(v, c64(vl)))
                    qv = b.add(self.splat(q0, vl), iota)
                    mask = b.and_(b.icmp_signed(">=", qv, lov), b.icmp_signed("<", qv, hiv))
                    ptr = b.bitcast(b.gep(src, [q0]), self.vec.as_pointer())
                    val = b.call(self.mload, [ptr, ir.Constant(I32, self.es), mask, self.vzero])
                    self.vstore(val, dst, b.mul(v, c64(vl)))
            with other, b.if_else(b.icmp_signed("==", sw, c64(2))) as (two, gen):
                with two:
                    lov = self.splat(b.mul(lo, c64(2)), 2 * vl)
                    hiv = self.splat(b.sub(b.mul(hi, c64(2)), c64(1)), 2 * vl)
                    iota = ir.Constant(ir.VectorType(I32, 2 * vl), list(range(2 * vl)))
                    evens = ir.Constant(ir.VectorType(I32, vl), list(range(0, 2 * vl, 2)))
                    with for_range(b, 0, nblk, "v") as v:
                        q0 = b.add(ow0, b.mul(v, c64(vl)))
                        ev = b.add(self.splat(b.mul(q0, c64(2)), 2 * vl), iota)
                        mask = b.and_(b.icmp_signed(">=", ev, lov), b.icmp_signed("<", ev, hiv))
                        ptr = b.bitcast(b.gep(src, [b.mul(q0, c64(2))]), self.vec2.as_pointer())
                        wide = b.call(self.mload2, [ptr, ir.Constant(I32, self.es), mask, self.vzero2])
                        self.vstore(b.shuffle_vector(wide, wide, evens), dst, b.mul(v, c64(vl)))
                with gen:
                    lo_ = smin(b, _max(b, lo, ow0), ow1)
                    hi_ = smin(b, _max(b, hi, lo_), ow1)
                    self.zero(dst, b.sub(lo_, ow0))
                    base = b.gep(dst, [b.sub(lo_, ow0)])
                    with for_range(b, lo_, hi_, "q") as q:
                        b.store(b.load(b.gep(src, [b.mul(q, sw)])), b.gep(base, [b.sub(q, lo_)]))
                    self.zero(b.gep(dst, [b.sub(hi_, ow0)]), b.sub(ow1, hi_))

    def gemm(self, f, m, n, k, a, bmat, ldb, cmat, ldc) -> None:
        b, real = self.b, self.real
        flags = [ir.Constant(I32, ROW_MAJOR), ir.Constant(I32, NO_TRANS), ir.Constant(I32, NO_TRANS)]
        one, zero = ir.Constant(real, 1.0), ir.Constant(real, 0.0)
        with b.if_else(b.icmp_signed("!=", f["int64"], c64(0))) as (w64, w32):
            for blk, idx in ((w64, I64), (w32, I32)):
                with blk:
                    cv = (lambda v: v) if idx is I64 else (lambda v: b.trunc(v, I32))
                    callee = b.inttoptr(f["gemm"], _gemm_type(real, idx).as_pointer())
                    b.call(callee, flags + [cv(m), cv(n), cv(k), one, a, cv(k), bmat, cv(ldb), zero, cmat,
                                            cv(ldc)])

    def epilogue(self, f, cmat, nm, np_, length, mrow, yoff) -> None:
        b, real = self.b, self.real
        bias, res = self.get("bias"), self.get("residual")
        has_bias, has_res = b.icmp_unsigned("!=", bias, c64(0)), b.icmp_unsigned("!=", res, c64(0))
        relu = b.icmp_signed("!=", f["clamp"], c64(0))
        with b.if_then(b.or_(b.or_(has_bias, has_res), relu)):
            bp, rp = b.inttoptr(bias, self.fp), b.gep(b.inttoptr(res, self.fp), [yoff])
            lo, hi = (b.bitcast(f[name], F64) for name in ("lo", "hi"))
            if real is not F64:
                lo, hi = b.fptrunc(lo, real), b.fptrunc(hi, real)
            with for_range(b, 0, nm, "e") as r:
                row = b.gep(cmat, [b.mul(r, length)])
                rrow = b.gep(rp, [b.mul(r, length)])
                bval = self._bias_value(has_bias, bp, b.add(mrow, r))
                with b.if_else(has_res) as (with_res, no_res):
                    for blk, add_res in ((with_res, True), (no_res, False)):
                        with blk, b.if_else(relu) as (rl, lin):
                            for blk2, do_relu in ((rl, True), (lin, False)):
                                with blk2, for_range(b, 0, np_, "q") as q:
                                    p = b.gep(row, [q])
                                    v = b.fadd(b.load(p), bval)
                                    if add_res:
                                        v = b.fadd(v, b.load(b.gep(rrow, [q])))
                                    if do_relu:
                                        v = b.select(b.fcmp_ordered("<", v, lo), lo, v)
                                        v = b.select(b.fcmp_ordered(">", v, hi), hi, v)
                                    b.store(v, p)

    def _bias_value(self, has_bias, bp, m) -> ir.Value:
        """``bias[m]`` when there is a bias, else 0 (the load only happens when there is one)."""
        b = self.b
        pre = b.block
        load_bb, join = b.append_basic_block("bias.load"), b.append_basic_block("bias.join")
        b.cbranch(has_bias, load_bb, join)
        b.position_at_end(load_bb)
        v = b.load(b.gep(bp, [m]))
        b.branch(join)
        b.position_at_end(join)
        phi = b.phi(self.real)
        phi.add_incoming(ir.Constant(self.real, 0.0), pre)
        phi.add_incoming(v, load_bb)
        return phi


def _emit(module: ir.Module, real: ir.Type, symbol: str) -> ir.Function:
    tile, cols, gemm = (_Body(module, real, symbol, kind).emit() for kind in ("tile", "cols", "gemm"))
    pool = declare_pool(module)
    fn = ir.Function(module, ir.FunctionType(VOID, [BYTE_PTR, I64]), symbol)
    desc, nthreads = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    d = b.bitcast(desc, I64.as_pointer())
    get = lambda name: b.load(b.gep(d, [c64(_F[name])]))
    bufs = b.bitcast(desc, BYTE_PTR_PTR)
    images = b.mul(get("n"), get("group"))
    with b.if_else(b.icmp_signed("!=", get("shared"), c64(0))) as (shared, tiles):
        with shared, for_range(b, 0, images, "img") as cur:
            b.store(cur, b.gep(d, [c64(_F["cur"])]))
            b.call(pool, [cols, bufs, get("n_cparts"), nthreads])
            b.call(pool, [gemm, bufs, get("n_mtiles"), nthreads])
        with tiles:
            b.call(pool, [tile, bufs, b.mul(images, b.mul(get("n_ptiles"), get("n_mtiles"))), nthreads])
    b.ret_void()
    return fn


def emit_conv_f32(module: ir.Module) -> ir.Function:
    """Defines ``cl_conv2d_tiles_f32`` (see the module doc) in ``module``."""
    return _emit(module, F32, CONV_SYMBOLS["float32"])


def emit_conv_f64(module: ir.Module) -> ir.Function:
    """Defines ``cl_conv2d_tiles_f64`` (see the module doc) in ``module``."""
    return _emit(module, F64, CONV_SYMBOLS["float64"])


EMITTERS = {CONV_SYMBOLS["float32"]: emit_conv_f32, CONV_SYMBOLS["float64"]: emit_conv_f64}
