"""Reference kernels: Conv, ConvTranspose and Col2Im (N-D, grouped, dilated, strided, padded).

* ``Conv(X[N,C,D...], W[M,C/g,k...], B[M]?)``: a strided window view (``nn_window.windows``) of the padded
  input, then per group either im2col and one matmul ``Y[n,g,:,p] = W[g] @ cols[n,g,p,:]``, or the same sum
  accumulated tap by tap ``Y[n,g] += W[g,:,:,t] @ X_t[n,g]`` (wide groups, depthwise).
* ``ConvTranspose(X[N,C,D...], W[C,M/g,k...], B[M]?)``: the adjoint: per-group matmul
  ``cols[n,g,m,t,i] = sum_c X[n,g,c,i] W[g,c,m,t]`` then col2im (``scatter_windows``) into the full output
  ``(D - 1) * s + e`` and a crop of the pads.  Output size
  ``full - pb - pe`` with ``full = (D - 1) * s + output_padding + e``.  With ``output_shape`` (or SAME_*,
  wanting ``D * s``) the total padding is ``max(0, full - wanted)``: SAME_UPPER puts ``total // 2`` at the
  begin, NOTSET/SAME_LOWER the rest (as ONNX and onnxruntime do); SAME_* alone never makes the output
  larger than ``full`` (onnxruntime), while ``output_shape`` may (zeros past ``full``).
* ``Col2Im(input[N, C*prod(block), L], image_shape, block_shape)``: sums the L columns back into the image.

float16 is computed in float32 and rounded once at the end.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType
from .nn_window import Window, compute_dtype, int_tuple, prod, resolve_window, scatter_windows, windows
from .registry import KernelError, reference


# -- Conv ----------------------------------------------------------------------------------------------------
def _conv_geometry(attrs: dict, x_shape, w_shape) -> tuple[int, Window]:
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise KernelError(f"Conv: X {list(x_shape)} and W {list(w_shape)} must have the same rank >= 3")
    group = int(attrs.get("group", 1))
    c, m = x_shape[1], w_shape[0]
    if group < 1 or c != w_shape[1] * group or m % group:
        raise KernelError(f"Conv: X channels {c}, W {list(w_shape)} and group {group} do not agree")
    kernel = tuple(attrs.get("kernel_shape", w_shape[2:]))
    if kernel != tuple(w_shape[2:]):
        raise KernelError(f"Conv: kernel_shape {list(kernel)} differs from W's spatial dims {list(w_shape[2:])}")
    return group, resolve_window("Conv", attrs, tuple(x_shape[2:]), kernel)


def _infer_conv(node: Node) -> list[TensorType]:
    x, w = node.inputs[0].type, node.inputs[1].type
    _, win = _conv_geometry(node.attrs, x.shape, w.shape)
    return [TensorType(x.dtype, (x.shape[0], w.shape[0]) + win.out)]


# im2col's gather (one big transposing copy) loses to per-tap accumulation once a group has this many input
# channels: each tap is then a plain (Mg x Cg) @ (Cg x P) product over a 2-D strided copy (measured on
# ResNet/MobileNet shapes, 2-4x faster); with fewer channels the per-tap products get too thin
TAP_LOOP_MIN_CHANNELS = 8


@reference("Conv", infer=_infer_conv)
def conv(attrs, x, w, b=None):
    group, win = _conv_geometry(attrs, x.shape, w.shape)
    ct = compute_dtype(x.dtype)
    n = x.shape[0]
    m, cg = w.shape[:2]
    mg, nsp, p, k = m // group, len(win.out), prod(win.out), prod(win.kernel)
    cols = windows(x.astype(ct, copy=False), win, 0)                 # N, C, O..., K...
    cols = cols.reshape((n, group, cg) + cols.shape[2:])              # N, G, Cg, O..., K... (a view)
    wk = w.astype(ct, copy=False).reshape(group, mg, cg, k)
    if cg == 1 or cg >= TAP_LOOP_MIN_CHANNELS:
        y = np.zeros((n, group, mg, p), ct)
        for ti, tap in enumerate(np.ndindex(*win.kernel)):
            xs = cols[(Ellipsis,) + tap].reshape(n, group, cg, p)
            if cg == 1:                                               # depthwise: a broadcast product
                y += xs * wk[None, :, :, 0, ti, None]
            else:
                y += np.matmul(wk[:, :, :, ti], xs)
    else:
        perm = (0, 1) + tuple(range(3, 3 + nsp)) + (2,) + tuple(range(3 + nsp, 3 + 2 * nsp))
        cols = cols.transpose(perm).reshape(n, group, p, cg * k)      # im2col: N, G, P, Cg*K
        y = np.matmul(wk.reshape(group, mg, cg * k), cols.transpose(0, 1, 3, 2))   # N, G, Mg, P
    y = y.reshape((n, m) + win.out)
    if b is not None:
        y = y + b.astype(ct, copy=False).reshape((m,) + (1,) * nsp)
    return y.astype(x.dtype, copy=False)


# -- ConvTranspose --------------------------------------------------------------------------------------------
def _conv_transpose_geometry(attrs: dict, x_shape, w_shape) -> tuple[int, Window, tuple[int, ...]]:
    """Returns (group, window over the full output, output spatial sizes); the window's ``out`` is the input
    spatial shape (col2im direction) and its pads are those cropped from the full output."""
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise KernelError(f"ConvTranspose: X {list(x_shape)} and W {list(w_shape)} must have the same rank >= 3")
    group = int(attrs.get("group", 1))
    if group < 1 or x_shape[1] != w_shape[0] or x_shape[1] % group:
        raise KernelError(f"ConvTranspose: X channels {x_shape[1]}, W {list(w_shape)} and group {group} disagree")
    op, n = "ConvTranspose", len(x_shape) - 2
    kernel = tuple(attrs.get("kernel_shape", w_shape[2:]))
    if kernel != tuple(w_shape[2:]):
        raise KernelError(f"{op}: kernel_shape {list(kernel)} differs from W's spatial dims {list(w_shape[2:])}")
    strides = int_tuple(attrs, "strides", (1,) * n, n, op)
    dilations = int_tuple(attrs, "dilations", (1,) * n, n, op)
    adj = int_tuple(attrs, "output_padding", (0,) * n, n, op)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    spatial = tuple(x_shape[2:])
    full = [(i - 1) * s + (k - 1) * d + 1 + a for i, s, k, d, a in zip(spatial, strides, kernel, dilations, adj)]
    wanted = attrs.get("output_shape")
    if wanted is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if wanted is not None:
            out = tuple(int(v) for v in wanted)
            if len(out) != n:
                raise KernelError(f"{op}: output_shape {list(out)} must have {n} (spatial) entries")
        else:
            out = tuple(i * s for i, s in zip(spatial, strides))
        total = [max(0, f - o) for f, o in zip(full, out)]
        if wanted is None:      # SAME_* never grows the output past ``full``
            out = tuple(f - t for f, t in zip(full, total))
        if auto_pad == "SAME_UPPER":
            pb = tuple(t // 2 for t in total)
        else:
            pb = tuple(t - t // 2 for t in total)
    elif auto_pad in ("NOTSET", "VALID"):
        pads = int_tuple(attrs, "pads", (0,) * (2 * n), 2 * n, op) if auto_pad == "NOTSET" else (0,) * (2 * n)
        pb = pads[:n]
        out = tuple(f - b - e for f, b, e in zip(full, pads[:n], pads[n:]))
    else:
        raise KernelError(f"{op}: auto_pad {auto_pad!r} is not supported")
    if min(out, default=1) < 0:
        raise KernelError(f"{op}: negative output size {list(out)}")
    pe = tuple(f - b - o for f, b, o in zip(full, pb, out))
    return group, Window(kernel, strides, dilations, pb, pe, spatial), out


def _infer_conv_transpose(node: Node) -> list[TensorType]:
    x, w = node.inputs[0].type, node.inputs[1].type
    group, _, out = _conv_transpose_geometry(node.attrs, x.shape, w.shape)
    return [TensorType(x.dtype, (x.shape[0], w.shape[1] * group) + out)]


@reference("ConvTranspose", infer=_infer_conv_transpose)
def conv_transpose(attrs, x, w, b=None):
    group, win, out = _conv_transpose_geometry(attrs, x.shape, w.shape)
    ct = compute_dtype(x.dtype)
    n, c = x.shape[:2]
    mg, nsp = w.shape[1], len(out)
    pin, k = prod(win.out), prod(win.kernel)
    xg = x.astype(ct, copy=False).reshape(n, group, c // group, pin).transpose(0, 1, 3, 2)  # N, G, Pin, Cg
    wg = w.astype(ct, copy=False).reshape(group, c // group, mg * k)                       # G, Cg, Mg*K
    cols = np.matmul(xg, wg).reshape((n, group, pin, mg, k))                                # N, G, Pin, Mg, K
    cols = cols.transpose(0, 1, 3, 4, 2).reshape((n, group * mg) + win.kernel + win.out)
    # buffer large enough for the full result and for pads/output_padding reaching past it
    size = tuple(max((i - 1) * s + e, b + o)
                 for i, s, e, b, o in zip(win.out, win.strides, win.effective, win.pads_begin, out))
    buf = scatter_windows(cols, size, win)
    y = buf[(slice(None), slice(None)) + tuple(slice(b, b + o) for b, o in zip(win.pads_begin, out))]
    if b is not None:
        y = y + b.astype(ct, copy=False).reshape((-1,) + (1,) * nsp)
    return np.ascontiguousarray(y, dtype=x.dtype)


# -- Col2Im ---------------------------------------------------------------------------------------------------
def _col2im_geometry(attrs: dict, x_shape, image_shape, block_shape) -> tuple[int, Window]:
    image = tuple(int(v) for v in np.asarray(image_shape).reshape(-1))
    block = tuple(int(v) for v in np.asarray(block_shape).reshape(-1))
    if len(x_shape) != 3 or len(image) != len(block):
        raise KernelError(f"Col2Im: input {list(x_shape)}, image_shape {list(image)}, block_shape {list(block)}")
    win = resolve_window("Col2Im", attrs, image, block)
    if x_shape[1] % prod(block) or x_shape[2] != prod(win.out):
        raise KernelError(f"Col2Im: input {list(x_shape)} does not match blocks {list(block)} over {list(win.out)}")
    return x_shape[1] // prod(block), win


def _infer_col2im(node: Node) -> list[TensorType]:
    x = node.inputs[0].type
    c, _ = _col2im_geometry(node.attrs, x.shape, node.inputs[1].const, node.inputs[2].const)
    image = tuple(int(v) for v in node.inputs[1].const.reshape(-1))
    return [TensorType(x.dtype, (x.shape[0], c) + image)]


@reference("Col2Im", infer=_infer_col2im, static_inputs=(1, 2))
def col2im(attrs, x, image_shape, block_shape):
    c, win = _col2im_geometry(attrs, x.shape, image_shape, block_shape)
    image = tuple(int(v) for v in np.asarray(image_shape).reshape(-1))
    ct = compute_dtype(x.dtype)
    cols = x.astype(ct, copy=False).reshape((x.shape[0], c) + win.kernel + win.out)
    size = tuple(i + b + e for i, b, e in zip(image, win.pads_begin, win.pads_end))
    size = tuple(max(sz, (o - 1) * s + e) for sz, o, s, e in zip(size, win.out, win.strides, win.effective))
    buf = scatter_windows(cols, size, win)
    y = buf[(slice(None), slice(None)) + tuple(slice(b, b + i) for b, i in zip(win.pads_begin, image))]
    return np.ascontiguousarray(y, dtype=x.dtype)
