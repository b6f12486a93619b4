"""DFT, STFT, window functions and MelWeightMatrix (signal_ops.py) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, data, i64

from converter_lite.ir.dtype import DType


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,length,inverse,onesided", [
    ((2, 8, 1), None, None, 0, 0), ((2, 8, 2), None, None, 1, 0), ((2, 8, 1), None, None, 0, 1),
    ((3, 5, 4, 2), 1, None, 0, 0), ((3, 5, 4, 1), -3, 8, 0, 1), ((2, 7, 2), -2, 4, 1, 0), ((1, 9, 1), 1, 12, 0, 0),
])
def test_dft(shape, axis, length, inverse, onesided, dtype):
    inputs = {"x": data(shape, dtype), "n": None if length is None else i64(length)[0],
              "a": None if axis is None else i64(axis)[0]}
    check("DFT", inputs, const=("n", "a"), rtol=1e-4, atol=1e-4, inverse=inverse, onesided=onesided)


def test_dft_rejects_complex_axis():
    check_rejects("DFT", {"x": data((2, 8, 2)), "n": None, "a": i64(-1)[0]}, const=("n", "a"))


@pytest.mark.parametrize("shape,step,wlen,flen,onesided", [
    ((2, 64, 1), 8, 16, None, 1), ((1, 50, 1), 5, None, 10, 1), ((2, 40, 2), 4, 8, 8, 0), ((1, 33, 1), 32, 16, None, 0),
])
def test_stft(shape, step, wlen, flen, onesided):
    inputs = {"x": data(shape), "s": i64(step)[0], "w": None if wlen is None else np.hanning(wlen).astype(np.float32),
              "l": None if flen is None else i64(flen)[0]}
    check("STFT", inputs, const=("s", "l"), rtol=1e-4, atol=1e-4, onesided=onesided)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("size,periodic", [(10, 1), (10, 0), (1, 1), (7, 0), (2, 0)])
@pytest.mark.parametrize("out_dtype", [None, int(DType.float64)])   # onnxruntime: no float16 windows
def test_windows(op, size, periodic, out_dtype):
    attrs = {"periodic": periodic} | ({} if out_dtype is None else {"output_datatype": out_dtype})
    check(op, {"n": i64(size)[0]}, const=("n",), rtol=1e-3, atol=1e-5, **attrs)


@pytest.mark.parametrize("bins,n_fft,rate,lo,hi", [(8, 16, 8000, 0.0, 4000.0), (10, 64, 16000, 20.0, 7600.0),
                                                   (40, 512, 16000, 0.0, 8000.0), (3, 10, 100, 10.0, 40.0)])
def test_mel_weight_matrix(bins, n_fft, rate, lo, hi):
    inputs = {"b": i64(bins)[0], "n": i64(n_fft)[0], "r": i64(rate)[0], "lo": np.float32(lo), "hi": np.float32(hi)}
    check("MelWeightMatrix", inputs, const=tuple(inputs))
    check("MelWeightMatrix", inputs, const=tuple(inputs), output_datatype=int(DType.float64))
