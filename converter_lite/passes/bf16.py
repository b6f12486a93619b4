"""``--bf16=on``: MatMul/Gemm on constant float32 weights as bfloat16 products (``MatMulBf16``, ops/bf16.py) on
AVX-512 BF16's ``vdpbf16ps`` (kernels/bgemm/).  Opt-in: the products lose precision (bfloat16 keeps 8 bits of
mantissa; outputs typically within cosine 0.9999 of float32), so the converter never chooses it by itself, and
reports what it converted.

``convert_to_bf16`` runs on the imported graph, before the graph-kernel optimizer, and rewrites per op:

========  ===========================================================================================================
op        rewritten when / into
========  ===========================================================================================================
MatMul    input 0 float32 (computed, rank >= 2), input 1 a constant float32 ``W [K, N]``: ``MatMulBf16(x, bf16(W))``;
          a following ``Add`` of a constant float32 bias of ``N`` elements (or one), the product's only reader
          and not a graph output, folds in as the product's bias (the driver adds it in its epilogue)
Gemm      ``transA=0``, 2-D input 0, constant float32 ``B``: ``transB`` applied to the constant and ``alpha`` folded
          into it before rounding; ``beta * C`` a bias when constant and of ``N`` elements (or one), else an
          ``Add`` after the product (a computed ``C`` needs ``beta=1``)
========  ===========================================================================================================

A weight of fewer than ``min_elements`` elements (``MIN_ELEMENTS``) stays float32 (the products are too small for
the conversion of their activations to pay); a weight read by several nodes is rounded once.  The weights are
stored as uint16 bit patterns (round to nearest even, ops/bf16.py ``to_bf16``): half the bytes of float32 in the
``.ms``.  The activations stay float32 in memory; the driver rounds them per call.

What to run where the CPU has no AVX-512 BF16 is the caller's concern (pipeline.py refuses ``--bf16=on`` there);
this pass reads no host state.  Measured (bert_tiny, 2 threads, this repo's Zen 4 VM): see README "bf16".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.core import Graph, Node, Value
from ..ops.bf16 import bf16_to_float, to_bf16
from ..ops.builder import GraphBuilder, fresh_name
from .dynamic_quant import _site as matmul_site
from .weight_quant import report_row

MIN_ELEMENTS = 1024
OP = "MatMulBf16"


@dataclass
class Bf16Result:
    """What ``convert_to_bf16`` did: nodes rewritten (by op), biases folded, report rows (one per weight: node,
    weight, shape, bits 16, max |error| and cosine of the rounded weight), float32 and bfloat16 weight bytes."""
    nodes: dict[str, int] = field(default_factory=dict)
    biases_folded: int = 0
    rows: list[dict] = field(default_factory=list)
    float_bytes: int = 0
    bf16_bytes: int = 0

    @property
    def count(self) -> int:
        return sum(self.nodes.values())

    def summary(self) -> str:
        """One line for the converter's output."""
        ops = ", ".join(f"{n} {op}" for op, n in sorted(self.nodes.items())) or "no MatMul/Gemm"
        return (f"bf16: {self.count} nodes as bfloat16 products ({ops}; {self.biases_folded} biases folded), "
                f"{len(self.rows)} weights {self.float_bytes / 2**20:.2f} MB float32 -> "
                f"{self.bf16_bytes / 2**20:.2f} MB bfloat16")


