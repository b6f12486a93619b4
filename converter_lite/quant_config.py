"""MindSpore's post-training quantization config: ``[common_quant_param]`` (and ``[dynamic_quant_param]``) of
``--configFile``.

``parse_quant_sections`` gives one config dataclass per built ``quant_type``; each carries its ``quant_type`` so
the pipeline dispatches on it:

* ``quant_type=WEIGHT_QUANT`` -> WeightQuantConfig: weights stored with ``bit_num`` (1-16) bits, one scale per
  output channel, computed in float (passes/weight_quant.py);
* ``quant_type=DYNAMIC_QUANT`` -> DynamicQuantConfig: int8 weights (one scale per output column) and activations
  quantized to uint8 per call; MatMul/Gemm run as integer products (passes/dynamic_quant.py).  ``bit_num`` must
  be 8.  ``[dynamic_quant_param] quant_strategy`` is ALWC (activation per layer, weight per channel: the
  default and what is built); ACWL (activation per channel, weight per layer) is refused, not built yet.
* ``quant_type=FULL_QUANT`` (calibrated activations) is not built yet (-600), nor mixed-bit weights
  (``bit_num=0``), nor the sections of those (config.check_sections refuses them).

Both built types read ``min_quant_weight_size`` (elements), ``min_quant_weight_channel`` (output channels),
``skip_quant_node`` (node names, comma-separated) and ``debug_info_save_path`` (a per-weight CSV report).
``enable_encode`` is accepted and has no effect (the integers are stored unpacked).  Unlike the graph-kernel
flags, a bad key or value here fails (-600 naming the key): a typo would otherwise leave the model unquantized
without a word.  ``[dynamic_quant_param]`` is meaningful only with ``quant_type=DYNAMIC_QUANT``; anywhere else it
fails too.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from .errors import RET_INPUT_PARAM_INVALID, ConverterError


@dataclass(frozen=True)
class WeightQuantConfig:
    """MindSpore's ``[common_quant_param]`` with ``quant_type=WEIGHT_QUANT``: weights stored with ``bit_num`` bits
    per element and one scale per output channel (passes/weight_quant.py)."""
    quant_type: ClassVar[str] = "WEIGHT_QUANT"
    bit_num: int = 8
    min_quant_weight_size: int = 0
    min_quant_weight_channel: int = 16
    skip_quant_node: tuple[str, ...] = ()
    debug_info_save_path: str = ""


@dataclass(frozen=True)
class DynamicQuantConfig:
    """MindSpore's ``[common_quant_param]`` with ``quant_type=DYNAMIC_QUANT`` (+ ``[dynamic_quant_param]``): int8
    weights, one scale per output column; activations quantized per call (passes/dynamic_quant.py)."""
    quant_type: ClassVar[str] = "DYNAMIC_QUANT"
    bit_num: int = 8
    min_quant_weight_size: int = 0
    min_quant_weight_channel: int = 16
    skip_quant_node: tuple[str, ...] = ()
    debug_info_save_path: str = ""
    quant_strategy: str = "ALWC"


QuantConfig = WeightQuantConfig | DynamicQuantConfig

QUANT_KEYS = ("quant_type", "bit_num", "min_quant_weight_size", "min_quant_weight_channel", "skip_quant_node",
              "debug_info_save_path", "enable_encode")
QUANT_TYPES = ("WEIGHT_QUANT", "FULL_QUANT", "DYNAMIC_QUANT")
BUILT_QUANT_TYPES = ("WEIGHT_QUANT", "DYNAMIC_QUANT")
DYNAMIC_KEYS = ("quant_strategy",)
QUANT_STRATEGIES = ("ALWC", "ACWL")


def _unknown_key(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f"unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else
                                     f" (known keys: {', '.join(known)})")


def parse_quant_sections(sections: Mapping[str, Mapping[str, str]], path: str = "<config>") -> QuantConfig | None:
    """``[common_quant_param]`` (+ ``[dynamic_quant_param]``) -> WeightQuantConfig or DynamicQuantConfig (None
    without the section).  A bad key or value fails (-600 naming the key); FULL_QUANT, mixed-bit
    (``bit_num=0``) and ``quant_strategy=ACWL`` are not built yet (-600)."""
    params = sections.get("common_quant_param")
    dynamic = sections.get("dynamic_quant_param")
    if params is None:
        if dynamic is not None:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [dynamic_quant_param] needs [common_quant_param] "
                                                          "quant_type=DYNAMIC_QUANT")
        return None

    def fail(msg: str) -> ConverterError:
        return ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [common_quant_param] {msg}")

    for key in params:
        if key not in QUANT_KEYS:
            raise fail(_unknown_key(key, QUANT_KEYS))
    qtype = params.get("quant_type", "").strip()
    if qtype not in QUANT_TYPES:
        raise fail(f"quant_type={qtype!r}: must be one of {', '.join(QUANT_TYPES)}" if qtype else
                   "quant_type is missing (WEIGHT_QUANT, FULL_QUANT or DYNAMIC_QUANT)")
    if qtype not in BUILT_QUANT_TYPES:
        raise fail(f"quant_type={qtype} is not supported yet (only {' and '.join(BUILT_QUANT_TYPES)} are)")

    def integer(key: str, default: int, lo: int, hi: int | None = None) -> int:
        text = params.get(key, "").strip()
        if not text:
            return default
        try:
            v = int(text)
        except ValueError:
            raise fail(f"{key}={text!r}: not an integer") from None
        if v < lo or (hi is not None and v > hi):
            raise fail(f"{key}={v}: out of range [{lo}, {hi if hi is not None else 'inf'}]")
        return v

    bits = integer("bit_num", 8, 0, 16)
    skip = tuple(s.strip() for s in params.get("skip_quant_node", "").split(",") if s.strip())
    common = {"min_quant_weight_size": integer("min_quant_weight_size", 0, 0),
              "min_quant_weight_channel": integer("min_quant_weight_channel", 16, 0),
              "skip_quant_node": skip, "debug_info_save_path": params.get("debug_info_save_path", "").strip()}
    if qtype == "WEIGHT_QUANT":
        if dynamic is not None:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{path}: [dynamic_quant_param] applies to quant_type=DYNAMIC_QUANT only "
                                 f"([common_quant_param] has quant_type={qtype}); remove the section")
        if bits == 0:
            raise fail("bit_num=0 (mixed-bit weight quantization) is not supported yet; use 1-16")
        return WeightQuantConfig(bit_num=bits, **common)
    if bits != 8:
        raise fail(f"bit_num={bits}: quant_type=DYNAMIC_QUANT supports 8 bits only")
    return DynamicQuantConfig(bit_num=8, quant_strategy=_quant_strategy(dynamic or {}, path), **common)


def _quant_strategy(params: Mapping[str, str], path: str) -> str:
    """``[dynamic_quant_param] quant_strategy``: ALWC (the default) is built; ACWL is not yet (-600)."""
    def fail(msg: str) -> ConverterError:
        return ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [dynamic_quant_param] {msg}")

    for key in params:
        if key not in DYNAMIC_KEYS:
            raise fail(_unknown_key(key, DYNAMIC_KEYS))
    strategy = params.get("quant_strategy", "").strip() or "ALWC"
    if strategy not in QUANT_STRATEGIES:
        raise fail(f"quant_strategy={strategy!r}: must be ALWC (activation per layer, weight per channel) or ACWL "
                   "(activation per channel, weight per layer)")
    if strategy == "ACWL":
        raise fail("quant_strategy=ACWL (activation per channel, weight per layer) is not supported yet; use ALWC")
    return strategy
