"""``quantized_moves``: a QDQ model's data-movement ops run on the quantized bytes, and the round trips they leave
between two equal pairs go.

    (a) M(y...) whose readers all quantize with (s, z)  ->  M(QuantizeLinear(y, s, z)...)   (uint8; the readers:
        (QuantizeLinear nodes, int8 convolutions' x)         QuantizeLinear ones go, convolutions read the bytes)
    (b) M(DequantizeLinear(q, s, z)...)                   ->  DequantizeLinear(M(q...), s, z)
    (c) QuantizeLinear(DequantizeLinear(q, s, z), s, z)   ->  q

``M`` is an op that only moves or selects its input's elements (``MOVES``: Reshape, Transpose, Slice, Split, a
nearest Resize, Expand, ...; Concat, whose every input is data) or takes their maximum (MaxPool).  A QDQ model
quantizes after each of them with its input's pair (onnxruntime gives Reshape, Transpose, Resize, MaxPool, Split
... their input's scale), so in the float form each moved the float32 values, then divided them by ``s`` again
(YOLOv8n 320x320 FULL_QUANT: its head's Concat -> Reshape -> Concat -> Split -> Reshape -> Transpose chain
requantized the same values five times, 219 us in six kernels where the float model's takes 70; the SPPF's max
pools 100 us; the upsampling Resize -> Concat 155 us).  Now they move bytes: the producer's epilogue quantizes
once (quantized_handoff.py, which this pass runs again after each round that moved anything: a convolution whose
readers now all quantize with its pair writes uint8), and the kernels that remain requantize only where the pairs
differ (a Concat of inputs of other pairs: byte -> byte).

Exact, value for value:
* (a), (b): ``QuantizeLinear``/``DequantizeLinear`` with one (per-tensor) pair are elementwise, so they commute
  with ops that only move elements; and they are non-decreasing (for a positive scale), so they commute with a
  maximum: ``Q(max(a, b)) == max(Q(a), Q(b))``.  A NaN would break that (the float max pool's NaN rule is not
  Q's NaN -> zero point), hence (a) only where ``M``'s data inputs come from a DequantizeLinear or an int8
  convolution: never NaN.  A Concat takes (b) when all its inputs are DequantizeLinear of one pair and type.
* (c) is ``QuantizeLinear(DequantizeLinear(q)) == q`` for every 8-bit ``q`` with a scale ``round_trips`` takes
  (ops/quantized_conv.py).

Declined: per-axis or blocked pairs, non-constant scales or zero points, pairs of other types than a float32 scale
and an int8/uint8 zero point ((a): uint8, quantized_handoff's), a value that is a graph output, a Resize other
than nearest or with ``tf_crop_and_resize``, a MaxPool whose Indices output is read, (a) where some reader of
``M``'s outputs does not quantize them or readers disagree on the pair.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Graph, Node, TensorType, Value
from ...ir.dce import remove_dead_nodes
from ...ir.dtype import DType
from ...ops.builder import fresh_name
from ...ops.quantized_conv import round_trips
from ..base import Pass, PassContext
from ..registry import register_pass
from .quantized_handoff import (
    QuantizedHandoffPass,
    hand_to_readers,
    pair_values,
    readers_pair,
)

MAX_ROUNDS = 8                 # move -> hand off rounds (YOLOv8n needs 2)

INT8 = (DType.int8, DType.uint8)
NAN_FREE = ("DequantizeLinear", "QuantizedConv")   # (a)'s producers: their outputs are never NaN


def _always(node: Node) -> bool:
    return True


def _nearest_resize(node: Node) -> bool:
    return node.attrs.get("mode", "nearest") == "nearest" and \
        node.attrs.get("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize"


def _max_pool(node: Node) -> bool:
    return all(not o.uses for o in node.outputs[1:])


# op -> whether this node only moves/selects (or takes maxima of) its input 0's elements; the other inputs are
# shapes, indices or sizes.  Concat (every input is data) is handled apart.
MOVES = {
    "Reshape": _always, "Flatten": _always, "Squeeze": _always, "Unsqueeze": _always, "Transpose": _always,
    "Identity": _always, "Slice": _always, "Split": _always, "Expand": _always, "Tile": _always,
    "DepthToSpace": _always, "SpaceToDepth": _always, "Resize": _nearest_resize, "MaxPool": _max_pool,
}
MONOTONE = ("MaxPool",)        # commutes with Q/DQ through monotonicity, not element movement


def pair_of(node: Node) -> tuple[float, DType, int] | None:
    """A QuantizeLinear/DequantizeLinear's per-tensor (float32 scale, 8-bit type, zero point), else None."""
    if node.op not in ("QuantizeLinear", "DequantizeLinear") or len(node.inputs) < 3 or \
            node.attrs.get("block_size") or node.attrs.get("precision", 0) not in (0, int(DType.float32)):
        return None
    s, z = node.inputs[1], node.inputs[2]
    if s is None or z is None or s.const is None or z.const is None or s.const.size != 1 or z.const.size != 1:
        return None
    zt = DType.from_np(z.const.dtype)
    if s.const.dtype != np.float32 or zt not in INT8 or not round_trips(s.const):
        return None
    q = node.outputs[0] if node.op == "QuantizeLinear" else node.inputs[0]
    if q.type is None or q.type.dtype is not zt:
        return None
    return float(s.const.reshape(())), zt, int(z.const.reshape(()))


def _moves(node: Node | None) -> bool:
    return node is not None and node.op in MOVES and MOVES[node.op](node) and node.inputs and \
        node.inputs[0] is not None


def _retype(v: Value, dt: DType) -> None:
    v.type = TensorType(dt, v.type.shape)


def _is_output(graph: Graph, v: Value) -> bool:
    return any(o is v for o in graph.outputs)


