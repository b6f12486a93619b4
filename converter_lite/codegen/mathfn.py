"""Inline, vectorisable approximations of the transcendental functions (no libm calls in hot loops).

Each function emits straight-line IR (selects, no branches, no calls other than LLVM intrinsics that map to
single instructions), so the loop vectorizer widens it to AVX2/AVX-512 code.  Special values (NaN, ±inf,
±0, denormal inputs and results) follow C99/numpy.

float32 (measured accuracy is stated in tests/codegen/test_codegen_mathfn.py):
    exp               Cody-Waite range reduction (n = round(x*log2(e)) by the 1.5*2**23 trick), a degree-6
                      minimax polynomial in Horner form, y * 2**n as two multiplies by normal powers of two (the
                      second rounds once into denormals or inf); NaN passes through the range clamp and the
                      arithmetic (no compare/select for it)
    log               Cephes logf: range reduction + minimax polynomial, denormals handled
    tanh              Cephes tanhf: odd polynomial for |x| <= 0.625, 1 - 2/(exp(2|x|)+1) above
    sigmoid           1 / (1 + exp(-x))
    erf               in float32: x*P(x^2) for |x| < 0.875, 1 - E_k(t) on three intervals up to 3.92 (one
                      polynomial evaluated, its coefficients picked by selects), 1 above
    pow, sin/cos      evaluated in double precision (inputs widened): pow = exp(y*log|x|) with the C99
                      special cases; sin/cos by reduction modulo pi/2 and Cephes polynomials on [-pi/4, pi/4]
float64: exp, log (Cephes Pade forms), tanh, sigmoid inline; erf, pow, sin, cos call libm (accuracy first).

The erf polynomials were fitted with numpy Chebyshev least squares against math.erf/math.erfc (fit errors:
3e-9 relative on [0, 0.875], < 3e-9 absolute on the erfc intervals).
"""
from __future__ import annotations

import math

from llvmlite import ir

from .types import F32, F64, I32, I64

LOG2E = 1.4426950408889634
_MAGIC = 1.5 * 2 ** 23                   # float32 whose ulp is 1: x + _MAGIC rounds x to an integer
_MAGIC_BITS = 0x4B400000                 # its bit pattern
EXPF_BIAS2 = 254                         # two float32 exponent biases (exp's two-factor 2**n)
SQRTHF = 0.7071067811865476

# exp(r) = 1 + r*(1 + r*(c2 + ...)) on |r| <= ln2/2: c2..c6 fitted to (exp(r) - 1 - r)/r**2 with numpy weighted
# least squares iterated to the minimax relative error (3.1e-9), rounded to float32; float32 Horner evaluation
# simulated at 6.2e-8 (Cephes' degree-7 form: 6.7e-8)
_EXPF_P = (5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4)
_EXPF_H = (1.0, 1.0, 0.4999999403953552, 0.1666652113199234, 0.04166839271783829, 0.00836874358355999,
           0.0013814526610076427)
_LOGF_P = (3.3333331174e-1, -2.4999993993e-1, 2.0000714765e-1, -1.6668057665e-1, 1.4249322787e-1,
           -1.2420140846e-1, 1.1676998740e-1, -1.1514610310e-1, 7.0376836292e-2)
_TANHF_P = (-3.33332819422e-1, 1.33314422036e-1, -5.37397155531e-2, 2.06390887954e-2, -5.70498872745e-3)
_EXP_P = (9.99999999999999999910e-1, 3.02994407707441961300e-2, 1.26177193074810590878e-4)
_EXP_Q = (2.00000000000000000009e0, 2.27265548208155028766e-1, 2.52448340349684104192e-3, 3.00198505138664455042e-6)
# log(m) = 2*atanh(s), s = (m-1)/(m+1), |s| <= 0.172: 2s * sum(t**k / (2k+1)), t = s*s (truncation < 1e-18)
_ATANH_SERIES = tuple(1.0 / (2 * k + 1) for k in range(13))
_TANH_P = (-1.61468768441708447952e3, -9.92877231001918586564e1, -9.64399179425052238628e-1)
_TANH_Q = (4.84406305325125486048e3, 2.23548839060100448583e3, 1.12811678491632931402e2, 1.0)
_SIN_P = (-1.66666666666666307295e-1, 8.33333333332211858878e-3, -1.98412698295895385996e-4,
          2.75573136213857245213e-6, -2.50507477628578072866e-8, 1.58962301576546568060e-10)
