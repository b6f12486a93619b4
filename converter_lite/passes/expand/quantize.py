"""Quantized ONNX ops -> float ops the optimizer fuses and the native drivers run.

QuantizeLinear / DequantizeLinear become elementwise ops, so that a QDQ model's activation quantization fuses
into kernels (the QDQ form onnxruntime's ``quantize_static`` writes: every activation goes through a Q->DQ
pair).  QLinearConv / QLinearMatMul (the QOperator form) become a float Conv/MatMul on zero-point-shifted
values with dequantized constant weights, then an elementwise requantization (QLinearMatMul and QGemm with uint8
activations and constant int8 weights: the native int8 GEMM, MatMulIntegerToFloat, then the requantization); DynamicQuantizeLinear,
MatMulInteger and ConvInteger (the form of onnxruntime's ``quantize_dynamic``) likewise (sections at the end).

    QuantizeLinear:   y = Cast(Min(Max(Where(IsNaN(t), 0, t), qmin), qmax)),  t = Round(x / scale) + zero_point
    DequantizeLinear: y = (Cast(x, float) - zero_point) * scale

with per-tensor or per-axis ``scale``/``zero_point`` reshaped to broadcast along ``axis``; exactly the reference
kernels' arithmetic (ops/quantize.py: the division in the scale's precision, round half to even, NaN -> 0,
saturation).  The weights' DequantizeLinear nodes are constants and were folded before this (constant_folding),
so only the activations' pairs remain.  Before, each ran as a numpy reference kernel: resnet_mini quantized by
onnxruntime (18 Q/DQ pairs) ran 5.9 ms where the float model takes 1.5.

Declined: blocked quantization (``block_size``), non-constant scale or zero point, a ``precision``/``output_dtype``
other than the scale's, float outputs other than float32/float64, integer types other than int8/uint8/int16/
uint16 (int32 DequantizeLinear only without a zero point: float32 could not hold the int64 difference the
reference takes).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...ir.core import Node
from ...ir.dtype import DType
from ...kernels.qgemm.abi import select as qgemm_select
from ...ops.builder import GraphBuilder
from ...ops.qlinear_ms import nbits_weight
from ...ops.registry import KernelError
from .emit import const_input, input_value
from .registry import Declined, expander

QUANT_TYPES = (DType.int8, DType.uint8, DType.int16, DType.uint16)
FLOAT_TYPES = (DType.float32, DType.float64)


def _param(b: GraphBuilder, p: np.ndarray | None, rank: int, axis: int, n: int, dtype, what: str):
    """``p`` (one element or one per ``axis`` entry) as a constant of ``dtype`` broadcasting along ``axis``."""
    if p is None:
        return None
    p = np.asarray(p)
    if p.size == 1:
        return b.const(np.asarray(p.reshape(()), dtype=dtype))
    if p.ndim != 1 or p.shape[0] != n:
        raise Declined(f"{what} of shape {list(p.shape)} is neither per-tensor nor per-axis")
    return b.const(p.astype(dtype).reshape((n,) + (1,) * (rank - axis - 1)))


def _geometry(node: Node, x) -> tuple[int, int]:
    if int(node.attrs.get("block_size", 0) or 0):
        raise Declined("blocked quantization (block_size)")
    if x.shape is None:
        raise Declined("dynamic shape")
    rank = len(x.shape)
    axis = int(node.attrs.get("axis", 1))
    if rank == 0:
        return 0, 0
    if not -rank <= axis < rank:
        raise Declined(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    return axis, int(x.shape[axis])


def _operands(b: GraphBuilder, node: Node):
    """(x, scale, zero point, output dtype) of a QuantizeLinear/DequantizeLinear node; scale and zero point
    constant (Declined otherwise)."""
    return input_value(b, node, 0), const_input(node, 1), const_input(node, 2), node.outputs[0].dtype


@expander("QuantizeLinear")
def expand_quantize_linear(b: GraphBuilder, node: Node) -> list:
    x, scale, zp, out = _operands(b, node)
    if out not in QUANT_TYPES:
        raise Declined(f"output {out.name}")
    if x.dtype not in FLOAT_TYPES or DType.from_np(scale.dtype) not in FLOAT_TYPES:
        raise Declined(f"input {x.dtype.name}, scale {scale.dtype}")
    if int(node.attrs.get("precision", 0) or 0) not in (0, int(DType.from_np(scale.dtype))):
        raise Declined("precision other than the scale's")
    ct = np.float64 if scale.dtype == np.float64 else np.float32
    axis, n = _geometry(node, x)
    rank = len(x.shape)
    xc = x if x.dtype.np == ct else b.op("Cast", x, to=int(DType.from_np(np.dtype(ct))))
    t = b.op("Round", b.op("Div", xc, _param(b, scale, rank, axis, n, ct, "scale")))
    if zp is not None and np.any(zp):
        t = b.op("Add", t, _param(b, zp, rank, axis, n, ct, "zero point"))
    t = b.op("Where", b.op("IsNaN", t), b.const(np.asarray(0, ct)), t)
    info = np.iinfo(out.np)
    t = b.op("Min", b.op("Max", t, b.const(np.asarray(info.min, ct))), b.const(np.asarray(info.max, ct)))
    return [b.op("Cast", t, to=int(out))]


@expander("DequantizeLinear")
def expand_dequantize_linear(b: GraphBuilder, node: Node) -> list:
    x, scale, zp, out = _operands(b, node)
    if out not in FLOAT_TYPES or DType.from_np(scale.dtype) is not out:
        raise Declined(f"output {out.name} with a {scale.dtype} scale")
    if x.dtype not in QUANT_TYPES and not (x.dtype is DType.int32 and (zp is None or not np.any(zp))):
        raise Declined(f"input {x.dtype.name}")
    axis, n = _geometry(node, x)
    rank = len(x.shape)
    t = b.op("Cast", x, to=int(out))
    if zp is not None and np.any(zp):
        t = b.op("Sub", t, _param(b, zp, rank, axis, n, out.np, "zero point"))
    return [b.op("Mul", t, _param(b, scale, rank, axis, n, out.np, "scale"))]


# -- QOperator form: QLinearConv / QLinearMatMul ------------------------------------------------------------------
# The integer products run as float32 Conv/MatMul on the native drivers, with the zero points subtracted first
# (exact: int8 differences are exact floats) and the weights dequantized to float constants at conversion; the
# requantization is elementwise.  A float32 sum of more than 2**24 / 127**2 ~ 1000 products may round where the
# reference (float64) does not, so a requantized output can differ by one step at an exact tie.
INT8 = (DType.int8, DType.uint8)


def _int8_const(node: Node, i: int, what: str) -> np.ndarray | None:
    v = const_input(node, i)
    if v is not None and DType.from_np(v.dtype) not in INT8:
        raise Declined(f"{what} of type {v.dtype}")
    return v


def _shift(b: GraphBuilder, x, zp, shape_to) -> object:
    """float32(x) - zp, with a per-tensor or per-channel zero point already shaped by ``shape_to``."""
    xf = b.op("Cast", x, to=int(DType.float32))
    if zp is None or not np.any(zp):
        return xf
    return b.op("Sub", xf, b.const(shape_to(np.asarray(zp, np.float32))))


def _requantize(b: GraphBuilder, acc, multiplier: np.ndarray | None, y_zp: np.ndarray | None, out: DType):
    """saturate(round(acc * multiplier) + y_zp) as ``out`` (``multiplier`` None: ``acc`` is scaled already)."""
    t = b.op("Round", acc if multiplier is None else b.op("Mul", acc, b.const(multiplier.astype(np.float32))))
    if y_zp is not None and np.any(y_zp):
        t = b.op("Add", t, b.const(np.asarray(y_zp, np.float32).reshape(())))
    info = np.iinfo(out.np)
    t = b.op("Min", b.op("Max", t, b.const(np.float32(info.min))), b.const(np.float32(info.max)))
    return b.op("Cast", t, to=int(out))


def _int8_conv(b: GraphBuilder, node: Node, x, xs, xz, w, ws, wz, bias, y_pair=None):
    """``float32(conv((x - xz), w)) * (xs * ws[o]) + bias[o] * xs * ws[o]`` as a QuantizedConv on the native int8
    convolution (kernels/qconv/), or None where it does not take the convolution (int8 activations, a weight zero
    point, groups, a column stride other than 1 or 2, ...).  It reads the uint8 ``x`` as it is (QuantizedConv's
    uint8 input: ``DequantizeLinear`` of it is what the float form reads), and with ``y_pair`` = (scale, uint8
    zero point) writes its output's QuantizeLinear bytes itself (``uint8_out``: ``saturate(round(y / scale) +
    zero point)``, the requantization, with no elementwise kernel after it).  Either only where
    ``QuantizeLinear(DequantizeLinear(q)) == q`` with the scale (ops/quantized_conv.py ``round_trips``)."""
    from ...kernels.qconv.abi import select as qconv_select
    from ...ops.quantized_conv import round_trips
    if x.dtype is not DType.uint8 or w.dtype != np.int8 or w.ndim != 4 or (wz is not None and np.any(wz)) or \
            xz is None or np.asarray(xz).dtype != np.uint8:
        return None
    sx = np.asarray(xs, np.float32).reshape(())
    zx = np.asarray(xz, np.uint8).reshape(())
    wsf = np.broadcast_to(np.asarray(ws, np.float32).reshape(-1), (w.shape[0],)).copy()
    b_f = None if bias is None else (np.asarray(bias, np.float64) * (np.float64(sx) * wsf)).astype(np.float32)
    if not round_trips(sx):
        x = b.op("Mul", b.op("Sub", b.op("Cast", x, to=int(DType.float32)), b.const(np.float32(zx))), b.const(sx))
    ins = [x, b.const(sx), b.const(zx), b.const(np.ascontiguousarray(w)), b.const(wsf),
           None if b_f is None else b.const(b_f)]
    attrs = {k: v for k, v in node.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                             "strides")}
    if y_pair is not None:
        ins += [b.const(np.float32(y_pair[0])), b.const(np.uint8(y_pair[1]))]
        attrs["uint8_out"] = 1
    if not qconv_select(SimpleNamespace(op="QuantizedConv", attrs=attrs, inputs=ins)):
        return None
    return b.op("QuantizedConv", *ins, **attrs)


def _output_pair(node: Node) -> tuple[np.float32, np.uint8] | None:
    """QLinearConv's (y_scale, y_zero_point) when its output is uint8 and the int8 convolution can write it
    (ops/quantized_conv.py ``round_trips``), else None."""
    from ...ops.quantized_conv import round_trips
    ys, yz = const_input(node, 6), const_input(node, 7)
    if node.outputs[0].dtype is not DType.uint8 or ys is None or yz is None or np.size(ys) != 1 or \
            np.size(yz) != 1 or np.asarray(yz).dtype != np.uint8 or np.asarray(ys).dtype != np.float32:
        return None
    ys = np.float32(np.asarray(ys).reshape(()))
    return (ys, np.uint8(np.asarray(yz).reshape(()))) if round_trips(ys) else None


@expander("QLinearConv")
def expand_qlinear_conv(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    if x.dtype not in INT8 or x.shape is None:
        raise Declined(f"input {x.dtype.name}")
    xs, xz = const_input(node, 1), _int8_const(node, 2, "x zero point")
    w, ws, wz = _int8_const(node, 3, "weight"), const_input(node, 4), _int8_const(node, 5, "w zero point")
    ys, yz = const_input(node, 6), _int8_const(node, 7, "y zero point")
    bias = const_input(node, 8)
    if w is None or any(p is None for p in (xs, ws, ys)):
        raise Declined("missing weight or scale")
    if xz is not None and np.size(xz) != 1 or np.size(xs) != 1 or np.size(ys) != 1:
        raise Declined("per-channel activation parameters")
    m, nsp = w.shape[0], w.ndim - 2
    pair = _output_pair(node)
    scaled = _int8_conv(b, node, x, xs, xz, w, ws, wz, bias, pair)
    if scaled is not None:
        return [scaled if pair is not None else _quantized(b, node, scaled, 6, 7)]
    per_channel = (lambda p: p.reshape((-1,) + (1,) * (w.ndim - 1))) if np.size(wz if wz is not None else 0) > 1 \
        else (lambda p: p.reshape(()))
    wf = w.astype(np.float32) - (0 if wz is None else per_channel(np.asarray(wz, np.float32)))
    ins = [_shift(b, x, xz, lambda p: p.reshape(())), b.const(np.ascontiguousarray(wf))]
    if bias is not None:
        if np.abs(np.asarray(bias, np.int64)).max(initial=0) >= 2 ** 24:
            raise Declined("bias beyond float32's exact integers")
        ins.append(b.const(np.asarray(bias, np.float32).reshape(m)))
    attrs = {k: v for k, v in node.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                             "strides")}
    acc = b.op("Conv", *ins, **attrs)
    wsf = np.asarray(ws, np.float32)
    mult = np.float32(np.asarray(xs, np.float32).reshape(())) * \
        (wsf.reshape((-1,) + (1,) * nsp) if wsf.size > 1 else wsf.reshape(())) / np.asarray(ys, np.float32).reshape(())
    return [_requantize(b, acc, np.asarray(mult, np.float32), yz, node.outputs[0].dtype)]


def _int8_gemm(b: GraphBuilder, a, w: np.ndarray, za, zb, mult: np.ndarray, bias: np.ndarray | None = None):
    """``float32((a - za) @ w) * mult (+ bias)`` as MatMulIntegerToFloat on the native int8 GEMM (kernels/qgemm/:
    the same float32 product the float path computes, ``mult`` per tensor or per column), or None where the
    driver does not take the operands (int8 activations, a b zero point, K not a multiple of 4)."""
    if a.dtype is not DType.uint8 or w.dtype != np.int8 or w.ndim != 2 or w.shape[0] % 4 or \
            (zb is not None and np.any(zb)) or (za is not None and np.asarray(za).dtype != np.uint8):
        return None
    ins = [a, b.const(np.ascontiguousarray(w)), b.const(np.float32(1.0)), b.const(np.asarray(mult, np.float32)),
           None if za is None else b.const(np.asarray(za, np.uint8).reshape(())), None]
    if bias is not None:
        ins.append(b.const(np.asarray(bias, np.float32)))
    return b.op("MatMulIntegerToFloat", *ins)


@expander("QLinearMatMul")
def expand_qlinear_matmul(b: GraphBuilder, node: Node) -> list:
    a = input_value(b, node, 0)
    if a.dtype not in INT8 or a.shape is None or len(a.shape) < 2:
        raise Declined(f"input {a.dtype.name}")
    sa, za = const_input(node, 1), _int8_const(node, 2, "a zero point")
    sb, zb = const_input(node, 4), _int8_const(node, 5, "b zero point")
    ys, yz = const_input(node, 6), _int8_const(node, 7, "y zero point")
    bv = node.inputs[3]
    if bv is not None and bv.const is None:              # b computed too (attention's q @ k^T): both shifted
        if any(p is None for p in (sa, sb, ys)) or max(np.size(sa), np.size(sb), np.size(ys)) != 1 or \
                any(z is not None and np.size(z) != 1 for z in (za, zb)) or bv.dtype not in INT8:
            raise Declined("per-row/column parameters of a computed b")
        scalar = lambda p: p.reshape(())
        acc = b.op("MatMul", _shift(b, a, za, scalar), _shift(b, b.wrap(bv), zb, scalar))
        mult = np.float32(np.asarray(sa, np.float32).reshape(())) * np.asarray(sb, np.float32).reshape(()) / \
            np.asarray(ys, np.float32).reshape(())
        return [_requantize(b, acc, np.asarray(mult, np.float32), yz, node.outputs[0].dtype)]
    w = _int8_const(node, 3, "b")
    if w is None or any(p is None for p in (sa, sb, ys)) or w.ndim != 2 or np.size(ys) != 1:
        raise Declined("non-2-D b, or missing scales")
    if np.size(sa) != 1 or (za is not None and np.size(za) != 1):
        raise Declined("per-row a parameters")
    col = (lambda p: p.reshape(-1)) if max(np.size(sb), np.size(zb if zb is not None else 0)) > 1 \
        else (lambda p: p.reshape(()))
    mult = np.float32(np.asarray(sa, np.float32).reshape(())) * col(np.asarray(sb, np.float32)) / \
        np.asarray(ys, np.float32).reshape(())
    scaled = _int8_gemm(b, a, w, za, zb, mult)
    if scaled is not None:
        return [_requantize(b, scaled, None, yz, node.outputs[0].dtype)]
    wf = w.astype(np.float32) - (0 if zb is None else col(np.asarray(zb, np.float32)))
    acc = b.op("MatMul", _shift(b, a, za, lambda p: p.reshape(())), b.const(np.ascontiguousarray(wf)))
    return [_requantize(b, acc, np.asarray(mult, np.float32), yz, node.outputs[0].dtype)]


# -- dynamic quantization: DynamicQuantizeLinear, MatMulInteger, ConvInteger ------------------------------------------
# The form onnxruntime's ``quantize_dynamic`` writes: each activation is quantized per call to uint8
# (DynamicQuantizeLinear), multiplied by int8 weights (MatMulInteger / ConvInteger, int32 result), then Cast to
# float and scaled.  The integer products run as float32 MatMul/Conv on the zero-point-shifted values (the native
# drivers) and are cast back to int32: exact while a sum stays below 2**24, else rounded to float32's precision
# (about 1e-7 relative), as for QLinearMatMul above.  They ran as numpy integer products (no BLAS): a 2-layer
# BERT-base quantized by onnxruntime took 2.8 s a run.

@expander("DynamicQuantizeLinear")
def expand_dynamic_quantize_linear(b: GraphBuilder, node: Node) -> list:
    """y = saturate(round(x / scale) + zp) with scale = (max(0, max x) - min(0, min x)) / 255 (1 for an all-zero
    x), zp = saturate(round(-min(0, min x) / scale)): the reference kernel's arithmetic (the scale computed in
    float64 and rounded to float32, the rest in float32)."""
    x = input_value(b, node, 0)
    if x.dtype is not DType.float32 or x.shape is None:
        raise Declined(f"input {x.dtype.name}" if x.dtype is not DType.float32 else "dynamic shape")
    axes = list(range(len(x.shape)))
    f32, f64 = int(DType.float32), int(DType.float64)
    zero = b.const(np.float32(0.0))
    lo = b.op("Min", b.op("ReduceMin", x, b.const(np.asarray(axes, np.int64)), keepdims=0), zero)
    hi = b.op("Max", b.op("ReduceMax", x, b.const(np.asarray(axes, np.int64)), keepdims=0), zero)
    span = b.op("Sub", b.op("Cast", hi, to=f64), b.op("Cast", lo, to=f64))
    scale = b.op("Where", b.op("Equal", hi, lo), b.const(np.float32(1.0)),
                 b.op("Cast", b.op("Div", span, b.const(np.float64(255.0))), to=f32))
    clip = lambda t: b.op("Min", b.op("Max", t, zero), b.const(np.float32(255.0)))
    zp = clip(b.op("Round", b.op("Sub", zero, b.op("Div", lo, scale))))
    y = clip(b.op("Add", b.op("Round", b.op("Div", x, scale)), zp))
    u8 = int(DType.uint8)
    return [b.op("Cast", y, to=u8), scale, b.op("Cast", zp, to=u8)]


def _zero_point_shift(b: GraphBuilder, x, node: Node, i: int, what: str):
    """float32(x) - zero point ``i`` of ``node``: a constant or a computed scalar (DynamicQuantizeLinear's)."""
    v = node.inputs[i] if i < len(node.inputs) else None
    xf = b.op("Cast", x, to=int(DType.float32))
    if v is None:
        return xf
    if v.const is not None:
        zp = _int8_const(node, i, what)
        if np.size(zp) != 1:
            raise Declined(f"per-row {what}")
        return xf if not np.any(zp) else b.op("Sub", xf, b.const(np.float32(np.asarray(zp).reshape(()))))
    if v.dtype not in INT8 or v.shape is None or any(d != 1 for d in v.shape):
        raise Declined(f"computed {what} that is not one int8/uint8 element")
    return b.op("Sub", xf, b.op("Cast", b.wrap(v), to=int(DType.float32)))


def _float_product(b: GraphBuilder, node: Node, za: int, zb: int):
    """The float32 MatMul of ``(A - a_zp) @ (B - b_zp)`` (node inputs 0, 1 and zero points ``za``, ``zb``)."""
    a = input_value(b, node, 0)
    if a.dtype not in INT8 or a.shape is None or len(a.shape) < 2:
        raise Declined(f"input {a.dtype.name}")
    w, zp = _int8_const(node, 1, "b"), _int8_const(node, zb, "b zero point")
    if w is None or w.ndim != 2:
        raise Declined("b is not a constant matrix")
    zp = np.zeros((), np.float32) if zp is None else np.asarray(zp, np.float32)
    if zp.size not in (1, w.shape[1]):
        raise Declined(f"b zero point of shape {list(zp.shape)}")
    wf = w.astype(np.float32) - zp.reshape(-1 if zp.size > 1 else ())
    return b.op("MatMul", _zero_point_shift(b, a, node, za, "a zero point"), b.const(np.ascontiguousarray(wf)))


@expander("MatMulInteger")
def expand_matmul_integer(b: GraphBuilder, node: Node) -> list:
    if qgemm_select(node):
        raise Declined("the native int8 GEMM runs it")
    return [b.op("Cast", _float_product(b, node, 2, 3), to=int(DType.int32))]


@expander("MatMulIntegerToFloat")
def expand_matmul_integer_to_float(b: GraphBuilder, node: Node) -> list:
    """``float32((A - a_zp) @ (B - b_zp)) * (a_scale * b_scale) + bias`` as float ops, where the native int8 GEMM
    does not take it (a target without the driver, a computed B, K not a multiple of 4, ...)."""
    if qgemm_select(node):
        raise Declined("the native int8 GEMM runs it")
    sa, sb = input_value(b, node, 2), input_value(b, node, 3)
    if sa is None or sb is None or sa.dtype is not DType.float32 or sb.dtype is not DType.float32:
        raise Declined("scales that are not float32")
    y = b.op("Mul", _float_product(b, node, 4, 5), b.op("Mul", sa, sb))
    bias = input_value(b, node, 6) if len(node.inputs) > 6 and node.inputs[6] is not None else None
    return [y if bias is None else b.op("Add", y, bias)]


@expander("ConvInteger")
def expand_conv_integer(b: GraphBuilder, node: Node) -> list:
    x = input_value(b, node, 0)
    if x.dtype not in INT8 or x.shape is None:
        raise Declined(f"input {x.dtype.name}")
    w, wz = _int8_const(node, 1, "weight"), _int8_const(node, 3, "w zero point")
    if w is None:
        raise Declined("weight is not a constant")
    wz = np.zeros((), np.float32) if wz is None else np.asarray(wz, np.float32)
    if wz.size not in (1, w.shape[0]):
        raise Declined(f"w zero point of shape {list(wz.shape)}")
    wf = w.astype(np.float32) - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz.reshape(()))
    attrs = {k: v for k, v in node.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                             "strides")}
    acc = b.op("Conv", _zero_point_shift(b, x, node, 2, "x zero point"), b.const(np.ascontiguousarray(wf)), **attrs)
    return [b.op("Cast", acc, to=int(DType.int32))]


