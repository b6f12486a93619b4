"""Graph-kernel configuration: MindSpore's graph-kernel flags, parsed the forgiving MindSpore way.

Sources of the flag string (the caller, not this module, reads the environment):

1. ``--configFile`` INI file, section ``[graph_kernel_param]`` -> ``load_config_file`` turns each
   ``key=value`` line into ``--key=value``, sorted by key (MindSpore keeps the section in an ordered map).
2. ``MS_DEV_GRAPH_KERNEL_FLAGS``: when non-empty it REPLACES the config-file string (``resolve_flags``).
3. ``parse_flags(text)`` -> frozen ``GraphKernelConfig``.  Rules (MindSpore ``GraphKernelFlags``):
   tokens are split on ASCII spaces; each must be ``--key`` (bool true) or ``--key=value`` with exactly
   one ``=``; invalid tokens, repeated keys (the first wins), bad values (the default is kept) and unknown
   keys only produce WARNING lines naming the key; ``opt_level`` > 3 is clamped to 3.

Fields are named exactly like the MindSpore keys; the extra fields after ``# -- converter-only`` are not
flags (they come from the command line / environment through the caller).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .errors import RET_INPUT_PARAM_INVALID, ConverterError
from .quant_config import QuantConfig

LOGGER_NAME = "converter_lite"
GRAPH_KERNEL_SECTION = "graph_kernel_param"
MAX_OPT_LEVEL = 3
DEFAULT_REDUCE_FUSE_DEPTH = 20      # MindSpore's value for CPU/GPU when reduce_fuse_depth is -1

Warn = Callable[[str], None]


# -- op-name spelling ---------------------------------------------------------------------------------------
# MindSpore (and MindSpore Lite "...Fusion") op names -> the ONNX op type our IR uses.  Names not listed are
# already ONNX spelling (Add, Mul, Exp, ReduceSum, MatMul, Transpose, Reshape, Cast, Softmax, Tanh, ...).
OP_ALIASES: dict[str, str] = {
    "GeLU": "Gelu", "FastGeLU": "Gelu", "FastGelu": "Gelu",
    "Maximum": "Max", "Minimum": "Min",
    "RealDiv": "Div",
    "ReLU": "Relu", "ReLU6": "Relu6", "LeakyReLU": "LeakyRelu",
    "LayerNorm": "LayerNormalization", "LayerNormFusion": "LayerNormalization",
    "FusedBatchNorm": "BatchNormalization", "BatchNorm": "BatchNormalization",
    "InstanceNorm": "InstanceNormalization",
    "Select": "Where",
    "LogicalAnd": "And", "LogicalOr": "Or", "LogicalNot": "Not", "LogicalXor": "Xor",
    "ExpandDims": "Unsqueeze",
    "BroadcastTo": "Expand",
    "StridedSlice": "Slice", "StridedSliceOnnx": "Slice",
    "IsNan": "IsNaN",
    "HSwish": "HardSwish", "HSigmoid": "HardSigmoid",
    "AddN": "Sum",
    "Argmax": "ArgMax", "Argmin": "ArgMin",
    "BatchMatMul": "MatMul", "MatMulFusion": "MatMul",
    "AddFusion": "Add", "SubFusion": "Sub", "MulFusion": "Mul", "DivFusion": "Div", "ExpFusion": "Exp",
    "PowFusion": "Pow", "ReduceFusion": "ReduceSum", "PadFusion": "Pad", "Conv2DFusion": "Conv",
    "Conv2D": "Conv", "AvgPoolFusion": "AveragePool", "MaxPoolFusion": "MaxPool",
    "ConcatV2": "Concat", "GatherV2": "Gather",
}


def onnx_op_name(name: str) -> str:
    """The IR (ONNX) spelling of an op name given in MindSpore or ONNX spelling (case-sensitive)."""
    return OP_ALIASES.get(name, name)


def _op_set(names: Iterable[str]) -> frozenset[str]:
    return frozenset(onnx_op_name(n) for n in names)


# -- fusion switch file ---------------------------------------------------------------------------------------
FUSION_SWITCH_SECTIONS = ("GraphFusion", "UBFusion")


@dataclass(frozen=True)
class FusionSwitchSection:
    """One section of an Ascend fusion switch file: an ``ALL`` default plus per-pass exceptions."""
    default: bool = True                                # "ALL" (absent -> on)
    passes: tuple[tuple[str, bool], ...] = ()           # (pass name as written, on?) in file order

    def explicit(self, names: Iterable[str]) -> bool | None:
        """The explicit on/off of the first of ``names`` listed in this section, else None."""
        table = dict(self.passes)
        for n in names:
            if n in table:
                return table[n]
        return None


@dataclass(frozen=True)
class FusionSwitch:
    """A parsed ``--fusionSwitchFile``: ``{"Switch": {"GraphFusion": {...}, "UBFusion": {...}}}``."""
    graph_fusion: FusionSwitchSection = FusionSwitchSection()
    ub_fusion: FusionSwitchSection = FusionSwitchSection()

    def section(self, name: str) -> FusionSwitchSection:
        return self.ub_fusion if name == "UBFusion" else self.graph_fusion

    def state(self, section: str, names: Iterable[str]) -> bool | None:
        """Switch state of a pass known by ``names`` whose home section is ``section``.

        An explicit entry (looked up in the home section first, then in the other one, since users put
        e.g. ``MatMulBiasAddFusionPass`` under GraphFusion) wins; else ``"ALL":"off"`` of the home section
        returns False; else None (no opinion: the opt_level rule decides).
        """
        names = tuple(names)
        home = self.section(section)
        other = self.graph_fusion if home is self.ub_fusion else self.ub_fusion
        for sec in (home, other):
            value = sec.explicit(names)
            if value is not None:
                return value
        return None if home.default else False

    def names(self) -> list[str]:
        return [n for sec in (self.graph_fusion, self.ub_fusion) for n, _ in sec.passes]


# -- the configuration ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphKernelConfig:
    """All graph-kernel flags (MindSpore names and defaults, CPU target) plus converter-only settings.

    Defaults that depend on ``opt_level`` (``enable_stitch_fusion``, ``enable_parallel_fusion``,
    ``enable_recompute_fusion``) and ``reduce_fuse_depth=-1`` are resolved at construction; note that
    ``dataclasses.replace(cfg, opt_level=...)`` keeps the already resolved values.
    """
    opt_level: int = 0
    # op lists (MindSpore or ONNX spelling; expand_ops()/cluster_ops() return ONNX spelling)
    enable_expand_ops: tuple[str, ...] = ()
    disable_expand_ops: tuple[str, ...] = ()
    enable_expand_ops_only: tuple[str, ...] = ()
    enable_cluster_ops: tuple[str, ...] = ()
    disable_cluster_ops: tuple[str, ...] = ()
    enable_cluster_ops_only: tuple[str, ...] = ()
    # pass switches: "<S>.<P>", "<stagename>.<passname>", full name or bare pass name
    enable_pass: tuple[str, ...] = ()
    disable_pass: tuple[str, ...] = ()
    # arithmetic-simplify rule ids (as written; see simplify_rule_enabled)
    enable_simplify_exprs_only: tuple[str, ...] = ()
    disable_simplify_exprs: tuple[str, ...] = ()
    dump_as_text: bool = False
    enable_debug_mode: bool = False
    enable_stitch_fusion: bool | None = None        # None -> opt_level == 3
    enable_parallel_fusion: bool | None = None      # None -> opt_level == 3
    enable_recompute_fusion: bool | None = None     # None -> opt_level >= 2
    enable_parallel_op_combine: bool = False
    enable_vectorization: bool = True
    enable_dynamic_batch: bool = False
    enable_lite_conv_tuning: bool = False
    reduce_fuse_depth: int = -1                     # -1 -> 20
    composite_op_limit_size: int = 200
    fusion_ops_level: int = 1
    online_tuning: int = 0
    cpu_refer_thread_num: int = 8
    parallel_ops_level: int = 0
    recompute_increment_threshold: int = 0
    recompute_peak_threshold: int = 0
    cpu_arch: str = ""                              # "" -> the host
    cpu_type: str = ""
    cpu_feature: str = ""
    target_os: str = "linux"
    kernel_generator: str = "AKG"
    repository_path: str = ""
    # GPU/Ascend-only keys: accepted (with a warning) and recorded, no effect on CPU
    enable_horizontal_fusion: bool = False
    enable_auto_tensor_inplace: bool = False
    enable_low_precision: bool = False
    enable_csr_fusion: bool = False
    enable_dynamic_shape_fusion: bool = False
    enable_cce_lib: bool = False
    enable_cce_lib_ops: tuple[str, ...] = ()
    enable_cce_lib_ops_only: tuple[str, ...] = ()
    disable_cce_lib_ops: tuple[str, ...] = ()
    enable_packet_ops_only: tuple[str, ...] = ()
    disable_packet_ops: tuple[str, ...] = ()
    # -- converter-only (not MindSpore flags) -----------------------------------------------------------------
    flags_text: str = ""                            # the raw flag string this config was parsed from
    fusion_switch: FusionSwitch | None = None       # parsed --fusionSwitchFile
    dump_ir: bool = False                           # MS_DEV_DUMP_GRAPH_KERNEL_IR=on
    dump_dir: str = "."                             # base directory of all dumps
    kernel_cache_dir: str | None = None             # on-disk native-kernel cache (None: codegen's default,
                                                    # "": no cache)
    num_threads_hint: int = 2                       # threads the native kernels are built for (<=1: serial)
    verify_ir: bool = False                         # run the IR verifier after every pass
    quant: QuantConfig | None = None                # [common_quant_param]: WEIGHT_QUANT or DYNAMIC_QUANT

    def __post_init__(self) -> None:
        if not 0 <= self.opt_level <= MAX_OPT_LEVEL:
            raise ValueError(f"opt_level must be in [0, {MAX_OPT_LEVEL}], got {self.opt_level}")
        resolved = {
            "enable_stitch_fusion": self.opt_level == MAX_OPT_LEVEL,
            "enable_parallel_fusion": self.opt_level == MAX_OPT_LEVEL,
            "enable_recompute_fusion": self.opt_level >= 2,
        }
        for key, default in resolved.items():
            if getattr(self, key) is None:
                object.__setattr__(self, key, default)
        if self.reduce_fuse_depth < 0:
            object.__setattr__(self, "reduce_fuse_depth", DEFAULT_REDUCE_FUSE_DEPTH)
        for f in dataclasses.fields(self):      # lists given as plain lists still hash/compare as tuples
            if isinstance(getattr(self, f.name), list):
                object.__setattr__(self, f.name, tuple(getattr(self, f.name)))

    # -- queries used by the passes -------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Graph-kernel optimization runs at all (MindSpore ``IsEnableGraphKernel``: opt_level > 0)."""
        return self.opt_level > 0

    def expand_ops(self, default: Iterable[str]) -> frozenset[str]:
        """Ops the expander may expand (GetValidOps: ``*_only`` wins, else default + enable - disable)."""
        return _valid_ops(default, self.enable_expand_ops, self.disable_expand_ops, self.enable_expand_ops_only)

    def cluster_ops(self, default: Iterable[str]) -> frozenset[str]:
        """Ops the clusterer may fuse (same semantics as ``expand_ops``)."""
        return _valid_ops(default, self.enable_cluster_ops, self.disable_cluster_ops,
                          self.enable_cluster_ops_only)

    def simplify_rule_enabled(self, rule_id: int) -> bool:
        """Arithmetic-simplify rule ``rule_id`` is on (``*_only`` list wins, else not disabled)."""
        rid = str(rule_id)
        if self.enable_simplify_exprs_only:
            return rid in {s.strip() for s in self.enable_simplify_exprs_only}
        return rid not in {s.strip() for s in self.disable_simplify_exprs}

    def pass_listed(self, which: str, names: Iterable[str]) -> str | None:
        """The first item of ``enable_pass`` (which="enable") or ``disable_pass`` matching any of
        ``names``, else None."""
        items = self.enable_pass if which == "enable" else self.disable_pass
        wanted = set(names)
        return next((item for item in items if item in wanted), None)

    def flags_dict(self) -> dict[str, object]:
        """Every MindSpore flag and its (resolved) value, in declaration order."""
        return {k: (list(v) if isinstance(v, tuple) else v)
                for k, v in ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
                if k in FLAG_KEYS}

    def flags_json(self) -> str:
        return json.dumps(self.flags_dict())


