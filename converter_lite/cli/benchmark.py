"""The ``benchmark`` command (SPEC §6): MindSpore's ``--key=value`` flags and output lines.

The flow lives in benchmark_core.py; this module only parses flags.  The last line is
``Run Benchmark <model> Success.`` (exit 0) or ``Run Benchmark <model> Failed : <code>`` (stderr, exit 1);
user errors never print a traceback.
"""
from __future__ import annotations

import os
import sys

import click

from ..errors import RET_INPUT_PARAM_INVALID
from .benchmark_core import BenchmarkOptions, run_benchmark


class _MsBool(click.ParamType):
    """MindSpore's bool flag values: true/false (also on/off, 1/0)."""
    name = "true|false"

    def convert(self, value, param, ctx):
        if isinstance(value, bool):
            return value
        v = str(value).strip().lower()
        if v in ("true", "on", "1"):
            return True
        if v in ("false", "off", "0"):
            return False
        self.fail(f"{value!r} is not true or false", param, ctx)


MS_BOOL = _MsBool()


class _Command(click.Command):
    """A usage error (unknown flag, bad flag value) also ends with MindSpore's failure line and exit status 1,
    like every other failure, instead of click's exit status 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = sys.argv[1:] if args is None else list(args)
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            e.show()
            model = next((a.split("=", 1)[1] for a in args if a.startswith("--modelFile=")), "")
            click.echo(f"Run Benchmark {os.path.basename(model)} Failed : {RET_INPUT_PARAM_INVALID}", err=True)
            sys.exit(1)
        except click.Abort:
            sys.exit(1)


@click.command(name="benchmark", cls=_Command, context_settings={"help_option_names": ["--help", "-h"]})
@click.option("--modelFile", "model_file", metavar="PATH", help="The .ms model to run (required).")
@click.option("--inDataFile", "in_data_file", metavar="a.bin,b.bin",
              help="Input data: raw little-endian files (one per input, in input order), .npy files, or one "
                   ".npz keyed by input name.  Default: random inputs (seeded).")
@click.option("--inputShapes", "input_shapes", metavar="1,3,224,224:1,128",
              help="Input shapes (dims by ',', inputs by ':'); the converted shapes, except that dims the "
                   "source model leaves dynamic may differ (the model is specialized for them).")
@click.option("--loopCount", "loop_count", type=int, default=10, show_default=True, help="Timed runs (> 0).")
@click.option("--warmUpLoopCount", "warm_up_loop_count", type=int, default=3, show_default=True,
              help="Untimed warm-up runs.")
@click.option("--numThreads", "num_threads", type=int, default=2, show_default=True, help="Threads (> 0).")
@click.option("--benchmarkDataFile", "benchmark_data_file", metavar="PATH",
              help="Calibration data (MindSpore text format or .npz): accuracy mode.")
@click.option("--accuracyThreshold", "accuracy_threshold", type=float, default=0.5, show_default=True,
              help="Maximum mean bias in percent.")
@click.option("--compareModel", "compare_model", metavar="model.onnx",
              help="Accuracy mode against onnxruntime running this ONNX model on the same inputs.")
@click.option("--timeProfiling", "time_profiling", type=MS_BOOL, default="false", is_flag=False,
              flag_value="true", show_default=True, help="Per-kernel and per-op-type time tables.")
@click.option("--reportFile", "report_file", metavar="report.json", help="Write the whole result as JSON.")
@click.option("--device", "device", default="CPU", show_default=True, help="Only CPU is supported.")
@click.option("--cpuBindMode", "cpu_bind_mode", type=int, default=None,
              help="0: no bind; 1: bind the process to the big cores; 2: to the little cores (Linux "
                   "sched_setaffinity; on a machine whose cores are all alike nothing is bound, and a line says so).")
@click.option("--cosineDistanceThreshold", "cosine_distance_threshold", type=float, default=-1.1,
              show_default=True, help="Accuracy mode: fail when an output's cosine similarity with the reference "
                                      "is below this (checked only when > -1).")
@click.option("--modelType", "model_type", default="MindIR_Lite", show_default=True,
              help="MindIR_Lite (or MindIR): the .ms file; other types are refused.")
@click.option("--benchmarkDataType", "benchmark_data_type", default="FLOAT", show_default=True,
              help="Type of --benchmarkDataFile's values: FLOAT, or INT32 (values must be integers); INT8/UINT8 "
                   "(quantized models) are refused.")
@click.option("--enableFp16", "enable_fp16", type=MS_BOOL, default="false", show_default=True,
              help="Only false: the kernels compute in float32.")
@click.option("--perfProfiling", "perf_profiling", type=MS_BOOL, default="false", show_default=True,
              help="Only false: no hardware counters (use --timeProfiling).")
@click.option("--perfEvent", "perf_event", default=None, help="Refused (goes with --perfProfiling).")
@click.option("--enableParallel", "enable_parallel", type=MS_BOOL, default="false", show_default=True,
              help="Only false: no parallel-predict worker pool.")
@click.option("--workersNum", "workers_num", type=int, default=None, help="Refused (goes with --enableParallel).")
@click.option("--seed", "seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--native", "native", type=MS_BOOL, default="true", show_default=True,
              help="false runs the numpy reference kernels even where native code is present.")
@click.option("--rebuildKernels", "rebuild_kernels", type=MS_BOOL, default="false", show_default=True,
              help="true never runs the machine code shipped in the .ms: every fused kernel is generated again "
                   "from the model's graph and compiled in memory (for models from untrusted sources).")
def main(model_type, **kw):
    """Runs a converted .ms model: timing (default) or accuracy (--benchmarkDataFile / --compareModel)."""
    if model_type.upper() not in ("MINDIR_LITE", "MINDIR"):
        raise click.BadParameter(f"{model_type}: only MindIR_Lite (.ms) models run", param_hint="--modelType")
    opts = BenchmarkOptions(**kw, progress=sys.stderr.isatty())
    status, _ = run_benchmark(opts, out=click.echo, err=lambda line: click.echo(line, err=True))
    if status != 0:
        sys.exit(1)


if __name__ == "__main__":   # pragma: no cover
    main()