# -- onnxruntime's quantized contrib ops (com.microsoft, QOperator models): ops/qlinear_ms.py ------------------------
# Each is quantize(f(dequantize(inputs))): the dequantization and quantization become the elementwise chains
# above, ``f`` the float op, so they fuse with their neighbours and the pools/products run on the native drivers.

def _scalar_const(node: Node, i: int, what: str, ints: bool = False):
    v = const_input(node, i)
    if v is not None and (np.size(v) != 1 or (ints and DType.from_np(v.dtype) not in INT8)):
        raise Declined(f"{what} of shape {list(np.shape(v))} and type {np.asarray(v).dtype}")
    return None if v is None else np.asarray(v).reshape(())


def _dequantized(b: GraphBuilder, node: Node, x: int, s: int, z: int):
    """Input ``x`` of ``node`` dequantized with its constant scalar scale (input ``s``) and zero point (``z``)."""
    v = input_value(b, node, x)
    if v is None or v.dtype not in INT8:
        raise Declined(f"input {x} is not int8/uint8")
    scale, zp = _scalar_const(node, s, "scale"), _scalar_const(node, z, "zero point", ints=True)
    if scale is None:
        raise Declined("missing scale")
    t = b.op("Cast", v, to=int(DType.float32))
    if zp is not None and zp != 0:
        t = b.op("Sub", t, b.const(np.float32(zp)))
    return b.op("Mul", t, b.const(np.float32(scale)))


