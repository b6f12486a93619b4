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
(``check_padded``).  Only what the driver takes is rewritten: a uint8 zero point, one group, stride 1, 2-D, float32
(kernels/qconv/abi.py ``select``).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ...ir.core import TensorType, Value
from ...kernels.qconv.abi import select
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
    if int8_weights(m["w"].const) is None:
        return MatchResult.fail("the weights are not int8 values times a scale per output channel")
    return MatchResult() if _candidate_ok(m) else MatchResult.fail("the int8 convolution does not take this Conv")


def _candidate_ok(m: Match) -> bool:
    """The driver's own test, asked of the node the rewrite would make (not inserted anywhere)."""
    q, scale = int8_weights(m["w"].const)
    x = m["x"]
    if x.type is not None and x.type.is_tensor and x.type.shape is None:
        # dims known only at run time: ask with the input's known parts (the runtime re-selects per shape and
        # binds the driver only where the shapes fit)
        x = Value(x.name, TensorType(x.type.dtype, (1, int(q.shape[1]), 1, 1)))
    ins = [x, m["s1"], m["z1"], Value("w", const=q), Value("w_scale", const=scale), m["b"]]
    return bool(select(SimpleNamespace(op="QuantizedConv", inputs=ins, attrs=dict(m.node("conv").attrs))))


def rewrite(m: Match, b: GraphBuilder) -> Value:
    q, scale = int8_weights(m["w"].const)
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


@register_pass
class QuantizedConvPass(RewritePass):
    name = "quantized_conv"
    rules = (Rule("pad_after_quantization", PADDED, rewrite_padded, check=check_padded, exclusive=False),
             Rule("quantized_conv", PATTERN, rewrite, check=check, exclusive=False, dynamic_ok=True),
             *(Rule(f"requantized_conv_{k}", p, rewrite_requantized, check=check_requantized, dynamic_ok=True)
               for k, p in enumerate(REQUANTIZED)))
