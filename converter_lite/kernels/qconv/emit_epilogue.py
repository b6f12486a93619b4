"""The int8 convolution's epilogue helpers, shared by its two bodies (emit.py's pixel lanes and emit_channels.py's
channel lanes): the epilogue's flags, the output's quantization round trip (DequantizeLinear(QuantizeLinear(v))),
its quantization to uint8 bytes (``FLAG_U8``: the uint8 hand-off to the next int8 convolution) and the SiLU tail
(a QDQ model's Sigmoid and Mul, each with its round trip) as one non-inlined function, or (``FLAG_LUT``) its 256
results for the quantized values the output's round trip can give, tabulated once a call and looked up.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import internal_function
from ...codegen.loops import for_range
from ...codegen.types import F32, I32, I64
from ...codegen.vector import MASK, VEC, VECP, VL, c64, splat, splat_i32

FLAG_BIAS, FLAG_RES, FLAG_CLAMP, FLAG_FQ, FLAG_SILU, FLAG_SFQ, FLAG_PFQ, FLAG_U8 = 1, 2, 4, 8, 16, 32, 64, 128
FLAG_LUT = 256                                      # SiLU looked up (silu_table) instead of computed
IVEC = ir.VectorType(I32, VL)
LUT_VECTORS = 256 // VL                             # silu_table's vectors (256 words, then 256 bytes)
VBMI_FEATURES = frozenset({"avx512vbmi", "avx512bw", "avx512f"})      # look_up's byte permutes
BYTES = ir.VectorType(ir.IntType(8), VL)            # a vector's lanes as uint8 (FLAG_U8's stores)


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


def _quantize(b: ir.IRBuilder, v: ir.Value, sv: ir.Value, zv: ir.Value) -> ir.Value:
    """QuantizeLinear(v) to uint8, as float32 lanes holding the integers (scale ``sv``, zero point ``zv``: float32
    vectors): ``saturate(round_half_even(v / s) + z)``, NaN -> 0."""
    rint = module_rint(b.module)
    zero, top = ir.Constant(VEC, None), ir.Constant(VEC, [255.0] * VL)
    t = b.fadd(b.call(rint, [b.fdiv(v, sv)]), zv)
    t = b.select(b.fcmp_unordered("uno", t, t), zero, t)
    t = b.select(b.fcmp_ordered("<", t, zero), zero, t)
    return b.select(b.fcmp_ordered(">", t, top), top, t)


def _round_trip(b: ir.IRBuilder, v: ir.Value, sv: ir.Value, zv: ir.Value) -> ir.Value:
    """DequantizeLinear(QuantizeLinear(v)) with a uint8 zero point (scale ``sv``, zero point ``zv``: float32)."""
    sv, zv = splat(b, sv), splat(b, zv)
    return b.fmul(b.fsub(_quantize(b, v, sv, zv), zv), sv)


def bytes_of(b: ir.IRBuilder, t: ir.Value) -> ir.Value:
    """``_quantize``'s lanes as 16 uint8."""
    return b.trunc(b.fptosi(t, ir.VectorType(I32, VL)), BYTES)


def quantize_out(b: ir.IRBuilder, v: ir.Value, has_fq: ir.Value, has_q: ir.Value, sc: ir.Value, zp: ir.Value
                 ) -> tuple[ir.Value, ir.Value]:
    """(``v`` after the output's round trip where ``has_fq``, ``_quantize(v)`` where ``has_fq`` or ``has_q``: the
    uint8 output's lanes): one division, and only where a flag asks for it (a select computed it for every
    convolution; a uint8 output then took a second one)."""
    before = b.block
    with b.if_then(b.or_(has_fq, has_q)):
        sv, zv = splat(b, sc), splat(b, zp)
        t = _quantize(b, v, sv, zv)
        rt = b.select(has_fq, b.fmul(b.fsub(t, zv), sv), v)
        then = b.block
    out, q = b.phi(VEC), b.phi(VEC)
    out.add_incoming(rt, then)
    out.add_incoming(v, before)
    q.add_incoming(t, then)
    q.add_incoming(ir.Constant(VEC, None), before)
    return out, q


def store_bytes(module: ir.Module) -> ir.Function:
    """``llvm.masked.store`` of 16 bytes."""
    name = "llvm.masked.store.v16i8.p0v16i8"
    return module.globals.get(name) or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [BYTES, BYTES.as_pointer(), I32, MASK]), name)


def module_rint(module: ir.Module) -> ir.Function:
    return module.globals.get("llvm.rint.v16f32") or ir.Function(
        module, ir.FunctionType(VEC, [VEC]), "llvm.rint.v16f32")


