"""Reference kernel of ``DeformConv(X, W, offset, B?, mask?)`` (opset 19/22), N-D: a grouped convolution whose
taps sample X at learned fractional positions.

For output position ``o``, kernel tap ``t`` and spatial axis ``d``, channel ``c`` of offset group
``c // (C / offset_group)`` samples X at

    p_d = o_d * stride_d - pad_begin_d + t_d * dilation_d + offset[n, (og, t, d), o]

by multilinear interpolation of the ``2^n`` neighbouring pixels, a neighbour outside X counting as zero; the
sample is scaled by ``mask[n, (og, t), o]`` (default 1), then ``Y[n, m, o] = B[m] + sum_{c in group(m), t}
W[m, c, t] * sample``.  Output sizes are those of Conv (``floor((in + pads - dilated kernel) / stride) + 1``)
and must match offset's spatial shape.  float16 is computed in float32.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.core import TensorType
from .nn_window import compute_dtype, prod, resolve_window
from .registry import KernelError, reference


def _geometry(attrs: dict, x, w, offset, b, mask):
    """(group, offset_group, window) after checking every input shape."""
    if len(x) < 3 or len(w) != len(x) or len(offset) != len(x):
        raise KernelError(f"DeformConv: X {list(x)}, W {list(w)}, offset {list(offset)} need the same rank >= 3")
    n = len(x) - 2
    group, og = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    if group < 1 or og < 1 or x[1] != w[1] * group or w[0] % group or x[1] % og:
        raise KernelError(f"DeformConv: channels of X {list(x)} / W {list(w)} do not fit group {group} and "
                          f"offset_group {og}")
    kernel = tuple(attrs.get("kernel_shape", w[2:]))
    if kernel != tuple(w[2:]):
        raise KernelError(f"DeformConv: kernel_shape {list(kernel)} differs from W {list(w)}")
    win = resolve_window("DeformConv", {k: v for k, v in attrs.items() if k != "auto_pad"}, tuple(x[2:]), kernel)
    taps = prod(kernel)
    if tuple(offset) != (x[0], og * taps * n) + win.out:
        raise KernelError(f"DeformConv: offset {list(offset)} should be {[x[0], og * taps * n, *win.out]}")
    if mask is not None and tuple(mask) != (x[0], og * taps) + win.out:
        raise KernelError(f"DeformConv: mask {list(mask)} should be {[x[0], og * taps, *win.out]}")
    if b is not None and tuple(b) != (w[0],):
        raise KernelError(f"DeformConv: B {list(b)} should be [{w[0]}]")
    return group, og, win


def _infer_deform_conv(node):
    ins = [None if v is None else v.type.shape for v in node.inputs] + [None] * 5
    _, _, win = _geometry(node.attrs, *ins[:5])
    x, w = node.inputs[0].type, node.inputs[1].type
    return [TensorType(x.dtype, (x.shape[0], w.shape[0]) + win.out)]


def _sample(xg: np.ndarray, pos: np.ndarray, spatial: tuple[int, ...]) -> np.ndarray:
    """Multilinear samples of ``xg[N, OG, Cog, prod(spatial)]`` at ``pos[N, OG, n, P]`` -> ``[N, OG, Cog, P]``,
    zero outside the image."""
    lo = np.floor(pos)
    frac = pos - lo
    lo = lo.astype(np.int64)
    out = np.zeros(xg.shape[:3] + pos.shape[-1:], xg.dtype)
    strides = [prod(spatial[d + 1:]) for d in range(len(spatial))]
    for corner in itertools.product((0, 1), repeat=len(spatial)):
        flat = np.zeros(lo.shape[:2] + lo.shape[3:], np.int64)
        weight = np.ones(flat.shape, xg.dtype)
        inside = np.ones(flat.shape, np.bool_)
        for d, bit in enumerate(corner):
            idx = lo[:, :, d] + bit
            inside &= (idx >= 0) & (idx < spatial[d])
            flat += np.clip(idx, 0, spatial[d] - 1) * strides[d]
            weight *= frac[:, :, d] if bit else 1 - frac[:, :, d]
        vals = np.take_along_axis(xg, flat[:, :, None, :], axis=3)
        out += vals * np.where(inside, weight, 0)[:, :, None, :]
    return out


@reference("DeformConv", infer=_infer_deform_conv)
def deform_conv(attrs, x, w, offset, b=None, mask=None):
    group, og, win = _geometry(attrs, x.shape, w.shape, offset.shape, None if b is None else b.shape,
                               None if mask is None else mask.shape)
    ct = compute_dtype(x.dtype)
    n, c = x.shape[:2]
    nsp, m = x.ndim - 2, w.shape[0]
    taps, p = prod(win.kernel), prod(win.out)
    grid = np.stack(np.meshgrid(*(np.arange(o) * s - pb for o, s, pb in zip(win.out, win.strides, win.pads_begin)),
                                indexing="ij")).reshape(nsp, 1, p)
    tap = np.stack(np.meshgrid(*(np.arange(k) * d for k, d in zip(win.kernel, win.dilations)),
                               indexing="ij")).reshape(nsp, taps, 1)
    off = offset.astype(ct).reshape(n, og, taps, nsp, p).transpose(0, 1, 3, 2, 4)     # N, OG, n, T, P
    pos = (off + (grid + tap)).reshape(n, og, nsp, taps * p)
    xg = x.astype(ct).reshape(n, og, c // og, prod(x.shape[2:]))
    cols = _sample(xg, pos, x.shape[2:]).reshape(n, og, c // og, taps, p)
    if mask is not None:
        cols = cols * mask.astype(ct).reshape(n, og, 1, taps, p)
    cols = cols.reshape(n, group, c // group, taps, p)
    wg = w.astype(ct).reshape(group, m // group, c // group, taps)
    y = np.einsum("gmct,ngctp->ngmp", wg, cols, optimize=True).reshape((n, m) + win.out)
    if b is not None:
        y = y + b.astype(ct).reshape((1, m) + (1,) * nsp)
    return y.astype(x.dtype, copy=False)
