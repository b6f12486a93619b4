"""Vectorised error function in float64: FDLIBM's ``s_erf.c`` (Sun Microsystems, freely distributable)
evaluated with numpy on whole arrays, region by region.

FDLIBM's erf (the algorithm behind glibc's ``erf``, and so ``math.erf``) is accurate to < 1 ulp in float64:

* ``|x| < 2**-28``: ``x + efx * x`` (``0.125 * (8x + efx8 * x)`` for subnormals);
* ``|x| < 0.84375``: ``x + x * R(x**2) / S(x**2)``;
* ``|x| < 1.25``: ``erx + P(|x| - 1) / Q(|x| - 1)`` (sign of x);
* ``|x| < 6``: ``1 - exp(-z*z - 0.5625) * exp((z - |x|)(z + |x|) + R(1/x**2) / S(1/x**2)) / |x|`` with ``z`` =
  ``|x|`` truncated to its high 32 bits, two coefficient sets split at ``|x| = 1/0.35``;
* ``|x| >= 6``: ``±1``; ``erf(nan) = nan``.

numpy's ``exp`` may differ from the C library's by an ulp, so results can differ from ``math.erf`` in the last
float64 bit; rounded to float32 they agree (used by the float32/float16 Erf and Gelu kernels).
"""
from __future__ import annotations

import numpy as np

ERX = 8.45062911510467529297e-01
EFX = 1.28379167095512586316e-01
EFX8 = 1.02703333676410069053e+00
PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
      -5.77027029648944159157e-03, -2.37630166566501626084e-05)
QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
      1.32494738004321644526e-04, -3.96022827877536812320e-06)
PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
      3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
      -2.16637559486879084300e-03)
QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
      1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
      -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
      -8.12874355063065934246e+01, -9.81432934416914548592e+00)
SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
      6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
      6.57024977031928170135e+00, -6.04244152148580987438e-02)
RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
      -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
      -4.83519191608651397019e+02)
SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
      3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
      -2.24409524465858183362e+01)
TINY = 2.0 ** -28
SUBNORMAL = 2.0 ** -1022
ONE_OVER_035 = float(np.array([0x4006DB6E00000000], np.uint64).view(np.float64)[0])   # FDLIBM's split


def _poly(c: tuple, t: np.ndarray) -> np.ndarray:
    """c[0] + t*(c[1] + t*(c[2] + ...)) in FDLIBM's evaluation order."""
    acc = t * c[-1]
    acc += c[-2]
    for k in c[-3::-1]:
        acc *= t
        acc += k
    return acc


def erf(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array (see the module docstring).  erf is odd in every region, so it is computed on
    ``|x|`` and the sign of ``x`` is copied at the end (``erf(-0.0) = -0.0``, ``erf(nan) = nan``)."""
    x = np.asarray(x, np.float64)
    if x.ndim != 1:                               # flat index arrays: fancy indexing stays cheap
        return erf(x.reshape(-1)).reshape(x.shape)
    ax = np.abs(x)
    out = np.ones_like(ax)                       # |x| >= 6
    out[np.isnan(ax)] = np.nan
    region = np.searchsorted(np.array([0.84375, 1.25, ONE_OVER_035, 6.0]), ax, side="right")

    i = np.nonzero(region == 0)
    if i[0].size:
        a = ax[i]
        z = a * a
        r = _poly(PP, z)
        r /= _poly(QQ, z)
        r *= a
        r += a
        small = a < TINY
        if small.any():
            at = a[small]
            r[small] = np.where(at < SUBNORMAL, 0.125 * (8.0 * at + EFX8 * at), at + EFX * at)
        out[i] = r

    i = np.nonzero(region == 1)
    if i[0].size:
        s = ax[i] - 1.0
        q = _poly(PA, s)
        q /= _poly(QA, s)
        q += ERX
        out[i] = q

    for k, (rc, sc) in ((2, (RA, SA)), (3, (RB, SB))):
        i = np.nonzero(region == k)
        if not i[0].size:
            continue
        a = ax[i]
        s = 1.0 / (a * a)
        ratio = _poly(rc, s)
        ratio /= _poly(sc, s)
        z = (a.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
        e1 = np.exp(-z * z - 0.5625)
        ratio += (z - a) * (z + a)
        e1 *= np.exp(ratio)
        e1 /= a
        out[i] = 1.0 - e1
    return np.copysign(out, x, out=out)