def _valid_ops(default: Iterable[str], enable: Iterable[str], disable: Iterable[str],
               only: Iterable[str]) -> frozenset[str]:
    only_set = _op_set(only)
    if only_set:
        return only_set
    return (_op_set(default) | _op_set(enable)) - _op_set(disable)


# -- flag table -------------------------------------------------------------------------------------------------
_CONVERTER_ONLY = {"flags_text", "fusion_switch", "dump_ir", "dump_dir", "verify_ir", "kernel_cache_dir",
                   "num_threads_hint", "quant"}
FLAG_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(GraphKernelConfig)
                                   if f.name not in _CONVERTER_ONLY)
HARDWARE_ONLY_KEYS = frozenset({
    "enable_horizontal_fusion", "enable_auto_tensor_inplace", "enable_low_precision", "enable_csr_fusion",
    "enable_dynamic_shape_fusion", "enable_cce_lib", "enable_cce_lib_ops", "enable_cce_lib_ops_only",
    "disable_cce_lib_ops", "enable_packet_ops_only", "disable_packet_ops",
})
# MindSpore keys that parse but change nothing here (no pass, codegen or runtime reads their field): setting
# one warns so.  enable_parallel_op_combine: the op combiner runs at opt_level 3 regardless.
NO_EFFECT_KEYS = frozenset({
    "enable_parallel_op_combine", "enable_vectorization", "enable_dynamic_batch", "enable_lite_conv_tuning",
    "fusion_ops_level", "online_tuning", "cpu_refer_thread_num", "parallel_ops_level",
    "recompute_increment_threshold", "recompute_peak_threshold", "target_os", "kernel_generator",
    "repository_path",
})
# unsigned in MindSpore: a negative value is invalid
_UNSIGNED_KEYS = frozenset({"opt_level", "fusion_ops_level", "online_tuning", "cpu_refer_thread_num",
                            "parallel_ops_level"})
