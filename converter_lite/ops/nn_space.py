"""Reference kernels: spatial rearrangement and sampling.

* ``DepthToSpace(X[N, C, H, W])``, ``blocksize b``: ``[N, C/b^2, H*b, W*b]``; ``DCR`` (default) reads the
  depth as ``(b, b, C/b^2)``, ``CRD`` as ``(C/b^2, b, b)``.
* ``SpaceToDepth`` (opset 28 ``mode``, default DCR): the inverse, ``[N, C*b^2, H/b, W/b]``.
* ``AffineGrid(theta[N, r, r+1], size)``: ``grid[n, ..., :] = theta[n] @ (x, y[, z], 1)`` over the normalized
  base grid (``linspace(-1, 1, S)`` with ``align_corners``, pixel centres ``(2i + 1) / S - 1`` without).
* ``GridSample(X[N, C, D...], grid[N, O..., r])``: samples X at ``grid`` (component 0 indexes the LAST spatial
  dim); ``mode`` linear / nearest (round half to even) / cubic (Keys, a = -0.75); ``padding_mode`` zeros
  (out-of-range taps read 0), border (taps clamped), reflection (tap indices reflected about
  ``[0, S-1]`` or ``[-0.5, S-0.5]``), applied per tap as onnxruntime does.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..ir.core import Node, TensorType
from .nn_window import compute_dtype
from .registry import KernelError, reference


# -- DepthToSpace / SpaceToDepth -----------------------------------------------------------------------------
def _block(op: str, attrs: dict, shape) -> int:
    if len(shape) != 4:
        raise KernelError(f"{op}: input must be 4-D, got {list(shape)}")
    if "blocksize" not in attrs or int(attrs["blocksize"]) < 1:
        raise KernelError(f"{op}: attribute blocksize (>= 1) is required")
    mode = attrs.get("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise KernelError(f"{op}: mode {mode!r} is not DCR or CRD")
    return int(attrs["blocksize"])


def _depth_to_space_shape(attrs: dict, shape) -> tuple[int, ...]:
    b = _block("DepthToSpace", attrs, shape)
    n, c, h, w = shape
    if c % (b * b):
        raise KernelError(f"DepthToSpace: channels {c} not divisible by blocksize^2 = {b * b}")
    return (n, c // (b * b), h * b, w * b)


def _space_to_depth_shape(attrs: dict, shape) -> tuple[int, ...]:
    b = _block("SpaceToDepth", attrs, shape)
    n, c, h, w = shape
    if h % b or w % b:
        raise KernelError(f"SpaceToDepth: spatial dims {h}x{w} not divisible by blocksize {b}")
    return (n, c * b * b, h // b, w // b)


def _infer_with(shape_fn):
    def infer(node: Node) -> list[TensorType]:
        x = node.inputs[0].type
        return [TensorType(x.dtype, shape_fn(node.attrs, x.shape))]
    return infer


@reference("DepthToSpace", infer=_infer_with(_depth_to_space_shape))
def depth_to_space(attrs, x):
    out = _depth_to_space_shape(attrs, x.shape)
    b = int(attrs["blocksize"])
    n, c, h, w = x.shape
    if attrs.get("mode", "DCR") == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(out)


@reference("SpaceToDepth", infer=_infer_with(_space_to_depth_shape))
def space_to_depth(attrs, x):
    out = _space_to_depth_shape(attrs, x.shape)
    b = int(attrs["blocksize"])
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b)
    perm = (0, 3, 5, 1, 2, 4) if attrs.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    return t.transpose(perm).reshape(out)


# -- AffineGrid ----------------------------------------------------------------------------------------------
def _affine_grid_shape(theta_shape, size) -> tuple[int, ...]:
    size = tuple(int(v) for v in np.asarray(size).reshape(-1))
    r = len(size) - 2
    if r not in (2, 3) or tuple(theta_shape) != (size[0], r, r + 1):
        raise KernelError(f"AffineGrid: theta {list(theta_shape)} does not fit size {list(size)}")
    return (size[0],) + size[2:] + (r,)


def _infer_affine_grid(node: Node) -> list[TensorType]:
    theta = node.inputs[0].type
    return [TensorType(theta.dtype, _affine_grid_shape(theta.shape, node.inputs[1].const))]


@reference("AffineGrid", infer=_infer_affine_grid, static_inputs=(1,))
def affine_grid(attrs, theta, size):
    out = _affine_grid_shape(theta.shape, size)
    spatial = out[1:-1]
    ct = compute_dtype(theta.dtype)
    axes = []
    for s in reversed(spatial):               # x first: component 0 runs along the last spatial dim
        if attrs.get("align_corners", 0):
            axes.append(np.linspace(-1.0, 1.0, s, dtype=ct))
        else:
            axes.append(((np.arange(s, dtype=ct) * 2 + 1) / s - 1).astype(ct))
    mesh = np.meshgrid(*reversed(axes), indexing="ij")          # each of shape spatial
    base = np.stack(list(reversed(mesh)) + [np.ones(spatial, ct)], axis=-1)   # spatial..., r + 1
    grid = np.einsum("...k,njk->n...j", base, theta.astype(ct, copy=False))
    return grid.astype(theta.dtype, copy=False)


# -- GridSample ----------------------------------------------------------------------------------------------
def _grid_sample_shape(x_shape, g_shape) -> tuple[int, ...]:
    r = len(x_shape) - 2
    if r < 1 or len(g_shape) != r + 2 or g_shape[0] != x_shape[0] or g_shape[-1] != r:
        raise KernelError(f"GridSample: X {list(x_shape)} and grid {list(g_shape)} do not agree")
    return tuple(x_shape[:2]) + tuple(g_shape[1:-1])


def _infer_grid_sample(node: Node) -> list[TensorType]:
    x, g = node.inputs[0].type, node.inputs[1].type
    return [TensorType(x.dtype, _grid_sample_shape(x.shape, g.shape))]


def _reflect(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.zeros_like(v)
    d = np.where(v < lo, lo - v, np.where(v > hi, v - hi, 0.0))
    n = np.floor(d / span)
    r = d - n * span
    even = n % 2 == 0
    low = np.where(even, lo + r, hi - r)
    high = np.where(even, hi - r, lo + r)
    return np.where(v < lo, low, np.where(v > hi, high, v))


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@reference("GridSample", infer=_infer_grid_sample)
def grid_sample(attrs, x, grid):
    out = _grid_sample_shape(x.shape, grid.shape)
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(attrs.get("mode", "linear"), attrs.get("mode", "linear"))
    padding = attrs.get("padding_mode", "zeros")
    align = bool(attrs.get("align_corners", 0))
    ct = compute_dtype(x.dtype)
    r = x.ndim - 2
    sizes = x.shape[2:]
    g = grid.astype(np.float64)
    taps_per_dim = []                       # per spatial dim: list of (index array, weight array)
    for d in range(r):
        s = sizes[d]
        gc = g[..., r - 1 - d]
        pos = (gc + 1) / 2 * (s - 1) if align else ((gc + 1) * s - 1) / 2
        if mode == "nearest":
            taps = [(np.rint(pos), np.ones_like(pos))]
        elif mode == "linear":
            lo = np.floor(pos)
            taps = [(lo, lo + 1 - pos), (lo + 1, pos - lo)]
        elif mode == "cubic":
            lo = np.floor(pos)
            taps = list(zip((lo - 1, lo, lo + 1, lo + 2), _cubic_weights(pos - lo)))
        else:
            raise KernelError(f"GridSample: mode {mode!r} is not supported")
        taps_per_dim.append(taps)
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * (r))
    xc = np.moveaxis(x.astype(ct, copy=False), 1, -1)              # N, D..., C
    y = np.zeros(tuple(grid.shape[:-1]) + (x.shape[1],), np.float64)
    for combo in itertools.product(*taps_per_dim):
        weight = np.ones(grid.shape[:-1])
        valid = np.ones(grid.shape[:-1], bool)
        index = []
        for d, (idx, w) in enumerate(combo):
            s = sizes[d]
            if padding == "zeros":
                valid &= (idx >= 0) & (idx < s)
            elif padding == "reflection":
                idx = _reflect(idx, 0.0, s - 1.0) if align else _reflect(idx, -0.5, s - 0.5)
            elif padding != "border":
                raise KernelError(f"GridSample: padding_mode {padding!r} is not supported")
            index.append(np.clip(idx, 0, s - 1).astype(np.int64))
            weight = weight * w
        values = xc[(n_idx, *index)]                                # N, O..., C
        y += np.where(valid, weight, 0.0)[..., None] * values
    return np.moveaxis(y, -1, 1).astype(x.dtype, copy=False).reshape(out)