def _quantized(b: GraphBuilder, node: Node, y, s: int, z: int):
    """saturate(round(y / scale) + zero point) as the zero point's type (the output's)."""
    scale, zp = _scalar_const(node, s, "scale"), _scalar_const(node, z, "zero point", ints=True)
    out = node.outputs[0].dtype
    if scale is None or out not in INT8:
        raise Declined(f"output {out.name} or missing scale")
    t = b.op("Round", b.op("Div", y, b.const(np.float32(scale))))
    if zp is not None and zp != 0:
        t = b.op("Add", t, b.const(np.float32(zp)))
    info = np.iinfo(out.np)
    t = b.op("Min", b.op("Max", t, b.const(np.float32(info.min))), b.const(np.float32(info.max)))
    return b.op("Cast", t, to=int(out))


def _binary_q(op: str):
    def expand(b: GraphBuilder, node: Node) -> list:
        y = b.op(op, _dequantized(b, node, 0, 1, 2), _dequantized(b, node, 3, 4, 5))
        return [_quantized(b, node, y, 6, 7)]
    return expand


expander("QLinearAdd")(_binary_q("Add"))
expander("QLinearMul")(_binary_q("Mul"))


def _unary_q(f):
    def expand(b: GraphBuilder, node: Node) -> list:
        if int(node.attrs.get("channels_last", 0)):
            raise Declined("channels_last")
        return [_quantized(b, node, f(b, node, _dequantized(b, node, 0, 1, 2)), 3, 4)]
    return expand


