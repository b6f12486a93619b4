"""Weights stored with fewer bits in the ``.ms``: per-channel symmetric quantization and its inverse.

``quantize(w, bits, axis)`` gives integers ``q`` (int8 for up to 8 bits, int16 up to 16) and one float32 scale
per slice of ``axis``, with ``w ~ q * scale``:

* 2-16 bits: ``scale = max|w| / (2**(bits-1) - 1)`` per slice, ``q = round(w / scale)`` (ties to even), so
  ``q`` lies in ``[-(2**(bits-1) - 1), 2**(bits-1) - 1]``; an all-zero slice gets scale 1 and zeros;
* 1 bit: ``q = sign(w)`` (+1 for 0) and ``scale = mean|w|`` per slice (binary weights).

``dequantize(q, scale, axis, dtype)`` is ``q * scale`` in float32, cast to ``dtype``; the converter computes its
model with exactly these values and the loader rebuilds them from the file (model/graph_codec.py), so a quantized
model runs the same on every machine.  Bits below 8 are not packed: they shrink the file like 8 bits do.
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


def quantize(w: np.ndarray, bits: int, axis: int) -> QuantizedWeight:
    if not 1 <= bits <= 16:
        raise ValueError(f"bits must be in [1, 16], got {bits}")
    w = np.asarray(w)
    axis = axis % w.ndim
    x = np.moveaxis(w.astype(np.float32), axis, 0).reshape(w.shape[axis], -1)
    if bits == 1:
        scale = np.abs(x).mean(axis=1).astype(np.float32)
        q = np.where(x >= 0, 1, -1)
    else:
        qmax = 2 ** (bits - 1) - 1
        peak = np.abs(x).max(axis=1) if x.size else np.zeros(x.shape[0], np.float32)
        scale = np.where(peak > 0, peak / np.float32(qmax), np.float32(1)).astype(np.float32)
        q = np.clip(np.rint(x.astype(np.float64) / scale[:, None]), -qmax, qmax)   # float64: exact halves
    q = np.moveaxis(q.astype(storage_dtype(bits)).reshape(np.moveaxis(w, axis, 0).shape), 0, axis)
    return QuantizedWeight(np.ascontiguousarray(q), scale, axis, bits, w.dtype)


def dequantize(q: np.ndarray, scale: np.ndarray, axis: int, dtype) -> np.ndarray:
    shape = [1] * q.ndim
    shape[axis] = -1
    return (q.astype(np.float32) * np.asarray(scale, np.float32).reshape(shape)).astype(dtype)