def silu_pass(module: ir.Module) -> ir.Function:
    """``cl_qconv.silu(vals, qvals, n, flags, ssc, szp, psc, pzp)``: ``vals[k] *= sigmoid(vals[k])`` for the ``n``
    vectors at ``vals``, with the sigmoid's (FLAG_SFQ) and the product's (FLAG_PFQ) quantization round trips, and
    with FLAG_U8 ``qvals[k]`` = the product's quantized lanes (its pair quantizes the uint8 output).  A loop over a
    tile's vectors in one call, each only for a convolution that has it: inlined, the sigmoid made the driver
    2.5x larger (and the file of a small quantized model with it), computed for every convolution it cost 1x1 ones
    8%; called once per vector (the epilogue's registers saved around each call) it cost 5-8% more (one thread,
    with the output's and both SiLU round trips: 241 -> 230 us for 128->64 1x1 at 40 x 40, 228 -> 210 us for
    16->16 3x3 at 80 x 80)."""
    fnty = ir.FunctionType(ir.VoidType(), [VECP, VECP, I64, I64, F32, F32, F32, F32])
    fn = internal_function(module, "cl_qconv.silu", fnty, noalias=(0, 1))
    if not fn.is_declaration:
        return fn
    fn.attributes.add("noinline")
    vals, qvals, n, flags, ssc, szp, psc, pzp = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    on = lambda bit: b.icmp_unsigned("!=", b.and_(flags, c64(bit)), c64(0))
    sfq, pfq, u8 = on(FLAG_SFQ), on(FLAG_PFQ), on(FLAG_U8)
    with for_range(b, 0, n, "k") as k:
        v = b.load(b.gep(vals, [k]))
        sig = _sigmoid(module, b, v)
        sig = b.select(sfq, _round_trip(b, sig, ssc, szp), sig)
        out = b.fmul(v, sig)
        out = b.select(pfq, _round_trip(b, out, psc, pzp), out)
        b.store(out, b.gep(vals, [k]))
        with b.if_then(u8):
            b.store(_quantize(b, out, splat(b, psc), splat(b, pzp)), b.gep(qvals, [k]))
    b.ret_void()
    return fn


def _mload(module: ir.Module):
    name = "llvm.masked.load.v16f32.p0v16f32"
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(VEC, [VECP, I32, MASK, VEC]), name)


def silu_table(module: ir.Module) -> ir.Function:
    """``cl_qconv.lut(lut, flags, osc, ozp, ssc, szp, psc, pzp)``: where the output's round trip precedes SiLU
    (FLAG_FQ), SiLU's input is ``(q - ozp) * osc`` for a quantized value q in 0..255, so the product's quantized
    byte -- the uint8 output (FLAG_U8), or with the product's round trip (FLAG_PFQ) the float32 output's
    ``(byte - pzp) * psc`` -- is one of 256: ``lut[q]`` gets each (as 256 int32 words, then as 256 bytes for
    ``look_up``'s byte permutes), computed by ``silu_pass`` from the round trip's own arithmetic (quantize_out's),
    so looking them up is bit for bit what computing them per element gives.  Per element, the sigmoid and its
    round trips took most of a small convolution's epilogue (the 3->16 stride-2 stem at 320 x 320: 585 us, 209
    without SiLU; 64->64 3x3 at 40 x 40: 387 us, 305 without; one thread); the table costs 16 vectors of it a
    call."""
    fnty = ir.FunctionType(ir.VoidType(), [IVEC.as_pointer(), I64, F32, F32, F32, F32, F32, F32])
    fn = internal_function(module, "cl_qconv.lut", fnty, noalias=(0,))
    if not fn.is_declaration:
        return fn
    fn.attributes.add("noinline")
    lut, flags, osc, ozp, ssc, szp, psc, pzp = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n = LUT_VECTORS
    vals, qvals = b.alloca(VEC, n), b.alloca(VEC, n)
    vals.align = qvals.align = 64
    sv, zv = splat(b, osc), splat(b, ozp)
    iota = ir.Constant(IVEC, list(range(VL)))
    with for_range(b, 0, n, "k") as k:
        t = b.sitofp(b.add(iota, splat_i32(b, b.mul(k, c64(VL)))), VEC)
        b.store(b.fmul(b.fsub(t, zv), sv), b.gep(vals, [k]))             # quantize_out's round trip
    # the product's byte before its round trip: silu_pass's uint8 lanes, the round trip left to the lookup
    byte_flags = b.or_(b.and_(flags, c64(~FLAG_PFQ)), c64(FLAG_U8))
    b.call(silu_pass(module), [vals, qvals, c64(n), byte_flags, ssc, szp, psc, pzp])
    table = b.bitcast(b.gep(lut, [c64(n)]), BYTES.as_pointer())
    with for_range(b, 0, n, "k") as k:
        words = b.fptosi(b.load(b.gep(qvals, [k])), IVEC)
        b.store(words, b.gep(lut, [k]), align=64)
        b.store(b.trunc(words, BYTES), b.gep(table, [k]), align=16)
    b.ret_void()
    return fn


def _gather(module: ir.Module) -> ir.Function:
    name = "llvm.masked.gather.v16i32.v16p0i32"
    ptrs = ir.VectorType(I32.as_pointer(), VL)
    return module.globals.get(name) or ir.Function(
        module, ir.FunctionType(IVEC, [ptrs, I32, MASK, IVEC]), name)


