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

``bit_num=0`` (mixed bits, ``[mixed_bit_weight_quant_param]``): each weight gets the fewest bits whose relative
error is at most ``init_scale`` (model/quantized.py ``mixed_bits``).  With ``auto_tune=true`` the scale is
searched instead (``tune_init_scale``): the largest ``init_scale`` in [1e-4, 0.5] (bisection in log space,
``TUNE_STEPS`` model runs) whose model output keeps a cosine of at least ``TUNE_COSINE`` with the float model's
on a seeded input (float inputs standard normal, integer inputs 1, dynamic dims 1), the graph run by the
reference interpreter (ops/interpret.py).

``quantize_weights`` returns the map for ``save_model``, one report row per weight (node, weight, shape, bits,
axis, max |error|, cosine with the float weight), which ``debug_info_save_path`` writes as CSV, and the
``init_scale`` used (None with fixed bits).
"""
from __future__ import annotations

import csv
import hashlib
import io
import os

import numpy as np

from ..fileio import write_text
from ..ir.core import Graph, Node, Value
from ..model.quantized import mixed_bits, quantize, relative_error
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


TUNE_COSINE = 0.995            # MindSpore's auto_tune target: output cosine with the float model "around 0.995"
TUNE_RANGE = (1e-4, 0.5)
TUNE_STEPS = 10


def _slots(graph: Graph, cfg: WeightQuantConfig) -> list[tuple[Node, Value, int]]:
    """(node, weight value, channel axis) of every weight to quantize, each value once."""
    out, done = [], set()
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
                out.append((node, v, axis))
    return out


def quantize_weights(graph: Graph, cfg: WeightQuantConfig) -> tuple[dict, list[dict], float | None]:
    """Quantizes ``graph``'s weights in place (see the module doc); returns ({id(array): QuantizedWeight},
    report rows, the init_scale of mixed bits or None)."""
    slots = _slots(graph, cfg)
    scale = None
    if cfg.bit_num == 0:
        scale = tune_init_scale(graph, slots, cfg) if cfg.auto_tune else cfg.init_scale
    quantized: dict[int, object] = {}
    rows: list[dict] = []
    for node, v, axis in slots:
        w = v.const
        qw = mixed_bits(w, axis, scale, cfg.per_channel) if scale is not None else \
            quantize(w, cfg.bit_num, axis, cfg.per_channel)
        deq = qw.dequantize()
        rows.append(report_row(node, v.name, w, deq, qw.bits, qw.axis))
        v.const = deq
        quantized[id(deq)] = qw
    return quantized, rows, scale


def tune_init_scale(graph: Graph, slots: list, cfg: WeightQuantConfig) -> float:
    """``auto_tune``: the largest init_scale whose quantized model keeps the output cosine >= ``TUNE_COSINE``
    (module doc).  The weights are back to float when it returns."""
    from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
    from ..ops.interpret import eval_graph

    originals = [v.const for _, v, _ in slots]
    feeds = _tune_feeds(graph)
    try:
        reference = _flat_outputs(eval_graph(graph, feeds))
    except Exception as e:                                     # noqa: BLE001 - any kernel's failure, reported
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"[mixed_bit_weight_quant_param] auto_tune=true: the model did not run on the seeded "
                             f"input auto_tune uses ({type(e).__name__}: {e}); set auto_tune=false and an "
                             "init_scale") from None
    # the bits each weight takes at a scale only change where its error curve crosses it: cache by the bits chosen
    errors = [{b: relative_error(w, quantize(w, b, axis, cfg.per_channel)) for b in range(2, 17)}
              for w, (_, _, axis) in zip(originals, slots)]
    seen: dict[tuple, float] = {}

    def cosine_at(scale: float) -> float:
        bits = tuple(min((b for b, e in errs.items() if e <= scale), default=16) for errs in errors)
        if bits not in seen:
            for (_, v, axis), w, b in zip(slots, originals, bits):
                v.const = quantize(w, b, axis, cfg.per_channel).dequantize()
            seen[bits] = _cosine(reference, _flat_outputs(eval_graph(graph, feeds)))
        return seen[bits]

    lo, hi = np.log(TUNE_RANGE[0]), np.log(TUNE_RANGE[1])
    try:
        if cosine_at(float(np.exp(hi))) >= TUNE_COSINE:
            return float(np.exp(hi))
        for _ in range(TUNE_STEPS):
            mid = (lo + hi) / 2
            if cosine_at(float(np.exp(mid))) >= TUNE_COSINE:
                lo = mid
            else:
                hi = mid
        return float(np.exp(lo))
    finally:
        for (_, v, _), w in zip(slots, originals):
            v.const = w


def _tune_feeds(graph: Graph) -> dict:
    rng = np.random.default_rng(0)
    feeds = {}
    for v in graph.inputs:
        t = v.type
        shape = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in (t.shape or ()))
        dt = t.dtype.np
        feeds[v.name] = rng.standard_normal(shape).astype(dt) if np.dtype(dt).kind == "f" else np.ones(shape, dt)
    return feeds


def _flat_outputs(outputs: list) -> np.ndarray:
    parts = [np.asarray(o, np.float64).reshape(-1) for o in outputs
             if isinstance(o, np.ndarray) and o.dtype.kind == "f"]
    return np.concatenate(parts) if parts else np.zeros(0)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / denom) if denom > 0 else float(np.array_equal(a, b))


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
