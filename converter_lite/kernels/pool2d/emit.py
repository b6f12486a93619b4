"""The pooling driver: MaxPool / AveragePool windows over planes of float32, and the global pools (a support
function each).

    void cl_pool2d_v1_f32(i8* desc, i64 nthreads)

``[planes, h, w] -> [planes, oh, ow]``: output ``(oy, ox)`` reads the taps ``(oy*sh - pt + i*dh, ox*sw - pl +
j*dw)``, ``i < kh``, ``j < kw``; a tap outside ``[0, h) x [0, w)`` (explicit padding, or the overhang of a
``ceil_mode`` window) is padding: ``-inf`` for MaxPool, ``+0.0`` for AveragePool, as in the reference
(ops/nn_pool.py, which pads the input with them).  Each output row is cut into chunks of VL columns, kept in one
register while the taps are visited in the reference's order (kernel rows, then kernel columns).  A unit of
work is ``ROWS`` output rows of a plane: each input row their windows cover is visited once and each of its
taps loaded once for all of them (an accumulator whose window does not hold the row takes the identity, -inf
or -0.0, instead).  A tap's columns are one masked load (the binder's column masks: the lanes whose column lies
inside the row; the others read the padding value); stride 2 loads 32 elements (two masks) and keeps the even
ones; other strides load lane by lane.  Kernel rows outside the input are skipped:

* MaxPool (``mode`` 0): the accumulator starts at the first tap (``-inf`` when it is padding) and takes a tap
  only when it is strictly greater (``v > acc``), so a NaN first tap stays, later NaNs are skipped, and of equal
  values (+0.0 / -0.0) the first one stays: the reference's result, bit for bit (a padding row's ``-inf``
  never wins).
* AveragePool (``mode`` 1): the taps are added in that order to an accumulator that starts at ``rstart[oy]``:
  -0.0 (the identity) when every kernel row is inside the input, +0.0 otherwise (what the skipped padding rows'
  zeros would change: only the sign of a zero sum), then divided by ``rcount[oy] * ccount[ox]`` (the
  reference's counts per axis, with or without the pads, tabulated by the binder).

The units of all planes are cut into about ``CHUNKS_PER_THREAD`` pool chunks per thread (at least
``MIN_CHUNK_WORK`` taps each).

Record (i64 fields, ``POOL_FIELDS``): ``planes h w oh ow kh kw sh sw dh dw pt pl mode``, addresses ``x y``,
``masks`` (i32 ``[ceil(ow / VL), kw, 2]``: per chunk of VL outputs and kernel column, the lanes inside the row
as bits; stride 2: of the 32 elements loaded, low and high half), ``rowtaps`` (i32 ``[(kh - 1) * dh + 1]``: 1
at the offsets of kernel rows from a window's first row), and for AveragePool ``rcount`` (f32 ``[oh]``),
``ccount`` (f32 ``[ow]`` padded to a multiple of VL), ``rstart`` (f32 ``[oh]``); then one word the entry point
writes (units per chunk).

    void cl_global_pool_v1_f32(i8* desc, i64 nthreads)

``[planes, size] -> [planes]``:

* GlobalAveragePool (``mode`` 1): numpy's ``mean`` exactly: ``0.0 + pairwise_sum(plane)`` (numpy's pairwise
  summation: below 8 elements a plain sum, up to 128 eight accumulators (one 8-lane vector) added pairwise
  then the rest, above that the two halves, split at a multiple of 8, summed recursively), divided by ``size``
  in double precision and rounded to float32.
* GlobalMaxPool (``mode`` 0): the maximum, NaN when the plane holds a NaN (numpy's ``max``; the NaN is the
  default quiet NaN, and of +0.0 and -0.0 as the maximum the first one found, where numpy's SIMD loop may
  return the other).

Record (``GLOBAL_FIELDS``): ``planes size mode``, addresses ``x y``; then the planes per chunk.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import driver_entry
from ...codegen.loops import for_range
from ...codegen.threadpool import BODY_TYPE, declare_pool
from ...codegen.types import BYTE_PTR_PTR, F32, F64, I32, I64
from ...codegen.vector import FP, I64P, MASK, VEC, VECP, VL, c64, cdiv, smin, splat, vector_intrinsics
from .abi import EXTRA, GLOBAL_FIELDS, GLOBAL_SYMBOL, LANES, MODE_AVG, MODE_MAX, POOL_FIELDS, POOL_SYMBOL

CHUNKS_PER_THREAD = 4
ROWS = 2                          # output rows a unit of the window pools computes (their taps loaded once)
MIN_CHUNK_WORK = 1 << 15          # taps (elements read) per pool chunk at least: smaller jobs run on fewer chunks
_P = {name: i for i, name in enumerate(POOL_FIELDS)}
_G = {name: i for i, name in enumerate(GLOBAL_FIELDS)}
IVEC = ir.VectorType(I32, VL)
V8 = ir.VectorType(F32, 8)
NEG_INF = float("-inf")
IOTA = ir.Constant(IVEC, list(range(VL)))
EVENS = ir.Constant(ir.VectorType(I32, VL), [2 * i for i in range(VL)])
PW_BLOCK = 128                     # numpy's PW_BLOCKSIZE


def _c32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _splat_i32(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    v = b.trunc(v, I32) if v.type == I64 else v
    one = b.insert_element(ir.Constant(IVEC, None), v, _c32(0))
    return b.shuffle_vector(one, ir.Constant(IVEC, None), ir.Constant(IVEC, [0] * VL))


def _fields(b: ir.IRBuilder, desc: ir.Value, index: dict) -> dict:
    d = b.bitcast(desc, I64P)
    return {name: b.load(b.gep(d, [c64(i)]), name=name) for name, i in index.items()}


def _chunk_range(fn: ir.Function, b: ir.IRBuilder, units: ir.Value, per: ir.Value):
    u0 = b.mul(fn.args[1], per)
    return u0, smin(b, b.add(u0, per), units)


# -- MaxPool / AveragePool ------------------------------------------------------------------------------------
def _mask(b: ir.IRBuilder, masks: ir.Value, at: ir.Value) -> ir.Value:
    """The lane mask stored as bits in the i32 word ``masks[at]``."""
    return b.bitcast(b.trunc(b.load(b.gep(masks, [at])), ir.IntType(VL)), MASK)


def _tap(b: ir.IRBuilder, mload, kind: int, xr, ox0, off, sw, masks, at, pad: ir.Constant):
    """The tap at column offset ``off`` (``j*dw - pl``) of the VL outputs ``ox0 + lane`` in the row at ``xr``:
    a lane whose column lies outside the row reads ``pad``.  ``masks[at]``, ``masks[at + 1]``: the binder's
    column masks of the tap (stride 2: of the 32 elements loaded)."""
    if kind == 1:
        ptr = b.bitcast(b.gep(xr, [b.add(ox0, off)]), VECP)
        return b.call(mload, [ptr, _c32(4), _mask(b, masks, at), pad])
    if kind == 2:
        first = b.add(b.shl(ox0, c64(1)), off)
        lo = b.call(mload, [b.bitcast(b.gep(xr, [first]), VECP), _c32(4), _mask(b, masks, at), pad])
        hi = b.call(mload, [b.bitcast(b.gep(xr, [b.add(first, c64(VL))]), VECP), _c32(4),
                            _mask(b, masks, b.add(at, c64(1))), pad])
        return b.shuffle_vector(lo, hi, EVENS)
    # any other stride: lane by lane, the columns outside the row reading column 0, then replaced by the pad
    m = _mask(b, masks, at)
    cols = b.add(b.mul(b.add(_splat_i32(b, ox0), IOTA), _splat_i32(b, sw)), _splat_i32(b, off))
    safe = b.select(m, cols, ir.Constant(IVEC, [0] * VL))
    v = ir.Constant(VEC, None)
    for lane in range(VL):
        c = b.sext(b.extract_element(safe, _c32(lane)), I64)
        v = b.insert_element(v, b.load(b.gep(xr, [c])), _c32(lane))
    return b.select(m, v, pad)


def _emit_rows(b: ir.IRBuilder, mload, mstore, f: dict, mode: int, kind: int, u0, u1, slots):
    """Units ``[u0, u1)`` of one mode and column-stride kind (1, 2, 0: any other).  A unit is ROWS output rows
    of one plane (the last ones of a plane repeat its last row: the same values stored twice); each chunk of VL
    columns keeps one accumulator per row (``slots``, promoted to registers by LLVM) and visits the input rows
    their windows cover once, each tap loaded once for all of them: an accumulator whose window does not hold
    the row takes the identity instead (-inf, -0.0), so every accumulator still sees its taps in the
    reference's order."""
    x, y = b.inttoptr(f["x"], FP), b.inttoptr(f["y"], FP)
    masks, rowtaps = b.inttoptr(f["masks"], I32.as_pointer()), b.inttoptr(f["rowtaps"], I32.as_pointer())
    oh, ow, h, w, kw, sw, dh = f["oh"], f["ow"], f["h"], f["w"], f["kw"], f["sw"], f["dh"]
    plane = b.mul(h, w)
    neg_pl = b.neg(f["pl"])
    pad = ir.Constant(VEC, [NEG_INF if mode == MODE_MAX else 0.0] * VL)
    ident = ir.Constant(VEC, [NEG_INF if mode == MODE_MAX else -0.0] * VL)
    span = b.mul(b.sub(f["kh"], c64(1)), dh)                 # the last kernel row's offset
    groups = cdiv(b, oh, c64(ROWS))
    tap_words = b.mul(kw, c64(2))
    with for_range(b, u0, u1, "u") as u:
        p, q = b.sdiv(u, groups), b.srem(u, groups)
        xplane = b.gep(x, [b.mul(p, plane)])
        last = b.sub(oh, c64(1))
        oys = [smin(b, b.add(b.mul(q, c64(ROWS)), c64(k)), last) for k in range(ROWS)]
        r0s = [b.sub(b.mul(oy, f["sh"]), f["pt"]) for oy in oys]
        r_lo = r0s[0]
        r_lo = b.select(b.icmp_signed("<", r_lo, c64(0)), c64(0), r_lo)
        r_hi = smin(b, b.add(r0s[-1], span), b.sub(h, c64(1)))
        with for_range(b, 0, cdiv(b, ow, c64(VL)), "c") as c:
            ox0 = b.mul(c, c64(VL))
            m0 = b.mul(c, tap_words)
            for slot, oy, r0 in zip(slots, oys, r0s):
                if mode == MODE_MAX:             # the first tap as it is (NaN included), -inf in the padding
                    b.store(pad, slot)
                    with b.if_then(b.icmp_unsigned("<", r0, h)):
                        b.store(_tap(b, mload, kind, b.gep(xplane, [b.mul(r0, w)]), ox0, neg_pl, sw, masks, m0,
                                     pad), slot)
                else:                            # -0.0, or +0.0 where rows of the window lie in the padding
                    b.store(splat(b, b.load(b.gep(b.inttoptr(f["rstart"], FP), [oy]))), slot)
            with for_range(b, r_lo, b.add(r_hi, c64(1)), "r") as r:
                ins = []
                for r0 in r0s:                   # kernel row (r - r0) / dh of the window, if any
                    d = b.sub(r, r0)
                    inside = b.icmp_unsigned("<=", d, span)
                    tap_row = b.load(b.gep(rowtaps, [b.select(inside, d, c64(0))]))
                    ins.append(b.and_(inside, b.icmp_signed("!=", tap_row, _c32(0))))
                any_in = ins[0]
                for ok in ins[1:]:
                    any_in = b.or_(any_in, ok)
                with b.if_then(any_in):
                    xr = b.gep(xplane, [b.mul(r, w)])
                    with for_range(b, 0, kw, "j") as j:
                        v = _tap(b, mload, kind, xr, ox0, b.add(b.mul(j, f["dw"]), neg_pl), sw, masks,
                                 b.add(m0, b.mul(j, c64(2))), pad)
                        for slot, ok in zip(slots, ins):
                            vk = b.select(ok, v, ident)
                            a = b.load(slot)
                            a = b.select(b.fcmp_ordered(">", vk, a), vk, a) if mode == MODE_MAX else b.fadd(a, vk)
                            b.store(a, slot)
            inlane = b.icmp_signed("<", b.add(_splat_i32(b, ox0), IOTA), _splat_i32(b, ow))
            for slot, oy in zip(slots, oys):
                a = b.load(slot)
                if mode == MODE_AVG:
                    rc = b.load(b.gep(b.inttoptr(f["rcount"], FP), [oy]))
                    cc = b.load(b.bitcast(b.gep(b.inttoptr(f["ccount"], FP), [ox0]), VECP), align=4)
                    a = b.fdiv(a, b.fmul(splat(b, rc), cc))
                yrow = b.gep(y, [b.add(b.mul(b.add(b.mul(p, oh), oy), ow), ox0)])
                b.call(mstore, [a, b.bitcast(yrow, VECP), _c32(4), inlane])


