"""The int8 convolution's epilogue helpers, shared by its two bodies (emit.py's pixel lanes and emit_channels.py's
channel lanes): the epilogue's flags, the output's quantization round trip (DequantizeLinear(QuantizeLinear(v))),
its quantization to uint8 bytes (``FLAG_U8``: the uint8 hand-off to the next int8 convolution) and the SiLU tail
(a QDQ model's Sigmoid and Mul, each with its round trip) as one non-inlined function.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import internal_function
from ...codegen.loops import for_range
from ...codegen.types import F32, I32, I64
from ...codegen.vector import MASK, VEC, VECP, VL, c64, splat

FLAG_BIAS, FLAG_RES, FLAG_CLAMP, FLAG_FQ, FLAG_SILU, FLAG_SFQ, FLAG_PFQ, FLAG_U8 = 1, 2, 4, 8, 16, 32, 64, 128
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
