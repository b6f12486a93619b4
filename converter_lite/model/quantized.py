"""Weights stored with fewer bits in the ``.ms``: per-channel symmetric quantization and its inverse.

``quantize(w, bits, axis)`` gives integers ``q`` (int8 for up to 8 bits, int16 up to 16) and one float32 scale
per slice of ``axis``, with ``w ~ q * scale``:

* 2-16 bits: ``scale = max|w| / (2**(bits-1) - 1)`` per slice, ``q = round(w / scale)`` (ties to even), so
  ``q`` lies in ``[-(2**(bits-1) - 1), 2**(bits-1) - 1]``; an all-zero slice gets scale 1 and zeros;
* 1 bit: ``q = sign(w)`` (+1 for 0) and ``scale = mean|w|`` per slice (binary weights).

``dequantize(q, scale, axis, dtype)`` is ``q * scale`` in float32, cast to ``dtype``; the converter computes its
model with exactly these values and the loader rebuilds them from the file (model/graph_codec.py), so a quantized
model runs the same on every machine.

``per_channel=False`` gives one scale for the whole tensor (MindSpore's ``[weight_quant_param] per_channel``).

Below 8 bits the integers are stored packed (``pack_bits``/``unpack_bits``, MindSpore's ``enable_encode``): ``q +
qmax`` (1 bit: ``q > 0``) in ``bits`` bits each, little-endian within each group of 8 values (8 values -> ``bits``
bytes), so 4-bit weights take half the bytes of 8-bit ones.

``mixed_bits(w, axis, init_scale)`` is MindSpore's mixed-bit choice (``bit_num=0``): the fewest bits whose
quantization error relative to the weight, ``||w - dequantize(q)|| / ||w||``, is at most ``init_scale`` (2-16
bits; a weight that needs more stays at 16).  For Gaussian-like weights one bit more halves that error: MindSpore's
default 0.02 lands at 6-7 bits (its documentation: "a compression rate comparable to 6-7 fixed bits").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QuantizedWeight:
    q: np.ndarray                  # int8 / int16, the weight's shape
    scale: np.ndarray              # float32, one per slice of ``axis``
    axis: int
    bits: int
    dtype: np.dtype                # of the weight it stands for

    def dequantize(self) -> np.ndarray:
        return dequantize(self.q, self.scale, self.axis, self.dtype)


def storage_dtype(bits: int) -> np.dtype:
    return np.dtype(np.int8) if bits <= 8 else np.dtype(np.int16)


def quantize(w: np.ndarray, bits: int, axis: int, per_channel: bool = True) -> QuantizedWeight:
    if not 1 <= bits <= 16:
        raise ValueError(f"bits must be in [1, 16], got {bits}")
    w = np.asarray(w)
    axis = axis % w.ndim
    x = np.moveaxis(w.astype(np.float32), axis, 0).reshape(w.shape[axis], -1)
    rows = x if per_channel else x.reshape(1, -1)
    if bits == 1:
        scale = np.abs(rows).mean(axis=1).astype(np.float32) if rows.size else np.ones(len(rows), np.float32)
        q = np.where(x >= 0, 1, -1)
    else:
        qmax = 2 ** (bits - 1) - 1
        peak = np.abs(rows).max(axis=1) if rows.size else np.zeros(len(rows), np.float32)
        scale = np.where(peak > 0, peak / np.float32(qmax), np.float32(1)).astype(np.float32)
        per_row = scale if per_channel else np.broadcast_to(scale, (x.shape[0],))
        q = np.clip(np.rint(x.astype(np.float64) / per_row[:, None]), -qmax, qmax)   # float64: exact halves
    if not per_channel:
        scale = np.ascontiguousarray(np.broadcast_to(scale, (x.shape[0],)), np.float32)
    q = np.moveaxis(q.astype(storage_dtype(bits)).reshape(np.moveaxis(w, axis, 0).shape), 0, axis)
    return QuantizedWeight(np.ascontiguousarray(q), scale, axis, bits, w.dtype)


def relative_error(w: np.ndarray, qw: QuantizedWeight) -> float:
    """``||w - dequantize(q)|| / ||w||`` (0 for an all-zero weight)."""
    a = np.asarray(w, np.float64).reshape(-1)
    norm = float(np.linalg.norm(a))
    return float(np.linalg.norm(a - qw.dequantize().astype(np.float64).reshape(-1))) / norm if norm > 0 else 0.0


def mixed_bits(w: np.ndarray, axis: int, init_scale: float, per_channel: bool = True) -> QuantizedWeight:
    """The weight quantized with the fewest bits (2-16) whose relative error is at most ``init_scale`` (module
    doc); a binary search, the error falling as bits grow."""
    lo, hi = 2, 16
    best = quantize(w, hi, axis, per_channel)
    while lo < hi:
        mid = (lo + hi) // 2
        qw = quantize(w, mid, axis, per_channel)
        if relative_error(w, qw) <= init_scale:
            hi, best = mid, qw
        else:
            lo = mid + 1
    return best if best.bits == lo else quantize(w, lo, axis, per_channel)


def pack_bits(q: np.ndarray, bits: int) -> np.ndarray:
    """``q`` (integers of ``bits`` < 8 bits, any shape) as uint8 bytes: ``ceil(q.size / 8) * bits`` of them."""
    if not 1 <= bits < 8:
        raise ValueError(f"packing is for 1-7 bits, got {bits}")
    flat = np.asarray(q).reshape(-1).astype(np.int64)
    u = (flat > 0) if bits == 1 else flat + (2 ** (bits - 1) - 1)
    groups = -(-flat.size // 8)
    padded = np.zeros(groups * 8, np.uint64)
    padded[:flat.size] = u
    words = np.bitwise_or.reduce(padded.reshape(groups, 8) << (np.arange(8, dtype=np.uint64) * np.uint64(bits)),
                                 axis=1)
    return np.ascontiguousarray(words.astype("<u8").view(np.uint8).reshape(groups, 8)[:, :bits]).reshape(-1)


def unpack_bits(data: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The ``count`` int8 integers ``pack_bits`` stored in ``data``."""
    groups = -(-count // 8)
    if data.size != groups * bits:
        raise ValueError(f"{data.size} bytes cannot hold {count} values of {bits} bits")
    words = np.zeros((groups, 8), np.uint8)
    words[:, :bits] = np.asarray(data, np.uint8).reshape(groups, bits)
    w = words.view("<u8").reshape(groups, 1)
    u = ((w >> (np.arange(8, dtype=np.uint64) * np.uint64(bits))) & np.uint64((1 << bits) - 1)).reshape(-1)[:count]
    q = u.astype(np.int16) * 2 - 1 if bits == 1 else u.astype(np.int16) - (2 ** (bits - 1) - 1)
    return q.astype(np.int8)


def dequantize(q: np.ndarray, scale: np.ndarray, axis: int, dtype) -> np.ndarray:
    shape = [1] * q.ndim
    shape[axis] = -1
    return (q.astype(np.float32) * np.asarray(scale, np.float32).reshape(shape)).astype(dtype)
