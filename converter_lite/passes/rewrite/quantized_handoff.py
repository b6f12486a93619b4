"""``quantized_handoff``: values read only by int8 convolutions reach them as uint8.

    y = QuantizedConv(...)                      (float32)
    QuantizedConv(y, s, z, ...), ...            (every reader: each quantizes y with (s, z) on the way in,
    QuantizeLinear(y, s, z) -> q, ...           or is a QuantizeLinear with that pair)
  ->
    yq = QuantizedConv(..., uint8_out=1)        (uint8: QuantizeLinear(y', s, z) from its epilogue)
    QuantizedConv(yq, s, z, ...), ...           (read as quantized already: no quantization pass;
    q -> yq                                     the QuantizeLinear's readers read yq)

Between two int8 convolutions of a QDQ model (or of FULL_QUANT, which writes one) the activation otherwise
travels as float32, four times the bytes, and each reader divides it by ``s`` again; now the producer's epilogue
writes the bytes and the readers' packing only interleaves them (kernels/qconv/emit.py), or, a depthwise one
(kernels/qconv_depthwise/), reads them where they are: MobileNetV2's expand -> depthwise -> project stays uint8.  A value an elementwise
op or a Concat makes (a residual Add and its Relu, YOLOv8's Concat) gets ``yq = QuantizeLinear(y, s, z)`` after
it instead (case 3), which the expander and the clusterer put into the producer's fused kernel: the kernel writes
the bytes, once for all its readers.  And an int8 convolution ending in a round trip whose one reader is such a
kernel writes the bytes too, ``DequantizeLinear`` inserted in front of the reader, in its kernel (case 4): the
kernel reads a quarter of the bytes (YOLOv8's Concat, a residual Add).

The values stay those of the float graph (ops/quantized_conv.py, its two uint8 variants):

1. the producer ends in a round trip with ``(s, z)`` (``y_scale``/``y_zero_point``, or with a SiLU the product's
   ``silu_product_q``): its uint8 output is ``QuantizeLinear(v)`` of that round trip's input, and the readers'
   ``DequantizeLinear`` of it is the producer's float output bit for bit;
2. it has no last pair (its QuantizeLinear -> DequantizeLinear pair went to its readers, quantized_conv's first
   rule): ``(s, z)`` becomes it, as ``y_scale``/``y_zero_point`` (or ``silu_product_q``);
3. an elementwise (or broadcast) op or a Concat makes it: the readers' QuantizeLinear moves in front of them,
   shared.  Not where the elementwise ops read a float Conv's output (a Relu or Clip there runs in the Conv's
   epilogue, passes/conv_epilogue.py, which a QuantizeLinear would undo: one more pass over the values);
4. the producer ends in a round trip, and its one reader is an elementwise op or a Concat: its output is
   ``QuantizeLinear(v)`` of that round trip's pair, and ``DequantizeLinear`` of it (the reader's new input) is the
   producer's float output bit for bit.  Also next to case 1 (a convolution read by convolutions and by the
   residual Add of a YOLOv8 bottleneck).

5. the producer ends in a round trip, some readers quantize with its pair and the others are QuantizeLinear nodes
   of other pairs, elementwise ops or Concats: the former read its uint8 output, the others ``DequantizeLinear``
   of it (case 4's): YOLOv8's neck convolution read by the upsampling Resize (its pair) and by a Concat (another).

Cases 1 and 2 rest on ``QuantizeLinear(DequantizeLinear(q)) == q`` for every uint8 ``q`` (ops/quantized_conv.py
``round_trips``: the scales for which it holds): a reader quantized the round trip's float value before, and gets
its integer now.

Readers are int8 convolutions (at their input ``x``) and QuantizeLinear nodes of one float32 scale and uint8 zero
point whose outputs are no graph outputs (a QDQ model's residual branch quantizes the value the next convolution
reads with the same pair); at least one a convolution for cases 3 and 4, any for 1 and 2 (a convolution read
only by QuantizeLinear nodes: YOLOv8's upsampling Resize and SPPF max pools once quantized_moves.py moved their
QuantizeLinear in front of them).

Declined: a graph output; readers quantizing it with different pairs; other readers (or a convolution reading
it as another input than ``x``) except case 4's one elementwise reader of a producer ending in the readers' pair;
a producer whose last pair differs from the readers'; a scale ``round_trips`` refuses or a zero point that is not
one uint8.
"""
from __future__ import annotations

