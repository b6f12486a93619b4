"""``[common_quant_param] quant_type=FULL_QUANT``, the graph side: the ``.ms`` keeps the int8 weights.

onnxruntime's QDQ model (frontend/full_quant.py) holds each weight as an int8 initializer read through a
DequantizeLinear, which the importer folds into a float32 constant ``(q - 0) * scale``.  ``storage_map`` finds
those constants in the optimized graph (as they are, reshaped along their channel axis, or a 2-D one transposed)
and marks each to be stored as its integers and scales (model/quantized.py QuantizedWeight), and only where
``dequantize`` of them gives back exactly the same bytes: the loaded model computes with the very floats the
converter compiled.  A weight that the optimizer changed (folded into another constant) stays float32; one it
moved onto int8 values itself (a QDQ Conv on the native int8 convolution) is stored as those int8 values.

``report_rows`` and ``write_report`` make the ``debug_info_save_path`` CSV ``<model>_full_quant.csv``: one row per
quantized node output (cosine and max |error| of the quantized model's activation against the float model's on
the first calibration input) and one per int8 weight (as passes/weight_quant.py's report).
"""
from __future__ import annotations

import numpy as np

from ..ir.core import Graph
from ..model.quantized import QuantizedWeight, dequantize
from . import weight_quant
from .weight_quant import constant_arrays, digest

BITS = 8
REPORT_FIELDS = ("kind", "node", "op", "tensor", "shape", "bits", "axis", "max_abs_error", "cosine")


def _candidates(records) -> dict[bytes, list]:
    """digest of a float32 form -> [(record, transposed)], for each weight as the importer folds it and, 2-D,
    transposed."""
    out: dict[bytes, list] = {}
    for r in records:
        deq = dequantize(r.q, r.scale, r.axis, np.float32)
        out.setdefault(digest(deq), []).append((r, False))
        if deq.ndim == 2:
            out.setdefault(digest(deq.T), []).append((r, True))
    return out


def _stored_as(a: np.ndarray, r, transposed: bool) -> QuantizedWeight | None:
    """``a``'s QuantizedWeight if it is ``r``'s weight (transposed), possibly reshaped along its channel axis."""
    q, axis = (r.q.T, 1 - r.axis) if transposed else (r.q, r.axis)
    if a.shape != q.shape:
        if axis != 0 or a.ndim == 0 or a.shape[0] != q.shape[0]:
            return None
        q = q.reshape(a.shape)
    qw = QuantizedWeight(np.ascontiguousarray(q), r.scale, axis, BITS, np.dtype(np.float32))
    return qw if np.array_equal(qw.dequantize().view(np.uint32), a.view(np.uint32)) else None


def storage_map(graph: Graph, records) -> dict[int, QuantizedWeight]:
    """{id(array): QuantizedWeight} for model/format.py ``save_model``: the float32 constants of the optimized
    ``graph`` that are exactly one of ``records``' (frontend/full_quant.py WeightRecord) dequantized weights."""
    found = _candidates(records)
    out: dict[int, QuantizedWeight] = {}
    for a in constant_arrays(graph):
        if a.dtype != np.float32 or a.ndim == 0 or id(a) in out:
            continue
        for r, transposed in found.get(digest(a), ()):
            qw = _stored_as(a, r, transposed)
            if qw is not None:
                out[id(a)] = qw
                break
    return out


def report_rows(records, activations: list[dict]) -> list[dict]:
    """The report: the activation rows (frontend/full_quant.py), then one row per int8 weight."""
    rows = list(activations)
    for r in records:
        deq = dequantize(r.q, r.scale, r.axis, np.float32).astype(np.float64).reshape(-1)
        w = r.float_weight
        if w is None:
            err, cosine = "", ""
        else:
            a = w.astype(np.float64).reshape(-1)
            denom = float(np.linalg.norm(a) * np.linalg.norm(deq))
            err = float(np.abs(a - deq).max()) if a.size else 0.0
            cosine = float(a @ deq / denom) if denom > 0 else 1.0
        rows.append({"kind": "weight", "node": r.node, "op": "", "tensor": r.name,
                     "shape": "x".join(map(str, r.q.shape)), "bits": BITS, "axis": r.axis,
                     "max_abs_error": err, "cosine": cosine})
    return rows


def write_report(rows: list[dict], directory: str, model_name: str) -> str:
    """Writes ``<directory>/<model_name>_full_quant.csv`` (atomically); returns the path."""
    return weight_quant.write_report(rows, directory, model_name, "full_quant", REPORT_FIELDS)
