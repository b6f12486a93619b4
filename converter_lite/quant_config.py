"""MindSpore's post-training quantization config: the ``[common_quant_param]`` section of ``--configFile``.

Only ``quant_type=WEIGHT_QUANT`` is built (passes/weight_quant.py); the other quantization sections are refused by
config.check_sections.  Unlike the graph-kernel flags, a bad key or value here fails (-600 naming the key): a
typo would otherwise leave the model unquantized without a word.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import RET_INPUT_PARAM_INVALID, ConverterError


@dataclass(frozen=True)
class WeightQuantConfig:
    """MindSpore's ``[common_quant_param]`` with ``quant_type=WEIGHT_QUANT``: weights stored with ``bit_num`` bits
    per element and one scale per output channel (passes/weight_quant.py)."""
    bit_num: int = 8
    min_quant_weight_size: int = 0
    min_quant_weight_channel: int = 16
    skip_quant_node: tuple[str, ...] = ()
    debug_info_save_path: str = ""


QUANT_KEYS = ("quant_type", "bit_num", "min_quant_weight_size", "min_quant_weight_channel", "skip_quant_node",
              "debug_info_save_path", "enable_encode")
QUANT_TYPES = ("WEIGHT_QUANT", "FULL_QUANT", "DYNAMIC_QUANT")


def parse_quant_sections(sections: Mapping[str, Mapping[str, str]], path: str = "<config>") -> WeightQuantConfig | None:
    """``[common_quant_param]`` -> WeightQuantConfig (None without the section).  Unlike the graph-kernel flags,
    a bad key or value fails (-600 naming the key): a typo here would otherwise leave the model unquantized
    without a word.  FULL_QUANT, DYNAMIC_QUANT and mixed-bit (``bit_num=0``) are not built yet (-600)."""
    params = sections.get("common_quant_param")
    if params is None:
        return None

    def fail(msg: str) -> ConverterError:
        return ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [common_quant_param] {msg}")

    for key in params:
        if key not in QUANT_KEYS:
            close = difflib.get_close_matches(key, QUANT_KEYS, n=1)
            raise fail(f"unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else
                                                   f" (known keys: {', '.join(QUANT_KEYS)})"))
    qtype = params.get("quant_type", "").strip()
    if qtype not in QUANT_TYPES:
        raise fail(f"quant_type={qtype!r}: must be one of {', '.join(QUANT_TYPES)}" if qtype else
                   "quant_type is missing (WEIGHT_QUANT, FULL_QUANT or DYNAMIC_QUANT)")
    if qtype != "WEIGHT_QUANT":
        raise fail(f"quant_type={qtype} is not supported yet (only WEIGHT_QUANT is)")

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
    if bits == 0:
        raise fail("bit_num=0 (mixed-bit weight quantization) is not supported yet; use 1-16")
    skip = tuple(s.strip() for s in params.get("skip_quant_node", "").split(",") if s.strip())
    return WeightQuantConfig(bit_num=bits, min_quant_weight_size=integer("min_quant_weight_size", 0, 0),
                             min_quant_weight_channel=integer("min_quant_weight_channel", 16, 0),
                             skip_quant_node=skip,
                             debug_info_save_path=params.get("debug_info_save_path", "").strip())
