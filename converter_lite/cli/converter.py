"""The ``converter_lite`` command (SPEC §2): MindSpore's flags, result lines and status codes.

The last stdout line is always ``CONVERT RESULT SUCCESS:0`` or ``CONVERT RESULT FAILED:<code> <description>``;
failures exit non-zero without a traceback (``--debug=true`` shows one) and leave no output file.
"""
from __future__ import annotations

import os
import sys
import time
import traceback

import logging

import click

from ..errors import (DESCRIPTIONS, RET_ERROR, RET_INPUT_PARAM_INVALID, RET_NOT_FIND_OP, RET_NOT_SUPPORT,
                      ConverterError)
from . import batch

FMKS = ("TF", "TFLITE", "CAFFE", "MINDIR", "ONNX", "PYTORCH", "MSLITE")
_SEP = "=" * 60
log = logging.getLogger("converter_lite")


def _bool(value: str, flag: str) -> bool:
    v = value.strip().lower()
    if v in ("on", "true", "1"):
        return True
    if v in ("off", "false", "0"):
        return False
    raise ConverterError(RET_INPUT_PARAM_INVALID, f"--{flag}={value}: must be on or off")


@click.command(name="converter_lite", context_settings={"help_option_names": ["--help", "-h"]})
@click.option("--fmk", "fmk", metavar="ONNX", help="Input model framework; only ONNX is supported.")
@click.option("--modelFile", "model_file", metavar="PATH", help="Input model file (ONNX).")
@click.option("--outputFile", "output_file", metavar="PATH", help="Output model path; '.ms' is appended.")
@click.option("--configFile", "config_file", metavar="PATH",
              help="INI config; [graph_kernel_param] holds graph-kernel flags such as opt_level=2.")
@click.option("--optimize", "optimize", default="general", show_default=True,
              metavar="none|general|gpu_oriented|ascend_oriented", help="none disables all fusion.")
@click.option("--inputShape", "input_shape", metavar="'in:1,3,224,224;ids:1,128'",
              help="Fix input shapes (dynamic dims); the last ':' separates name and dims.")
@click.option("--inputValue", "input_value", metavar="'sr:16000'",
              help="Fix inputs' values at conversion (control flow on them folds); runs must feed the same values.")
@click.option("--fusionSwitchFile", "fusion_switch_file", metavar="PATH",
              help="Ascend-style JSON switching named fusion passes on/off.")
@click.option("--fp16", "fp16", default="off", show_default=True, metavar="on|off",
              help="Store float32 weights as float16 (halves the file; computed in float32).")
@click.option("--bf16", "bf16", default="off", show_default=True, metavar="on|off",
              help="MatMul/Gemm on constant weights as bfloat16 products (AVX-512 BF16 vdpbf16ps: weights stored "
                   "as bf16, float32 sums; less precise, faster). Refused where the CPU lacks avx512_bf16.")
@click.option("--weightFile", "weight_file", metavar="PATH", help="Caffe weights (not supported).")
@click.option("--jobs", "jobs", default=1, type=int, show_default=True,
              help="Batch mode: parallel conversions.")
@click.option("--shard", "shard", metavar="K/N", help="Batch mode: convert only the K-th of N parts of the models.")
@click.option("--saveType", "save_type", default="MINDIR_LITE", show_default=True, metavar="MINDIR_LITE",
              help="Output kind: MINDIR_LITE (our .ms, the only kind written); MINDIR is refused.")
@click.option("--NoFusion", "no_fusion", default="false", show_default=True, metavar="true|false",
              help="true = --optimize=none (no fusion at all).")
@click.option("--infer", "infer", default="false", show_default=True, metavar="true|false",
              help="After writing, run the model once on seeded random inputs and compare it with onnxruntime on "
                   "the source (benchmark --compareModel lines); above 0.5%% mean bias the conversion fails and "
                   "the file is removed.")