_COS_P = (4.16666666666665929218e-2, -1.38888888888730564116e-3, 2.48015872888517045348e-5,
          -2.75573141792967388112e-7, 2.08757008419747316778e-9, -1.13585365213876817300e-11)
_ATANF_P = (-3.33329491539e-1, 1.99777106478e-1, -1.38776856032e-1, 8.05374449538e-2)
# float32 erf (fitted with numpy Chebyshev least squares against math.erf/math.erfc, coefficients rounded to
# float32; the float32 evaluation below was simulated and measured at 7.8e-8 max relative error):
# erf(x)/x = P(x^2) on [0, 0.875], P[0] = 1.128379225730896 + _ERFF_P0_LO;
# erfc(x) = E_k((x - m_k) / h_k) on [lo_k, lo_k+1) (rows: lo_k, float32 m_k, float32 1/h_k, coefficients)
_ERFF_P = (1.128379225730896, -0.37612634897232056, 0.11283726990222931, -0.026861444115638733,
           0.005206685047596693, -0.0008212926331907511, 8.692377741681412e-05)
_ERFF_P0_LO = -5.912626832582646e-08
_ERFF_B = (
    (0.875, 1.2875, 1 / 0.4125, (0.06863726675510406, -0.08870906382799149, 0.0471128411591053,
                                 -0.011649555526673794, 0.0004212262574583292, 0.0005057035014033318,
                                 -0.00010836689034476876, -4.7774174163350835e-06, 4.269182227290003e-06)),
    (1.7, 2.15, 1 / 0.45000000000000007, (0.002361393067985773, -0.004990473855286837, 0.0048282756470143795,
                                          -0.00277730287052691, 0.0010176734067499638, -0.0002254219725728035,
                                          1.7573902368894778e-05, 6.443187885452062e-06, -2.128374944732059e-06)),
    (2.6, 3.26, 1 / 0.6599999999999999, (4.020194410259137e-06, -1.803661507437937e-05, 3.8836875319248065e-05,
                                         -5.3294214012566954e-05, 5.148020863998681e-05, -3.6545014154398814e-05,
                                         2.0787510948139243e-05, -1.0121107152372133e-05, 2.907216185121797e-06)),
)
ERFF_ONE = 3.92          # erfc(x) < 2**-25 above: erf(x) rounds to 1.0f
# pi/2 split into 30-bit pieces, so j * PIO2_HI and j * PIO2_MID are exact for |j| < 2**23
PIO2_HI = 1.570796325802803
PIO2_MID = 9.920935791635221e-10
PIO2_LO = 5.170182981794105e-19
# beyond this the 3-part reduction loses accuracy: sin/cos give NaN rather than wrong numbers (documented limit)
SINCOS_MAX = float(2 ** 24)