_BOOL_VALUES = {"": True, "true": True, "True": True, "on": True, "1": True,
                "false": False, "False": False, "off": False, "0": False}
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_FORMAT_HINT = ('Valid flag format is "--key=value", flags are separated by spaces '
                '(e.g. "--key1=value1 --key2=value2"); a bool flag\'s value can be implicit: '
                '"--key" means "--key=true".')


def _kind(key: str) -> str:
    f = _FIELDS[key]
    if f.type in ("bool", "bool | None"):
        return "bool"
    if f.type == "int":
        return "int"
    if f.type.startswith("tuple"):
        return "list"
    return "str"


_FIELDS = {f.name: f for f in dataclasses.fields(GraphKernelConfig)}


def _parse_value(key: str, value: str) -> tuple[bool, object]:
    kind = _kind(key)
    if kind == "bool":
        return (value in _BOOL_VALUES), _BOOL_VALUES.get(value)
    if kind == "int":
        if not _INT_RE.match(value) or (key in _UNSIGNED_KEYS and value.startswith("-")):
            return False, None
        return True, int(value)
    if kind == "list":
        items = tuple(s for s in value.split(",") if s)
        return bool(items), items
    return bool(value), value


def tokenize_flags(text: str, warn: Warn) -> dict[str, str]:
    """``--key[=value]`` tokens -> {key: value} (first occurrence wins); warns on bad and repeated tokens."""
    flags: dict[str, str] = {}
    for token in text.split(" "):
        if not token:
            continue
        body = token[2:] if token.startswith("--") else None
        key, sep, value = (body or "").partition("=")
        if body is None or not key or (sep and (not value or "=" in value)):
            warn(f"For 'graph_kernel_flags', the flag '{token}' in the parameter 'graph_kernel_flags' "
                 f"is invalid. {_FORMAT_HINT}")
            continue
        if key in flags:
            warn(f"For 'graph_kernel_flags', the flag '{key}' in the parameter 'graph_kernel_flags' "
                 f"is repeated; the first value '{flags[key]}' is used.")
            continue
        flags[key] = value
    return flags