@click.option("--inputDataFormat", "input_data_format", default="NCHW", show_default=True, metavar="NCHW|NHWC",
              help="NHWC: 4-D inputs take channels-last data (a Transpose to NCHW is inserted before fusion); "
                   "other inputs are unchanged.")
@click.option("--inputDataType", "input_data_type", default="DEFAULT", show_default=True,
              metavar="DEFAULT|FLOAT32", help="Input tensor type: DEFAULT/FLOAT32 (the model's own types); "
                                              "INT8/UINT8/FLOAT16 need quantization (not supported yet).")
@click.option("--outputDataType", "output_data_type", default="DEFAULT", show_default=True,
              metavar="DEFAULT|FLOAT32", help="Output tensor type: as --inputDataType.")
@click.option("--device", "device", default="CPU", show_default=True, metavar="CPU",
              help="Target device; only CPU (others fail with -7).")
@click.option("--encryption", "encryption", default="false", show_default=True, metavar="false",
              help="Model encryption: the .ms format has none, so only false is accepted.")
@click.option("--encryptKey", "encrypt_key", metavar="KEY", help="Refused: the .ms format has no encryption.")
@click.option("--optimizeTransformer", "optimize_transformer", default="false", show_default=True,
              metavar="true|false", help="Accepted: graph-kernel fusion already fuses transformer blocks.")
@click.option("--trainModel", "train_model", default="false", show_default=True, metavar="false",
              help="Only false: training models are not supported.")
@click.option("--debug", "debug", default="false", metavar="true|false", help="Show tracebacks on failure.")
def _command(**kw):
    return _convert(**kw)


DATA_TYPES_LATER = ("INT8", "UINT8", "FLOAT16", "INT16", "INT32", "INT64", "UINT16", "UINT32", "UINT64")


def _mindspore_flags(save_type, no_fusion, infer, input_data_format, input_data_type, output_data_type, device,
                     encryption, encrypt_key, optimize_transformer, train_model) -> tuple[bool, bool, str]:
    """Checks MindSpore's flags that have a single meaning here; returns (no_fusion, infer, input format)."""
    bad = RET_INPUT_PARAM_INVALID
    if save_type.upper() == "MINDIR":
        raise ConverterError(bad, "--saveType=MINDIR is not supported: converter_lite writes only MINDIR_LITE-style "
                                  "output (the .ms model); use --saveType=MINDIR_LITE")
    if save_type.upper() != "MINDIR_LITE":
        raise ConverterError(bad, f"--saveType={save_type}: INPUT ILLEGAL: saveType must be MINDIR_LITE "
                                  "(MINDIR is not supported)")
    fmt = input_data_format.upper()
    if fmt not in ("NCHW", "NHWC"):
        raise ConverterError(bad, f"--inputDataFormat={input_data_format}: must be NCHW or NHWC")
    for flag, value in (("inputDataType", input_data_type), ("outputDataType", output_data_type)):
        v = value.upper()
        if v in ("DEFAULT", "FLOAT32"):
            continue
        if v in DATA_TYPES_LATER:
            raise ConverterError(bad, f"--{flag}={value} is not supported yet (needs quantization); "
                                      "use DEFAULT or FLOAT32")
        raise ConverterError(bad, f"--{flag}={value}: INPUT ILLEGAL: must be DEFAULT, FLOAT32, FLOAT16, INT8 or "
                                  "UINT8")
    if device.upper() != "CPU":
        raise ConverterError(RET_NOT_SUPPORT, f"--device={device} is not supported: converter_lite builds CPU "
                                              "models only (--device=CPU)")
    if _bool(encryption, "encryption"):
        raise ConverterError(bad, "--encryption=true is not supported: the .ms format has no encryption "
                                  "(use --encryption=false)")
    if encrypt_key:
        raise ConverterError(bad, "--encryptKey is not supported: the .ms format has no encryption")
    if _bool(train_model, "trainModel"):
        raise ConverterError(bad, "--trainModel=true is not supported: converter_lite converts inference "
                                  "models only")
    if _bool(optimize_transformer, "optimizeTransformer"):
        log.info("--optimizeTransformer=true: graph-kernel fusion (opt_level >= 1) already fuses transformer "
                 "blocks; the flag adds nothing")
    return _bool(no_fusion, "NoFusion"), _bool(infer, "infer"), fmt


