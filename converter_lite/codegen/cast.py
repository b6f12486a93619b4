"""Cast emitters: conversions between every pair of IR dtypes with the reference kernels' semantics
(converter_lite.ops.elementwise.cast_to): float -> int truncates toward zero, NaN and out-of-range values give
the x86 "integer indefinite" INT_MIN of the conversion, narrow integer targets go through int32, uint32 through
int64; float -> bool is ``x != 0`` (NaN is True); bool -> number is 0/1.
"""
from __future__ import annotations

from llvmlite import ir

from ..ir.dtype import DType
from .types import F64, I64, compute_type, is_unsigned


def float_to_int(sc, x, to: DType):
    """C/x86 semantics (the reference's cast_to): truncate toward zero; NaN and out-of-range values give the
    "integer indefinite" INT_MIN of the conversion; types narrower than 32 bits convert through int32 and keep
    its low bits, uint32 through int64."""
    b = sc.b
    lim = 9.223372036854775807e18
    ok = b.and_(b.fcmp_ordered("<", x, ir.Constant(x.type, lim)), b.fcmp_ordered(">=", x, ir.Constant(x.type, -lim)))
    if to in (DType.int8, DType.uint8, DType.int16, DType.uint16):
        return b.trunc(float_to_int(sc, x, DType.int32), compute_type(to))
    if to is DType.int32:
        lim32 = 2147483648.0
        ok32 = b.and_(b.fcmp_ordered("<", x, ir.Constant(x.type, lim32)),
                      b.fcmp_ordered(">=", x, ir.Constant(x.type, -lim32)))
        safe = b.select(ok32, x, ir.Constant(x.type, 0.0))
        return b.select(ok32, b.fptosi(safe, compute_type(to)), ir.Constant(compute_type(to), -(1 << 31)))
    if to is DType.uint64:
        big = b.fcmp_ordered(">=", x, ir.Constant(x.type, lim))
        safe = b.select(ok, x, ir.Constant(x.type, 0.0))
        hi = b.select(big, b.fsub(x, ir.Constant(x.type, lim)), ir.Constant(x.type, 0.0))
        as_hi = b.add(b.fptoui(b.select(b.fcmp_ordered("<", hi, ir.Constant(x.type, lim)), hi,
                                        ir.Constant(x.type, 0.0)), I64), ir.Constant(I64, 1 << 63))
        return b.select(ok, b.fptosi(safe, I64), b.select(big, as_hi, ir.Constant(I64, 1 << 63)))
    safe = b.select(ok, x, ir.Constant(x.type, 0.0))
    v = b.select(ok, b.fptosi(safe, I64), ir.Constant(I64, 1 << 63))
    ty = compute_type(to)
    return v if ty == I64 else b.trunc(v, ty)


def cast_scalar(sc, x: ir.Value, src: DType, dst: DType) -> ir.Value:
    b = sc.b
    sty, dty = compute_type(src), compute_type(dst)
    if src is dst or (sty == dty and (src.is_float or dst.is_float or src is DType.bool or dst is DType.bool)
                      and src.is_float == dst.is_float and (src is DType.bool) == (dst is DType.bool)):
        return x
    if dst is DType.bool:
        if src.is_float:
            return b.fcmp_unordered("!=", x, ir.Constant(sty, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(sty, 0))
    if src is DType.bool:
        return b.uitofp(x, dty) if dst.is_float else b.zext(x, dty)
    if src.is_float and dst.is_float:
        if sty == dty:
            return x
        return b.fpext(x, dty) if dty == F64 else b.fptrunc(x, dty)
    if src.is_float:
        return float_to_int(sc, x, dst)
    if dst.is_float:
        return b.uitofp(x, dty) if is_unsigned(src) else b.sitofp(x, dty)
    if sty.width == dty.width:
        return x
    if sty.width > dty.width:
        return b.trunc(x, dty)
    return b.zext(x, dty) if is_unsigned(src) else b.sext(x, dty)