def _sigmoid_f(b, node, x):
    one = b.const(np.float32(1.0))
    return b.op("Div", one, b.op("Add", b.op("Exp", b.op("Neg", x)), one))


def _leaky_f(b, node, x):
    zero = b.const(np.float32(0.0))
    return b.op("Where", b.op("Less", x, zero), b.op("Mul", x, b.const(np.float32(node.attrs.get("alpha", 0.01)))), x)


def _softmax_f(b, node, x):
    if int(node.attrs.get("opset", 13)) < 13 and int(node.attrs.get("axis", -1)) not in (-1, len(x.shape) - 1):
        raise Declined("opset < 13 Softmax over several axes")
    return b.op("Softmax", x, axis=int(node.attrs.get("axis", -1)))


def _pool_f(op: str):
    def f(b, node, x):
        return b.op(op, x, **{k: v for k, v in node.attrs.items() if k in (
            "auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides")})
    return f


expander("QLinearSigmoid")(_unary_q(_sigmoid_f))
expander("QLinearLeakyRelu")(_unary_q(_leaky_f))
expander("QLinearSoftmax")(_unary_q(_softmax_f))
expander("QLinearGlobalAveragePool")(_unary_q(_pool_f("GlobalAveragePool")))
expander("QLinearAveragePool")(_unary_q(_pool_f("AveragePool")))