def _cancel(graph: Graph, q: Node) -> bool:
    """(c): ``q`` = QuantizeLinear(DequantizeLinear(x)) with one pair: its readers read ``x``."""
    x = q.inputs[0]
    dq = x.producer if x is not None else None
    if dq is None or dq.op != "DequantizeLinear" or _is_output(graph, q.outputs[0]):
        return False
    pair = pair_of(q)
    if pair is None or pair != pair_of(dq):
        return False
    graph.replace_all_uses(q.outputs[0], dq.inputs[0])
    graph.remove_node(q)
    return True


def _quantize_in_front(graph: Graph, m: Node) -> bool:
    """(a): every reader of ``m``'s outputs quantizes them with one pair (QuantizeLinear nodes, int8 convolutions'
    input: quantized_handoff.py ``readers_pair``) and ``m``'s data inputs are NaN-free -> ``m`` moves the bytes
    of ``QuantizeLinear(input)``: the QuantizeLinear readers go, the convolutions read the bytes."""
    if m.op == "Concat":
        data = [i for i, v in enumerate(m.inputs) if v is not None]
    elif _moves(m):
        data = [0]
    else:
        return False
    outs = m.outputs[:1] if m.op in MONOTONE else m.outputs
    if any(not o.uses or o.type is None or o.type.dtype is not DType.float32 or _is_output(graph, o) for o in outs):
        return False
    pairs = {readers_pair(graph, list(o.uses), need_conv=False) for o in outs}
    if len(pairs) != 1 or None in pairs:
        return False
    pair = pairs.pop()
    if not all(m.inputs[i].producer is not None and m.inputs[i].producer.op in NAN_FREE and
               m.inputs[i].type is not None and m.inputs[i].type.dtype is DType.float32 for i in data):
        return False
    at = graph.nodes.index(m)
    for i in data:
        y = m.inputs[i]
        yq = Value(fresh_name(f"{y.name}_quantized"), TensorType(DType.uint8, y.type.shape))
        graph.nodes.insert(at, Node("QuantizeLinear", [y, *pair_values(pair)], [yq],
                                    name=fresh_name(f"{m.name}_QuantizeLinear")))
        at += 1
        m.set_input(i, yq)
    for o in outs:
        readers = list(o.uses)
        _retype(o, DType.uint8)
        hand_to_readers(graph, readers, o)
    return True


def _dequantize_after(graph: Graph, m: Node) -> bool:
    """(b): ``m`` = M(DequantizeLinear(q)...) -> DequantizeLinear(M(q)...), one DequantizeLinear per output."""
    data = [i for i, v in enumerate(m.inputs) if v is not None] if m.op == "Concat" else [0]
    if m.op != "Concat" and not _moves(m):
        return False
    dqs = [m.inputs[i].producer for i in data]
    if not dqs or any(d is None or d.op != "DequantizeLinear" for d in dqs):
        return False
    pairs = {pair_of(d) for d in dqs}
    if len(pairs) != 1 or None in pairs:
        return False
    qt = pairs.pop()[1]
    if any(o.type is None or o.type.dtype is not DType.float32 for o in m.outputs):
        return False
    first = dqs[0]
    for i, d in zip(data, dqs):
        m.set_input(i, d.inputs[0])
    at = graph.nodes.index(m) + 1
    for k, out in enumerate(list(m.outputs)):
        if m.op == "MaxPool" and k > 0:     # (Indices: unread)
            continue
        oq = Value(fresh_name(f"{out.name}_quantized"), TensorType(qt, out.type.shape))
        m.outputs[k] = oq
        oq.producer, oq.index = m, k
        graph.nodes.insert(at, Node("DequantizeLinear", [oq, first.inputs[1], first.inputs[2]], [out],
                                    dict(first.attrs), name=fresh_name(first.name or "DequantizeLinear")))
        at += 1
    for d in dqs:
        if not d.outputs[0].uses and not _is_output(graph, d.outputs[0]) and d in graph.nodes:
            graph.remove_node(d)
    return True


def move_quantization(graph: Graph) -> int:
    """(a), (b), (c) to a fixed point; the number of rewrites."""
    total = 0
    while True:
        n = 0
        for node in list(graph.nodes):
            if node not in graph.nodes:
                continue
            if node.op == "QuantizeLinear" and node.inputs and node.inputs[0] is not None:
                n += _cancel(graph, node)
            elif node.op in MOVES or node.op == "Concat":
                n += _dequantize_after(graph, node) or _quantize_in_front(graph, node)
        if not n:
            if total:
                remove_dead_nodes(graph, recursive=False)     # (the DequantizeLinears nothing reads now)
            return total
        total += n


def _handoff_enabled(ctx: PassContext) -> bool:
    """Whether quantized_handoff ran before this pass (the manager records every pass it runs in ``ctx.stats``;
    ``disable_pass=quantized_handoff`` turns off its reruns here too); a bare context (no configuration): yes."""
    return ctx.config is None or any(k.startswith("time_us/") and k.endswith("_quantized_handoff") for k in ctx.stats)


@register_pass
class QuantizedMovesPass(Pass):
    """After quantized_handoff (whose QuantizeLinear after a Concat read by convolutions (a) moves in front of
    the Concat's inputs), and again quantized_handoff after each round that changed something (a convolution
    whose readers are now all QuantizeLinear nodes of its pair writes the bytes itself)."""
    name = "quantized_moves"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        total, handoff = 0, _handoff_enabled(ctx)
        for _ in range(MAX_ROUNDS):
            n = move_quantization(graph)
            if not n:
                break
            total += n
            if handoff:
                QuantizedHandoffPass().run(graph, ctx)
        if total:
            ctx.count(self.name, total)
        return total > 0
