"""``quantized_conv``: a QDQ model's convolution, ``Conv(DequantizeLinear(QuantizeLinear(x, s, z), s, z), W, B)``
with ``W`` the dequantized int8 weights, becomes ``QuantizedConv(x, s, z, Wq, w_scale, B)`` (ops/quantized_conv.py),
which the native int8 convolution runs (kernels/qconv/: the input quantized on the way in, the sums in integers).

The importer folded the weights' DequantizeLinear into float32 constants; ``int8_weights`` finds the int8
values and scale per output channel back: a channel ``w`` is accepted when a scale ``s`` (its largest magnitude
/ 127 or / 128, or the whole tensor's, and their neighbouring float32 values) gives integers ``q`` in
[-128, 127] with ``float32(q) * s == w`` bit for bit -- the weights are then exactly what DequantizeLinear made of
``q``, and nothing about the model's arithmetic is assumed.  Other readers of the QuantizeLinear/DequantizeLinear
outputs keep them.  A zero Pad in front of the QuantizeLinear (TensorFlow-style exports pad explicitly; the
quantizer put the pair between the Pad and the Conv) moves into the Conv's pads first, int8 or not
(``check_padded``).  Only what a driver takes is rewritten: a uint8 zero point, 2-D, float32, one group
(kernels/qconv/abi.py ``select``) or depthwise (kernels/qconv_depthwise/abi.py ``select``).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...ir.core import TensorType, Value
from ...kernels.qconv.abi import select
from ...kernels.qconv_depthwise.abi import select as select_depthwise
from ...ops.builder import GraphBuilder
from ..registry import register_pass
from ..simplify.pattern import Const, Match, MatchResult, Opt, Var, op
from ..simplify.rewriter import Rule
from .base import RewritePass
from .pad_conv import check as pad_check
from .pad_conv import rewrite as pad_rewrite

PADDED = op.Conv(op.DequantizeLinear(op.QuantizeLinear(op.Pad(Var("x"), Const("pads"), Opt("value"), Opt("axes"),
                                                              bind="pad"),
                                                       Const("s1"), Opt("z1"), bind="q"),
                                     Const("s2"), Opt("z2"), bind="dq"), Var("w"), Opt("b"), bind="conv")
PATTERN = op.Conv(op.DequantizeLinear(op.QuantizeLinear(Var("x"), Const("s1"), Opt("z1"), bind="q"), Const("s2"),
                                      Opt("z2"), bind="dq"), Const("w"), Opt("b"), bind="conv")
CONV = op.QuantizedConv(Var("x"), Var("xs"), Var("xz"), Var("w"), Var("ws"), Opt("b"), bind="conv")
REQUANTIZED = [op.DequantizeLinear(op.QuantizeLinear(inner, Const("s1"), Opt("z1"), bind="q"), Const("s2"), Opt("z2"),
                                   bind="dq")
               for inner in (CONV, op.Relu(CONV, bind="act"), op.Clip(CONV, Const("lo"), Const("hi"), bind="act"))]
_SIG_QDQ = op.DequantizeLinear(op.QuantizeLinear(op.Sigmoid(Var("ya"), bind="sig"), Const("sb"), Opt("zb"), bind="qb"),
                               Const("sb2"), Opt("zb2"), bind="dqb")
SILU = [op.DequantizeLinear(op.QuantizeLinear(op.Mul(Var("ya"), sig, bind="mul"), Const("sc"), Opt("zc"), bind="qc"),
                            Const("sc2"), Opt("zc2"), bind="dqc")
        for sig in (_SIG_QDQ, op.Sigmoid(Var("ya"), bind="sig"))]
# the same with the product read only by int8 convolutions (which took its QuantizeLinear -> DequantizeLinear pair
# before this rule saw it: the rules visit the graph from its end)
SILU_READ = [op.Mul(Var("ya"), sig, bind="mul") for sig in (_SIG_QDQ, op.Sigmoid(Var("ya"), bind="sig"))]
ULPS = 2                        # neighbouring float32 scales tried on each side of a candidate


def int8_weights(w: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(int8 ``q``, float32 scale per output channel) with ``float32(q) * scale == w`` exactly, or None."""
    if w.dtype != np.float32 or w.ndim < 2 or not np.isfinite(w).all():
        return None
    m = w.shape[0]
    flat = w.reshape(m, -1)
    amax = np.abs(flat).max(axis=1)
    bases = [amax / np.float32(127), amax / np.float32(128),
             np.full(m, amax.max() / np.float32(127), np.float32), np.full(m, amax.max() / np.float32(128), np.float32)]
    q = np.zeros(flat.shape, np.int8)
    scale = np.ones(m, np.float32)
    done = amax == 0                                   # an all-zero channel: q = 0, scale 1
    for base in bases:
        base = base.astype(np.float32)
        for k in range(-ULPS, ULPS + 1):
            s = base
            for _ in range(abs(k)):
                s = np.nextafter(s, np.float32(np.inf) if k > 0 else np.float32(0))
            todo = ~done & (s > 0)
            if not todo.any():
                break
            with np.errstate(all="ignore"):
                cand = np.rint(flat[todo] / s[todo, None])
            ok = (cand >= -128).all(axis=1) & (cand <= 127).all(axis=1)
            ok &= ((cand.astype(np.float32) * s[todo, None]) == flat[todo]).all(axis=1)
            rows = np.flatnonzero(todo)[ok]
            q[rows] = cand[ok].astype(np.int8)
            scale[rows] = s[rows]
            done[rows] = True
    return (q.reshape(w.shape), scale) if done.all() else None