def convert_to_bf16(graph: Graph, min_elements: int = MIN_ELEMENTS) -> Bf16Result:
    """Rewrites ``graph``'s MatMul/Gemm nodes on constant weights in place (see the module doc)."""
    result = Bf16Result()
    weights: dict[tuple[int, bool, float], Value] = {}
    for g in graph.all_graphs():
        readers = _readers(g)
        outputs = {id(v) for v in g.outputs}
        for node in list(g.nodes):
            if node.op not in ("MatMul", "Gemm"):
                continue
            site = matmul_site(node)
            if site is None or site.w.const.size < max(1, min_elements):
                continue
            w = site.w.const
            key = (id(site.w), site.trans, site.alpha)
            wb = weights.get(key)
            if wb is None:
                wf = np.ascontiguousarray(w.T if site.trans else w)
                if site.alpha != 1.0:
                    wf = (wf * np.float32(site.alpha)).astype(np.float32)
                bits = to_bf16(wf)
                wb = weights[key] = Value(fresh_name(f"{site.w.name}_bf16"), const=bits)
                result.rows.append(report_row(node, site.w.name, wf, bf16_to_float(bits), 16, 1))
                result.float_bytes += wf.nbytes
                result.bf16_bytes += bits.nbytes
            n = wb.const.shape[1]
            bias, after = _bias(site.bias, n)
            add = None
            if node.op == "MatMul" and bias is None:
                add = _bias_add(node, readers, outputs, n)
                if add is not None:
                    bias = add[1]
            _rewrite(g, node, site.x, wb, bias, after, add[0] if add else None)
            result.nodes[node.op] = result.nodes.get(node.op, 0) + 1
            result.biases_folded += add is not None
    return result


def _readers(g: Graph) -> dict[int, list[Node]]:
    out: dict[int, list[Node]] = {}
    for node in g.nodes:
        for v in node.inputs:
            if v is not None:
                out.setdefault(id(v), []).append(node)
        for sub in _bodies(node):
            for v in _captured(sub):
                out.setdefault(id(v), []).append(node)
    return out


def _bodies(node: Node):
    return [v for v in node.attrs.values() if isinstance(v, Graph)]


def _captured(g: Graph):
    for h in g.all_graphs():
        for node in h.nodes:
            yield from (v for v in node.inputs if v is not None)


def _row_bias(c: np.ndarray, n: int) -> np.ndarray | None:
    """``c`` as a bias of ``n`` columns (or one value), or None when it varies along other axes."""
    c = np.asarray(c)
    if c.dtype != np.float32 or (c.size not in (1, n)) or (c.size == n and c.shape[-1:] != (n,)):
        return None
    return np.ascontiguousarray(c.reshape(-1))


def _bias(bias, n: int) -> tuple[np.ndarray | None, Value | None]:
    """A Gemm's (beta-scaled) C as (a constant bias for the product, or a value to add after it)."""
    if bias is None:
        return None, None
    const = bias if isinstance(bias, np.ndarray) else bias.const
    if const is not None:
        row = _row_bias(const, n)
        if row is not None:
            return row, None
        if not isinstance(bias, Value):
            return None, Value(fresh_name("bf16_gemm_c"), const=np.asarray(const, np.float32))
    return None, bias


def _bias_add(node: Node, readers: dict, outputs: set, n: int) -> tuple[Node, np.ndarray] | None:
    """The ``Add`` of a constant row bias that alone reads ``node``'s product (folded into the product)."""
    out = node.outputs[0]
    users = readers.get(id(out), [])
    if len(users) != 1 or id(out) in outputs or users[0].op != "Add" or len(users[0].inputs) != 2:
        return None
    add = users[0]
    other = add.inputs[1] if add.inputs[0] is out else add.inputs[0]
    if other is None or other is out or other.const is None:
        return None
    row = _row_bias(other.const, n)
    if row is None or add.outputs[0].type is None or out.type is None or add.outputs[0].type.shape != out.type.shape:
        return None
    return add, row


def _rewrite(g: Graph, node: Node, x: Value, wb: Value, bias: np.ndarray | None, after: Value | None,
             add: Node | None) -> None:
    base = node.name or fresh_name("bf16")
    b = GraphBuilder(g, insert_before=node, name_prefix=base, dynamic=True)
    ins = [x, wb] + ([b.const(bias)] if bias is not None else [])
    last = b.node(OP, *ins, name=f"{base}_bf16")
    if after is not None:
        last = b.node("Add", last.outputs[0], after, name=f"{base}_bias_add")
    out = (add if add is not None else node).outputs[0]     # the last new node takes over the output
    last.outputs = [out]
    out.producer, out.index = last, 0
    if add is not None:
        add.outputs = []
        g.remove_node(add)
    node.outputs = []
    g.remove_node(node)