def _default_warn(msg: str) -> None:
    logging.getLogger(LOGGER_NAME).warning(msg)


def parse_flags(text: str | None, warn: Warn | None = None, *, default_opt_level: int = 0,
                **converter_fields: object) -> GraphKernelConfig:
    """Parses a MindSpore graph-kernel flag string; never raises on bad flags (it warns instead).

    Args:
        text: e.g. ``"--opt_level=2 --disable_pass=cluster.graph_kernel_cluster"`` (None/"" -> defaults).
        warn: receives each warning line (default: WARNING on the ``converter_lite`` logger).
        default_opt_level: the opt_level when the flags do not set it (2 for ``enable_graph_kernel=True``).
        converter_fields: converter-only fields (``dump_ir``, ``dump_dir``, ``fusion_switch``, ``verify_ir``).
    """
    warn = warn or _default_warn
    text = text or ""
    flags = tokenize_flags(text, warn)
    values: dict[str, object] = {"opt_level": default_opt_level}
    for key in FLAG_KEYS:                       # opt_level first: later defaults depend on it
        if key not in flags:
            continue
        ok, value = _parse_value(key, flags[key])
        if not ok:
            warn(f"For 'graph_kernel_flags', the flag '--{key}={flags[key]}' in the parameter "
                 f"'graph_kernel_flags' is invalid; '{key}' keeps its default value. {_FORMAT_HINT}")
            continue
        if key == "opt_level" and value > MAX_OPT_LEVEL:
            warn(f"For 'graph_kernel_flags', the value of 'opt_level' must be in the range "
                 f"[0, {MAX_OPT_LEVEL}], but got {value}. It will be set to {MAX_OPT_LEVEL}.")
            value = MAX_OPT_LEVEL
        if key in HARDWARE_ONLY_KEYS:
            warn(f"For 'graph_kernel_flags', the flag '{key}' only takes effect on GPU/Ascend; "
                 f"it is accepted and ignored on CPU.")
        if key in NO_EFFECT_KEYS:
            warn(f"For 'graph_kernel_flags', the flag '{key}' is accepted but has no effect in converter_lite "
                 f"(nothing in its CPU code generation uses it).")
        if key in ("enable_simplify_exprs_only", "disable_simplify_exprs"):
            bad = [s for s in value if not s.strip().isdigit()]
            if bad:
                warn(f"For 'graph_kernel_flags', the flag '{key}' has items that are not rule ids: "
                     f"{','.join(bad)}.")
        values[key] = value
    unknown = sorted(k for k in flags if k not in FLAG_KEYS)
    for key in unknown:
        warn(f"Unknown flag: {key}")
    if unknown:
        warn("For 'graph_kernel_flags', the above flags are unknown and ignored; the valid keys are "
             "listed in converter_lite/config.py (MindSpore graph_kernel_flags.h).")
    values.update(converter_fields)
    return GraphKernelConfig(flags_text=text, **values)


