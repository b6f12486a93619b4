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
* ``quant_type=FULL_QUANT`` -> FullQuantConfig: post-training static quantization calibrated on the files of
  ``[data_preprocess_param]`` (required), tuned by ``[full_quant_param]``; onnxruntime's ``quantize_static``
  writes the QDQ model that the converter then imports (frontend/full_quant.py).  ``bit_num`` must be 8.
* ``quant_type=WEIGHT_QUANT`` with ``bit_num=0``: mixed bits, each weight with the fewest bits (2-16) whose
  relative error is at most ``[mixed_bit_weight_quant_param] init_scale`` (default 0.02, in (0, 1));
  ``auto_tune=true`` searches the largest ``init_scale`` whose model output keeps a cosine of at least 0.995 with
  the float model's (passes/weight_quant.py).  ``[mixed_bit_weight_quant_param]`` applies to ``bit_num=0`` only.
* ``[weight_quant_param]`` (WEIGHT_QUANT only): ``per_channel`` (default true; false: one scale per weight),
  ``bias_correction`` (false only: correcting a weight-only quantization's bias needs calibration data, which
  WEIGHT_QUANT does not take), ``dequant_strategy`` (ON_THE_FLY is Ascend's: refused).

All built types read ``min_quant_weight_size`` (elements), ``min_quant_weight_channel`` (output channels),
``skip_quant_node`` (node names, comma-separated) and ``debug_info_save_path`` (a CSV report).  MindSpore
documents the two thresholds for weight quantization only, so with FULL_QUANT they default to 0 (every supported
node is quantized, as MindSpore does) and are honoured when the file sets them.
``enable_encode`` (default true) stores integers of fewer than 8 bits packed (model/quantized.py); as in
MindSpore, false is refused unless ``bit_num`` is 8 or 16 (other widths are only stored packed).  Unlike the graph-kernel
flags, a bad key or value here fails (-600 naming the key): a typo would otherwise leave the model unquantized
without a word.  ``[dynamic_quant_param]`` is meaningful only with ``quant_type=DYNAMIC_QUANT``, and
``[full_quant_param]``/``[data_preprocess_param]`` only with ``FULL_QUANT``; anywhere else they fail too.

FULL_QUANT's sections (MindSpore's keys; what depends on the model, such as input names and file sizes, is
checked at conversion, frontend/calibration.py):

* ``[data_preprocess_param]``: ``calibrate_path=name:dir[,name2:dir2]`` (one directory per model input),
  ``calibrate_size`` (files read per input, the first ones by name; 1-65535), ``input_type`` ``BIN`` (each file
  the raw little-endian tensor of that input) or ``IMAGE`` (refused: decoding images needs a library this tool
  does not ship; convert them to BIN).  The image preprocessing keys (``image_to_format``, ``normalize_mean``,
  ``normalize_std``, ``resize_width``/``resize_height``/``resize_method``, ``center_crop_width``/
  ``center_crop_height``) are checked as MindSpore documents them and, MindSpore applying them to IMAGE input
  only, have no effect with BIN (a WARNING says so).