def _emit_pool_body(module: ir.Module) -> ir.Function:
    fn = ir.Function(module, BODY_TYPE, f"{POOL_SYMBOL}.rows")
    fn.linkage = "internal"
    _, mload, mstore = vector_intrinsics(module)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slots = [b.alloca(VEC, name=f"acc{k}") for k in range(ROWS)]
    f = _fields(b, fn.args[0], _P)
    per = b.load(b.gep(b.bitcast(fn.args[0], I64P), [c64(len(POOL_FIELDS))]))
    u0, u1 = _chunk_range(fn, b, _units(b, f["planes"], f["oh"]), per)
    sw = f["sw"]
    kind = b.select(b.icmp_signed("==", sw, c64(1)), c64(1), b.select(b.icmp_signed("==", sw, c64(2)), c64(2), c64(0)))
    key = b.add(b.mul(f["mode"], c64(3)), kind)
    done = fn.append_basic_block("done")
    switch = b.switch(key, done)
    for mode in (MODE_MAX, MODE_AVG):
        for k in (1, 2, 0):
            blk = fn.append_basic_block(f"m{mode}s{k}")
            switch.add_case(c64(mode * 3 + k), blk)
            b.position_at_end(blk)
            _emit_rows(b, mload, mstore, f, mode, k, u0, u1, slots)
            b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _units(b: ir.IRBuilder, planes, oh):
    """Units of the window pools: ROWS output rows of one plane each."""
    return b.mul(planes, cdiv(b, oh, c64(ROWS)))


