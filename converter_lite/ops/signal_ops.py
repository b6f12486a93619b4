"""Signal processing: DFT (opset 20), STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix.

Complex tensors are real tensors with a trailing dimension of 2 (real, imaginary); a trailing 1 means a real
signal.  Windows and the mel matrix depend only on constant inputs, so they fold to constants; DFT/STFT are
OPAQUE.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import TensorType
from ..ir.dtype import DType
from .registry import KernelError, reference
from .tensor import as_ints, const_input


def _scalar_int(v, what: str) -> int:
    vals = as_ints(v, what)
    if len(vals) != 1:
        raise KernelError(f"{what} must hold one integer, got {vals}")
    return vals[0]


def _as_complex(x: np.ndarray, what: str) -> np.ndarray:
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise KernelError(f"{what} needs a trailing dimension of 1 (real) or 2 (complex), got {list(x.shape)}")
    x = x.astype(np.float64)
    return x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]


def _as_pairs(z: np.ndarray, dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


# -- DFT -------------------------------------------------------------------------------------------------------
def _dft_plan(shape, attrs, dft_length, axis) -> tuple[int, int, int]:
    """(signal axis, transform length, output length along the axis)."""
    rank = len(shape)
    axis = -2 if axis is None else _scalar_int(axis, "DFT axis")
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise KernelError(f"DFT axis {axis} is out of range for rank {rank} (the last dim holds complex parts)")
    axis = axis + rank if axis < 0 else axis
    n = shape[axis] if dft_length is None else _scalar_int(dft_length, "DFT dft_length")
    if n < 1:
        raise KernelError(f"DFT length {n} must be positive")
    onesided = attrs.get("onesided", 0)
    if onesided and (attrs.get("inverse", 0) or shape[-1] != 1):
        raise KernelError("DFT onesided=1 needs a real input and inverse=0")
    return axis, n, n // 2 + 1 if onesided else n


def _dft_infer(node):
    shape = node.inputs[0].shape
    axis, _, out_n = _dft_plan(shape, node.attrs, const_input(node, 1), const_input(node, 2))
    return [TensorType(node.inputs[0].dtype, shape[:axis] + (out_n,) + shape[axis + 1:-1] + (2,))]


@reference("DFT", infer=_dft_infer, static_inputs=(1, 2))
def dft(attrs, x, dft_length=None, axis=None):
    """Forward: X[k] = sum_n x[n] exp(-2 pi i k n / N); inverse: the conjugate transform divided by N.  The
    signal is zero-padded or truncated to ``dft_length`` along the axis first."""
    ax, n, out_n = _dft_plan(x.shape, attrs, dft_length, axis)
    z = _as_complex(x, "DFT input")
    z = np.fft.ifft(z, n=n, axis=ax) if attrs.get("inverse", 0) else np.fft.fft(z, n=n, axis=ax)
    return _as_pairs(np.take(z, np.arange(out_n), axis=ax), x.dtype)


# -- STFT ------------------------------------------------------------------------------------------------------
def _stft_plan(shape, attrs, frame_step, window_shape, frame_length) -> tuple[int, int, int, int]:
    """(frame step, frame length, frame count, bins)."""
    if len(shape) != 3 or shape[-1] not in (1, 2):
        raise KernelError(f"STFT signal must be [batch, length, 1 or 2], got {list(shape)}")
    step = _scalar_int(frame_step, "STFT frame_step")
    if frame_length is not None:
        length = _scalar_int(frame_length, "STFT frame_length")
    elif window_shape is not None:
        length = window_shape[0]
    else:
        raise KernelError("STFT needs a window or a frame_length")
    if window_shape is not None and tuple(window_shape) != (length,):
        raise KernelError(f"STFT window of shape {list(window_shape)} does not match frame length {length}")
    if step < 1 or not 1 <= length <= shape[1]:
        raise KernelError(f"STFT frame_step {step} / frame_length {length} do not fit signal length {shape[1]}")
    onesided = attrs.get("onesided", 1)
    if onesided and shape[-1] != 1:
        raise KernelError("STFT onesided=1 needs a real signal")
    return step, length, (shape[1] - length) // step + 1, length // 2 + 1 if onesided else length


def _stft_infer(node):
    w = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    shape = node.inputs[0].shape
    _, _, frames, bins = _stft_plan(shape, node.attrs, const_input(node, 1), None if w is None else w.shape,
                                    const_input(node, 3))
    return [TensorType(node.inputs[0].dtype, (shape[0], frames, bins, 2))]


@reference("STFT", infer=_stft_infer, static_inputs=(1, 3))
def stft(attrs, signal, frame_step, window=None, frame_length=None):
    """out[b, f, k] = DFT_k(signal[b, f * step : f * step + length] * window)."""
    step, length, frames, bins = _stft_plan(signal.shape, attrs, frame_step,
                                            None if window is None else window.shape, frame_length)
    z = _as_complex(signal, "STFT signal")
    starts = np.arange(frames) * step
    framed = z[:, starts[:, None] + np.arange(length)]      # [batch, frames, length]
    if window is not None:
        framed = framed * window.astype(np.float64)
    return _as_pairs(np.fft.fft(framed, axis=-1)[..., :bins], signal.dtype)


# -- windows ---------------------------------------------------------------------------------------------------
# generalized cosine windows: w[n] = sum_k (-1)^k a_k cos(2 pi k n / N), N = size (periodic) or size - 1
_WINDOW_COEFFS = {"HannWindow": (0.5, 0.5), "HammingWindow": (25 / 46, 21 / 46), "BlackmanWindow": (0.42, 0.5, 0.08)}


def _window_type(node) -> list[TensorType]:
    size = _scalar_int(const_input(node, 0), f"{node.op} size")
    return [TensorType(DType(node.attrs.get("output_datatype", int(DType.float32))), (max(size, 0),))]


def _window(op: str):
    coeffs = _WINDOW_COEFFS[op]

    @reference(op, infer=_window_type, static_inputs=(0,))
    def window(attrs, size):
        size = max(_scalar_int(size, f"{op} size"), 0)
        denom = size if attrs.get("periodic", 1) else size - 1
        n = np.arange(size, dtype=np.float64)
        with np.errstate(all="ignore"):
            w = sum((-1) ** k * a * np.cos(2 * np.pi * k * n / denom) for k, a in enumerate(coeffs))
        return np.asarray(w).astype(DType(attrs.get("output_datatype", int(DType.float32))).np)
    return window


for _op in _WINDOW_COEFFS:
    _window(_op)


# -- MelWeightMatrix -------------------------------------------------------------------------------------------
def _mel_args(num_mel_bins, dft_length, sample_rate, lower, upper):
    bins = _scalar_int(num_mel_bins, "MelWeightMatrix num_mel_bins")
    n_fft = _scalar_int(dft_length, "MelWeightMatrix dft_length")
    rate = _scalar_int(sample_rate, "MelWeightMatrix sample_rate")
    if bins < 1 or n_fft < 1 or rate < 1:
        raise KernelError("MelWeightMatrix num_mel_bins, dft_length and sample_rate must be positive")
    return bins, n_fft, rate, float(np.asarray(lower).reshape(-1)[0]), float(np.asarray(upper).reshape(-1)[0])


def _mel_infer(node):
    bins, n_fft, *_ = _mel_args(*(const_input(node, i) for i in range(5)))
    return [TensorType(DType(node.attrs.get("output_datatype", int(DType.float32))), (n_fft // 2 + 1, bins))]


@reference("MelWeightMatrix", infer=_mel_infer, static_inputs=(0, 1, 2, 3, 4))
def mel_weight_matrix(attrs, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
    """Triangular filters, equally spaced on the mel scale mel(f) = 2595 log10(1 + f / 700) between the edges,
    mapped to DFT bins floor((dft_length + 1) * f / sample_rate) (the ONNX reference algorithm)."""
    bins, n_fft, rate, lower, upper = _mel_args(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                                                upper_edge_hertz)
    lo_mel, hi_mel = (2595 * np.log10(1 + f / 700) for f in (lower, upper))
    # the step divides by bins + 2 (not bins + 1) in the ONNX reference and in onnxruntime alike
    mels = lo_mel + np.arange(bins + 2) * (hi_mel - lo_mel) / (bins + 2)
    points = (((n_fft + 1) * (700 * (10 ** (mels / 2595) - 1))) // rate).astype(np.int64)
    out = np.zeros((n_fft // 2 + 1, bins))
    for i in range(bins):
        left, center, right = points[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return out.astype(DType(attrs.get("output_datatype", int(DType.float32))).np)
