"""convert(): the one ordered path from an ONNX file to a ``.ms`` file.

    [FULL_QUANT: onnxruntime's static quantizer, calibrated, writes the QDQ model (frontend/full_quant.py)]
    ->  load + import (frontend)  ->  [DYNAMIC_QUANT: MatMul/Gemm to int8 products (passes/dynamic_quant.py)
                                         | --bf16=on: MatMul/Gemm to bfloat16 products (passes/bf16.py)]
    ->  graph-kernel optimizer at opt_level (passes.manager; includes native build)
    ->  [fp16 weights | WEIGHT_QUANT (passes/weight_quant.py)]  ->  serialize (model.format, atomic write)

``[common_quant_param]`` (quant_config.py) gives ``config.quant``, whose ``quant_type`` picks the quantization
pass; the ``.ms`` metadata records it (``"weight_quant"`` / ``"dynamic_quant"`` / ``"full_quant"``: bit_num,
weight count, ...).  FULL_QUANT's int8 weights are found again after the optimizer (passes/full_quant.py).

``--bf16=on`` is checked against the CPU first (``bf16_refusal``: the host's /proc/cpuinfo, or the named
``cpu_type``/``cpu_feature`` target): without AVX-512 BF16 the conversion fails with -600 before anything is read
or written.

Environment variables are read here, at the entry, and nowhere below: MS_DEV_GRAPH_KERNEL_FLAGS replaces the
config file's ``[graph_kernel_param]`` flags, MS_DEV_DUMP_GRAPH_KERNEL_IR=on dumps the IR after every pass.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field

from .config import (
    GraphKernelConfig,
    check_sections,
    config_to_json,
    load_config_file,
    load_fusion_switch_file,
    parse_flags,
    resolve_flags,
)
from .errors import RET_INPUT_PARAM_INVALID, RET_NOT_SUPPORT, ConverterError
from .ir.core import Graph
from .quant_config import parse_quant_sections
from .version import __version__

log = logging.getLogger("converter_lite")

OPTIMIZE_CHOICES = ("none", "general", "gpu_oriented", "ascend_oriented")


@dataclass
class ConvertResult:
    output_path: str
    graph: Graph
    config: GraphKernelConfig
    stats: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    bf16: object | None = None              # passes/bf16.py Bf16Result with --bf16=on


def output_path_for(output_file: str) -> str:
    """MindSpore appends ``.ms`` unless the name already ends with it."""
    return output_file if output_file.endswith(".ms") else output_file + ".ms"


def build_config(config_file: str | None = None, *, graph_kernel_flags: str | None = None,
                 enable_graph_kernel: bool | None = None, fusion_switch_file: str | None = None,
                 env: dict | None = None, dump_dir: str = ".") -> GraphKernelConfig:
    """Resolves the flag string in force (API flags > env > config file) into a GraphKernelConfig."""
    env = os.environ if env is None else env
    file_flags, quant = None, None
    if config_file is not None:
        file_flags, sections = load_config_file(config_file)
        check_sections(sections, config_file)
        quant = parse_quant_sections(sections, config_file)
    text = resolve_flags(file_flags, env.get("MS_DEV_GRAPH_KERNEL_FLAGS"))
    if graph_kernel_flags:
        text = graph_kernel_flags
    fusion_switch = load_fusion_switch_file(fusion_switch_file) if fusion_switch_file else None
    cfg = parse_flags(text, default_opt_level=2 if enable_graph_kernel else 0,
                      dump_ir=env.get("MS_DEV_DUMP_GRAPH_KERNEL_IR", "") == "on", dump_dir=dump_dir,
                      fusion_switch=fusion_switch)
    return dataclasses.replace(cfg, quant=quant) if quant is not None else cfg


def bf16_refusal(config: GraphKernelConfig, host_flags=None) -> str | None:
    """Why ``--bf16=on`` cannot convert for ``config``'s target (None: it can): the CPU features the bf16 driver
    needs (kernels/bgemm/abi.py ``REQUIRED_FEATURES``) missing from the host's /proc/cpuinfo flags
    (``host_flags``, default runtime/native.py ``host_cpu_flags()``; tests hand in a host without them), or from a
    named ``cpu_type`` (the C compiler's features for it) and ``cpu_feature``."""
    from .kernels.bgemm.abi import CPUINFO_FLAGS, REQUIRED_FEATURES
    from .runtime import native
    user = {f.lstrip("+-"): not f.startswith("-") for f in config.cpu_feature.replace(";", ",").replace(" ", ",")
            .split(",") if f.strip()}
    if config.cpu_type.strip():
        from .codegen.library import cpu_implied_features
        implied = set(cpu_implied_features(config.cpu_type.strip()) or ())
        have = {f for f in REQUIRED_FEATURES if user.get(f, f in implied)}
        where = f"the target cpu_type={config.cpu_type.strip()}"
    else:
        flags = native.host_cpu_flags() if host_flags is None else frozenset(host_flags)
        have = {f for f in REQUIRED_FEATURES if user.get(f, CPUINFO_FLAGS.get(f, f) in flags)}
        where = "this CPU"
    missing = [f for f in REQUIRED_FEATURES if f not in have]
    if not missing:
        return None
    names = ", ".join(f"{f} (/proc/cpuinfo: {CPUINFO_FLAGS.get(f, f)})" for f in missing)
    return (f"--bf16=on: {where} lacks {names}, which the bfloat16 products (vdpbf16ps) need; convert without "
            "--bf16, or on a CPU with AVX-512 BF16 (Intel Cooper Lake, Sapphire Rapids and later; AMD Zen 4 and "
            "later) for such hosts")


def convert_model(model_file, output_file: str, *, config: GraphKernelConfig, optimize: str = "general",
                  input_shape: dict | str | None = None, fp16: bool = False,
                  embed_source: bool = True, input_format: str = "NCHW",
                  input_value: dict | str | None = None, bf16: bool = False,
                  host_flags=None) -> ConvertResult:
    """Converts ``model_file`` (path or ModelProto) to ``output_file`` (.ms).  Dynamic input dims that
    ``input_shape`` does not fix stay dynamic: the model runs at any admitted shape (ir/input_dims.py).  A model
    whose dynamic dims ``input_shape`` fixes gets its ONNX source embedded (``embed_source``, not with ``fp16``)
    so a run with other shapes can re-specialize it: the file then holds the weights twice.  ``input_format="NHWC"`` (``--inputDataFormat``)
    makes the 4-D inputs channels-last with a Transpose inserted before the optimizer (frontend/layout.py).
    ``input_value`` (``--inputValue``) fixes inputs' values at conversion (frontend/input_values.py).
    ``bf16`` (``--bf16=on``): MatMul/Gemm on constant weights as bfloat16 products (passes/bf16.py), refused
    with -600 where the CPU lacks AVX-512 BF16 (``bf16_refusal``; ``host_flags``: /proc/cpuinfo's flags to check
    instead of this host's)."""
    from .frontend.input_shapes import parse_input_shapes
    from .frontend.input_values import parse_input_values
    from .frontend.onnx_import import import_model
    from .model.format import SOURCE_SECTION, save_model
    from .passes.manager import run_graph_kernel_optimizer

    if optimize not in OPTIMIZE_CHOICES:
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"--optimize={optimize}: INPUT ILLEGAL: optimize must be none|general|gpu_oriented|"
                             "ascend_oriented")
    if optimize in ("gpu_oriented", "ascend_oriented"):
        raise ConverterError(RET_NOT_SUPPORT,
                             f"--optimize={optimize} targets a {optimize.split('_')[0].upper()} device; "
                             "converter_lite builds for the CPU only (use --optimize=general)")
    quant = config.quant
    if fp16 and quant is not None:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--fp16=on and [common_quant_param] quant_type="
                                                      f"{quant.quant_type} both choose how weights are stored: "
                                                      "use one of them")
    if bf16:
        if fp16 or quant is not None:
            other = "--fp16=on" if fp16 else f"[common_quant_param] quant_type={quant.quant_type}"
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--bf16=on and {other} both choose how weights are "
                                                          "stored: use one of them")
        refusal = bf16_refusal(config, host_flags)
        if refusal:
            raise ConverterError(RET_INPUT_PARAM_INVALID, refusal)
    if isinstance(input_shape, str):
        input_shape = parse_input_shapes(input_shape)
    input_values = parse_input_values(input_value) if input_value else None
    out_path = output_path_for(os.fspath(output_file))
    _check_output_dir(out_path)

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    source = os.fspath(model_file) if not hasattr(model_file, "graph") else model_file
    if input_format == "NHWC":
        from .frontend.layout import to_nhwc_inputs
        from .frontend.onnx_import import load_onnx
        source, changed = to_nhwc_inputs(load_onnx(source))
        log.info("--inputDataFormat=NHWC: inputs %s take NHWC data (a Transpose to NCHW follows each)",
                 ", ".join(changed) or "(none: no 4-D input)")
    elif input_format != "NCHW":
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputDataFormat={input_format}: must be NCHW or NHWC")
    stats: dict[str, int] = {}
    artifacts: dict[str, bytes] = {}
    full = None
    if quant is not None and quant.quant_type == "FULL_QUANT":
        if input_values:
            raise ConverterError(RET_INPUT_PARAM_INVALID, "--inputValue with [common_quant_param] quant_type="
                                                          "FULL_QUANT is not supported yet (calibration feeds every "
                                                          "input from calibrate_path)")
        from .frontend.full_quant import quantize_full
        where = "<proto>" if hasattr(model_file, "graph") else os.fspath(model_file)
        full = quantize_full(source, quant, input_shape, where, debug=bool(quant.debug_info_save_path))
        source = full.model
        timings["full_quant"] = time.perf_counter() - t0
        log.info("full quantization (%s, per_channel=%s): %d nodes quantized, %d weights to int8, %d biases "
                 "corrected, %d nodes kept float", quant.activation_quant_method, quant.per_channel, len(full.nodes),
                 len(full.weights), full.bias_corrected, len(full.excluded))
        t0 = time.perf_counter()
    graph = import_model(source, input_shapes=input_shape, input_values=input_values)
    timings["import"] = time.perf_counter() - t0
    dynamic = None
    if quant is not None and quant.quant_type == "DYNAMIC_QUANT":
        from .passes.dynamic_quant import quantize_dynamic
        t0 = time.perf_counter()
        dynamic = quantize_dynamic(graph, quant)
        timings["dynamic_quant"] = time.perf_counter() - t0
        log.info("dynamic quantization: %d weights to int8, %d MatMul/Gemm nodes", len(dynamic.rows),
                 dynamic.nodes)
    bf16_result = None
    if bf16:
        from .passes.bf16 import convert_to_bf16
        t0 = time.perf_counter()
        bf16_result = convert_to_bf16(graph)
        timings["bf16"] = time.perf_counter() - t0
        log.info("%s", bf16_result.summary())
    if optimize != "none" and config.enabled:
        t0 = time.perf_counter()
        ctx = run_graph_kernel_optimizer(graph, config)
        timings["graph_kernel"] = time.perf_counter() - t0
        stats = dict(ctx.stats)
        artifacts = dict(ctx.artifacts)
    if dynamic is not None:
        stats["dynamic_quant"] = len(dynamic.rows)
    if bf16_result is not None:
        stats["bf16"] = bf16_result.count

    if fp16:
        from .passes.fp16_weights import store_weights_as_fp16
        stats["fp16_weights"] = store_weights_as_fp16(graph)
    quantized, quant_rows = None, []
    if quant is not None and quant.quant_type == "WEIGHT_QUANT":
        from .passes.weight_quant import quantize_weights
        quantized, quant_rows, init_scale = quantize_weights(graph, quant)
        stats["weight_quant"] = len(quant_rows)
        log.info("weight quantization: %d weights to %s bits", len(quant_rows),
                 quant.bit_num or f"mixed (init_scale {init_scale:.4g})")
    elif dynamic is not None:
        from .passes.dynamic_quant import storage_map
        quantized, quant_rows = storage_map(graph, dynamic), dynamic.rows
    elif full is not None:
        from .passes.full_quant import report_rows
        from .passes.full_quant import storage_map as full_storage_map
        quantized = full_storage_map(graph, full.weights)
        quant_rows = report_rows(full.weights, full.activations) if quant.debug_info_save_path else []
        stats["full_quant"] = len(full.weights)

    t0 = time.perf_counter()
    metadata = {
        "converter_version": __version__,
        "source_model": os.path.basename(os.fspath(model_file)) if not hasattr(model_file, "graph") else "<proto>",
        "optimize": optimize,
        "opt_level": config.opt_level if optimize != "none" else 0,
        "graph_kernel_flags": config.flags_text,
        "fusion_stats": stats,
        "fp16_weights": fp16,
        "input_format": input_format,
    }
    if bf16_result is not None:
        metadata["bf16"] = {"nodes": bf16_result.count, "by_op": dict(bf16_result.nodes),
                            "biases_folded": bf16_result.biases_folded, "weights": len(bf16_result.rows),
                            "float32_bytes": bf16_result.float_bytes, "bf16_bytes": bf16_result.bf16_bytes}
    if full is not None:
        metadata["full_quant"] = {
            "bit_num": quant.bit_num, "activation_quant_method": quant.activation_quant_method,
            "per_channel": quant.per_channel, "bias_correction": quant.bias_correction,
            "calibration_inputs": full.inputs, "nodes": len(full.nodes), "quantized_nodes": full.nodes,
            "excluded_nodes": full.excluded, "biases_corrected": full.bias_corrected,
            "weights": len(full.weights)}
    elif quant is not None:
        key = "weight_quant" if quant.quant_type == "WEIGHT_QUANT" else "dynamic_quant"
        metadata[key] = {"bit_num": quant.bit_num, "weights": len(quant_rows)}
        if quant.quant_type == "WEIGHT_QUANT" and quant.bit_num == 0:
            metadata[key].update(init_scale=init_scale, auto_tune=quant.auto_tune,
                                 bits=[int(r["bits"]) for r in quant_rows])
        if dynamic is not None:
            metadata[key].update(nodes=dynamic.nodes, quant_strategy=quant.quant_strategy)
    if embed_source and not fp16 and not bf16 and quant is None and graph.metadata.get("dynamic_inputs"):
        # the runtime re-specializes the model for other shapes of the dynamic dims from this (runtime/respecialize.py);
        # not with fp16 weights, whose point is a small file (the source holds them in float32)
        from .frontend.onnx_import import source_bytes
        artifacts[SOURCE_SECTION] = source_bytes(source)       # already NHWC where --inputDataFormat=NHWC
        metadata["reconvert"] = {"config": config_to_json(config), "optimize": optimize, "fp16": fp16,
                                 "input_value": input_values}
    _make_output_dir(out_path)
    save_model(out_path, graph, metadata, artifacts or None, quantized=quantized)
    if quant_rows and quant.debug_info_save_path:
        stem = os.path.splitext(os.path.basename(out_path))[0]
        if full is not None:
            from .passes.full_quant import write_report as write_full_report
            log.info("full_quant report: %s", write_full_report(quant_rows, quant.debug_info_save_path, stem))
        else:
            from .passes.weight_quant import write_report
            kind = "weight_quant" if quant.quant_type == "WEIGHT_QUANT" else "dynamic_quant"
            log.info("%s report: %s", kind, write_report(quant_rows, quant.debug_info_save_path, stem, kind))
    timings["save"] = time.perf_counter() - t0
    return ConvertResult(out_path, graph, config, stats, timings, bf16_result)


