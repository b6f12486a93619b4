"""Padding ops (pure index maps, kind INJECTIVE): Pad (opset 21+: pads/constant_value/axes inputs; modes
constant, reflect, edge, wrap) and CenterCropPad.

Pad with a negative amount crops that side: the kernel crops first, then pads the cropped tensor.
"""
from __future__ import annotations

import numpy as np

from .registry import KernelError, OpKind, reference
from .tensor import as_ints, const_input, norm_axes, same_dtype

_NP_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def pad_amounts(rank: int, pads, axes=None) -> list[tuple[int, int]]:
    """Per-axis (begin, end) amounts from ONNX ``pads`` = [b_axis0, b_axis1, ..., e_axis0, e_axis1, ...]."""
    pads = as_ints(pads, "Pad pads")
    axes = list(range(rank)) if axes is None else norm_axes(as_ints(axes, "Pad axes"), rank, "Pad axes")
    if len(pads) != 2 * len(axes):
        raise KernelError(f"Pad pads {pads} must have 2 x {len(axes)} entries")
    amounts = [(0, 0)] * rank
    for i, a in enumerate(axes):
        amounts[a] = (pads[i], pads[i + len(axes)])
    return amounts


def _padded_shape(shape, amounts) -> tuple[int, ...]:
    out = tuple(d + b + e for d, (b, e) in zip(shape, amounts))
    if any(d < 0 for d in out):
        raise KernelError(f"Pad amounts {amounts} crop more than the shape {list(shape)}")
    return out


def _pad_infer(node):
    amounts = pad_amounts(node.inputs[0].type.rank, const_input(node, 1), const_input(node, 3))
    mode = node.attrs.get("mode", "constant")
    if mode not in _NP_MODES:
        raise KernelError(f"Pad mode {mode!r} is not one of {sorted(_NP_MODES)}")
    return same_dtype(node, _padded_shape(node.inputs[0].shape, amounts))


@reference("Pad", kind=OpKind.INJECTIVE, infer=_pad_infer, static_inputs=(1, 3))
def pad(attrs, x, pads, constant_value=None, axes=None):
    mode = attrs.get("mode", "constant")
    if mode not in _NP_MODES:
        raise KernelError(f"Pad mode {mode!r} is not one of {sorted(_NP_MODES)}")
    amounts = pad_amounts(x.ndim, pads, axes)
    shape = _padded_shape(x.shape, amounts)
    crop = tuple(slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(x.shape, amounts))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in amounts]
    if mode != "constant" and any(d == 0 and w != (0, 0) for d, w in zip(x.shape, widths)):
        raise KernelError(f"Pad mode {mode!r} cannot extend an empty axis")
    if mode == "reflect" and any(w != (0, 0) and max(w) >= d for d, w in zip(x.shape, widths)):
        raise KernelError(f"Pad mode 'reflect' needs pads smaller than the axis length: {amounts} on {x.shape}")
    if mode == "constant":
        value = 0 if constant_value is None or np.size(constant_value) == 0 else np.asarray(constant_value).item()
        out = np.pad(x, widths, mode="constant", constant_values=value)
    else:
        out = np.pad(x, widths, mode=_NP_MODES[mode])
    assert out.shape == shape
    return out


# -- CenterCropPad -------------------------------------------------------------------------------------------
def _crop_pad_plan(in_shape, target, axes):
    """Per-axis (target length, crop start, pad before): crops start at (dim - n) // 2, pads put the input at
    (n - dim) // 2, as in the ONNX definition."""
    target = as_ints(target, "CenterCropPad shape")
    rank = len(in_shape)
    axes = list(range(rank)) if axes is None else norm_axes(axes, rank, "CenterCropPad axes")
    if len(target) != len(axes) or any(n < 0 for n in target):
        raise KernelError(f"CenterCropPad shape {target} does not fit axes {axes}")
    plan = {a: (n, max(in_shape[a] - n, 0) // 2, max(n - in_shape[a], 0) // 2) for a, n in zip(axes, target)}
    return plan


def _center_crop_pad_infer(node):
    shape = list(node.inputs[0].shape)
    for a, (n, _, _) in _crop_pad_plan(shape, const_input(node, 1), node.attrs.get("axes")).items():
        shape[a] = n
    return same_dtype(node, shape)


@reference("CenterCropPad", kind=OpKind.INJECTIVE, infer=_center_crop_pad_infer, static_inputs=(1,))
def center_crop_pad(attrs, x, shape):
    plan = _crop_pad_plan(x.shape, shape, attrs.get("axes"))
    out_shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for a, (n, crop, before) in plan.items():
        out_shape[a] = n
        kept = min(n, x.shape[a])
        src[a] = slice(crop, crop + kept)
        dst[a] = slice(before, before + kept)
    out = np.zeros(out_shape, x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out
