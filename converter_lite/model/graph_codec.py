"""Graph <-> JSON-able header object, with tensor data going to a separate weights blob.

Encoding (one dict per graph, sub-graphs of fused kernels nested in their node's attrs)::

    {"name": str, "metadata": {str: str},
     "values": [{"name": str, "type": [dtype_code, [d0, ...] | null, kind?] | null, "const": <tensor ref>?},
                ...],   (kind: "sequence"/"optional"/"optional_sequence"; absent for a tensor)
     "inputs": [value index, ...], "outputs": [value index, ...],
     "nodes": [{"op": str, "name": str, "inputs": [value index | null], "outputs": [value index],
                "attrs": {key: <attr>}}, ...]}

Value indices are local to their graph.  Attribute values map to JSON as follows: None, bool, int, str and
finite or non-finite floats map to themselves (``Infinity``/``NaN`` are written the way Python's json module
does); a tuple or list becomes a JSON list (decoded as a tuple); everything else is a tagged object
``{"$": tag, ...}``: ``"array"`` (a tensor ref), ``"graph"`` (a nested encoded graph), ``"dict"`` (string keys),
``"scalar"`` (a numpy scalar: dtype tag + value).

A weight stored quantized (``[common_quant_param] quant_type=WEIGHT_QUANT``) is ``{"dtype": float dtype, "shape":
[...], "quant": {"bits": int, "axis": int, "q": <int8/int16 tensor ref>, "scale": <float32 tensor ref>}}``,
dequantized at load (model/quantized.py); below 8 bits ``"q"`` is the uint8 bytes of ``pack_bits`` and the quant
object holds ``"packed": true``.
A tensor ref is ``{"dtype": dtype tag, "shape": [...], "offset": int, "nbytes": int}`` into the weights
blob, where each tensor starts on a 64-byte boundary so that loading can view it in place (np.frombuffer over a
memory map, no copy).  String tensors (dtype object) are stored inline as ``{"dtype": "str", "shape": [...],
"items": [...]}``.  Data is little-endian.

A dtype tag is the numpy dtype str (``"<f4"``), or for the low-precision types (``DType.is_low_precision``:
ml_dtypes arrays, whose dtype str is a bare ``"<V2"``, or even ``"<f1"`` for float8e5m2) the DType name
(``"bfloat16"``, ``"int4"``), their data one element per numpy element (int4/uint4/float4e2m1 one byte each).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import KINDS, Graph, Node, TensorType, Value
from ..ir.dtype import DType
from .quantized import dequantize, pack_bits, storage_dtype, unpack_bits

ALIGN = 64
_TAG = "$"


class CodecError(ValueError):
    """The graph cannot be encoded, or a header does not decode to a graph; the message says where."""


def align_up(n: int, alignment: int = ALIGN) -> int:
    return (n + alignment - 1) // alignment * alignment


# the low-precision types, stored under their DType name (module docstring): name <-> numpy dtype
_LOW_PRECISION = {d.name: d.np for d in DType if d.is_low_precision}
_LOW_PRECISION_NAME = {dt: name for name, dt in _LOW_PRECISION.items()}


def _dtype_tag(dtype: np.dtype) -> str:
    """The dtype tag of ``dtype`` (module docstring); CodecError for a type the format cannot hold."""
    if dtype in _LOW_PRECISION_NAME:
        return _LOW_PRECISION_NAME[dtype]
    if dtype.kind not in "biuf":
        raise CodecError(f"cannot store an array of dtype {dtype}")
    return dtype.newbyteorder("<").str


def _tag_dtype(tag: str) -> np.dtype:
    """The numpy dtype a dtype tag names; CodecError for any other tag."""
    if tag in _LOW_PRECISION:
        return _LOW_PRECISION[tag]
    dtype = np.dtype(tag)
    if dtype.kind not in "biuf" or dtype in _LOW_PRECISION_NAME:     # float8e5m2's "<f1" only by name
        raise CodecError(f"unsupported dtype {tag!r}")
    return dtype


class WeightsWriter:
    """Collects tensors into one blob, each 64-byte aligned; identical array objects are stored once.
    ``quantized`` maps ``id(array)`` to the QuantizedWeight (model/quantized.py) that array is the dequantized
    form of: such an array is stored as its integers and scales."""

    def __init__(self, quantized: dict | None = None) -> None:
        self.chunks: list[tuple[int, np.ndarray]] = []   # (offset in blob, little-endian contiguous data)
        self.size = 0
        self._seen: dict[int, tuple[np.ndarray, dict]] = {}
        self.quantized = quantized or {}

    def add(self, array: np.ndarray) -> dict:
        hit = self._seen.get(id(array))
        if hit is not None and hit[0] is array:
            return hit[1]
        qw = self.quantized.get(id(array))
        if qw is not None:
            packed = qw.bits < 8
            q = pack_bits(qw.q, qw.bits) if packed else qw.q
            ref = {"dtype": np.dtype(qw.dtype).newbyteorder("<").str, "shape": list(np.shape(array)),
                   "quant": {"bits": qw.bits, "axis": qw.axis, "q": self.add(q), "scale": self.add(qw.scale)}}
            if packed:
                ref["quant"]["packed"] = True
            self._seen[id(array)] = (array, ref)
            return ref
        a = np.asarray(array)
        if a.dtype == object or a.dtype.kind in "US":
            ref = {"dtype": "str", "shape": list(a.shape), "items": [str(x) for x in a.reshape(-1)]}
        else:
            tag = _dtype_tag(a.dtype)
            if a.dtype in _LOW_PRECISION_NAME:      # its bits, as the unsigned integers of its size
                a = np.asarray(a, order="C").view(f"u{a.dtype.itemsize}")
            a = np.asarray(a, dtype=a.dtype.newbyteorder("<"), order="C")   # keeps 0-d arrays 0-d
            offset = align_up(self.size)
            ref = {"dtype": tag, "shape": list(a.shape), "offset": offset, "nbytes": a.nbytes}
            if a.nbytes:
                self.chunks.append((offset, a))
                self.size = offset + a.nbytes
        self._seen[id(array)] = (array, ref)
        return ref


def read_tensor(ref: dict, blob: memoryview | bytes, blob_size: int) -> np.ndarray:
    """The array a tensor ref describes, viewing ``blob`` in place (read-only when the blob is); a quantized
    weight (``"quant"``) is dequantized into a new array."""
    shape = tuple(int(d) for d in ref["shape"])
    if any(d < 0 for d in shape):
        raise CodecError(f"negative dimension in tensor shape {list(shape)}")
    if "quant" in ref:
        return _read_quantized(ref, shape, blob, blob_size)
    if ref["dtype"] == "str":
        items = ref["items"]
        arr = np.empty(len(items), dtype=object)
        arr[:] = [str(x) for x in items]
        return arr.reshape(shape)
    dtype = _tag_dtype(ref["dtype"])
    low = dtype in _LOW_PRECISION_NAME
    stored = np.dtype(f"<u{dtype.itemsize}") if low else dtype     # the bits of a low-precision type
    count = int(np.prod(shape, dtype=np.int64))
    nbytes, offset = int(ref["nbytes"]), int(ref["offset"])
    if nbytes != count * dtype.itemsize:
        raise CodecError(f"tensor of shape {list(shape)} and dtype {dtype} cannot have {nbytes} bytes")
    if count == 0:
        return np.empty(shape, dtype=dtype.newbyteorder("="))
    if offset < 0 or offset + nbytes > blob_size:
        raise CodecError(f"tensor at offset {offset} with {nbytes} bytes lies outside the weights section")
    arr = np.frombuffer(blob, dtype=stored, count=count, offset=offset).reshape(shape)
    if not stored.isnative:     # big-endian host: one copy into native order
        arr = arr.astype(stored.newbyteorder("="))
    return arr.view(dtype) if low else arr


def _read_quantized(ref: dict, shape: tuple, blob, blob_size: int) -> np.ndarray:
    quant = ref["quant"]
    try:
        bits, axis = int(quant["bits"]), int(quant["axis"])
        q, scale = read_tensor(quant["q"], blob, blob_size), read_tensor(quant["scale"], blob, blob_size)
        dtype = np.dtype(ref["dtype"])
        if quant.get("packed"):
            if q.dtype != np.uint8 or not 1 <= bits < 8:
                raise ValueError(f"packed integers must be uint8 bytes of 1-7 bits, not {q.dtype} of {bits} bits")
            q = unpack_bits(q, bits, int(np.prod(shape, dtype=np.int64))).reshape(shape)
    except (KeyError, TypeError, ValueError) as e:
        raise CodecError(f"bad quantized tensor ref: {e}") from None
    if q.shape != shape or not 1 <= bits <= 16 or q.dtype != storage_dtype(bits) or dtype.kind != "f" \
            or not -len(shape) <= axis < len(shape) or scale.shape != (shape[axis],):
        raise CodecError(f"quantized tensor of shape {list(shape)}: q {list(q.shape)} {q.dtype}, "
                         f"{bits} bits, axis {axis}, scales {list(scale.shape)} do not agree")
    return dequantize(q, scale, axis, dtype.newbyteorder("="))


# -- encoding ------------------------------------------------------------------------------------------------
def encode_graph(graph: Graph, weights: WeightsWriter) -> dict:
    index: dict[int, int] = {}
    values: list[dict] = []

    def ref(v: Value | None) -> int | None:
        if v is None:
            return None
        i = index.get(id(v))
        if i is None:
            i = index[id(v)] = len(values)
            entry: dict[str, Any] = {"name": v.name, "type": _encode_type(v.type)}
            if v.const is not None:
                entry["const"] = weights.add(v.const)
            values.append(entry)
        return i

    inputs = [ref(v) for v in graph.inputs]
    nodes = []
    for n in graph.nodes:
        try:
            attrs = {str(k): _encode_attr(a, weights) for k, a in n.attrs.items()}
        except CodecError as e:
            raise CodecError(f"node {n.name!r} ({n.op}): {e}") from None
        nodes.append({"op": n.op, "name": n.name, "inputs": [ref(v) for v in n.inputs],
                      "outputs": [ref(v) for v in n.outputs], "attrs": attrs})
    outputs = [ref(v) for v in graph.outputs]
    return {"name": graph.name, "metadata": dict(graph.metadata), "values": values, "inputs": inputs,
            "outputs": outputs, "nodes": nodes}


def _encode_type(t: TensorType | None) -> list | None:
    if t is None:
        return None
    enc = [int(t.dtype), None if t.shape is None else [int(d) for d in t.shape]]
    return enc if t.kind == "tensor" else enc + [t.kind]


def _encode_attr(a: Any, weights: WeightsWriter) -> Any:
    if a is None or isinstance(a, (bool, str)):
        return a
    if isinstance(a, int):          # also IntEnum (DType codes stay ints)
        return int(a)
    if isinstance(a, float):
        return float(a)
    if isinstance(a, (tuple, list)):
        return [_encode_attr(x, weights) for x in a]
    if isinstance(a, np.ndarray):
        return {_TAG: "array", "ref": weights.add(a)}
    if isinstance(a, np.generic):
        return {_TAG: "scalar", "dtype": _dtype_tag(a.dtype), "value": a.item()}
    if isinstance(a, Graph):
        return {_TAG: "graph", "graph": encode_graph(a, weights)}
    if isinstance(a, dict):
        if not all(isinstance(k, str) for k in a):
            raise CodecError("dict attribute keys must be strings")
        return {_TAG: "dict", "items": {k: _encode_attr(v, weights) for k, v in a.items()}}
    raise CodecError(f"attribute value of type {type(a).__name__} cannot be stored")


# -- decoding ------------------------------------------------------------------------------------------------
def decode_graph(obj: dict, blob: memoryview | bytes, blob_size: int) -> Graph:
    """Rebuilds a graph from ``encode_graph``'s output; raises CodecError on a malformed object."""
    try:
        return _decode_graph(obj, blob, blob_size)
    except CodecError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise CodecError(f"malformed graph description ({type(e).__name__}: {e})") from None