def _weights(m: Match) -> tuple[np.ndarray, np.ndarray] | None:
    """``int8_weights`` of the matched Conv's weight, found once per match (its check and its rewrite ask)."""
    if not hasattr(m, "int8"):
        m.int8 = int8_weights(m["w"].const)
    return m.int8


def _scalar(m: Match, name: str):
    v = m[name]
    return None if v is None else np.asarray(v.const).reshape(-1)


def _same_quantization(m: Match) -> MatchResult:
    s1, s2, z1, z2 = (_scalar(m, k) for k in ("s1", "s2", "z1", "z2"))
    if s1.size != 1 or s2.size != 1 or s1[0] != s2[0] or s1.dtype != np.float32:
        return MatchResult.fail("the scales differ or are not one float32")
    if z1 is None or z2 is None or z1.size != 1 or z2.size != 1 or z1[0] != z2[0] or \
            m["z1"].const.dtype != np.uint8 or m["z2"].const.dtype != np.uint8:
        return MatchResult.fail("the zero points differ or are not one uint8")
    if any(k in m.node(n).attrs for n in ("q", "dq") for k in ("block_size",)):
        return MatchResult.fail("blocked quantization")
    return MatchResult()


def check_padded(m: Match) -> MatchResult:
    """A zero Pad of the spatial axes in front of the QuantizeLinear -> DequantizeLinear pair: the pair maps a
    zero to a zero (round(0 / s) + z - z), so the Pad can follow it, and the Conv then takes it into its pads
    (what pad_conv_fusion does where no pair sits between them: the depthwise and int8 drivers read the
    unpadded input)."""
    same = _same_quantization(m)
    if not same:
        return same
    return pad_check(m)


def rewrite_padded(m: Match, b: GraphBuilder) -> Value:
    qn, dqn = m.node("q"), m.node("dq")
    q = b.node("QuantizeLinear", m["x"], m["s1"], m["z1"], **dict(qn.attrs)).outputs[0]
    dq = b.node("DequantizeLinear", q, m["s2"], m["z2"], **dict(dqn.attrs)).outputs[0]
    rebound = _Rebound(m, {"x": dq})
    return pad_rewrite(rebound, b)


class _Rebound:
    """``m`` with some bindings replaced (pad_conv's rewrite reads ``m["x"]``, ``m["w"]``, ``m["b"]``, the nodes
    "pad" and "conv")."""

    def __init__(self, m: Match, values: dict):
        self._m, self._values = m, values

    def __getitem__(self, name):
        return self._values[name] if name in self._values else self._m[name]

    def node(self, name):
        return self._m.node(name)

    def const(self, name):
        return self._m.const(name)


def check(m: Match) -> MatchResult:
    same = _same_quantization(m)
    if not same:
        return same
    if _weights(m) is None:
        return MatchResult.fail("the weights are not int8 values times a scale per output channel")
    return MatchResult() if _candidate_ok(m) else MatchResult.fail("the int8 convolution does not take this Conv")


