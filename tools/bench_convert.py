"""Conversion time with a cold and a warm kernel cache (issue 4: "report the compile time of the sample
transformer block; the cache makes a second conversion of the same model at least 5x faster").

    python -m tools.bench_convert [--model models/attention_block.onnx]

Each conversion runs ``converter_lite`` in a fresh process (nothing kept in memory between the two) with
``HOME`` pointing at an empty temporary directory, so the first one finds an empty on-disk kernel cache
(``~/.cache/converter_lite/kernels``) and compiles every kernel and the support drivers, and the second one
finds them all.  The figure is the wall time of each whole process (Python start-up and import included) and
the conversion time the converter itself prints.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

DEFAULT_MODEL = os.path.join(os.path.dirname(__file__), "..", "models", "attention_block.onnx")
_CONVERTED = re.compile(r"Converted .*?, ([0-9.]+) s\s*$", re.MULTILINE)


def _convert_once(model: str, out: str, home: str, opt_level: int) -> tuple[float, float | None]:
    """(process wall seconds, the converter's own seconds or None) of one conversion in a fresh process."""
    env = dict(os.environ, HOME=home)
    env.pop("XDG_CACHE_HOME", None)
    cmd = [sys.executable, "-c", "import sys; from converter_lite.cli.converter import main; sys.exit(main())",
           "--fmk=ONNX", f"--modelFile={model}", f"--outputFile={out}"]
    with tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False) as cfg:
        cfg.write(f"[graph_kernel_param]\nopt_level={opt_level}\n")
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd + [f"--configFile={cfg.name}"], env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        wall = time.perf_counter() - t0
    finally:
        os.unlink(cfg.name)
    if proc.returncode != 0:
        raise RuntimeError(f"conversion of {model} failed: {(proc.stdout + proc.stderr).strip()[-400:]}")
    found = _CONVERTED.search(proc.stdout + proc.stderr)
    return wall, float(found.group(1)) if found else None


def measure(model: str = DEFAULT_MODEL, opt_level: int = 2) -> dict:
    """{"model", "cold_s", "warm_s", "cold_wall_s", "warm_wall_s", "speedup"} for ``model``."""
    model = os.path.abspath(model)
    with tempfile.TemporaryDirectory(prefix="cl_convert_") as tmp:
        out = os.path.join(tmp, "model")
        cold_wall, cold = _convert_once(model, out, tmp, opt_level)
        warm_wall, warm = _convert_once(model, out, tmp, opt_level)
    result = {"model": os.path.basename(model), "opt_level": opt_level, "cold_s": cold, "warm_s": warm,
              "cold_wall_s": cold_wall, "warm_wall_s": warm_wall}
    result["speedup"] = (cold / warm) if cold and warm else None
    return result


def lines(result: dict | None) -> list[str]:
    """The Markdown lines of the conversion-time section."""
    if not result:
        return ["(not run)"]
    sp = result.get("speedup")
    return [(f"{result['model']} at opt_level {result['opt_level']}, each conversion in a fresh process with "
             "its own HOME (so the on-disk kernel cache starts empty):"), "",
            "| kernel cache | conversion s | process wall s |", "|---|---|---|",
            f"| cold (compiles every kernel and the support drivers) | {result['cold_s']:.2f} | "
            f"{result['cold_wall_s']:.2f} |",
            f"| warm (second conversion) | {result['warm_s']:.2f} | {result['warm_wall_s']:.2f} |", "",
            f"Second conversion {sp:.1f}x faster." if sp else "Speed-up not measured."]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--opt-level", type=int, default=2)
    args = ap.parse_args(argv)
    result = measure(args.model, args.opt_level)
    print("\n".join(lines(result)))
    return result


if __name__ == "__main__":
    main()