def _table_bytes(b: ir.IRBuilder, lut: ir.Value) -> list:
    """silu_table's bytes (after its words) as four 64-byte vectors."""
    b64 = ir.VectorType(ir.IntType(8), 4 * VL)
    table = b.bitcast(b.gep(b.inttoptr(lut, I32.as_pointer()), [c64(LUT_VECTORS * VL)]), b64.as_pointer())
    return [b.load(b.gep(table, [c64(k)]), align=64) for k in range(4)]


def lut_bytes(b: ir.IRBuilder, has_lut: ir.Value, lut: ir.Value, vbmi: bool, once: bool = True):
    """With AVX-512 VBMI, silu_table's 256 bytes for ``look_up``: four 64-byte vectors loaded here, once (where
    ``has_lut``; zeros otherwise), or (``once`` False) "load" -- at each lookup; without VBMI None (a gather).
    Loaded once, a 4 -> 32 1x1 convolution at 80 x 80 (SiLU looked up, pixel lanes) took 74.6 us against 76.8;
    the channel-lane epilogue, which holds a tile's 8 vectors, was 1-2% slower with them held (32 -> 32 3x3 at
    40 x 40: 96.8 us against 95.3; one thread)."""
    if not vbmi:
        return None
    if not once:
        return "load"
    b64 = ir.VectorType(ir.IntType(8), 4 * VL)
    before = b.block
    with b.if_then(has_lut):
        parts = _table_bytes(b, lut)
        then = b.block
    out = []
    for part in parts:
        phi = b.phi(b64)
        phi.add_incoming(part, then)
        phi.add_incoming(ir.Constant(b64, None), before)
        out.append(phi)
    return out


def look_up(b: ir.IRBuilder, lut: ir.Value, idx: ir.Value, table) -> ir.Value:
    """``lut[idx]`` lane by lane (``lut``: i64 address of silu_table's table; ``idx``: int32 lanes, quantize_out's
    integers 0..255): with AVX-512 VBMI (``table``: lut_bytes') two ``vpermi2b`` over its 256 bytes and a blend on
    the index's bit 7 (each lane's low byte: the index's upper bytes are 0 and look up byte 0, masked off), else
    one gather of its words.  (A ``vpgatherdd`` cost 32 cycles a vector on Zen 4: the stem above took 443 us.)
    (llvmlite's ``gep`` cannot type a vector index: the gather's is made with a scalar one and given the vector
    index and type, which LLVM reads as the base-plus-index gather it is.)"""
    base = b.inttoptr(lut, I32.as_pointer())
    if table is not None:
        b64 = ir.VectorType(ir.IntType(8), 4 * VL)
        permute = b.module.globals.get("llvm.x86.avx512.vpermi2var.qi.512") or ir.Function(
            b.module, ir.FunctionType(b64, [b64, b64, b64]), "llvm.x86.avx512.vpermi2var.qi.512")
        part = _table_bytes(b, lut) if table == "load" else table
        ib = b.bitcast(idx, b64)
        lo, hi = b.call(permute, [part[0], ib, part[1]]), b.call(permute, [part[2], ib, part[3]])
        got = b.select(b.icmp_signed("<", ib, ir.Constant(b64, None)), hi, lo)
        return b.and_(b.bitcast(got, IVEC), ir.Constant(IVEC, [255] * VL))
    ptrs = b.gep(base, [ir.Constant(I32, 0)])
    ptrs.indices, ptrs.operands, ptrs.type = [idx], [base, idx], ir.VectorType(I32.as_pointer(), VL)
    return b.call(_gather(b.module), [ptrs, ir.Constant(I32, 4), ir.Constant(MASK, [1] * VL),
                                      ir.Constant(IVEC, None)])


def looked_up(b: ir.IRBuilder, v: ir.Value, has_fq: ir.Value, has_q: ir.Value, sc: ir.Value, zp: ir.Value,
              has_lut: ir.Value, lut: ir.Value, table) -> tuple[ir.Value, ir.Value]:
    """``quantize_out(v, has_fq, has_q, sc, zp)`` as (the value, the quantized lanes as int32), and with
    ``has_lut`` SiLU's product byte ``lut[q]`` (silu_table; ``table``: lut_bytes') in place of the quantized
    lanes: the value is then ``lut_value``'s (the round trip is left out, nothing reads it)."""
    out, t = quantize_out(b, v, b.and_(has_fq, b.not_(has_lut)), b.or_(has_q, has_lut), sc, zp)
    before = b.block
    ti = b.fptosi(t, IVEC)
    with b.if_then(has_lut):
        q = look_up(b, lut, ti, table)
        then = b.block
    qi = b.phi(IVEC)
    qi.add_incoming(q, then)
    qi.add_incoming(ti, before)
    return out, qi


def lut_value(b: ir.IRBuilder, out: ir.Value, q: ir.Value, has_lut: ir.Value, psc: ir.Value, pzp: ir.Value
              ) -> ir.Value:
    """The float32 output of ``looked_up``'s (``out``, ``q``): with ``has_lut`` the product byte's round trip
    ``(q - pzp) * psc`` (_round_trip's arithmetic), else ``out``."""
    return b.select(has_lut, b.fmul(b.fsub(b.sitofp(q, VEC), splat(b, pzp)), splat(b, psc)), out)
