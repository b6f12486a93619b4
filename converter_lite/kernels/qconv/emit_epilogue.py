"""The int8 convolution's epilogue helpers, shared by its two bodies (emit.py's pixel lanes and emit_channels.py's
channel lanes): the epilogue's flags, the output's quantization round trip (DequantizeLinear(QuantizeLinear(v)))
and the SiLU tail (a QDQ model's Sigmoid and Mul, each with its round trip) as one non-inlined function.
"""
from __future__ import annotations

from llvmlite import ir

from ...codegen.internal import internal_function
from ...codegen.types import F32, I32, I64
from ...codegen.vector import MASK, VEC, VECP, VL, c64, splat

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