def _candidate_ok(m: Match) -> bool:
    """The drivers' own tests, asked of the node the rewrite would make (not inserted anywhere)."""
    q, scale = _weights(m)
    x = m["x"]
    if x.type is not None and x.type.is_tensor and x.type.shape is None:
        # dims known only at run time: ask with the input's known parts (the runtime re-selects per shape and
        # binds the driver only where the shapes fit)
        group = int(m.node("conv").attrs.get("group", 1))
        x = Value(x.name, TensorType(x.type.dtype, (1, int(q.shape[1]) * group, 1, 1)))
    ins = [x, m["s1"], m["z1"], Value("w", const=q), Value("w_scale", const=scale), m["b"]]
    node = SimpleNamespace(op="QuantizedConv", inputs=ins, attrs=dict(m.node("conv").attrs))
    return bool(select(node) or select_depthwise(node))


def rewrite(m: Match, b: GraphBuilder) -> Value:
    q, scale = _weights(m)
    attrs = dict(m.node("conv").attrs)
    return b.node("QuantizedConv", m["x"], m["s1"], m["z1"], b.const(q), b.const(scale), m["b"],
                  **attrs).outputs[0]


def check_requantized(m: Match) -> MatchResult:
    """A QuantizedConv (possibly through a Relu or a Clip of constant bounds) whose only reader is a
    QuantizeLinear -> DequantizeLinear pair of one uint8 scale and zero point: the pair (and the clamp) go into
    the convolution's epilogue (kernels/qconv/emit.py ``FLAG_FQ``), one pass over the output fewer."""
    same = _same_quantization(m)
    if not same:
        return same
    if "clamp" in m.node("conv").attrs:
        return MatchResult.fail("the convolution clamps already")
    return MatchResult()


def rewrite_requantized(m: Match, b: GraphBuilder) -> Value:
    conv = m.node("conv")
    attrs = dict(conv.attrs)
    act = m.named.get("act")
    if act is not None:
        lo, hi = (0.0, float("inf")) if act.op == "Relu" else (float(_scalar(m, "lo")[0]), float(_scalar(m, "hi")[0]))
        attrs["clamp"] = [lo, hi]
    return b.node("QuantizedConv", m["x"], m["xs"], m["xz"], m["w"], m["ws"], m["b"], m["s1"], m["z1"],
                  **attrs).outputs[0]


def _pair(m: Match, s1: str, s2: str, z1: str, z2: str) -> list | None:
    """[scale, zero point] of a QuantizeLinear -> DequantizeLinear pair of one float32 scale and one uint8 zero
    point, the same in both, else None."""
    a, b_ = np.asarray(m[s1].const).reshape(-1), np.asarray(m[s2].const).reshape(-1)
    if a.size != 1 or b_.size != 1 or a[0] != b_[0] or a.dtype != np.float32:
        return None
    za, zb = m[z1], m[z2]
    if za is None or zb is None or za.const is None or zb.const is None or za.const.dtype != np.uint8 or \
            za.const.size != 1 or zb.const.size != 1 or za.const.reshape(-1)[0] != zb.const.reshape(-1)[0]:
        return None
    return [float(a[0]), int(za.const.reshape(-1)[0])]


def check_silu(m: Match) -> MatchResult:
    """``x * Sigmoid(x)`` of a QuantizedConv's output ``x`` (nothing else reads it), the Sigmoid possibly through a
    QuantizeLinear -> DequantizeLinear pair, the product through one: all of it in the convolution's epilogue
    (kernels/qconv/emit.py ``FLAG_SILU``), a QDQ model's SiLU (YOLOv8's activation) in no extra pass."""
    source = _silu_source(m)
    if not source:
        return source
    pc = _pair(m, "sc", "sc2", "zc", "zc2")
    if pc is None:
        return MatchResult.fail("the product's quantization pair differs or is not uint8 per tensor")
    if not all(_requantizes(user, pos, pc) for user, pos in _outside(m)):
        return MatchResult.fail("the product has readers other than int8 convolutions quantizing it the same way")
    return MatchResult()


def _outside(m: Match) -> list:
    """The readers of the product (Mul) outside the match."""
    inside = {id(n) for n in m.nodes}
    return [(u, pos) for u, pos in m.node("mul").outputs[0].uses if id(u) not in inside]