def reconvert(source: bytes, spec: dict, shapes: dict, work_dir: str) -> str:
    """Converts an embedded ONNX ``source`` again, with the graph-kernel config it was first converted with
    (``spec``: the ``.ms`` metadata's ``"reconvert"``), for input ``shapes``; returns the new ``.ms`` path in
    ``work_dir``.  The runtime's re-specialization (runtime/respecialize.py) is handed this by
    ``converter_lite.load``."""
    from .config import config_from_json

    src = os.path.join(work_dir, "source.onnx")
    with open(src, "wb") as f:
        f.write(source)
    return convert_model(src, os.path.join(work_dir, "model"), config=config_from_json(spec["config"]),
                         optimize=spec.get("optimize", "general"), input_shape=dict(shapes),
                         fp16=bool(spec.get("fp16", False)), embed_source=False,
                         input_value=spec.get("input_value")).output_path


def _check_output_dir(out_path: str) -> None:
    """Fails early if the output cannot be written; a missing directory is created only at save time."""
    if os.path.isdir(out_path):
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--outputFile: {out_path} is a directory")
    d = os.path.dirname(os.path.abspath(out_path))
    while not os.path.exists(d):
        d = os.path.dirname(d)
    if not os.path.isdir(d):
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--outputFile: {d} is a file, not a directory")
    if not os.access(d, os.W_OK):
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--outputFile: directory {d} is not writable")


def _make_output_dir(out_path: str) -> None:
    d = os.path.dirname(os.path.abspath(out_path))
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--outputFile: cannot create directory {d}: "
                                                      f"{e.strerror}") from None