* ``[full_quant_param]``: ``activation_quant_method`` MAX_MIN (default), KL or REMOVAL_OUTLIER (onnxruntime's
  MinMax, Entropy and Percentile calibration), ``per_channel`` (default true: one weight scale per output channel),
  ``bias_correction`` (default true, MindSpore's: each quantized Conv/Gemm's bias absorbs the mean error its
  quantization causes on the calibration data), ``target_device`` (CPU only; NVGPU, DSP, ASCEND fail),
  ``enable_all_ops`` (false only: MindSpore's Micro code generation).
"""
from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from .errors import RET_INPUT_PARAM_INVALID, ConverterError


@dataclass(frozen=True)
class WeightQuantConfig:
    """MindSpore's ``[common_quant_param]`` with ``quant_type=WEIGHT_QUANT``: weights stored with ``bit_num`` bits
    per element and one scale per output channel (passes/weight_quant.py)."""
    quant_type: ClassVar[str] = "WEIGHT_QUANT"
    bit_num: int = 8                       # 0: mixed bits (init_scale, auto_tune)
    min_quant_weight_size: int = 0
    min_quant_weight_channel: int = 16
    skip_quant_node: tuple[str, ...] = ()
    debug_info_save_path: str = ""
    init_scale: float = 0.02
    auto_tune: bool = False
    per_channel: bool = True


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


@dataclass(frozen=True)
class FullQuantConfig:
    """MindSpore's ``[common_quant_param]`` with ``quant_type=FULL_QUANT`` + ``[data_preprocess_param]`` +
    ``[full_quant_param]``: int8 weights and uint8 activations calibrated on ``calibrate_path``'s files
    (frontend/full_quant.py)."""
    quant_type: ClassVar[str] = "FULL_QUANT"
    calibrate_path: tuple[tuple[str, str], ...] = ()          # (input name, directory), in the file's order
    calibrate_size: int = 1
    bit_num: int = 8
    min_quant_weight_size: int = 0
    min_quant_weight_channel: int = 0
    skip_quant_node: tuple[str, ...] = ()
    debug_info_save_path: str = ""
    input_type: str = "BIN"
    activation_quant_method: str = "MAX_MIN"
    per_channel: bool = True
    bias_correction: bool = True
    target_device: str = "CPU"


QuantConfig = WeightQuantConfig | DynamicQuantConfig | FullQuantConfig

QUANT_KEYS = ("quant_type", "bit_num", "min_quant_weight_size", "min_quant_weight_channel", "skip_quant_node",
              "debug_info_save_path", "enable_encode")
QUANT_TYPES = ("WEIGHT_QUANT", "FULL_QUANT", "DYNAMIC_QUANT")
BUILT_QUANT_TYPES = QUANT_TYPES
DYNAMIC_KEYS = ("quant_strategy",)
QUANT_STRATEGIES = ("ALWC", "ACWL")
IMAGE_KEYS = ("image_to_format", "normalize_mean", "normalize_std", "resize_width", "resize_height",
              "resize_method", "center_crop_width", "center_crop_height")
PREPROCESS_KEYS = ("calibrate_path", "calibrate_size", "input_type", *IMAGE_KEYS)
FULL_KEYS = ("activation_quant_method", "bias_correction", "per_channel", "target_device", "enable_all_ops")
ACTIVATION_QUANT_METHODS = ("MAX_MIN", "KL", "REMOVAL_OUTLIER")
MIXED_BIT_KEYS = ("init_scale", "auto_tune")
# the sections that only one quant_type reads (checked in this order)
SECTION_QUANT_TYPE = {"mixed_bit_weight_quant_param": "WEIGHT_QUANT", "weight_quant_param": "WEIGHT_QUANT",
                      "data_preprocess_param": "FULL_QUANT", "full_quant_param": "FULL_QUANT"}
WEIGHT_KEYS = ("per_channel", "bias_correction", "dequant_strategy")
_BOOLS = {"true": True, "false": False, "1": True, "0": False, "on": True, "off": False}

log = logging.getLogger("converter_lite")


def _unknown_key(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f"unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else
                                     f" (known keys: {', '.join(known)})")


def parse_quant_sections(sections: Mapping[str, Mapping[str, str]], path: str = "<config>") -> QuantConfig | None:
    """``[common_quant_param]`` (+ ``[dynamic_quant_param]``, or ``[data_preprocess_param]`` and
    ``[full_quant_param]``) -> WeightQuantConfig, DynamicQuantConfig or FullQuantConfig (None without the
    section).  A bad key or value fails (-600 naming the key); ``quant_strategy=ACWL`` is not built yet (-600)."""
    params = sections.get("common_quant_param")
    dynamic = sections.get("dynamic_quant_param")
    if params is None:
        if dynamic is not None:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [dynamic_quant_param] needs [common_quant_param] "
                                                          "quant_type=DYNAMIC_QUANT")
        for name, qtype in (("data_preprocess_param", "FULL_QUANT"), ("full_quant_param", "FULL_QUANT"),
                            ("mixed_bit_weight_quant_param", "WEIGHT_QUANT bit_num=0"),
                            ("weight_quant_param", "WEIGHT_QUANT")):
            if name in sections:
                raise ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [{name}] needs [common_quant_param] "
                                                              f"quant_type={qtype}")
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
        raise fail(f"quant_type={qtype} is not supported yet (only {', '.join(BUILT_QUANT_TYPES)} are)")
    for name, owner in SECTION_QUANT_TYPE.items():
        if name in sections and qtype != owner:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{path}: [{name}] applies to quant_type={owner} only ([common_quant_param] "
                                 f"has quant_type={qtype}); remove the section")

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
              "min_quant_weight_channel": integer("min_quant_weight_channel", 0 if qtype == "FULL_QUANT" else 16, 0),
              "skip_quant_node": skip, "debug_info_save_path": params.get("debug_info_save_path", "").strip()}
    if qtype in ("WEIGHT_QUANT", "FULL_QUANT") and dynamic is not None:
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"{path}: [dynamic_quant_param] applies to quant_type=DYNAMIC_QUANT only "
                             f"([common_quant_param] has quant_type={qtype}); remove the section")
    if qtype == "FULL_QUANT":
        if bits != 8:
            raise fail(f"bit_num={bits}: quant_type=FULL_QUANT supports 8 bits only")
        return FullQuantConfig(bit_num=8, **common, **_preprocess(sections, path), **_full_params(sections, path))
    encode = _bool_key(params, "enable_encode", True, fail)
    if not encode and bits not in (8, 16):
        raise fail(f"enable_encode=false: bit_num={bits} is stored packed only (MindSpore allows false with 8 or 16 "
                   "bits)")
    if qtype == "WEIGHT_QUANT":
        return WeightQuantConfig(bit_num=bits, **common, **_mixed_bit(sections, bits, path),
                                 **_weight_params(sections, path))
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


def _mixed_bit(sections: Mapping[str, Mapping[str, str]], bits: int, path: str) -> dict:
    """``[mixed_bit_weight_quant_param]`` (``bit_num=0`` only) -> WeightQuantConfig fields."""
    fail = _section_fail(path, "mixed_bit_weight_quant_param")
    params = sections.get("mixed_bit_weight_quant_param")
    if params is None:
        return {}
    if bits != 0:
        raise fail(f"applies to bit_num=0 (mixed bits) only; [common_quant_param] has bit_num={bits}: remove the "
                   "section or set bit_num=0")
    _check_keys(params, MIXED_BIT_KEYS, fail)
    text = params.get("init_scale", "").strip()
    out = {"auto_tune": _bool_key(params, "auto_tune", False, fail)}
    if text:
        try:
            scale = float(text)
        except ValueError:
            raise fail(f"init_scale={text!r}: not a number") from None
        if not 0 < scale < 1:
            raise fail(f"init_scale={text}: out of range (0, 1)")
        out["init_scale"] = scale
    return out


def _weight_params(sections: Mapping[str, Mapping[str, str]], path: str) -> dict:
    """``[weight_quant_param]`` (optional) -> WeightQuantConfig fields."""
    fail = _section_fail(path, "weight_quant_param")
    params = sections.get("weight_quant_param", {})
    _check_keys(params, WEIGHT_KEYS, fail)
    if _bool_key(params, "bias_correction", False, fail):
        raise fail("bias_correction=true: correcting the bias of a weight-only quantization needs calibration data, "
                   "which WEIGHT_QUANT does not take (FULL_QUANT's [full_quant_param] bias_correction does it); set "
                   "false or remove the key")
    strategy = params.get("dequant_strategy", "").strip()
    if strategy:
        raise fail(f"dequant_strategy={strategy}: ON_THE_FLY is Ascend's online dequantization; converter_lite "
                   "dequantizes the weights once at load on the CPU; remove the key" if strategy == "ON_THE_FLY" else
                   f"dequant_strategy={strategy!r}: MindSpore knows ON_THE_FLY only (an Ascend mode); remove the key")
    return {"per_channel": _bool_key(params, "per_channel", True, fail)}


def _section_fail(path: str, section: str):
    def fail(msg: str) -> ConverterError:
        return ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: [{section}] {msg}")
    return fail


def _check_keys(params: Mapping[str, str], known: tuple[str, ...], fail) -> None:
    for key in params:
        if key not in known:
            raise fail(_unknown_key(key, known))


def _int_key(params: Mapping[str, str], key: str, fail, lo: int = 1, hi: int = 65535) -> int | None:
    text = params.get(key, "").strip()
    if not text:
        return None
    try:
        v = int(text)
    except ValueError:
        raise fail(f"{key}={text!r}: not an integer") from None
    if not lo <= v <= hi:
        raise fail(f"{key}={v}: out of range [{lo}, {hi}]")
    return v


def _bool_key(params: Mapping[str, str], key: str, default: bool, fail) -> bool:
    text = params.get(key, "").strip()
    if not text:
        return default
    if text.lower() not in _BOOLS:
        raise fail(f"{key}={text!r}: must be true or false")
    return _BOOLS[text.lower()]


def _vector(params: Mapping[str, str], key: str, fail) -> tuple[float, ...] | None:
    """MindSpore's ``[v1, v2, v3]`` (1 or 3 numbers)."""
    text = params.get(key, "").strip()
    if not text:
        return None
    body = text[1:-1] if text.startswith("[") and text.endswith("]") else None
    try:
        values = tuple(float(x) for x in body.split(",")) if body is not None else None
    except ValueError:
        values = None
    if values is None or len(values) not in (1, 3):
        raise fail(f"{key}={text!r}: must be [v] (one channel) or [v1, v2, v3] (three channels)")
    return values


def _preprocess(sections: Mapping[str, Mapping[str, str]], path: str) -> dict:
    """``[data_preprocess_param]`` (required with FULL_QUANT) -> FullQuantConfig fields."""
    fail = _section_fail(path, "data_preprocess_param")
    params = sections.get("data_preprocess_param")
    if params is None:
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"{path}: [common_quant_param] quant_type=FULL_QUANT needs a [data_preprocess_param] "
                             "section (calibrate_path, calibrate_size, input_type): full quantization calibrates "
                             "the activations on data")
    _check_keys(params, PREPROCESS_KEYS, fail)
    text = params.get("calibrate_path", "").strip()
    if not text:
        raise fail("calibrate_path is missing (input_name:dir[,input_name2:dir2], one directory per model input)")
    pairs: list[tuple[str, str]] = []
    for item in (s.strip() for s in text.split(",")):
        name, sep, directory = item.partition(":")
        if not sep or not name.strip() or not directory.strip():
            raise fail(f"calibrate_path: {item!r} is not of the form input_name:directory")
        pairs.append((name.strip(), directory.strip()))
    size = _int_key(params, "calibrate_size", fail)
    if size is None:
        raise fail("calibrate_size is missing (how many files of each directory calibrate, 1-65535)")
    input_type = params.get("input_type", "").strip()
    if not input_type:
        raise fail("input_type is missing (BIN: raw tensor files; IMAGE is not supported)")
    if input_type not in ("BIN", "IMAGE"):
        raise fail(f"input_type={input_type!r}: must be BIN or IMAGE")
    if input_type == "IMAGE":
        raise fail("input_type=IMAGE is not supported: calibrating on images needs an image decoder (and MindSpore's "
                   "resize/crop/normalize preprocessing) that converter_lite does not ship; preprocess the images "
                   "as at inference and save each as a .bin file (the raw little-endian input tensor), then use "
                   "input_type=BIN")
    _image_keys(params, fail)
    given = [k for k in IMAGE_KEYS if params.get(k, "").strip()]
    if given:
        log.warning("%s: [data_preprocess_param] %s apply to input_type=IMAGE only and have no effect with BIN "
                    "(the files are the preprocessed tensors)", path, ", ".join(given))
    return {"calibrate_path": tuple(pairs), "calibrate_size": size, "input_type": input_type}