@expander("QLinearConcat")
def expand_qlinear_concat(b: GraphBuilder, node: Node) -> list:
    n = len(node.inputs)
    if n < 5 or (n - 2) % 3:
        raise Declined(f"{n} inputs")
    xs = [_dequantized(b, node, i, i + 1, i + 2) for i in range(2, n, 3)]
    return [_quantized(b, node, b.op("Concat", *xs, axis=int(node.attrs.get("axis", 0))), 0, 1)]


@expander("QGemm")
def expand_qgemm(b: GraphBuilder, node: Node) -> list:
    a = input_value(b, node, 0)
    if a.dtype not in INT8 or a.shape is None or len(a.shape) != 2 or int(node.attrs.get("transA", 0)):
        raise Declined(f"input {a.dtype.name} (or transA)")
    sa, za = _scalar_const(node, 1, "a scale"), _int8_const(node, 2, "a zero point")
    w, sb, zb = _int8_const(node, 3, "b"), const_input(node, 4), _int8_const(node, 5, "b zero point")
    bias = const_input(node, 6)
    if w is None or sa is None or sb is None or w.ndim != 2:
        raise Declined("non-constant b or missing scales")
    if za is not None and np.size(za) != 1:
        raise Declined("per-row a zero point")
    if int(node.attrs.get("transB", 0)):
        w = w.T
    n = w.shape[1]
    col = (lambda p: np.asarray(p, np.float32).reshape(-1)) if max(np.size(sb), np.size(zb if zb is not None else 0)) > 1 \
        else (lambda p: np.asarray(p, np.float32).reshape(()))
    if np.size(sb) not in (1, n) or (zb is not None and np.size(zb) not in (1, n)):
        raise Declined("b parameters neither per-tensor nor per-column")
    if bias is not None and np.abs(np.asarray(bias, np.int64)).max(initial=0) >= 2 ** 24:
        raise Declined("bias beyond float32's exact integers")
    mult = np.asarray(np.float32(node.attrs.get("alpha", 1.0)) * np.float32(sa) * col(sb), np.float32)
    # on the int8 GEMM the int32 bias is scaled at conversion (it adds after the product's scaling there)
    y = _int8_gemm(b, a, w, za, zb, mult, None if bias is None else
                   np.broadcast_to(np.asarray(bias, np.float32).reshape(-1) * mult, (n,)).copy())
    if y is None:
        wf = w.astype(np.float32) - (0 if zb is None else col(zb))
        acc = b.op("MatMul", _shift(b, a, za, lambda p: p.reshape(())), b.const(np.ascontiguousarray(wf)))
        if bias is not None:
            acc = b.op("Add", acc, b.const(np.asarray(bias, np.float32)))
        y = b.op("Mul", acc, b.const(mult))
    if len(node.inputs) <= 7 or node.inputs[7] is None:
        return [y]
    return [_quantized(b, node, y, 7, 8)]


@expander("MatMulNBits")
def expand_matmul_nbits(b: GraphBuilder, node: Node) -> list:
    """A float MatMul on the dequantized weight (a constant made here, at conversion), plus the bias."""
    a = input_value(b, node, 0)
    if a.dtype not in FLOAT_TYPES or a.shape is None:
        raise Declined(f"input {a.dtype.name}")
    packed, scales = const_input(node, 1), const_input(node, 2)
    zp, g_idx, bias = (const_input(node, i) for i in (3, 4, 5))
    if packed is None or scales is None:
        raise Declined("missing weight or scales")
    try:
        w = nbits_weight(node.attrs, packed, scales, zp, g_idx)
    except KernelError as e:
        raise Declined(str(e)) from None
    y = b.op("MatMul", a, b.const(w.astype(a.dtype.np)))
    return [y if bias is None else b.op("Add", y, b.const(np.asarray(bias, a.dtype.np)))]
