"""onnxruntime's quantized contrib ops (domain ``com.microsoft``), as its quantizer writes them in QOperator
models: every one is ``quantize(f(dequantize(inputs)))`` with a float op ``f``.  OPAQUE.

    dequantize(x, s, zp) = (float32(x) - zp) * s
    quantize(y, s, zp)   = saturate(round_half_even(y / s) + zp)          (the zero point's type: uint8/int8)

* ``QLinearAdd`` / ``QLinearMul`` (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp): f = A + B / A * B,
  numpy broadcasting;
* ``QLinearSigmoid`` / ``QLinearLeakyRelu`` (X, X_scale, X_zp, Y_scale, Y_zp; LeakyRelu's ``alpha``, 0.01);
* ``QLinearGlobalAveragePool`` (X, x_scale, x_zp, y_scale, y_zp; ``channels_last``: NHWC when 1);
* ``QLinearAveragePool`` (X, x_scale, x_zp, y_scale, y_zp; AveragePool's attributes, ``channels_last``);
* ``QLinearConcat`` (Y_scale, Y_zp, then (X, X_scale, X_zp) per input; ``axis``);
* ``QLinearSoftmax`` (X, X_scale, x_zp, y_scale, y_zp; ``axis``, ``opset``: before 13 Softmax flattens the
  axes from ``axis`` on, from 13 it is one axis);
* ``QGemm`` (A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?; ``alpha``, ``transA``, ``transB``):
  ``alpha * (A - a_zp)(B - b_zp) * a_scale * b_scale + C * a_scale * b_scale`` (C an int32 bias), quantized
  when ``y_scale`` is given, else float32; ``b_scale``/``b_zp`` may be per column;
* ``MatMulIntegerToFloat`` (A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?): onnxruntime's fusion
  of ``MatMulInteger -> Cast -> Mul -> Add``, ``float32(MatMulInteger(A, B, a_zp, b_zp)) * (a_scale * b_scale) +
  bias`` (``b_scale``, ``b_zero_point`` and ``bias`` one per column or one); the converter makes it of that
  chain (passes/rewrite/matmul_integer.py) for the native int8 GEMM (kernels/qgemm/);
* ``MatMulNBits`` (A, B, scales, zero_points?, g_idx?, bias?; ``K``, ``N``, ``bits`` 2/4/8, ``block_size``): the
  weight-only quantization of LLM exports, ``A @ W^T + bias`` with ``W[n, k] = (q[n, k] - zp[n, k // block_size]) *
  scale[n, k // block_size]``; ``B`` holds ``q`` as ``[N, blocks, block_size * bits / 8]`` bytes, low bits first;
  the zero points are packed the same way per row (uint8), or given as floats like the scales, or absent
  (``2**(bits-1)``).  ``nbits_weight`` dequantizes it (the expander makes it a constant of the float MatMul).

onnxruntime computes these with tables and fixed-point steps in places, so its result may differ from this
float formula by one quantization step at a tie.  passes/expand/quantize.py expands them into float ops the
optimizer fuses.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Node, TensorType, Value
from ..ir.dtype import DType
from .registry import OPS, KernelError, evaluate, reference

MS_QUANT_OPS = ("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool",
                "QLinearAveragePool", "QLinearConcat", "QLinearSoftmax", "QGemm", "MatMulNBits",
                "MatMulIntegerToFloat")
POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")


def dequantize(x, scale, zero_point) -> np.ndarray:
    if np.asarray(x).dtype not in (np.int8, np.uint8):
        raise KernelError(f"quantized input must be int8 or uint8, got {np.asarray(x).dtype}")
    t = np.asarray(x).astype(np.float32)
    if zero_point is not None:
        t = t - np.asarray(zero_point, np.float32)
    return t * np.asarray(scale, np.float32)


def quantize(y, scale, zero_point, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    t = np.rint(np.asarray(y, np.float32) / np.asarray(scale, np.float32))
    if zero_point is not None:
        t = t + np.asarray(zero_point, np.float32)
    return np.clip(t, info.min, info.max).astype(dtype)


def _scalar(p, what: str):
    if p is not None and np.size(p) != 1:
        raise KernelError(f"{what} must be one element, got shape {list(np.shape(p))}")
    return None if p is None else np.asarray(p).reshape(())


def _out_type(zero_point, like) -> np.dtype:
    return np.asarray(zero_point).dtype if zero_point is not None else np.asarray(like).dtype


def _float_infer(op: str, attrs: dict, shapes: list) -> tuple:
    """Output shape of the float op ``op`` on float32 inputs of ``shapes`` (its registered inference)."""
    ins = [Value(f"x{i}", TensorType(DType.float32, s)) for i, s in enumerate(shapes)]
    return OPS[op].infer(Node(op, ins, [Value("y")], dict(attrs)))[0].shape


def _zp_type(node, i: int, like: int) -> DType:
    v = node.inputs[i] if i < len(node.inputs) else None
    return v.dtype if v is not None else node.inputs[like].dtype


def _unary_infer(node):
    return [TensorType(_zp_type(node, 4, 0), node.inputs[0].shape)]


def _binary_infer(node):
    a, b = node.inputs[0].shape, node.inputs[3].shape
    return [TensorType(_zp_type(node, 7, 0), _float_infer("Add", {}, [a, b]))]


def _binary(f):
    def kernel(attrs, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
        y = f(dequantize(a, _scalar(a_scale, "A_scale"), _scalar(a_zp, "A_zero_point")),
              dequantize(b, _scalar(b_scale, "B_scale"), _scalar(b_zp, "B_zero_point")))
        return quantize(y, _scalar(c_scale, "C_scale"), _scalar(c_zp, "C_zero_point"), _out_type(c_zp, a))
    return kernel


reference("QLinearAdd", infer=_binary_infer)(_binary(np.add))
reference("QLinearMul", infer=_binary_infer)(_binary(np.multiply))


def _unary(f):
    def kernel(attrs, x, x_scale, x_zp, y_scale, y_zp=None):
        y = f(dequantize(x, _scalar(x_scale, "X_scale"), _scalar(x_zp, "X_zero_point")), attrs)
        return quantize(y, _scalar(y_scale, "Y_scale"), _scalar(y_zp, "Y_zero_point"), _out_type(y_zp, x))
    return kernel


def _sigmoid(x, attrs):
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


def _leaky_relu(x, attrs):
    return np.where(x < 0, x * np.float32(attrs.get("alpha", 0.01)), x)


def _channels_first(x, attrs):
    return np.moveaxis(x, -1, 1) if int(attrs.get("channels_last", 0)) and x.ndim > 2 else x


def _channels_back(y, attrs):
    return np.moveaxis(y, 1, -1) if int(attrs.get("channels_last", 0)) and y.ndim > 2 else y


def _global_average(x, attrs):
    x = _channels_first(x, attrs)
    return _channels_back(x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float32), attrs)


def _average_pool(x, attrs):
    pool = {k: v for k, v in attrs.items() if k in POOL_ATTRS}
    return _channels_back(evaluate("AveragePool", pool, [_channels_first(x, attrs)])[0], attrs)


def _softmax(x, attrs):
    axis = int(attrs.get("axis", -1))
    if int(attrs.get("opset", 13)) >= 13:
        return evaluate("Softmax", {"axis": axis}, [x])[0]
    axis %= max(x.ndim, 1)                         # opset < 13: the axes from ``axis`` on, flattened
    flat = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
    return evaluate("Softmax", {"axis": 1}, [flat])[0].reshape(x.shape)


reference("QLinearSigmoid", infer=_unary_infer)(_unary(_sigmoid))
reference("QLinearLeakyRelu", infer=_unary_infer)(_unary(_leaky_relu))
reference("QLinearSoftmax", infer=_unary_infer)(_unary(_softmax))


def _global_infer(node):
    s = node.inputs[0].shape
    out = s[:1] + (1,) * (len(s) - 2) + s[-1:] if node.attrs.get("channels_last", 0) else s[:2] + (1,) * (len(s) - 2)
    return [TensorType(_zp_type(node, 4, 0), out)]


def _average_pool_infer(node):
    s = node.inputs[0].shape
    last = int(node.attrs.get("channels_last", 0)) and len(s) > 2
    first = s[:1] + s[-1:] + s[1:-1] if last else s
    out = _float_infer("AveragePool", {k: v for k, v in node.attrs.items() if k in POOL_ATTRS}, [first])
    return [TensorType(_zp_type(node, 4, 0), out[:1] + out[2:] + out[1:2] if last else out)]


reference("QLinearGlobalAveragePool", infer=_global_infer)(_unary(_global_average))
reference("QLinearAveragePool", infer=_average_pool_infer)(_unary(_average_pool))


def _concat_infer(node):
    shapes = [node.inputs[i].shape for i in range(2, len(node.inputs), 3)]
    return [TensorType(_zp_type(node, 1, 2), _float_infer("Concat", {"axis": node.attrs.get("axis", 0)}, shapes))]


@reference("QLinearConcat", infer=_concat_infer)
def qlinear_concat(attrs, y_scale, y_zp, *triples):
    if not triples or len(triples) % 3:
        raise KernelError(f"QLinearConcat takes (X, X_scale, X_zero_point) triples, got {len(triples)} inputs")
    xs = [dequantize(triples[i], _scalar(triples[i + 1], "X_scale"), _scalar(triples[i + 2], "X_zero_point"))
          for i in range(0, len(triples), 3)]
    y = evaluate("Concat", {"axis": attrs.get("axis", 0)}, xs)[0]
    return quantize(y, _scalar(y_scale, "Y_scale"), _scalar(y_zp, "Y_zero_point"), _out_type(y_zp, triples[0]))


def _gemm_shape(node) -> tuple:
    a, b = node.inputs[0].shape, node.inputs[3].shape
    if len(a) != 2 or len(b) != 2:
        raise KernelError(f"QGemm: A {list(a)} and B {list(b)} must be matrices")
    m = a[1] if node.attrs.get("transA", 0) else a[0]
    return (m, b[0] if node.attrs.get("transB", 0) else b[1])


def _qgemm_infer(node):
    quantized = len(node.inputs) > 7 and node.inputs[7] is not None
    return [TensorType(_zp_type(node, 8, 0) if quantized else DType.float32, _gemm_shape(node))]


def _column(p, n: int, what: str):
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if p.ndim != 1 or p.size != n:
        raise KernelError(f"QGemm {what} of shape {list(p.shape)} is neither one element nor one per column")
    return p


@reference("QGemm", infer=_qgemm_infer)
def qgemm(attrs, a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None):
    if int(attrs.get("transA", 0)):
        a = a.T
    if int(attrs.get("transB", 0)):
        b = b.T
    n = b.shape[1]
    sa = np.asarray(_scalar(a_scale, "a_scale"), np.float32)
    sb = _column(np.asarray(b_scale, np.float32), n, "b_scale")
    az = 0.0 if a_zp is None else np.float64(_scalar(a_zp, "a_zero_point"))
    bz = 0.0 if b_zp is None else _column(b_zp, n, "b_zero_point").astype(np.float64)
    acc = np.matmul(a.astype(np.float64) - az, b.astype(np.float64) - bz)
    if c is not None:
        acc = acc + np.asarray(c, np.float64)
    y = (acc * (np.float32(attrs.get("alpha", 1.0)) * sa * sb).astype(np.float64)).astype(np.float32)
    if y_scale is None:
        return y
    return quantize(y, _scalar(y_scale, "y_scale"), _scalar(y_zp, "y_zero_point"), _out_type(y_zp, a))


def _mmitf_infer(node):
    from .nn import matmul_shape
    return [TensorType(node.inputs[2].dtype, matmul_shape(node.inputs[0].shape, node.inputs[1].shape))]


@reference("MatMulIntegerToFloat", infer=_mmitf_infer)
def matmul_integer_to_float(attrs, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    from .nn import matmul_integer
    dt = np.asarray(a_scale).dtype
    y = matmul_integer({}, a, b, a_zero_point, b_zero_point).astype(dt) * (np.asarray(a_scale) * np.asarray(b_scale, dt))
    if bias is not None:
        y = y + np.asarray(bias, dt)
    return y.astype(dt, copy=False)


# -- MatMulNBits ----------------------------------------------------------------------------------------------------
def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The ``bits``-bit unsigned values of each row of ``packed`` (uint8, low bits first), ``count`` per row."""
    if bits not in (2, 4, 8):
        raise KernelError(f"MatMulNBits: bits={bits} (2, 4 or 8 are defined)")
    per = 8 // bits
    rows = packed.reshape(packed.shape[0], -1)
    shifts = np.arange(per, dtype=np.uint8) * bits
    vals = (rows[:, :, None] >> shifts) & np.uint8((1 << bits) - 1)
    out = vals.reshape(rows.shape[0], -1)
    if out.shape[1] < count:
        raise KernelError(f"MatMulNBits: {out.shape[1]} packed values per row, {count} needed")
    return out[:, :count]