import numpy as np

from ...ir.core import Graph, Node, TensorType, Value
from ...ir.dtype import DType
from ...ops.builder import fresh_name
from ...ops.quantized_conv import round_trips
from ...ops.registry import OPS, OpKind
from ..base import Pass, PassContext
from ..registry import register_pass

OP = "QuantizedConv"
SHARED = ("Concat",)           # non-elementwise producers and readers whose fused kernels take the (de)quantization


def _scalar(v: Value | None) -> np.ndarray | None:
    return None if v is None or v.const is None or v.const.size != 1 else v.const.reshape(())


def _reader_pair(graph: Graph, user: Node, pos: int) -> tuple[float, int] | None:
    """The (scale, zero point) ``user`` quantizes its input ``pos`` with: a QuantizedConv's ``x``, or a per-tensor
    uint8 QuantizeLinear (whose output is no graph output); else None."""
    if pos != 0 or user.op not in (OP, "QuantizeLinear") or len(user.inputs) < 3:
        return None
    if user.op == "QuantizeLinear" and (
            any(o is user.outputs[0] for o in graph.outputs) or user.outputs[0].type.dtype is not DType.uint8 or
            user.attrs.get("block_size") or user.attrs.get("precision", 0) not in (0, int(DType.float32))):
        return None
    s, z = _scalar(user.inputs[1]), _scalar(user.inputs[2])
    if s is None or z is None or s.dtype != np.float32 or z.dtype != np.uint8:
        return None
    return float(s), int(z)


def readers_pair(graph: Graph, readers: list, need_conv: bool = True) -> tuple[float, int] | None:
    """The (scale, zero point) all of ``readers`` (uses of one value, at least one a QuantizedConv unless not
    ``need_conv``) quantize it with, when they agree on one that round-trips (ops/quantized_conv.py
    ``round_trips``), else None."""
    if not readers or (need_conv and not any(u.op == OP for u, _ in readers)):
        return None
    pairs = {_reader_pair(graph, u, pos) for u, pos in readers}
    if len(pairs) != 1 or None in pairs:
        return None
    pair = pairs.pop()
    return pair if round_trips(pair[0]) else None


def last_pair(node: Node) -> tuple[float, int] | None:
    """The producer's last quantization round trip: the SiLU product's, else its ``y_scale``'s (or None)."""
    if node.attrs.get("silu"):
        q = node.attrs.get("silu_product_q")
        return None if q is None else (float(np.float32(q[0])), int(q[1]))
    ys, yz = (_scalar(node.inputs[i]) if len(node.inputs) > i else None for i in (6, 7))
    return None if ys is None or yz is None else (float(ys), int(yz))


def _elementwise(node: Node) -> bool:
    return node.op in OPS and OPS[node.op].kind <= OpKind.BROADCAST


def fusable_producer(node: Node | None) -> bool:
    """Case 3: an elementwise op or a Concat, whose elementwise inputs (back to the first other op) read no float
    Conv's output."""
    if node is None or not (_elementwise(node) or node.op in SHARED) or len(node.outputs) != 1:
        return False
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for v in n.inputs:
            p = None if v is None else v.producer
            if p is not None and p.op == "Conv":
                return False
            if p is not None and _elementwise(p):
                todo.append(p)
    return True


def fusable_reader(readers: list) -> bool:
    """Case 4: ``readers`` (uses of one value) are one elementwise op or Concat."""
    users = {id(u): u for u, _ in readers}
    if len(users) != 1:
        return False
    (user,) = users.values()
    return _elementwise(user) or user.op in SHARED


def pair_values(pair: tuple[float, int]) -> tuple[Value, Value]:
    return (Value(fresh_name("handoff_const"), const=np.asarray(np.float32(pair[0]))),
            Value(fresh_name("handoff_const"), const=np.asarray(np.uint8(pair[1]))))


def hand_to_readers(graph: Graph, readers: list, yq: Value) -> None:
    """The readers (``y``'s uses, taken before the rewrite) read ``yq``: QuantizedConvs directly, a QuantizeLinear's
    readers instead of its output (it goes)."""
    for user, pos in readers:
        if user.op == OP:
            user.set_input(pos, yq)
        else:
            graph.replace_all_uses(user.outputs[0], yq)
            graph.remove_node(user)