class MathEmitter:
    """Emits the approximations with builder ``b`` into ``module`` (for intrinsic declarations)."""

    def __init__(self, b: ir.IRBuilder, module: ir.Module, *, ldexp: bool = False):
        """``ldexp``: scale float32 exp results with ``llvm.ldexp``, which the x86 back end turns into one
        ``vscalefps`` when the target has AVX-512F (and into libm calls when it has not: pass False there)."""
        self.b = b
        self.module = module
        self.ldexp = ldexp

    # -- small helpers -------------------------------------------------------------------------------------
    def intrinsic(self, name: str, ty: ir.Type, nargs: int = 1) -> ir.Function:
        fnty = ir.FunctionType(ty, [ty] * nargs)
        return self.module.declare_intrinsic(name, [ty], fnty)

    def call1(self, name: str, x: ir.Value) -> ir.Value:
        return self.b.call(self.intrinsic(name, x.type), [x])

    def call2(self, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.call(self.intrinsic(name, x.type, 2), [x, y])

    def c(self, ty: ir.Type, v: float) -> ir.Constant:
        return ir.Constant(ty, v)

    def fma(self, a: ir.Value, x: ir.Value, c: ir.Value) -> ir.Value:
        """a*x + c, fused where the target has FMA (llvm.fmuladd never becomes a libm call)."""
        return self.b.call(self.intrinsic("llvm.fmuladd", a.type, 3), [a, x, c])

    def horner(self, x: ir.Value, coeffs: tuple[float, ...]) -> ir.Value:
        """sum(coeffs[k] * x**k) (coefficients in ascending order)."""
        acc = self.c(x.type, coeffs[-1])
        for k in coeffs[-2::-1]:
            acc = self.fma(acc, x, self.c(x.type, k))
        return acc

    def isnan(self, x: ir.Value) -> ir.Value:
        return self.b.fcmp_unordered("uno", x, x)

    def lt(self, x: ir.Value, y) -> ir.Value:
        y = self.c(x.type, y) if isinstance(y, (int, float)) else y
        return self.b.fcmp_ordered("<", x, y)

    def gt(self, x: ir.Value, y) -> ir.Value:
        y = self.c(x.type, y) if isinstance(y, (int, float)) else y
        return self.b.fcmp_ordered(">", x, y)

    def eq(self, x: ir.Value, y) -> ir.Value:
        y = self.c(x.type, y) if isinstance(y, (int, float)) else y
        return self.b.fcmp_ordered("==", x, y)

    def sel(self, cond: ir.Value, x, y, ty: ir.Type | None = None) -> ir.Value:
        """select(cond, x, y); Python numbers become constants of the other operand's type (or ``ty``)."""
        ty = ty or (y.type if isinstance(x, (int, float)) else x.type)
        x = self.c(ty, x) if isinstance(x, (int, float)) else x
        y = self.c(ty, y) if isinstance(y, (int, float)) else y
        return self.b.select(cond, x, y)

    def clamp_finite(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """x clamped to [lo, hi], NaN -> 0 (so later float->int conversions are never poison)."""
        x = self.sel(self.isnan(x), 0.0, x)
        x = self.sel(self.gt(x, hi), hi, x)
        return self.sel(self.lt(x, lo), lo, x)

    def pow2i(self, k: ir.Value, ty: ir.Type) -> ir.Value:
        """2**k for an integer k in the normal exponent range of ``ty``."""
        b = self.b
        if ty == F32:
            bits = b.shl(b.add(k, ir.Constant(I32, 127)), ir.Constant(I32, 23))
            return b.bitcast(bits, F32)
        bits = b.shl(b.add(k, ir.Constant(I64, 1023)), ir.Constant(I64, 52))
        return b.bitcast(bits, F64)

    def scale(self, y: ir.Value, n: ir.Value) -> ir.Value:
        """y * 2**n for a float-valued integer n, in two steps so results may over/underflow gracefully."""
        b = self.b
        ity = I32 if y.type == F32 else I64
        ni = b.fptosi(n, ity)
        n1 = b.ashr(ni, ir.Constant(ity, 1))
        n2 = b.sub(ni, n1)
        return b.fmul(b.fmul(y, self.pow2i(n1, y.type)), self.pow2i(n2, y.type))

    def widen(self, x: ir.Value) -> ir.Value:
        return self.b.fpext(x, F64) if x.type == F32 else x

    def narrow(self, x: ir.Value, ty: ir.Type) -> ir.Value:
        return self.b.fptrunc(x, ty) if ty == F32 else x

    # -- exp / log -----------------------------------------------------------------------------------------
    def exp(self, x: ir.Value) -> ir.Value:
        b = self.b
        if x.type == F32:
            # x clamped to [., 89] by a select written so that NaN passes through (x86 min/max return their
            # second operand for NaN); NaN then reaches the addend below.  Below -104 the result is 0 (exp(-104)
            # is under half the smallest denormal): those lanes compute exp(0) and select 0 at the end, so no
            # lane's arithmetic underflows.  Clamping them to -104 made every such lane's last scaling produce an
            # underflow, which Intel cores finish in a microcode assist (~150 cycles) when FTZ is off: a GPT-2
            # softmax over a causal mask, half its lanes -inf or -3.4e38, took 157 us on a Xeon core where
            # the same kernel takes 5 us on a Zen 5
            xc = self.sel(self.gt(x, 89.0), 89.0, x)
            under = self.lt(x, -104.0)
            xc = self.sel(under, 0.0, xc)
            t = self.fma(xc, self.c(F32, LOG2E), self.c(F32, _MAGIC + EXPF_BIAS2))
            n = b.fsub(t, self.c(F32, _MAGIC + EXPF_BIAS2))
            r = self.fma(n, self.c(F32, -0.693359375), xc)
            r = self.fma(n, self.c(F32, 2.12194440e-4), r)
            y = self._expf_poly(r)
            if self.ldexp:
                # y * 2**n in one instruction (vscalefps): exact for normal and denormal results alike; n + 254
                # sits in t's low mantissa bits, so n is t's bits minus those of _MAGIC + 254 (NaN: y is NaN)
                ni = b.sub(b.bitcast(t, I32), ir.Constant(I32, _MAGIC_BITS + EXPF_BIAS2))
                fnty = ir.FunctionType(F32, [F32, I32])
                return self.sel(under, 0.0, b.call(self.module.declare_intrinsic("llvm.ldexp", [F32, I32], fnty),
                                                   [y, ni]))
            # 2**n in two normal factors 2**floor(n/2) * 2**ceil(n/2), from t's bits M + v (M = _MAGIC_BITS,
            # v = n + 254 carrying both exponent biases): h = (M + v) >> 1 = M/2 + floor(v/2) and
            # (M + v) - h = M/2 + ceil(v/2), and M/2 << 23 wraps to 0 (M/2 has 21 trailing zero bits), so
            # h << 23 and (bits - h) << 23 are the two factors' bit patterns (four integer operations).
            # NaN x: y is NaN, and NaN times any factor stays NaN
            ti = b.bitcast(t, I32)
            h = b.lshr(ti, ir.Constant(I32, 1))
            k23 = ir.Constant(I32, 23)
            return self.sel(under, 0.0,
                            b.fmul(b.fmul(y, b.bitcast(b.shl(h, k23), F32)), b.bitcast(b.shl(b.sub(ti, h), k23), F32)))
        xc = self.clamp_finite(x, -746.0, 710.0)
        n = self.call1("llvm.roundeven", b.fmul(xc, self.c(F64, LOG2E)))
        r = self.fma(n, self.c(F64, -6.93145751953125e-1), xc)
        r = self.fma(n, self.c(F64, -1.42860682030941723212e-6), r)
        rr = b.fmul(r, r)
        p = b.fmul(r, self.horner(rr, _EXP_P))
        q = self.horner(rr, _EXP_Q)
        y = self.fma(self.c(F64, 2.0), b.fdiv(p, b.fsub(q, p)), self.c(F64, 1.0))
        return self.sel(self.isnan(x), x, self.scale(y, n))

    def _round_log2e(self, x: ir.Value, bias: int) -> tuple[ir.Value, ir.Value]:
        """(n, n + bias as i32) with n = round(x * log2(e)), for |x * log2(e)| + bias < 2**22: adding
        1.5 * 2**23 rounds to an integer held in the low mantissa bits (no round/convert instructions)."""
        b = self.b
        t = self.fma(x, self.c(F32, LOG2E), self.c(F32, _MAGIC + bias))
        n = b.fsub(t, self.c(F32, _MAGIC + bias))
        ni = b.sub(b.bitcast(t, I32), ir.Constant(I32, _MAGIC_BITS))
        return n, ni

    def _exp_reduced(self, x: ir.Value) -> ir.Value:
        """float32 exp for finite x whose result is a normal number (no clamping, one scaling step);
        the result for NaN is unspecified (callers select another value then)."""
        b = self.b
        n, ni = self._round_log2e(x, 127)
        r = self.fma(n, self.c(F32, -0.693359375), x)
        r = self.fma(n, self.c(F32, 2.12194440e-4), r)
        # Cephes' degree-7 form here: tanh's error budget (1.4e-7) has less room than exp's
        y = b.fadd(self.fma(self.horner(r, _EXPF_P), b.fmul(r, r), r), self.c(F32, 1.0))
        return b.fmul(y, b.bitcast(b.shl(ni, ir.Constant(I32, 23)), F32))

    def _expf_poly(self, r: ir.Value) -> ir.Value:
        """exp(r) for |r| <= ln2/2 (degree 6, Horner: six multiply-adds)."""
        return self.horner(r, _EXPF_H)

    def log(self, x: ir.Value) -> ir.Value:
        b = self.b
        ty = x.type
        if ty == F32:
            ity, mbits, bias, tiny, up = I32, 23, 126, 2.0 ** -126, 23
            mant_mask, half_bits = 0x807FFFFF, 0x3F000000
        else:
            ity, mbits, bias, tiny, up = I64, 52, 1022, 2.0 ** -1022, 54
            mant_mask, half_bits = 0x800FFFFFFFFFFFFF, 0x3FE0000000000000
        small = self.lt(x, tiny)
        xs = self.sel(small, b.fmul(x, self.c(ty, 2.0 ** up)), x)
        bits = b.bitcast(xs, ity)
        e = b.sub(b.lshr(bits, ir.Constant(ity, mbits)), ir.Constant(ity, bias))
        e = b.sub(e, b.select(small, ir.Constant(ity, up), ir.Constant(ity, 0)))
        m = b.bitcast(b.or_(b.and_(bits, ir.Constant(ity, mant_mask)), ir.Constant(ity, half_bits)), ty)
        lo = self.lt(m, SQRTHF)
        e = b.sub(e, b.zext(lo, ity))
        m = b.fsub(self.sel(lo, b.fadd(m, m), m), self.c(ty, 1.0))
        fe = b.sitofp(e, ty)
        if ty == F32:
            z = b.fmul(m, m)
            y = b.fmul(b.fmul(m, z), self.horner(m, _LOGF_P))
            y = self.fma(fe, self.c(ty, -2.12194440e-4), y)
            y = self.fma(z, self.c(ty, -0.5), y)
            r = self.fma(fe, self.c(ty, 0.693359375), b.fadd(m, y))
        else:
            s = b.fdiv(m, b.fadd(m, self.c(ty, 2.0)))                    # m is already m' - 1 here
            s2 = b.fadd(s, s)
            logm = self.fma(b.fmul(s2, b.fmul(s, s)), self.horner(b.fmul(s, s), _ATANH_SERIES[1:]), s2)
            r = self.fma(fe, self.c(ty, 1.9082149292705877e-10), logm)   # ln2 = 0.6931471803691238 + 1.908e-10
            r = self.fma(fe, self.c(ty, 0.6931471803691238), r)
        inf = math.inf
        special = self.sel(self.eq(x, 0.0), -inf, self.sel(self.eq(x, inf), inf, math.nan, ty))
        regular = b.and_(self.gt(x, 0.0), self.lt(x, inf))
        return b.select(regular, r, special)

    def expm1(self, x: ir.Value) -> ir.Value:
        """exp(x) - 1, by its Taylor series for |x| < 0.5 (no cancellation), exp(x) - 1 elsewhere."""
        b = self.b
        terms = 9 if x.type == F32 else 16
        series = b.fmul(x, self.horner(x, tuple(1.0 / math.factorial(k + 1) for k in range(terms))))
        direct = b.fsub(self.exp(x), self.c(x.type, 1.0))
        return self.sel(self.lt(self.call1("llvm.fabs", x), 0.5), series, direct)

    def log1p(self, x: ir.Value) -> ir.Value:
        """log(1+x) accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x (Goldberg)."""
        b = self.b
        u = b.fadd(x, self.c(x.type, 1.0))
        d = b.fsub(u, self.c(x.type, 1.0))
        corrected = b.fmul(self.log(u), b.fdiv(x, d))
        exact = b.or_(self.eq(d, 0.0), self.eq(u, math.inf))
        return b.select(exact, self.sel(self.eq(d, 0.0), x, self.log(u)), corrected)

    # -- hyperbolic / logistic -----------------------------------------------------------------------------
    def tanh(self, x: ir.Value) -> ir.Value:
        b = self.b
        ty = x.type
        z = self.call1("llvm.fabs", x)
        if ty == F32:                       # 1 - 2/(exp(40)+1) is exactly 1: exp's argument stays in [1.25, 40]
            zc = self.sel(self.gt(z, 20.0), 20.0, z)
            e = self._exp_reduced(b.fadd(zc, zc))
        else:
            e = self.exp(b.fadd(z, z))
        big = b.fsub(self.c(ty, 1.0), b.fdiv(self.c(ty, 2.0), b.fadd(e, self.c(ty, 1.0))))
        big = self.call2("llvm.copysign", big, x)
        s = b.fmul(x, x)
        if ty == F32:
            small = self.fma(b.fmul(self.horner(s, _TANHF_P), s), x, x)
        else:
            small = self.fma(b.fmul(x, s), b.fdiv(self.horner(s, _TANH_P), self.horner(s, _TANH_Q)), x)
        return self.sel(self.gt(z, 0.625), big, small)

    def sigmoid(self, x: ir.Value) -> ir.Value:
        """1/(1+exp(-x)) for x >= 0, exp(x)/(1+exp(x)) below (no overflow, denormal results kept)."""
        b = self.b
        one = self.c(x.type, 1.0)
        e = self.exp(b.fneg(self.call1("llvm.fabs", x)))
        s = b.fdiv(one, b.fadd(one, e))
        return self.sel(self.lt(x, 0.0), b.fmul(e, s), s)

    # -- erf -----------------------------------------------------------------------------------------------
    def erf(self, x: ir.Value) -> ir.Value:
        """float32: x*P(x^2) below ERF_SMALL (leading coefficient split in two floats, so the result is
        rounded about once), 1 - E_k(t) on three intervals of [ERF_SMALL, ERF_ONE) (coefficients picked by
        selects: one polynomial evaluated), 1 at and above ERF_ONE (erf rounds to 1 there).  All float32,
        16 lanes per AVX-512 vector; tiny |x| are scaled by 2**64 so x*c does not underflow early."""
        if x.type == F64:
            return self.libm("erf", x)
        b = self.b
        a = self.call1("llvm.fabs", x)
        tiny = self.lt(a, 2.0 ** -100)
        at = self.sel(tiny, b.fmul(a, self.c(F32, 2.0 ** 64)), a)
        s = b.fmul(at, at)
        tail = b.fmul(s, self.horner(s, _ERFF_P[1:]))
        small = self.fma(at, self.c(F32, _ERFF_P[0]), b.fmul(at, b.fadd(tail, self.c(F32, _ERFF_P0_LO))))
        small = self.sel(tiny, b.fmul(small, self.c(F32, 2.0 ** -64)), small)
        k1 = b.fcmp_unordered(">=", a, self.c(F32, _ERFF_B[1][0]))      # NaN takes the last interval
        k2 = b.fcmp_unordered(">=", a, self.c(F32, _ERFF_B[2][0]))

        def pick(vals):
            return self.sel(k2, vals[2], self.sel(k1, vals[1], vals[0], F32))

        t = b.fmul(b.fsub(a, pick([m for _, m, _, _ in _ERFF_B])), pick([ih for _, _, ih, _ in _ERFF_B]))
        acc = pick([cs[-1] for *_, cs in _ERFF_B])
        for j in range(len(_ERFF_B[0][3]) - 2, -1, -1):
            acc = self.fma(acc, t, pick([cs[j] for *_, cs in _ERFF_B]))
        big = self.sel(self.lt(a, ERFF_ONE), b.fsub(self.c(F32, 1.0), acc), 1.0)
        r = self.sel(self.lt(a, _ERFF_B[0][0]), small, big)
        r = self.sel(self.isnan(a), a, r)
        return self.call2("llvm.copysign", r, x)

    # -- pow -----------------------------------------------------------------------------------------------
    def pow(self, x: ir.Value, y: ir.Value) -> ir.Value:
        """x**y with C99 special cases (pow(x, 0) = 1, pow(1, y) = 1, negative x needs an integer y)."""
        if x.type == F64:
            return self.b.call(self.intrinsic("llvm.pow", F64, 2), [x, y])
        b = self.b
        xd, yd = self.widen(x), self.widen(y)
        ax = self.call1("llvm.fabs", xd)
        mag = self.exp(b.fmul(yd, self.log(ax)))
        y_int = self.eq(self.call1("llvm.floor", yd), yd)
        half = b.fmul(yd, self.c(F64, 0.5))
        y_odd = b.and_(y_int, b.fcmp_ordered("!=", self.call1("llvm.floor", half), half))
        neg = self.lt(xd, 0.0)
        r = self.sel(b.and_(neg, y_odd), b.fneg(mag), mag)
        finite_x = self.lt(ax, math.inf)
        r = self.sel(b.and_(b.and_(neg, finite_x), b.not_(y_int)), math.nan, r)    # pow(-inf, 1.7) = inf
        # |x| == 1 and y = ±inf -> 1 (C99), x == 1 -> 1 even for NaN y, y == 0 -> 1 even for NaN x
        unit = b.or_(self.eq(xd, 1.0), b.or_(self.eq(yd, 0.0), b.and_(self.eq(ax, 1.0),
                                                                         self.eq(self.call1("llvm.fabs", yd), math.inf))))
        r = self.sel(unit, 1.0, r)
        return self.narrow(r, x.type)

    # -- sin / cos -----------------------------------------------------------------------------------------
    def sincos(self, x: ir.Value, want_cos: bool) -> ir.Value:
        if x.type == F64:
            return self.call1("llvm.cos" if want_cos else "llvm.sin", x)
        b = self.b
        xd = self.widen(x)
        finite = self.lt(self.call1("llvm.fabs", xd), math.inf)
        xf = self.sel(finite, xd, 0.0)
        j = self.call1("llvm.roundeven", b.fmul(xf, self.c(F64, 2.0 / math.pi)))
        r = self.fma(j, self.c(F64, -PIO2_HI), xf)
        r = self.fma(j, self.c(F64, -PIO2_MID), r)
        r = self.fma(j, self.c(F64, -PIO2_LO), r)
        r2 = b.fmul(r, r)
        s = self.fma(b.fmul(r, r2), self.horner(r2, _SIN_P), r)
        c = self.fma(b.fmul(r2, r2), self.horner(r2, _COS_P), self.fma(r2, self.c(F64, -0.5), self.c(F64, 1.0)))
        qf = self.fma(self.call1("llvm.floor", b.fmul(j, self.c(F64, 0.25))), self.c(F64, -4.0), j)  # j mod 4
        q = b.fptosi(qf, I64)
        finite = b.and_(finite, self.lt(self.call1("llvm.fabs", xd), SINCOS_MAX))
        if want_cos:
            q = b.and_(b.add(q, ir.Constant(I64, 1)), ir.Constant(I64, 3))
        use_cos = b.trunc(q, ir.IntType(1))                               # q odd -> the other polynomial
        negate = b.icmp_unsigned(">=", q, ir.Constant(I64, 2))
        v = b.select(use_cos, c, s)
        v = b.select(negate, b.fneg(v), v)
        v = self.sel(finite, v, math.nan)
        return self.narrow(v, x.type)

    # -- inverse trigonometric / hyperbolic (float32; float64 calls libm) ----------------------------------
    def atan(self, x: ir.Value) -> ir.Value:
        """Cephes atanf: reduce by atan(x) = pi/2 - atan(1/x) (|x| > tan(3pi/8)) or pi/4 + atan((x-1)/(x+1))."""
        if x.type == F64:
            return self.libm("atan", x)
        b = self.b
        a = self.call1("llvm.fabs", x)
        big = self.gt(a, 2.414213562373095)
        mid = self.gt(a, 0.4142135623730950)
        one = self.c(F32, 1.0)
        t = self.sel(big, b.fdiv(self.c(F32, -1.0), a), self.sel(mid, b.fdiv(b.fsub(a, one), b.fadd(a, one)), a))
        base = self.sel(big, math.pi / 2, self.sel(mid, math.pi / 4, 0.0, F32))
        z = b.fmul(t, t)
        p = self.fma(b.fmul(self.horner(z, _ATANF_P), z), t, t)
        r = b.fadd(base, p)
        return self.sel(self.isnan(x), x, self.call2("llvm.copysign", r, x))

    def asin(self, x: ir.Value) -> ir.Value:
        if x.type == F64:
            return self.libm("asin", x)
        b, one = self.b, self.c(F32, 1.0)
        return self.atan(b.fdiv(x, self.call1("llvm.sqrt", b.fmul(b.fsub(one, x), b.fadd(one, x)))))

    def acos(self, x: ir.Value) -> ir.Value:
        if x.type == F64:
            return self.libm("acos", x)
        b, one = self.b, self.c(F32, 1.0)
        return b.fmul(self.c(F32, 2.0), self.atan(self.call1("llvm.sqrt", b.fdiv(b.fsub(one, x), b.fadd(one, x)))))

    def asinh(self, x: ir.Value) -> ir.Value:
        """sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log(|x|) + ln 2 for huge |x|."""
        if x.type == F64:
            return self.libm("asinh", x)
        b, one = self.b, self.c(F32, 1.0)
        a = self.call1("llvm.fabs", x)
        a2 = b.fmul(a, a)
        small = self.log1p(b.fadd(a, b.fdiv(a2, b.fadd(one, self.call1("llvm.sqrt", b.fadd(one, a2))))))
        huge = b.fadd(self.log(a), self.c(F32, math.log(2.0)))
        r = self.sel(self.gt(a, 1e9), huge, small)
        return self.sel(self.isnan(x), x, self.call2("llvm.copysign", r, x))

    def acosh(self, x: ir.Value) -> ir.Value:
        """log1p((x-1) + sqrt((x-1)(x+1))); log(x) + ln 2 for huge x; NaN below 1."""
        if x.type == F64:
            return self.libm("acosh", x)
        b, one = self.b, self.c(F32, 1.0)
        t = b.fsub(x, one)
        small = self.log1p(b.fadd(t, self.call1("llvm.sqrt", b.fmul(t, b.fadd(x, one)))))
        r = self.sel(self.gt(x, 1e9), b.fadd(self.log(x), self.c(F32, math.log(2.0))), small)
        return self.sel(self.lt(x, 1.0), math.nan, r)

    def atanh(self, x: ir.Value) -> ir.Value:
        """0.5 * log1p(2x / (1 - x))."""
        if x.type == F64:
            return self.libm("atanh", x)
        b = self.b
        a = self.call1("llvm.fabs", x)
        r = b.fmul(self.c(F32, 0.5), self.log1p(b.fdiv(b.fadd(a, a), b.fsub(self.c(F32, 1.0), a))))
        return self.sel(self.isnan(x), x, self.call2("llvm.copysign", r, x))

    def libm(self, name: str, x: ir.Value) -> ir.Value:
        """A scalar libm call (float64 only, where accuracy matters more than vector width)."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(x.type, [x.type]), name)
        return self.b.call(fn, [x])