def _convert(fmk, model_file, output_file, config_file, optimize, input_shape, fusion_switch_file, fp16,
             weight_file, jobs, shard, debug, save_type, no_fusion, infer, input_data_format, input_data_type,
             output_data_type, device, encryption, encrypt_key, optimize_transformer, train_model,
             input_value=None, bf16="off"):
    """Returns the number of models that failed (batch mode) or 0."""
    from ..pipeline import build_config, convert_model

    if fmk is None:
        raise ConverterError(RET_INPUT_PARAM_INVALID, "--fmk is required (only --fmk=ONNX converts)")
    if fmk.upper() not in FMKS:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--fmk={fmk}: INPUT ILLEGAL: fmk must be "
                                                      "TF|TFLITE|CAFFE|MINDIR|ONNX")
    if fmk.upper() != "ONNX":
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--fmk={fmk} is not supported: converter_lite converts "
                                                      "ONNX models only (export your model to ONNX first)")
    if not model_file:
        raise ConverterError(RET_INPUT_PARAM_INVALID, "--modelFile is required")
    if not output_file:
        raise ConverterError(RET_INPUT_PARAM_INVALID, "--outputFile is required")
    if weight_file:
        raise ConverterError(RET_INPUT_PARAM_INVALID, "--weightFile is only for Caffe models, which are not "
                                                      "supported")
    fp16 = _bool(fp16, "fp16")
    bf16 = _bool(bf16, "bf16")
    no_fusion, infer, input_format = _mindspore_flags(save_type, no_fusion, infer, input_data_format,
                                                      input_data_type, output_data_type, device, encryption,
                                                      encrypt_key, optimize_transformer, train_model)
    if no_fusion:
        optimize = "none"
    if batch.is_batch(model_file):
        if infer or input_format != "NCHW":
            raise ConverterError(RET_INPUT_PARAM_INVALID, "--infer=true and --inputDataFormat=NHWC convert one "
                                                          "model at a time, not a directory or glob")
        if bf16:                        # refused once for the whole batch, before any model is read
            from ..pipeline import bf16_refusal
            refusal = bf16_refusal(build_config(config_file, fusion_switch_file=fusion_switch_file,
                                                dump_dir=os.getcwd()))
            if refusal:
                raise ConverterError(RET_INPUT_PARAM_INVALID, refusal)
        return batch.run_batch(model_file, output_file, config_file=config_file,
                               fusion_switch_file=fusion_switch_file, optimize=optimize, input_shape=input_shape,
                               fp16=fp16, jobs=jobs, shard=shard, echo=click.echo, input_value=input_value,
                               bf16=bf16)
    if shard:
        raise ConverterError(RET_INPUT_PARAM_INVALID, "--shard needs a directory or glob as --modelFile")
    t0 = time.perf_counter()
    config = build_config(config_file, fusion_switch_file=fusion_switch_file, dump_dir=os.getcwd())
    result = convert_model(model_file, output_file, config=config, optimize=optimize, input_shape=input_shape,
                           fp16=fp16, input_format=input_format, input_value=input_value, bf16=bf16)
    if result.bf16 is not None:
        click.echo(result.bf16.summary())
    if infer:
        _infer(model_file, result.output_path, input_format)
    graphs = result.graph.all_graphs()
    n_kernels = sum(1 for g in graphs for n in g.nodes if n.op == "GraphKernel")
    in_bodies = n_kernels - sum(1 for n in result.graph.nodes if n.op == "GraphKernel")
    bodies = f" ({in_bodies} in {len(graphs) - 1} control-flow bodies)" if len(graphs) > 1 else ""
    click.echo(f"Converted {model_file} -> {result.output_path}: {len(result.graph.nodes)} nodes, "
               f"{n_kernels} fused kernels{bodies} (opt_level {config.opt_level if optimize != 'none' else 0}), "
               f"{time.perf_counter() - t0:.2f} s")
    return 0