def _decode_graph(obj: dict, blob, blob_size: int) -> Graph:
    values: list[Value] = []
    for entry in obj["values"]:
        const = read_tensor(entry["const"], blob, blob_size) if "const" in entry else None
        t = entry["type"]
        vtype = None if t is None else TensorType(DType(int(t[0])),
                                                  None if t[1] is None else tuple(int(d) for d in t[1]),
                                                  str(t[2]) if len(t) > 2 else "tensor")
        if vtype is not None and vtype.kind not in KINDS:
            raise CodecError(f"value {entry['name']!r} has unknown kind {vtype.kind!r}")
        values.append(Value(str(entry["name"]), vtype, const))

    def get(i: int | None) -> Value | None:
        if i is None:
            return None
        if not isinstance(i, int) or not 0 <= i < len(values):
            raise CodecError(f"value reference {i!r} out of range (graph has {len(values)} values)")
        return values[i]

    nodes = []
    for n in obj["nodes"]:
        attrs = {str(k): _decode_attr(a, blob, blob_size) for k, a in n["attrs"].items()}
        outs = [get(i) for i in n["outputs"]]
        if any(o is None for o in outs):
            raise CodecError(f"node {n['name']!r} has a missing output")
        nodes.append(Node(str(n["op"]), [get(i) for i in n["inputs"]], outs, attrs, name=str(n["name"])))
    graph = Graph(str(obj["name"]), [get(i) for i in obj["inputs"]], [get(i) for i in obj["outputs"]], nodes)
    graph.metadata = {str(k): v for k, v in obj.get("metadata", {}).items()}
    return graph


def _decode_attr(a: Any, blob, blob_size: int) -> Any:
    if isinstance(a, list):
        return tuple(_decode_attr(x, blob, blob_size) for x in a)
    if not isinstance(a, dict):
        return a
    tag = a[_TAG]
    if tag == "array":
        return read_tensor(a["ref"], blob, blob_size)
    if tag == "graph":
        return _decode_graph(a["graph"], blob, blob_size)
    if tag == "dict":
        return {str(k): _decode_attr(v, blob, blob_size) for k, v in a["items"].items()}
    if tag == "scalar":
        return _tag_dtype(a["dtype"]).type(a["value"])
    raise CodecError(f"unknown attribute tag {tag!r}")