def resolve_flags(config_file_flags: str | None, env_flags: str | None) -> str:
    """The flag string in force: ``MS_DEV_GRAPH_KERNEL_FLAGS`` (non-blank) replaces the config file's."""
    if env_flags and env_flags.strip():
        return env_flags
    return config_file_flags or ""


# -- INI config file ------------------------------------------------------------------------------------------
def _strip(text: str) -> str:
    """Surrounding blanks, then one pair of surrounding quotes, are removed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _read_text(path: str, what: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"cannot read {what} {path}: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"{what} {path} is not a text file "
                                                      f"(invalid UTF-8 at byte {e.start})") from e
    if "\x00" in text:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"{what} {path} is not a text file (NUL byte)")
    return text


def parse_ini(text: str, path: str = "<config>") -> dict[str, dict[str, str]]:
    """INI text -> {section: {key: value}} (keys before any section go to section "").

    Raises ConverterError(-600, "<file>:<line>: ...") for a line that is neither a comment, blank,
    ``[section]`` nor ``key=value``.  A repeated key keeps its last value (MindSpore map assignment).
    """
    sections: dict[str, dict[str, str]] = {}
    current = ""
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            if not line.endswith("]") or not line[1:-1].strip():
                raise ConverterError(RET_INPUT_PARAM_INVALID,
                                     f"{path}:{lineno}: invalid section header {line!r}")
            current = line[1:-1].strip()
            sections.setdefault(current, {})
            continue
        key, sep, value = line.partition("=")
        key = _strip(key)
        if not sep or not key:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{path}:{lineno}: expected 'key=value', '[section]' or '# comment', "
                                 f"got {line!r}")
        sections.setdefault(current, {})[key] = _strip(value)
    return sections


def section_to_flags(params: Mapping[str, str]) -> str:
    """``{key: value}`` -> ``"--a=1 --b=2 "`` sorted by key (each token followed by one space, as
    MindSpore's ParseGraphKernelString)."""
    return "".join(f"--{k}={params[k]} " for k in sorted(params))


def load_config_file(path: str) -> tuple[str, dict[str, dict[str, str]]]:
    """Reads a ``--configFile``: returns (graph-kernel flag string, the other sections)."""
    sections = parse_ini(_read_text(path, "config file"), path)
    params = sections.pop(GRAPH_KERNEL_SECTION, {})
    return section_to_flags(params), sections


# MindSpore's other config sections (converter_tool docs): none is silently dropped.
QUANT_SECTIONS = ("common_quant_param", "full_quant_param", "data_preprocess_param",
                  "mixed_bit_weight_quant_param", "weight_quant_param", "dynamic_quant_param")
FULL_QUANT_SECTIONS = ("full_quant_param", "data_preprocess_param")
HARDWARE_SECTIONS = {
    "ascend_context": "it configures Ascend inference; converter_lite builds CPU models only",
    "acl_option_cfg_param": "it holds Ascend ACL options; converter_lite builds CPU models only",
    "micro_param": "it asks for MindSpore Micro C code generation; converter_lite writes .ms models only",
    "registry": "converter_lite loads no converter plugins (custom passes/ops from shared libraries)",
    "cpu_option_cfg_param": "its Ascend/OpenVINO-style CPU options (architecture, instruction set) are not "
                            "supported; set the target CPU with [graph_kernel_param] cpu_arch/cpu_type/cpu_feature",
    "custom_opp_path": "it names Ascend custom operator packages; converter_lite builds CPU models only",
}
KNOWN_SECTIONS = (GRAPH_KERNEL_SECTION, *QUANT_SECTIONS, *HARDWARE_SECTIONS)


def check_sections(sections: Mapping[str, Mapping[str, str]], path: str = "<config>",
                   warn: Warn | None = None) -> None:
    """Fails (-600) on a section this converter cannot honour; warns on an unknown one (closest known name).
    ``[full_quant_param]`` and ``[data_preprocess_param]`` pass only with ``quant_type=FULL_QUANT``."""
    import difflib
    warn = warn or _default_warn
    full_quant = sections.get("common_quant_param", {}).get("quant_type", "").strip() == "FULL_QUANT"
    for name, params in sections.items():
        if name == "":
            if params:
                warn(f"{path}: keys before any [section] are ignored: {', '.join(params)}")
            continue
        if name in ("common_quant_param", "dynamic_quant_param", "mixed_bit_weight_quant_param",
                    "weight_quant_param"):
            continue                                       # quant_config.parse_quant_sections reads (checks) them
        if name in FULL_QUANT_SECTIONS and full_quant:
            continue                                       # read (checked) by parse_quant_sections too
        if name in QUANT_SECTIONS:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{path}: section [{name}] applies to [common_quant_param] quant_type=FULL_QUANT "
                                 "only; remove the section or set quant_type=FULL_QUANT")
        if name in HARDWARE_SECTIONS:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{path}: section [{name}] is not supported: {HARDWARE_SECTIONS[name]}")
        close = difflib.get_close_matches(name, KNOWN_SECTIONS, n=1)
        hint = f"; did you mean [{close[0]}]?" if close else f" (known sections: {', '.join(KNOWN_SECTIONS)})"
        warn(f"{path}: unknown section [{name}] is ignored{hint}")


