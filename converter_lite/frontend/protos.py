"""Reading ONNX protobufs into plain Python: files (with external data), tensors, attributes, types."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.numpy_helper as onh
from onnx import AttributeProto

from ..errors import RET_GRAPH_FILE_ERR, ConverterError
from ..ir.dtype import DType


def load_onnx(path) -> onnx.ModelProto:
    """Loads ``path`` with its external data; every failure is a ConverterError(-200) naming the file."""
    if isinstance(path, onnx.ModelProto):
        return path
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"model file {path} does not exist")
    if os.path.isdir(path):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"model file {path} is a directory, not an ONNX file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConverterError(RET_GRAPH_FILE_ERR, f"cannot read model file {path}: {e.strerror}") from None
    if not data:
        raise ConverterError(RET_GRAPH_FILE_ERR, f"model file {path} is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        raise ConverterError(RET_GRAPH_FILE_ERR,
                             f"model file {path} is not a valid ONNX model (protobuf parse failed: the file is "
                             "truncated or not ONNX)") from None
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ConverterError(RET_GRAPH_FILE_ERR, f"model file {path} holds no ONNX graph (is it an ONNX file?)")
    try:
        onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except Exception as e:      # OSError, ValueError, onnx's ValidationError for a missing/irregular file
        raise ConverterError(RET_GRAPH_FILE_ERR, f"model file {path}: cannot load external data: {e}") from None
    return model


def c_array(a) -> np.ndarray:
    """C-contiguous copy only if needed; unlike np.ascontiguousarray, keeps 0-d arrays 0-d."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else np.array(a, order="C")


def tensor_to_array(t: onnx.TensorProto, where: str) -> np.ndarray:
    try:
        DType(t.data_type)
    except ValueError:
        name = onnx.TensorProto.DataType.Name(t.data_type) if t.data_type in onnx.TensorProto.DataType.values() \
            else str(t.data_type)
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: tensor {t.name!r} has unsupported data type {name}") \
            from None
    try:
        arr = onh.to_array(t)
    except Exception as e:   # malformed raw data, missing external file, ...
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: tensor {t.name!r} cannot be read: {e}") from None
    if arr.dtype.kind in "SU":
        arr = arr.astype(object)
    return c_array(arr)


def attribute_value(a: AttributeProto, where: str):
    """ONNX attribute -> int, float, str, tuple, np.ndarray.  Graph attributes are returned as GraphProto."""
    t = a.type
    if t == AttributeProto.INT:
        return int(a.i)
    if t == AttributeProto.FLOAT:
        return float(a.f)
    if t == AttributeProto.STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == AttributeProto.INTS:
        return tuple(int(x) for x in a.ints)
    if t == AttributeProto.FLOATS:
        return tuple(float(x) for x in a.floats)
    if t == AttributeProto.STRINGS:
        return tuple(s.decode("utf-8", errors="replace") for s in a.strings)
    if t == AttributeProto.TENSOR:
        return tensor_to_array(a.t, where)
    if t == AttributeProto.GRAPH:
        return a.g
    if t == AttributeProto.SPARSE_TENSOR:
        return _sparse(a.sparse_tensor, where)
    if t == AttributeProto.TYPE_PROTO:
        return a.tp             # Optional's ``type``: the importer reads it with kind_of_type
    return None   # other rarely used kinds: ignored


def _sparse(st, where) -> np.ndarray:
    values = tensor_to_array(st.values, where)
    idx = tensor_to_array(st.indices, where)
    dense = np.zeros(tuple(st.dims), dtype=values.dtype)
    if idx.ndim == 1:
        dense.reshape(-1)[idx] = values
    else:
        dense[tuple(idx.T)] = values
    return dense


def value_info_type(vi: onnx.ValueInfoProto, where: str):
    """(DType, dims) of a graph input/output; dims hold ints or str/None for dynamic dims."""
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        return kind_of_type(vi.type, vi.name, where)[1], None
    try:
        dtype = DType(tt.elem_type)
    except ValueError:
        name = onnx.TensorProto.DataType.Name(tt.elem_type).lower() \
            if tt.elem_type in onnx.TensorProto.DataType.values() else "unknown"
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: {vi.name!r} has unsupported element type "
                                                 f"{name} ({tt.elem_type})") from None
    if not tt.HasField("shape"):
        return dtype, None
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or None)
    return dtype, dims


def kind_of_type(tp: onnx.TypeProto, name: str, where: str) -> tuple[str, DType]:
    """(kind, element DType) of a tensor, sequence-of-tensor or optional (tensor or sequence) type proto;
    kinds as ``ir.core.KINDS``.  Maps, sparse tensors and nested sequences are -200."""
    which = tp.WhichOneof("value")
    kind, inner = "tensor", tp
    if which == "optional_type":
        inner = tp.optional_type.elem_type
        kind = "optional"
        which = inner.WhichOneof("value")
    if which == "sequence_type":
        inner = inner.sequence_type.elem_type
        kind = "optional_sequence" if kind == "optional" else "sequence"
        which = inner.WhichOneof("value")
    if which != "tensor_type":
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: {name!r} has type {which or 'none'} inside a "
                                                 f"{kind}; only tensors, sequences of tensors and optionals of "
                                                 "those are supported")
    try:
        return kind, DType(inner.tensor_type.elem_type)
    except ValueError:
        raise ConverterError(RET_GRAPH_FILE_ERR, f"{where}: {name!r} has unsupported element type "
                                                 f"{inner.tensor_type.elem_type}") from None


def value_info_kind(vi: onnx.ValueInfoProto, where: str) -> str:
    """The kind (``ir.core.KINDS``) of a graph input/output."""
    if vi.type.HasField("tensor_type"):
        return "tensor"
    return kind_of_type(vi.type, vi.name, where)[0]
