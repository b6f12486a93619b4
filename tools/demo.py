"""`make run`: convert every sample model with cfg/akg.cfg, benchmark it and check it against onnxruntime.

Runs the two real commands a user runs (``converter_lite`` and ``benchmark``) for each model in ``models/`` and
prints their key lines, then a summary table.  Exit status is non-zero if any step failed.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(args: list[str]) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=ROOT)
    return r.returncode, r.stdout + r.stderr


def _grep(pattern: str, text: str) -> str:
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else "?"


def main() -> int:
    models = sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx")))
    out_dir = os.path.join(ROOT, "out")
    os.makedirs(out_dir, exist_ok=True)
    cfg = os.path.join("cfg", "akg.cfg")
    rows, failed = [], 0
    for path in models:
        name = os.path.splitext(os.path.basename(path))[0]
        rel = os.path.relpath(path, ROOT)
        ms = os.path.join("out", name + ".ms")
        print(f"$ converter_lite --fmk=ONNX --modelFile={rel} --outputFile=out/{name} --configFile={cfg}")
        code, text = _run(["converter_lite.cli.converter", "--fmk=ONNX", f"--modelFile={rel}",
                           f"--outputFile=out/{name}", f"--configFile={cfg}"])
        print("  " + "\n  ".join(line for line in text.strip().splitlines()[-2:]))
        if code:
            failed += 1
            rows.append((name, "convert failed", "", "", ""))
            continue
        kernels = _grep(r"(\d+) fused kernels", text)
        print(f"$ benchmark --modelFile={ms} --loopCount=20 --warmUpLoopCount=3 --numThreads=2")
        code, perf = _run(["converter_lite.cli.benchmark", f"--modelFile={ms}", "--loopCount=20",
                           "--warmUpLoopCount=3", "--numThreads=2"])
        print("  " + "\n  ".join(line for line in perf.strip().splitlines() if "RunTime" in line))
        print(f"$ benchmark --modelFile={ms} --compareModel={rel}")
        code2, acc = _run(["converter_lite.cli.benchmark", f"--modelFile={ms}", f"--compareModel={rel}"])
        print("  " + "\n  ".join(line for line in acc.strip().splitlines()
                                 if "Mean bias of all" in line or "Run Benchmark" in line))
        failed += bool(code or code2)
        rows.append((name, kernels, _grep(r"AvgRunTime = ([\d.]+) ms", perf),
                     _grep(r"MedianRunTime = ([\d.]+) ms", perf), _grep(r"Mean bias of all nodes/tensors: ([\S]+)", acc)))
        print()
    print(f"{'model':<18} {'fused kernels':>13} {'avg ms':>10} {'median ms':>10} {'mean bias vs onnxruntime':>26}")
    for r in rows:
        print(f"{r[0]:<18} {r[1]:>13} {r[2]:>10} {r[3]:>10} {r[4]:>26}")
    print(f"{len(rows) - failed}/{len(rows)} models converted, ran and matched onnxruntime")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