def _entry(module: ir.Module, symbol: str, body: ir.Function, n_fields: int, units_of, work_of) -> ir.Function:
    """The exported entry: units per chunk (about CHUNKS_PER_THREAD chunks a thread, at least MIN_CHUNK_WORK
    taps a chunk) written after the record, then the pool."""
    pool = declare_pool(module)
    fn, b, desc, nt = driver_entry(module, symbol)
    d = b.bitcast(desc, I64P)
    units, work = units_of(b, d), work_of(b, d)
    per = cdiv(b, units, b.mul(nt, c64(CHUNKS_PER_THREAD)))
    least = cdiv(b, c64(MIN_CHUNK_WORK), b.select(b.icmp_signed("<", work, c64(1)), c64(1), work))
    per = b.select(b.icmp_signed("<", per, least), least, per)
    per = b.select(b.icmp_signed("<", per, c64(1)), c64(1), per)
    b.store(per, b.gep(d, [c64(n_fields)]))
    with b.if_then(b.icmp_signed(">", units, c64(0))):
        b.call(pool, [body, b.bitcast(desc, BYTE_PTR_PTR), cdiv(b, units, per), nt])
    b.ret_void()
    return fn


def _word(b, d, index):
    return b.load(b.gep(d, [c64(index)]))


def emit_pool2d(module: ir.Module) -> ir.Function:
    """Defines ``cl_pool2d_v1_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    body = _emit_pool_body(module)
    return _entry(module, POOL_SYMBOL, body, len(POOL_FIELDS),
                  lambda b, d: _units(b, _word(b, d, _P["planes"]), _word(b, d, _P["oh"])),
                  lambda b, d: b.mul(c64(ROWS), b.mul(_word(b, d, _P["ow"]),
                                                      b.mul(_word(b, d, _P["kh"]), _word(b, d, _P["kw"])))))


# -- GlobalAveragePool / GlobalMaxPool ------------------------------------------------------------------------
def _emit_pairwise(module: ir.Module) -> ir.Function:
    """``float pw(float* a, i64 n)``: numpy's pairwise summation (``@TYPE@_pairwise_sum``, unit stride)."""
    fn = ir.Function(module, ir.FunctionType(F32, [FP, I64]), f"{GLOBAL_SYMBOL}.pairwise")
    fn.linkage = "internal"
    a, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    res = b.alloca(F32, name="res")
    r8 = b.alloca(V8, name="r8")
    small, mid, big = (fn.append_basic_block(s) for s in ("small", "mid", "big"))
    not_small = fn.append_basic_block("not_small")
    b.cbranch(b.icmp_signed("<", n, c64(8)), small, not_small)
    b.position_at_end(not_small)
    b.cbranch(b.icmp_signed("<=", n, c64(PW_BLOCK)), mid, big)

    b.position_at_end(small)                       # res = -0.0; res += a[i]
    b.store(ir.Constant(F32, -0.0), res)
    with for_range(b, 0, n, "s") as i:
        b.store(b.fadd(b.load(res), b.load(b.gep(a, [i]))), res)
    b.ret(b.load(res))

    b.position_at_end(mid)                         # eight accumulators, then the rest
    v8p = V8.as_pointer()
    b.store(b.load(b.bitcast(a, v8p), align=4), r8)
    blocks = b.sdiv(n, c64(8))
    with for_range(b, 1, blocks, "k") as k:
        v = b.load(b.bitcast(b.gep(a, [b.mul(k, c64(8))]), v8p), align=4)
        b.store(b.fadd(b.load(r8), v), r8)
    r = b.load(r8)
    e = [b.extract_element(r, _c32(i)) for i in range(8)]
    total = b.fadd(b.fadd(b.fadd(e[0], e[1]), b.fadd(e[2], e[3])), b.fadd(b.fadd(e[4], e[5]), b.fadd(e[6], e[7])))
    b.store(total, res)
    with for_range(b, b.mul(blocks, c64(8)), n, "t") as i:
        b.store(b.fadd(b.load(res), b.load(b.gep(a, [i]))), res)
    b.ret(b.load(res))

    b.position_at_end(big)                         # the halves, split at a multiple of 8
    n2 = b.sdiv(n, c64(2))
    n2 = b.sub(n2, b.srem(n2, c64(8)))
    lo = b.call(fn, [a, n2])
    hi = b.call(fn, [b.gep(a, [n2]), b.sub(n, n2)])
    b.ret(b.fadd(lo, hi))
    return fn