# -- fusion switch JSON -----------------------------------------------------------------------------------------
def parse_fusion_switch(text: str, path: str = "<fusion switch>") -> FusionSwitch:
    """Ascend-style fusion switch JSON -> FusionSwitch; ConverterError(-600) says where it is wrong."""
    def fail(msg: str) -> ConverterError:
        return ConverterError(RET_INPUT_PARAM_INVALID, f"{path}: {msg}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from e
    if not isinstance(doc, dict) or set(doc) != {"Switch"}:
        raise fail('expected an object with the single key "Switch", '
                   'e.g. {"Switch": {"GraphFusion": {"ALL": "off"}}}')
    switch = doc["Switch"]
    if not isinstance(switch, dict):
        raise fail('"Switch" must be an object')
    parsed: dict[str, FusionSwitchSection] = {}
    for name, body in switch.items():
        if name not in FUSION_SWITCH_SECTIONS:
            raise fail(f'Switch.{name}: unknown section (expected one of {", ".join(FUSION_SWITCH_SECTIONS)})')
        if not isinstance(body, dict):
            raise fail(f"Switch.{name}: must be an object of \"<PassName>\": \"on\"|\"off\"")
        default, passes = True, []
        for pname, value in body.items():
            if value not in ("on", "off"):
                raise fail(f'Switch.{name}.{pname}: value must be "on" or "off", got {json.dumps(value)}')
            if pname == "ALL":
                default = value == "on"
            else:
                passes.append((pname, value == "on"))
        parsed[name] = FusionSwitchSection(default, tuple(passes))
    return FusionSwitch(parsed.get("GraphFusion", FusionSwitchSection()),
                        parsed.get("UBFusion", FusionSwitchSection()))


def load_fusion_switch_file(path: str) -> FusionSwitch:
    """Reads and parses a ``--fusionSwitchFile``."""
    return parse_fusion_switch(_read_text(path, "fusion switch file"), path)


__all__ = [
    "FLAG_KEYS",
    "HARDWARE_ONLY_KEYS",
    "NO_EFFECT_KEYS",
    "OP_ALIASES",
    "FusionSwitch",
    "FusionSwitchSection",
    "GraphKernelConfig",
    "config_from_json",
    "config_to_json",
    "check_sections",
    "load_config_file",
    "load_fusion_switch_file",
    "onnx_op_name",
    "parse_flags",
    "parse_fusion_switch",
    "parse_ini",
    "resolve_flags",
    "section_to_flags",
    "tokenize_flags",
]


# -- round trip through a .ms file (re-specializing a model for other input shapes) -----------------------------
def config_to_json(cfg: GraphKernelConfig) -> dict:
    """The fields that decide what a conversion builds (flags, fusion switch, thread hint), JSON-able."""
    out = {k: getattr(cfg, k) for k in FLAG_KEYS}
    out["num_threads_hint"] = cfg.num_threads_hint
    if cfg.fusion_switch is not None:
        out["fusion_switch"] = dataclasses.asdict(cfg.fusion_switch)
    return json.loads(json.dumps(out))


def config_from_json(data: Mapping) -> GraphKernelConfig:
    """Inverse of ``config_to_json`` (lists back to tuples; unknown keys are ignored)."""
    fields = {f.name for f in dataclasses.fields(GraphKernelConfig)}
    values = {k: _tuples(v) for k, v in data.items() if k in fields and k != "fusion_switch"}
    fs = data.get("fusion_switch")
    if fs is not None:
        values["fusion_switch"] = FusionSwitch(
            **{k: FusionSwitchSection(sec["default"], tuple((str(n), bool(on)) for n, on in sec["passes"]))
               for k, sec in fs.items()})
    return GraphKernelConfig(**values)


def _tuples(v):
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v