def _infer(model_file: str, ms_path: str, input_format: str) -> None:
    """``--infer=true``: benchmark's --compareModel accuracy run (same code, same lines) on seeded random
    inputs; a failure removes the written model."""
    import tempfile

    from .benchmark_core import BenchmarkOptions, run_benchmark

    with tempfile.TemporaryDirectory(prefix="converter_lite_infer_") as tmp:
        reference = model_file
        if input_format == "NHWC":         # the reference must take the same (channels-last) inputs
            from ..frontend.layout import save_with_nhwc_inputs
            reference = os.path.join(tmp, "reference.onnx")
            save_with_nhwc_inputs(model_file, reference)
        lines: list[str] = []
        status, report = run_benchmark(BenchmarkOptions(model_file=ms_path, compare_model=reference),
                                       out=click.echo, err=lambda line: (lines.append(line), click.echo(line, err=True)))
    if status != 0:
        try:
            os.unlink(ms_path)
        except OSError:
            pass
        reason = report.get("error") or (lines[0] if lines else "the accuracy check failed")
        raise ConverterError(status, f"--infer: {reason}; {ms_path} was removed")


def _print_unsupported(err) -> None:
    click.echo(_SEP)
    click.echo("UNSUPPORTED OP LIST:")
    for op_type, node in err.ops:
        click.echo(f"FMKTYPE: ONNX, OP TYPE: {op_type}, NODE NAME: {node}")
    click.echo(_SEP)


def main(args=None) -> None:
    """Entry point; exits 0 on success, 1 on failure."""
    from ..passes.manager import setup_logging

    args = sys.argv[1:] if args is None else list(args)
    setup_logging(os.environ.get("GLOG_v"))
    if not args:
        click.echo(_command.get_help(click.Context(_command, info_name="converter_lite")))
        sys.exit(0)
    debug = any(a.lower() in ("--debug=true", "--debug=1", "--debug=on") for a in args)
    if any(a in ("--help", "-h") for a in args):   # help and nothing else (no result line), exit 0
        click.echo(_command.get_help(click.Context(_command, info_name="converter_lite")))
        sys.exit(0)
    try:
        n_failed = _command.main(args, prog_name="converter_lite", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:           # unknown flag, missing value, ...
        click.echo(f"ERROR: {e.format_message()} (see converter_lite --help)", err=True)
        click.echo(f"CONVERT RESULT FAILED:{RET_INPUT_PARAM_INVALID} {DESCRIPTIONS[RET_INPUT_PARAM_INVALID]} "
                   f"{e.format_message()}")
        sys.exit(1)
    except ConverterError as e:
        if debug:
            traceback.print_exc()
        if e.code == RET_NOT_FIND_OP and hasattr(e, "ops"):
            _print_unsupported(e)
        click.echo(f"ERROR: {e.message}", err=True)
        click.echo(f"CONVERT RESULT FAILED:{e.code} {e.description} {e.message}")
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo(f"CONVERT RESULT FAILED:{RET_ERROR} interrupted")
        sys.exit(130)
    except Exception as e:                      # a bug of ours: still one clear line, traceback on request
        if debug:
            traceback.print_exc()
        click.echo(f"ERROR: internal error: {type(e).__name__}: {e} (rerun with --debug=true for a traceback)",
                   err=True)
        click.echo(f"CONVERT RESULT FAILED:{RET_ERROR} {DESCRIPTIONS[RET_ERROR]} internal error: {e}")
        sys.exit(1)
    if n_failed:
        click.echo(f"CONVERT RESULT FAILED:{RET_ERROR} {n_failed} model(s) failed to convert (see above)")
        sys.exit(1)
    click.echo("CONVERT RESULT SUCCESS:0")
    sys.exit(0)


if __name__ == "__main__":
    main()