def _emit_plane_max(b: ir.IRBuilder, mload, xp: ir.Value, size: ir.Value, acc_slot, nan_slot) -> ir.Value:
    """The maximum of ``size`` floats at ``xp``; NaN when one of them is."""
    b.store(ir.Constant(VEC, [NEG_INF] * VL), acc_slot)
    b.store(ir.Constant(MASK, [0] * VL), nan_slot)

    def take(v, m):
        a = b.load(acc_slot)
        gt = b.fcmp_ordered(">", v, a)
        nan = b.fcmp_unordered("uno", v, v)
        if m is not None:
            gt, nan = b.and_(gt, m), b.and_(nan, m)
        b.store(b.select(gt, v, a), acc_slot)
        b.store(b.or_(b.load(nan_slot), nan), nan_slot)

    whole = b.sdiv(size, c64(VL))
    with for_range(b, 0, whole, "v") as k:
        take(b.load(b.bitcast(b.gep(xp, [b.mul(k, c64(VL))]), VECP), align=4), None)
    rest = b.sub(size, b.mul(whole, c64(VL)))
    with b.if_then(b.icmp_signed(">", rest, c64(0))):
        m = b.icmp_signed("<", IOTA, _splat_i32(b, rest))
        v = b.call(mload, [b.bitcast(b.gep(xp, [b.mul(whole, c64(VL))]), VECP), _c32(4), m,
                           ir.Constant(VEC, [NEG_INF] * VL)])
        take(v, m)
    a, nans = b.load(acc_slot), b.load(nan_slot)
    best = b.extract_element(a, _c32(0))
    any_nan = b.extract_element(nans, _c32(0))
    for lane in range(1, VL):
        e = b.extract_element(a, _c32(lane))
        best = b.select(b.fcmp_ordered(">", e, best), e, best)
        any_nan = b.or_(any_nan, b.extract_element(nans, _c32(lane)))
    return b.select(any_nan, ir.Constant(F32, float("nan")), best)


