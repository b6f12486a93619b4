"""Upgrades of older ONNX op versions to the newest form, which is what the IR's op semantics follow.

Each entry ``LEGACY[op] = fn(p, em)`` is called with the pending node ``p`` (op, inputs, attrs, number of
outputs, and ``p.version``: the op's since_version under the model's opset) and may
  * edit ``p`` in place (attributes that became inputs, renamed attributes, ...) and return None, or
  * emit the replacement itself through ``em.emit(op, inputs, attrs, n_outputs)`` and return its outputs.
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Value
from ..ir.dtype import DType
from ..tables import registrar

LEGACY: dict = {}


legacy = registrar(LEGACY, "legacy upgrade of")


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _attr_to_input(p, em, attr: str, index: int, dtype=np.int64, default=None):
    """Moves attribute ``attr`` to (constant) input ``index``; missing attr -> ``default`` (None = omitted)."""
    value = p.attrs.pop(attr, default)
    while len(p.inputs) < index:
        p.inputs.append(None)
    const = None if value is None else em.const(np.asarray(value, dtype=dtype))
    if len(p.inputs) == index:
        p.inputs.append(const)
    else:
        p.inputs[index] = const


# -- opset < 7: legacy broadcasting (broadcast=1, axis=k) --------------------------------------------------
_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")


@legacy(*_BINARY)
def _legacy_broadcast(p, em):
    p.attrs.pop("consumed_inputs", None)
    if p.version >= 7:
        return None
    broadcast = p.attrs.pop("broadcast", 0)
    axis = p.attrs.pop("axis", None)
    if not broadcast or len(p.inputs) < 2:
        return None
    a, b = p.inputs[0], p.inputs[1]
    ra, rb = len(a.type.shape), len(b.type.shape)
    if axis is None:
        axis = ra - rb                     # suffix matching: same as numpy
    if axis < 0:
        axis += ra
    trailing = ra - axis - rb
    if trailing > 0:
        shape = tuple(b.type.shape) + (1,) * trailing
        p.inputs[1] = em.emit("Reshape", [b, em.const(_i64(shape))], {})[0]
    return None


@legacy("PRelu")
def _prelu(p, em):
    """Before opset 7 a 1-D slope of C elements applied per channel (axis 1), as PyTorch exported it."""
    p.attrs.pop("consumed_inputs", None)
    x, slope = p.inputs[0], p.inputs[1]
    xs, ss = x.type.shape, slope.type.shape
    if p.version < 7 and len(ss) == 1 and len(xs) > 2 and ss[0] == xs[1] and ss[0] != xs[-1]:
        shape = (ss[0],) + (1,) * (len(xs) - 2)
        p.inputs[1] = em.emit("Reshape", [slope, em.const(_i64(shape))], {})[0]


@legacy("Gemm")
def _gemm(p, em):
    p.attrs.pop("broadcast", None)


@legacy("BatchNormalization")
def _batch_norm(p, em):
    for k in ("spatial", "is_test", "consumed_inputs"):
        p.attrs.pop(k, None)
    if p.version < 14:           # training_mode (and its use of momentum) exists from opset 14
        p.attrs.pop("momentum", None)


@legacy("Dropout")
def _dropout(p, em):
    for k in ("ratio", "is_test", "consumed_inputs"):
        p.attrs.pop(k, None)
    p.inputs = p.inputs[:1]


@legacy("Softmax", "LogSoftmax", "Hardmax")
def _softmax(p, em):
    """Before opset 13 the op flattened the input to 2-D at ``axis`` (default 1) and normalised the rows."""
    if p.version >= 13:
        return None
    x = p.inputs[0]
    axis = p.attrs.pop("axis", 1)
    if x.type.shape is None:            # a dynamic input: back to its shape through a Shape op
        flat = em.emit("Flatten", [x], {"axis": axis})[0]
        y = em.emit(p.op, [flat], {"axis": -1}, name=p.name)[0]
        return em.emit("Reshape", [y, em.emit("Shape", [x], {})[0]], {})
    rank = len(x.type.shape)
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1 or rank == 0:
        return em.emit(p.op, [x], {"axis": -1}, name=p.name)
    flat = em.emit("Flatten", [x], {"axis": axis})[0]
    y = em.emit(p.op, [flat], {"axis": -1}, name=p.name)[0]
    return em.emit("Reshape", [y, em.const(_i64(x.type.shape))], {})


@legacy("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def _reduce(p, em):
    if "axes" in p.attrs:
        _attr_to_input(p, em, "axes", 1)


@legacy("Squeeze", "Unsqueeze")
def _squeeze(p, em):
    if "axes" in p.attrs:
        _attr_to_input(p, em, "axes", 1)


@legacy("Split")
def _split(p, em):
    if "split" in p.attrs:
        _attr_to_input(p, em, "split", 1)
    if len(p.inputs) < 2 or p.inputs[1] is None:
        p.attrs["num_outputs"] = p.n_outputs
    else:
        p.attrs.pop("num_outputs", None)


@legacy("Slice")
def _slice(p, em):
    if p.version < 10:
        axes = p.attrs.pop("axes", None)
        _attr_to_input(p, em, "starts", 1)
        _attr_to_input(p, em, "ends", 2)
        p.attrs["axes"] = axes
        _attr_to_input(p, em, "axes", 3)


@legacy("Pad")
def _pad(p, em):
    if p.version < 11:
        if "paddings" in p.attrs:
            p.attrs["pads"] = p.attrs.pop("paddings")
        value = p.attrs.pop("value", 0.0)
        _attr_to_input(p, em, "pads", 1)
        dtype = p.inputs[0].type.dtype.np
        p.inputs.append(em.const(np.asarray(value, dtype=dtype)))


@legacy("Clip")
def _clip(p, em):
    if p.version < 11:
        p.attrs.pop("consumed_inputs", None)
        dtype = p.inputs[0].type.dtype.np
        lo, hi = p.attrs.pop("min", None), p.attrs.pop("max", None)
        p.inputs = p.inputs[:1]
        p.inputs.append(None if lo is None else em.const(np.asarray(lo, dtype=dtype)))
        p.inputs.append(None if hi is None else em.const(np.asarray(hi, dtype=dtype)))


@legacy("TopK")
def _topk(p, em):
    if "k" in p.attrs:
        _attr_to_input(p, em, "k", 1, default=None)
        p.inputs[1] = em.const(_i64([int(p.inputs[1].const)]))


@legacy("Reshape")
def _reshape(p, em):
    if "shape" in p.attrs:
        _attr_to_input(p, em, "shape", 1)
    p.attrs.pop("consumed_inputs", None)


@legacy("DFT")
def _dft(p, em):
    """DFT-17 took ``axis`` as an attribute (default 1); DFT-20 takes it as input 2 (default -2)."""
    if p.version < 20:
        _attr_to_input(p, em, "axis", 2, default=1)
        p.inputs[2] = em.const(np.asarray(int(p.inputs[2].const), dtype=np.int64))


@legacy("Cast")
def _cast(p, em):
    to = p.attrs.get("to")
    if isinstance(to, str):     # opset < 6 spelled the type as a string
        name = {"float": "float32", "double": "float64", "half": "float16"}.get(to.lower(), to.lower())
        p.attrs["to"] = int(DType[name])


@legacy("Concat")
def _concat(p, em):
    p.attrs.setdefault("axis", 1)   # opset < 4 had a default of 1; later versions require it


@legacy("Scatter")
def _scatter(p, em):
    return em.emit("ScatterElements", p.inputs, p.attrs, name=p.name)


@legacy("Upsample")
def _upsample(p, em):
    """Upsample(X, scales) == Resize(X, scales) with asymmetric coordinates (and floor for nearest)."""
    mode = p.attrs.get("mode", "nearest")
    if "scales" in p.attrs:
        scales = em.const(np.asarray(p.attrs["scales"], dtype=np.float32))
    else:
        scales = p.inputs[1]
    attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return em.emit("Resize", [p.inputs[0], None, scales], attrs, name=p.name)


@legacy("Resize")
def _resize(p, em):
    if p.version < 11:
        p.attrs.setdefault("coordinate_transformation_mode", "asymmetric")
        p.attrs.setdefault("nearest_mode", "floor")
        p.inputs = [p.inputs[0], None, p.inputs[1]]
    # empty roi/scales tensors mean "not given"
    p.inputs = [None if (v is not None and v.const is not None and v.const.size == 0 and i > 0) else v
                for i, v in enumerate(p.inputs)]


@legacy("GroupNormalization")
def _group_norm(p, em):
    """Opset 18 gave scale and bias one value per group; opset 21 one per channel."""
    if p.version >= 21:
        return None
    x = p.inputs[0]
    channels, groups = x.type.shape[1], p.attrs["num_groups"]
    for i in (1, 2):
        v = p.inputs[i]
        if v.type.shape[0] == groups and groups != channels:
            rep = channels // groups
            col = em.emit("Reshape", [v, em.const(_i64([groups, 1]))], {})[0]
            wide = em.emit("Expand", [col, em.const(_i64([groups, rep]))], {})[0]
            p.inputs[i] = em.emit("Reshape", [wide, em.const(_i64([channels]))], {})[0]


@legacy("Elu", "Selu", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "Neg", "Abs", "Exp", "Log",
        "Sqrt", "Reciprocal", "Floor", "Ceil", "Sum", "Max", "Min", "Mean", "Softplus", "Softsign")
def _consumed_inputs(p, em):
    p.attrs.pop("consumed_inputs", None)


def constant_node_value(attrs: dict) -> np.ndarray:
    """The value of an ONNX Constant node from whichever of its attributes is set."""
    if "value" in attrs:
        return attrs["value"]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    if "value_string" in attrs:
        return np.asarray(attrs["value_string"], dtype=object)
    if "value_strings" in attrs:
        return np.asarray(list(attrs["value_strings"]), dtype=object)
    if "sparse_value" in attrs:
        return attrs["sparse_value"]
    raise ValueError("Constant node has no value attribute")


def is_value(v) -> bool:
    return isinstance(v, Value)