def nbits_weight(attrs: dict, b, scales, zero_points=None, g_idx=None) -> np.ndarray:
    """The float weight ``W^T`` ``[K, N]`` (the scales' dtype) of a MatMulNBits node (see the module doc)."""
    k, n = int(attrs["K"]), int(attrs["N"])
    bits, block = int(attrs.get("bits", 4)), int(attrs["block_size"])
    blocks = -(-k // block)
    b = np.asarray(b)
    if b.dtype != np.uint8 or b.size != n * blocks * (block * bits // 8):
        raise KernelError(f"MatMulNBits: B {b.dtype}{list(b.shape)} is not [N={n}, {blocks}, "
                          f"{block * bits // 8}] bytes")
    q = _unpack(b.reshape(n, -1), bits, blocks * block).astype(np.float32)
    scales = np.asarray(scales)
    if scales.size != n * blocks:
        raise KernelError(f"MatMulNBits: {scales.size} scales for N={n} x {blocks} blocks")
    s = scales.reshape(n, blocks).astype(np.float32)
    if zero_points is None:
        zp = np.full((n, blocks), float(1 << (bits - 1)), np.float32)
    elif np.asarray(zero_points).dtype == np.uint8:
        zp = _unpack(np.asarray(zero_points).reshape(n, -1), bits, blocks).astype(np.float32)
    else:
        zp = np.asarray(zero_points, np.float32).reshape(n, blocks)
    if g_idx is not None:
        g = np.asarray(g_idx).reshape(-1)
        if g.size != k or not np.array_equal(g, np.arange(k) // block):
            raise KernelError("MatMulNBits: a g_idx other than k // block_size (act-order) is not supported")
    w = (q.reshape(n, blocks, block) - zp[:, :, None]) * s[:, :, None]
    return np.ascontiguousarray(w.reshape(n, blocks * block)[:, :k].T).astype(scales.dtype)


def _nbits_infer(node):
    a = node.inputs[0].type
    return [TensorType(a.dtype, tuple(a.shape[:-1]) + (int(node.attrs["N"]),))]


@reference("MatMulNBits", infer=_nbits_infer)
def matmul_nbits(attrs, a, b, scales, zero_points=None, g_idx=None, bias=None):
    if a.shape[-1] != int(attrs["K"]):
        raise KernelError(f"MatMulNBits: A's last dim {a.shape[-1]} is not K={attrs['K']}")
    w = nbits_weight(attrs, b, scales, zero_points, g_idx)
    y = np.matmul(a.astype(np.float32), w.astype(np.float32))
    if bias is not None:
        y = y + np.asarray(bias, np.float32)
    return y.astype(a.dtype)