def _emit_global_body(module: ir.Module) -> ir.Function:
    fn = ir.Function(module, BODY_TYPE, f"{GLOBAL_SYMBOL}.planes")
    fn.linkage = "internal"
    _, mload, _ = vector_intrinsics(module)
    pairwise = _emit_pairwise(module)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    acc_slot, nan_slot = b.alloca(VEC, name="acc"), b.alloca(MASK, name="nan")
    f = _fields(b, fn.args[0], _G)
    per = b.load(b.gep(b.bitcast(fn.args[0], I64P), [c64(len(GLOBAL_FIELDS))]))
    u0, u1 = _chunk_range(fn, b, f["planes"], per)
    x, y, size = b.inttoptr(f["x"], FP), b.inttoptr(f["y"], FP), f["size"]
    is_avg = b.icmp_signed("==", f["mode"], c64(MODE_AVG))
    count = b.sitofp(size, F64)
    with b.if_else(is_avg) as (avg, mx):
        with avg:
            with for_range(b, u0, u1, "pa") as p:
                s = b.fadd(ir.Constant(F32, 0.0), b.call(pairwise, [b.gep(x, [b.mul(p, size)]), size]))
                b.store(b.fptrunc(b.fdiv(b.fpext(s, F64), count), F32), b.gep(y, [p]))
        with mx:
            with for_range(b, u0, u1, "pm") as p:
                b.store(_emit_plane_max(b, mload, b.gep(x, [b.mul(p, size)]), size, acc_slot, nan_slot),
                        b.gep(y, [p]))
    b.ret_void()
    return fn


def emit_global_pool(module: ir.Module) -> ir.Function:
    """Defines ``cl_global_pool_v1_f32(i8* desc, i64 nthreads)`` (see the module doc) in ``module``."""
    body = _emit_global_body(module)
    return _entry(module, GLOBAL_SYMBOL, body, len(GLOBAL_FIELDS),
                  lambda b, d: _word(b, d, _G["planes"]), lambda b, d: _word(b, d, _G["size"]))


assert EXTRA == 1 and LANES == VL         # units per chunk, written by the entry point; the binder's lanes
EMITTERS = {POOL_SYMBOL: emit_pool2d, GLOBAL_SYMBOL: emit_global_pool}
