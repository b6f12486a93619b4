"""``[common_quant_param] quant_type=DYNAMIC_QUANT``: int8 weights, activations quantized per call (MindSpore's
dynamic quantization, strategy ALWC: activation per layer, weight per channel).

``quantize_dynamic`` runs on the imported graph, before the graph-kernel optimizer, and rewrites every MatMul
whose input 1 is a constant float32 matrix ``W [K, N]`` and every Gemm with ``transA=0`` and a constant float32
``B`` into the form onnxruntime's ``quantize_dynamic`` (``per_channel=True``) writes::

    x -> DynamicQuantizeLinear -> (xq uint8, xs float32 scalar, xz uint8 scalar)
    MatMulInteger(xq, Wq, xz, Wz) -> Cast(to=float32) -> Mul(., Mul(xs, w_scale)) [-> Add(., C) for a Gemm]

``Wq`` is int8 ``[K, N]``, symmetric per output column: ``w_scale[n] = max|W[:, n]| / 127``, ``Wq = round(W /
w_scale)`` in ``[-127, 127]`` (an all-zero column gets scale 1; model/quantized.py ``quantize``); ``Wz`` is an
int8 zero point of zeros ``[N]``.  A Gemm's ``transB`` is applied to the constant (``Wq`` is always ``[K, N]``),
its ``alpha`` folds into ``w_scale`` and its ``beta`` into a constant ``C`` (a computed ``C`` needs ``beta=1``).
The activation ``x`` (float32, rank >= 2; a MatMul's may have batch dims, which MatMulInteger broadcasts like
MatMul) is quantized once for all the rewritten nodes that read it (Q/K/V projections share one
DynamicQuantizeLinear).  The last node of each rewrite takes over the original node's output value, so names and
graph outputs stay; the new nodes go where the original was, so the order stays topological.

A weight with fewer than ``min_quant_weight_size`` elements or ``min_quant_weight_channel`` output columns, or
read by a node named in ``skip_quant_node``, stays float (its node unchanged); a weight read by several nodes is
quantized once.  The graph-kernel optimizer then expands or runs these ops (passes/expand/quantize.py).

The ``.ms`` stores the int8 weights: as int8 constants where they stay so, and where the optimizer turned a weight
into an exactly int8-valued float32 constant (MatMulInteger expanded into a float MatMul on the integers),
``storage_map`` marks that constant to be stored as its int8 values (scale 1, model/quantized.py), which the
loader turns back into the same floats.  ``DynamicQuantResult.rows`` is the ``debug_info_save_path`` report, one
row per weight (node, weight, shape, bits, axis, max |error| and cosine of the dequantized weight against the
float one), written by passes/weight_quant.py ``write_report(..., kind="dynamic_quant")``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.core import Graph, Node, Value
from ..ir.dtype import DType
from ..model.quantized import QuantizedWeight, quantize
from ..ops.builder import GraphBuilder, fresh_name
from ..quant_config import DynamicQuantConfig
from .weight_quant import constant_arrays, digest, is_skipped, report_row

BITS = 8


@dataclass
class DynamicQuantResult:
    """What ``quantize_dynamic`` did: report rows (one per quantized weight), the nodes rewritten and the int8
    weights (for ``storage_map``)."""
    rows: list[dict] = field(default_factory=list)
    nodes: int = 0
    weights: list[np.ndarray] = field(default_factory=list)


@dataclass
class _Site:
    """A rewritable node: activation ``x``, weight value ``w`` (transposed: B of a Gemm with transB=1),
    ``alpha`` for the scales, the bias added after (Gemm's C, beta folded in) or None."""
    x: Value
    w: Value
    trans: bool
    alpha: float
    bias: Value | np.ndarray | None


def _float32_tensor(v: Value | None) -> bool:
    return v is not None and v.type is not None and v.type.is_tensor and v.type.dtype is DType.float32


def _site(node: Node) -> _Site | None:
    ins = node.inputs
    if node.op not in ("MatMul", "Gemm") or len(ins) < 2:
        return None
    x, w = ins[0], ins[1]
    if not _float32_tensor(x) or x.const is not None or w is None or w.const is None \
            or w.const.dtype != np.float32 or w.const.ndim != 2 or w.const.size == 0:
        return None
    rank = None if x.type.shape is None else len(x.type.shape)
    if node.op == "MatMul":
        return _Site(x, w, False, 1.0, None) if rank is None or rank >= 2 else None
    a = node.attrs
    if int(a.get("transA", 0)) or rank not in (None, 2):
        return None
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    c = ins[2] if len(ins) > 2 else None
    bias: Value | np.ndarray | None = None
    if c is not None and beta != 0.0:
        if not _float32_tensor(c):
            return None
        if beta != 1.0:
            if c.const is None:
                return None
            bias = (c.const.astype(np.float32) * np.float32(beta)).astype(np.float32)
        else:
            bias = c
    return _Site(x, w, bool(int(a.get("transB", 0))), alpha, bias)


def quantize_dynamic(graph: Graph, cfg: DynamicQuantConfig) -> DynamicQuantResult:
    """Rewrites ``graph``'s MatMul/Gemm nodes on constant weights in place (see the module doc)."""
    result = DynamicQuantResult()
    skip = frozenset(cfg.skip_quant_node)
    weights: dict[tuple[int, bool], tuple[Value, Value, np.ndarray]] = {}     # (id(w), trans) -> Wq, Wz, scale
    for g in graph.all_graphs():
        activations: dict[int, list[Value]] = {}                               # id(x) -> DynamicQuantizeLinear outs
        for node in list(g.nodes):
            site = _site(node)
            if site is None or is_skipped(node, skip):
                continue
            w = site.w.const
            n_cols = w.shape[0] if site.trans else w.shape[1]
            if w.size < max(1, cfg.min_quant_weight_size) or n_cols < cfg.min_quant_weight_channel:
                continue
            key = (id(site.w), site.trans)
            if key not in weights:
                wf = np.ascontiguousarray(w.T if site.trans else w)
                qw = quantize(wf, BITS, 1)
                name = site.w.name
                weights[key] = (Value(f"{name}_quantized", const=qw.q),
                                Value(f"{name}_zero_point", const=np.zeros(qw.q.shape[1], np.int8)), qw.scale)
                result.weights.append(qw.q)
                result.rows.append(report_row(node, name, wf, qw.dequantize(), BITS, 1))
            _rewrite(g, node, site, weights[key], activations)
            result.nodes += 1
    return result


def _rewrite(g: Graph, node: Node, site: _Site, weight: tuple[Value, Value, np.ndarray],
             activations: dict[int, list[Value]]) -> None:
    wq, wz, scale = weight
    base = node.name or fresh_name("dynamic_quant")
    b = GraphBuilder(g, insert_before=node, name_prefix=base, dynamic=True)
    dq = activations.get(id(site.x))
    if dq is None:
        dq = b.node("DynamicQuantizeLinear", site.x, n_outputs=3, name=f"{site.x.name}_QuantizeLinear").outputs
        for v, suffix in zip(dq, ("quantized", "scale", "zero_point")):
            v.name = f"{site.x.name}_{suffix}"
        activations[id(site.x)] = dq
    acc = b.node("MatMulInteger", dq[0], wq, dq[2], wz, name=f"{base}_MatMulInteger").outputs[0]
    acc_f = b.node("Cast", acc, to=int(DType.float32), name=f"{base}_cast").outputs[0]
    w_scale = scale if site.alpha == 1.0 else (scale * np.float32(site.alpha)).astype(np.float32)
    scales = b.node("Mul", dq[1], b.const(w_scale), name=f"{base}_scales_mul").outputs[0]
    last = b.node("Mul", acc_f, scales, name=f"{base}_output_mul")
    if site.bias is not None:
        bias = site.bias if isinstance(site.bias, Value) else b.const(site.bias)
        last = b.node("Add", last.outputs[0], bias, name=f"{base}_bias_add")
    out = node.outputs[0]                 # the last new node takes over the original output (name, uses, outputs)
    last.outputs = [out]
    out.producer, out.index = last, 0
    node.outputs = []
    g.remove_node(node)


def storage_map(graph: Graph, result: DynamicQuantResult) -> dict[int, QuantizedWeight]:
    """{id(array): QuantizedWeight} for model/format.py ``save_model``: the float32 constants of the optimized
    ``graph`` that hold exactly one of ``result``'s int8 weights (or its transpose), stored as those int8 values
    with scale 1, so the file keeps the weights in 8 bits whatever form the optimizer gave them."""
    known: set[tuple[tuple[int, ...], bytes]] = set()
    for q in result.weights:
        known.add((q.shape, digest(q)))
        known.add((q.T.shape, digest(q.T)))
    shapes = {s for s, _ in known}
    out: dict[int, QuantizedWeight] = {}
    for a in constant_arrays(graph):
        if a.dtype != np.float32 or a.ndim != 2 or a.shape not in shapes or id(a) in out:
            continue
        if not (np.all(np.abs(a) <= 127) and np.array_equal(a, np.rint(a))):
            continue
        q = a.astype(np.int8)
        if (a.shape, digest(q)) in known:
            out[id(a)] = QuantizedWeight(q, np.ones(a.shape[1], np.float32), 1, BITS, a.dtype)
    return out
