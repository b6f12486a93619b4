"""``[common_quant_param] quant_type=WEIGHT_QUANT``: weights stored with ``bit_num`` bits, one scale per output
channel (MindSpore's weight quantization).

The weights of Conv, ConvTranspose, MatMul, Gemm and Gather (embedding tables) are quantized per channel
(model/quantized.py): the output channels of a Conv (axis 0; axis 1 of a ConvTranspose's weight), the output
columns of a MatMul/Gemm weight, the rows of an embedding table.  A weight with fewer than
``min_quant_weight_size`` elements or ``min_quant_weight_channel`` channels, or read by a node named in
``skip_quant_node``, stays float.  The constant then holds the dequantized values, so the graph computes what the
loaded model will, and the ``.ms`` stores the integers and scales (``quantized``, for model/format.py
``save_model``); the loader dequantizes once.  Runs after the graph-kernel optimizer, on the weights the runtime
reads (Conv+BatchNorm already folded).

``quantize_weights`` returns the map for ``save_model`` and one report row per weight (node, weight, shape, bits,
axis, max |error|, cosine with the float weight), which ``debug_info_save_path`` writes as CSV.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os

import numpy as np

from ..fileio import write_text
from ..ir.core import Graph, Node
from ..model.quantized import quantize
from ..quant_config import WeightQuantConfig

REPORT_FIELDS = ("node", "weight", "shape", "bits", "axis", "max_abs_error", "cosine")


def _weight_slots(node: Node) -> list[tuple[int, int]]:
    """(input position, channel axis) of ``node``'s weights that may be quantized."""
    ins = node.inputs
    const = [i < len(ins) and ins[i] is not None and ins[i].const is not None for i in range(3)]
    if node.op == "Conv" and const[1]:
        return [(1, 0)]
    if node.op == "ConvTranspose" and const[1]:
        return [(1, 1 if int(node.attrs.get("group", 1)) == 1 else 0)]
    if node.op == "MatMul":
        if const[1] and ins[1].const.ndim >= 2:
            return [(1, -1)]
        if const[0] and ins[0].const.ndim >= 2:
            return [(0, -2)]
    if node.op == "Gemm" and const[1] and ins[1].const.ndim == 2:
        return [(1, 0 if node.attrs.get("transB", 0) else 1)]
    if node.op == "Gather" and const[0] and ins[0].const.ndim == 2 and int(node.attrs.get("axis", 0)) == 0:
        return [(0, 0)]
    return []


def is_skipped(node: Node, skip: frozenset[str]) -> bool:
    """``node`` (or an original node fused into it) is named in ``skip_quant_node``."""
    return node.name in skip or any(s in skip for s in node.attrs.get("source_nodes", ()) or ())


def quantize_weights(graph: Graph, cfg: WeightQuantConfig) -> tuple[dict, list[dict]]:
    """Quantizes ``graph``'s weights in place (see the module doc); returns ({id(array): QuantizedWeight},
    report rows)."""
    quantized: dict[int, object] = {}
    done: set[int] = set()
    rows: list[dict] = []
    skip = frozenset(cfg.skip_quant_node)
    for g in graph.all_graphs():
        for node in g.nodes:
            if is_skipped(node, skip):
                continue
            for pos, axis in _weight_slots(node):
                v = node.inputs[pos]
                w = v.const
                if id(v) in done or w.dtype.kind != "f" or w.size < max(1, cfg.min_quant_weight_size) \
                        or w.shape[axis] < cfg.min_quant_weight_channel:
                    continue
                done.add(id(v))
                qw = quantize(w, cfg.bit_num, axis)
                deq = qw.dequantize()
                rows.append(report_row(node, v.name, w, deq, cfg.bit_num, qw.axis))
                v.const = deq
                quantized[id(deq)] = qw
    return quantized, rows


def report_row(node: Node, name: str, w: np.ndarray, deq: np.ndarray, bits: int, axis: int) -> dict:
    """One row of the ``debug_info_save_path`` report: float weight ``w`` against its dequantized ``deq``."""
    a, b = w.astype(np.float64).reshape(-1), deq.astype(np.float64).reshape(-1)
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(a @ b / denom) if denom > 0 else 1.0
    return {"node": node.name, "weight": name, "shape": "x".join(map(str, w.shape)), "bits": bits, "axis": axis,
            "max_abs_error": float(np.abs(a - b).max()) if a.size else 0.0, "cosine": cosine}


def write_report(rows: list[dict], directory: str, model_name: str, kind: str = "weight_quant",
                 fields: tuple[str, ...] = REPORT_FIELDS) -> str:
    """Writes the rows as ``<directory>/<model_name>_<kind>.csv`` (atomically, fileio.py); returns the path.
    ``kind``: ``weight_quant`` here, ``dynamic_quant`` for passes/dynamic_quant.py, ``full_quant`` (with its
    ``fields``) for passes/full_quant.py.  Errors and cosines are written with 6 and 8 digits; an empty cell
    stays empty."""
    buf = io.StringIO()
    out = csv.DictWriter(buf, fieldnames=fields)
    out.writeheader()
    for r in rows:
        out.writerow({**r, "max_abs_error": _num(r["max_abs_error"], "{:.6g}"), "cosine": _num(r["cosine"], "{:.8f}")})
    return write_text(os.path.join(directory, f"{model_name}_{kind}.csv"), buf.getvalue())


def _num(v, fmt: str) -> str:
    return fmt.format(v) if isinstance(v, float) else str(v)


def digest(a: np.ndarray) -> bytes:
    """A 16-byte digest of an array's bytes (finding the folded form of a quantized weight by content)."""
    return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()


def constant_arrays(graph: Graph):
    """Every constant array and array attribute of ``graph`` and the graphs nested in its nodes' attributes."""
    todo = [graph]
    while todo:
        g = todo.pop()
        for v in g.constants():
            yield v.const
        for n in g.nodes:
            for a in n.attrs.values():
                if isinstance(a, Graph):
                    todo.append(a)
                elif isinstance(a, np.ndarray):
                    yield a