def _requantizes(user, pos: int, pair: list) -> bool:
    """Whether ``user`` reads the value as a QuantizedConv's input quantized with ``pair`` (the quantized_conv rule
    took the next convolution's QuantizeLinear -> DequantizeLinear first): it reads the round trip's result the
    same (the round trip's values are on that grid)."""
    if user.op != "QuantizedConv" or pos != 0:
        return False
    xs, xz = user.inputs[1].const, user.inputs[2].const
    return xs is not None and xz is not None and xs.size == 1 and xz.size == 1 and \
        float(xs.reshape(-1)[0]) == pair[0] and int(xz.reshape(-1)[0]) == pair[1]


def rewrite_silu(m: Match, b: GraphBuilder) -> Value:
    out = _silu_conv(m, b, _pair(m, "sc", "sc2", "zc", "zc2"))
    if not _outside(m):
        return out
    return {m.root.outputs[0]: out, m.node("mul").outputs[0]: out}     # (its outside readers requantize it)


def _readers_pair(m: Match) -> list | None:
    """The [scale, zero point] every reader of the product quantizes it with, when all are QuantizedConv inputs
    agreeing on it, else None."""
    users = m.node("mul").outputs[0].uses
    if not users or any(m.node("mul").outputs[0] is o for o in m.graph.outputs):
        return None
    u0 = users[0][0]
    if u0.op != "QuantizedConv":
        return None
    pair = [float(np.asarray(u0.inputs[1].const).reshape(-1)[0]), int(np.asarray(u0.inputs[2].const).reshape(-1)[0])]
    return pair if all(_requantizes(u, pos, pair) for u, pos in users) else None


def check_silu_read(m: Match) -> MatchResult:
    source = _silu_source(m)
    if not source:
        return source
    if _readers_pair(m) is None:
        return MatchResult.fail("the product is not read only by int8 convolutions quantizing it the same way")
    return MatchResult()


def rewrite_silu_read(m: Match, b: GraphBuilder) -> Value:
    return _silu_conv(m, b, _readers_pair(m))


def _silu_source(m: Match) -> MatchResult:
    """The SiLU rules' common part: ``ya`` is the output of a QuantizedConv without an activation, read only by
    the matched Sigmoid and Mul, and the Sigmoid's quantization pair (when there is one) is uint8 per tensor."""
    conv = m["ya"].producer
    if conv is None or conv.op != "QuantizedConv" or conv.attrs.get("silu"):
        return MatchResult.fail("not the output of a QuantizedConv without an activation")
    inside = {id(m.node("sig")), id(m.node("mul"))}
    if any(id(u) not in inside for u, _ in m["ya"].uses) or any(m["ya"] is o for o in m.graph.outputs):
        return MatchResult.fail("the convolution's output has other readers")
    if "qb" in m.named and _pair(m, "sb", "sb2", "zb", "zb2") is None:
        return MatchResult.fail("the sigmoid's quantization pair differs or is not uint8 per tensor")
    return MatchResult()


def _silu_conv(m: Match, b: GraphBuilder, product_pair: list) -> Value:
    """The matched convolution again, with the SiLU (and its quantization pairs) in its epilogue."""
    conv = m["ya"].producer
    attrs = dict(conv.attrs, silu=1, silu_product_q=product_pair)
    if "qb" in m.named:
        attrs["silu_sigmoid_q"] = _pair(m, "sb", "sb2", "zb", "zb2")
    return b.node("QuantizedConv", *conv.inputs, **attrs).outputs[0]


@register_pass
class QuantizedConvPass(RewritePass):
    name = "quantized_conv"
    rules = (Rule("pad_after_quantization", PADDED, rewrite_padded, check=check_padded, exclusive=False),
             Rule("quantized_conv", PATTERN, rewrite, check=check, exclusive=False, dynamic_ok=True),
             *(Rule(f"requantized_conv_{k}", p, rewrite_requantized, check=check_requantized, dynamic_ok=True)
               for k, p in enumerate(REQUANTIZED)),
             *(Rule(f"silu_conv_{k}", p, rewrite_silu, check=check_silu, dynamic_ok=True, shared=("mul",))
               for k, p in enumerate(SILU)),
             *(Rule(f"silu_conv_read_{k}", p, rewrite_silu_read, check=check_silu_read, dynamic_ok=True)
               for k, p in enumerate(SILU_READ)))