def _image_keys(params: Mapping[str, str], fail) -> None:
    """The image preprocessing keys, checked as MindSpore documents them."""
    fmt = params.get("image_to_format", "").strip()
    if fmt and fmt not in ("RGB", "GRAY", "BGR"):
        raise fail(f"image_to_format={fmt!r}: must be RGB, GRAY or BGR")
    mean, std = _vector(params, "normalize_mean", fail), _vector(params, "normalize_std", fail)
    if std is not None and any(v == 0 for v in std):
        raise fail("normalize_std: a standard deviation of 0 (dst = (src - mean) / std)")
    if mean is not None and std is not None and len(mean) != len(std):
        raise fail(f"normalize_mean has {len(mean)} values, normalize_std {len(std)}: give one per channel to both")
    for key in ("resize_width", "resize_height", "center_crop_width", "center_crop_height"):
        _int_key(params, key, fail)
    method = params.get("resize_method", "").strip()
    if method and method not in ("LINEAR", "NEAREST", "CUBIC"):
        raise fail(f"resize_method={method!r}: must be LINEAR, NEAREST or CUBIC")


def _full_params(sections: Mapping[str, Mapping[str, str]], path: str) -> dict:
    """``[full_quant_param]`` (optional) -> FullQuantConfig fields."""
    fail = _section_fail(path, "full_quant_param")
    params = sections.get("full_quant_param", {})
    _check_keys(params, FULL_KEYS, fail)
    method = params.get("activation_quant_method", "").strip() or "MAX_MIN"
    if method not in ACTIVATION_QUANT_METHODS:
        raise fail(f"activation_quant_method={method!r}: must be MAX_MIN, KL or REMOVAL_OUTLIER")
    device = params.get("target_device", "").strip() or "CPU"
    if device != "CPU":
        raise fail(f"target_device={device}: converter_lite builds CPU models only (NVGPU, DSP and ASCEND quantized "
                   "operator libraries are not supported); remove the key or set CPU")
    if _bool_key(params, "enable_all_ops", False, fail):
        raise fail("enable_all_ops=true is MindSpore Micro's (C code generation), which converter_lite does not do")
    return {"activation_quant_method": method, "per_channel": _bool_key(params, "per_channel", True, fail),
            "bias_correction": _bool_key(params, "bias_correction", True, fail), "target_device": device}