def hand_off(graph: Graph, node: Node, pair: tuple[float, int], readers: list) -> None:
    """Cases 1 and 2: ``node`` writes its output as uint8 with ``pair`` as its last quantization pair (case 2:
    added), which ``readers`` (its quantizing ones) read."""
    if node.attrs.get("silu"):
        node.attrs["silu_product_q"] = [pair[0], pair[1]]
    elif last_pair(node) is None:
        while len(node.inputs) < 6:
            node.add_input(None)                                 # (no bias)
        for i, v in zip((6, 7), pair_values(pair), strict=True):
            if len(node.inputs) > i:
                node.set_input(i, v)
            else:
                node.add_input(v)
    y = node.outputs[0]
    node.attrs["uint8_out"] = 1
    y.type = TensorType(DType.uint8, y.type.shape)
    hand_to_readers(graph, readers, y)


def quantize_before(graph: Graph, y: Value, pair: tuple[float, int]) -> None:
    """Case 3: ``yq = QuantizeLinear(y, pair)`` right after ``y``'s producer, what all of ``y``'s readers read."""
    yq = Value(fresh_name(f"{y.name}_uint8"), TensorType(DType.uint8, y.type.shape))
    readers = list(y.uses)
    q = Node("QuantizeLinear", [y, *pair_values(pair)], [yq], name=fresh_name("handoff_QuantizeLinear"))
    graph.nodes.insert(graph.nodes.index(y.producer) + 1, q)
    hand_to_readers(graph, readers, yq)


def dequantize_after(graph: Graph, node: Node, pair: tuple[float, int], readers: list) -> None:
    """Case 4: ``node`` writes uint8, ``DequantizeLinear`` of it (right after it) is what ``readers`` read."""
    y = node.outputs[0]
    yd = Value(fresh_name(f"{y.name}_dequantized"), TensorType(DType.float32, y.type.shape))
    node.attrs["uint8_out"] = 1
    y.type = TensorType(DType.uint8, y.type.shape)
    for user, pos in readers:
        user.set_input(pos, yd)
    dq = Node("DequantizeLinear", [y, *pair_values(pair)], [yd], name=fresh_name("handoff_DequantizeLinear"))
    graph.nodes.insert(graph.nodes.index(node) + 1, dq)


@register_pass
class QuantizedHandoffPass(Pass):
    name = "quantized_handoff"

    def run(self, graph: Graph, ctx: PassContext) -> bool:
        n = 0
        for node in list(graph.nodes):                           # (QuantizeLinear readers go: never producers)
            y = node.outputs[0] if node.outputs else None
            if y is None or y.type is None or y.type.dtype is not DType.float32 or not y.uses or \
                    any(o is y for o in graph.outputs) or not (node.op == OP or fusable_producer(node)):
                continue
            quantizing = [(u, pos) for u, pos in y.uses if _reader_pair(graph, u, pos) is not None]
            others = [use for use in y.uses if use not in quantizing]
            pair = readers_pair(graph, quantizing, need_conv=node.op != OP)     # (a convolution: any readers)
            if node.op != OP:
                if pair is not None and not others:
                    quantize_before(graph, y, pair)
                    n += 1
                continue
            last = last_pair(node)
            if pair is None:
                mine = [(u, pos) for u, pos in quantizing if _reader_pair(graph, u, pos) == last]
                if last is not None and not quantizing and fusable_reader(others):
                    dequantize_after(graph, node, last, others)
                    n += 1
                elif last is not None and mine and all(u.op == "QuantizeLinear" or _elementwise(u) or u.op in SHARED
                                                       for u, _ in y.uses):
                    rest = [use for use in y.uses if use not in mine]           # (case 5)
                    hand_off(graph, node, last, mine)
                    dequantize_after(graph, node, last, rest)
                    n += 1
            elif last is not None and last != pair:
                ctx.log.debug("%s: %r ends in the pair %s, its readers quantize with %s", self.name, node.name, last,
                              pair)
            elif not others or (last is not None and fusable_reader(others)):
                hand_off(graph, node, pair, quantizing)          # (cases 1 and 2; with others, 1 and 4)
                if others:
                    dequantize_after(graph, node, last, others)
                n += 1
        if n:
            ctx.count(self.name, n)
        return n > 0
