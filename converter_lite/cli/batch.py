"""Batch conversion for CI scripts: many models, parallel workers, shards, one result line each, a summary.

    converter_lite --fmk=ONNX --modelFile=models/ --outputFile=out/ --configFile=akg.cfg --jobs=4 --shard=2/3

* ``--modelFile`` is a directory (every ``*.onnx`` below it) or a glob; ``--outputFile`` is a directory and each
  model keeps its path relative to the input root (``a/b.onnx`` -> ``out/a/b.ms``).
* ``--shard=K/N`` (1 <= K <= N) keeps the models whose path hash falls in part K: deterministic, independent of
  the machine, and stable when models are added (a model never moves to another shard).
* Every model's result is one line; the others still convert when one fails; the exit status is non-zero if any
  failed.  ``<outputFile>/convert_summary.json`` (written atomically) lists every model with its status, code,
  message, output and time.
"""
from __future__ import annotations

import contextlib
import glob
import json
import os
import time
import zlib
from concurrent.futures import ProcessPoolExecutor

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
from ..fileio import write_text

SUMMARY_FILE = "convert_summary.json"


def is_batch(model_file: str) -> bool:
    return os.path.isdir(model_file) or any(c in model_file for c in "*?[")


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 1, 1
    k, sep, n = text.partition("/")
    try:
        k_, n_ = int(k), int(n)
    except ValueError:
        k_, n_ = 0, 0
    if not sep or not 1 <= k_ <= n_:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--shard={text}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return k_, n_


def discover(model_file: str) -> tuple[str, list[str]]:
    """(root, sorted model paths); the root is what output paths are made relative to."""
    if os.path.isdir(model_file):
        root = model_file
        paths = glob.glob(os.path.join(model_file, "**", "*.onnx"), recursive=True)
    else:
        root = _glob_root(model_file)
        paths = [p for p in glob.glob(model_file, recursive=True) if os.path.isfile(p)]
    if not paths:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--modelFile={model_file}: no ONNX model found")
    return root, sorted(paths)


def _glob_root(pattern: str) -> str:
    parts = []
    for part in pattern.split(os.sep):
        if any(c in part for c in "*?["):
            break
        parts.append(part)
    root = os.sep.join(parts)
    return root if os.path.isdir(root) else os.path.dirname(root) or "."


def in_shard(rel_path: str, k: int, n: int) -> bool:
    return zlib.crc32(rel_path.encode()) % n == k - 1


def _convert_one(job: dict) -> dict:
    """Runs in a worker process; never raises."""
    from ..pipeline import build_config, convert_model

    t0 = time.perf_counter()
    result = {"model": job["model"], "output": None, "status": "FAILED", "code": -1, "message": ""}
    try:
        config = build_config(job["config_file"], fusion_switch_file=job["fusion_switch_file"], dump_dir=job["cwd"],
                              env=job["env"])
        res = convert_model(job["model"], job["output"], config=config, optimize=job["optimize"],
                            input_shape=job["input_shape"], fp16=job["fp16"], input_value=job.get("input_value"),
                            bf16=job.get("bf16", False))
        result.update(status="SUCCESS", code=0, output=res.output_path,
                      kernels=sum(1 for n in res.graph.nodes if n.op == "GraphKernel"))
    except ConverterError as e:
        result.update(code=e.code, message=e.message, description=e.description)
    except Exception as e:      # a bug of ours: reported for this model, the batch goes on
        result.update(message=f"internal error: {type(e).__name__}: {e}")
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def run_batch(model_file: str, output_dir: str, *, config_file, fusion_switch_file, optimize, input_shape,
              jobs: int, shard: str | None, echo, fp16: bool = False, input_value=None, bf16: bool = False) -> int:
    k, n = parse_shard(shard)
    if jobs < 1:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--jobs={jobs}: must be at least 1")
    if os.path.isfile(output_dir):
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--outputFile={output_dir}: batch output must be a "
                                                      "directory, not a file")
    root, paths = discover(model_file)
    selected = [p for p in paths if in_shard(os.path.relpath(p, root), k, n)]
    env = dict(os.environ)
    job_list = []
    for p in selected:
        rel = os.path.splitext(os.path.relpath(p, root))[0]
        job_list.append({"model": p, "output": os.path.join(output_dir, rel), "config_file": config_file,
                         "fusion_switch_file": fusion_switch_file, "optimize": optimize, "input_shape": input_shape,
                         "input_value": input_value,
                         "fp16": fp16, "bf16": bf16, "cwd": os.getcwd(), "env": env})
    echo(f"Converting {len(job_list)} of {len(paths)} models (shard {k}/{n}) with {jobs} job(s)")
    t0 = time.perf_counter()
    results = []
    # the pool is shut down (its manager thread joined) before this returns: left to the interpreter's exit hook,
    # Python 3.11 may race that thread closing its wake-up pipe and print "Bad file descriptor" at exit
    with contextlib.ExitStack() as stack:
        if jobs == 1 or len(job_list) <= 1:
            mapped = map(_convert_one, job_list)
        else:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=min(jobs, len(job_list))))
            mapped = pool.map(_convert_one, job_list)
        for i, r in enumerate(mapped, 1):
            results.append(r)
            if r["status"] == "SUCCESS":
                echo(f"[{i}/{len(job_list)}] {r['model']} -> {r['output']}: CONVERT RESULT SUCCESS:0")
            else:
                echo(f"[{i}/{len(job_list)}] {r['model']}: CONVERT RESULT FAILED:{r['code']} {r['message']}")
    failed = [r for r in results if r["status"] != "SUCCESS"]
    summary = {"shard": f"{k}/{n}", "total_models": len(paths), "converted": len(results) - len(failed),
               "failed": len(failed), "seconds": round(time.perf_counter() - t0, 3), "models": results}
    # each run writes its own temp file and renames it: concurrent runs never interleave bytes
    path = write_text(os.path.join(output_dir, SUMMARY_FILE), json.dumps(summary, indent=1))
    echo(f"Summary: {summary['converted']} converted, {len(failed)} failed, {summary['seconds']:.1f} s "
         f"(details in {path})")
    return len(failed)
