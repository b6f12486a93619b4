"""The bad-input matrix (issue #6 item 3): every way a CI script can hand ``converter_lite`` or ``benchmark`` a bad
input, one row each.

Each row runs the real command in a subprocess, in an empty working directory, and asserts:
- the exit status (0 for the rows that must succeed, else 1) and the result line's status code
  (``CONVERT RESULT FAILED:<code> ...`` / ``Run Benchmark <model> Failed : <code>``);
- that the output names what is at fault (the file, node, tensor or flag): ``words``;
- that no Python traceback is printed;
- that nothing was written: the case's directory tree is unchanged (no .ms, no temp file, no partial report),
  except ``writes``, the files a succeeding row must produce.

Rows that must succeed: unknown config keys and bad values only warn (as in MindSpore); 0-size dims convert and
run; native code for a CPU this host lacks is rebuilt from the embedded LLVM IR (SPEC section 4).
"""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import bad_inputs as bad
import numpy as np
import pytest
from bad_inputs import Workspace

import converter_lite
from converter_lite.runtime.native import host_cpu_flags

CONVERT, BENCH = "converter_lite", "benchmark"
MODULES = {CONVERT: "converter_lite.cli.converter", BENCH: "converter_lite.cli.benchmark"}


@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    args: Callable[[Workspace], list[str]]      # writes the case's inputs, returns the command's flags
    code: int                                   # status code of the result line (0: must succeed)
    words: tuple[str, ...] = ()                 # must appear in the output (what is at fault)
    writes: tuple[str, ...] = ()                # files a succeeding row creates, relative to the workspace


def conv(ws: Workspace, model: str, *flags: str) -> list[str]:
    return ["--fmk=ONNX", f"--modelFile={model}", f"--outputFile={ws.out}/m", *flags]


def good(ws: Workspace) -> str:
    return ws.onnx("good", bad.relu())


def cfg(ws: Workspace, text: str) -> str:
    return f"--configFile={ws.file('c.cfg', text)}"


def switch(ws: Workspace, text: str) -> str:
    return f"--fusionSwitchFile={ws.file('fs.json', text)}"


def bench(ms: str, *flags: str) -> list[str]:
    return [f"--modelFile={ms}", "--loopCount=1", "--warmUpLoopCount=0", *flags]


def ms_of(ws: Workspace, name: str, model, opt_level: int = 2) -> str:
    """The model converted (in-process, before the case runs) into the inputs directory."""
    return converter_lite.convert(model, ws.path(name), graph_kernel_flags=f"--opt_level={opt_level}")


def in_files(ws: Workspace, *files: tuple[str, object]) -> str:
    """``--inDataFile`` of files written from (name, array-or-bytes) pairs (.npy saved with numpy)."""
    paths = []
    for name, data in files:
        p = ws.path(name)
        if name.endswith(".npy"):
            np.save(p, data)
        elif data is not None:
            ws.file(name, data if isinstance(data, bytes) else np.asarray(data).tobytes())
        paths.append(p)
    return "--inDataFile=" + ",".join(paths)


def missing_cpu_feature() -> str:
    flags = host_cpu_flags()
    return next(f for f in ("avx512fp16", "amx-tile", "sve2", "avx512f") if f.replace("-", "_") not in flags)


def _f32(*shape):
    return np.zeros(shape, np.float32)


def _i64(*shape):
    return np.zeros(shape, np.int64)


CASES = [
    # -- converter_lite flags ---------------------------------------------------------------------------------
    Case("flag-missing-fmk", CONVERT, lambda ws: conv(ws, good(ws))[1:], -600, ("--fmk",)),
    Case("flag-fmk-tf", CONVERT, lambda ws: ["--fmk=TF", *conv(ws, good(ws))[1:]], -600,
         ("--fmk=TF", "not supported")),
    Case("flag-missing-outputFile", CONVERT, lambda ws: conv(ws, good(ws))[:2], -600, ("--outputFile",)),
    Case("flag-unknown", CONVERT, lambda ws: conv(ws, good(ws), "--bogusFlag=1"), -600, ("bogusFlag",)),
    Case("flag-optimize-bad", CONVERT, lambda ws: conv(ws, good(ws), "--optimize=max"), -600, ("--optimize=max",)),
    Case("flag-optimize-gpu", CONVERT, lambda ws: conv(ws, good(ws), "--optimize=gpu_oriented"), -7,
         ("--optimize=gpu_oriented", "CPU only")),
    Case("flag-inputShape-syntax", CONVERT, lambda ws: conv(ws, good(ws), "--inputShape=x:a,b"), -600,
         ("--inputShape", "'x'")),
    Case("flag-inputShape-unknown-input", CONVERT, lambda ws: conv(ws, good(ws), "--inputShape=nothere:1,2"), -600,
         ("nothere",)),
    Case("flag-inputShape-contradicts", CONVERT, lambda ws: conv(ws, good(ws), "--inputShape=x:4,4"), -600,
         ("'x'",)),
    Case("flag-fp16-bad", CONVERT, lambda ws: conv(ws, good(ws), "--fp16=maybe"), -600, ("--fp16=maybe",)),
    Case("flag-jobs-not-int", CONVERT, lambda ws: conv(ws, good(ws), "--jobs=many"), -600, ("--jobs",)),
    Case("flag-shard-single-model", CONVERT, lambda ws: conv(ws, good(ws), "--shard=1/2"), -600, ("--shard",)),
    Case("flag-model-missing", CONVERT, lambda ws: conv(ws, ws.path("nope.onnx")), -200, ("nope.onnx",)),
    Case("flag-output-is-directory", CONVERT,
         lambda ws: ["--fmk=ONNX", f"--modelFile={good(ws)}", f"--outputFile={ws.mkdir('out/d.ms')}"], -600,
         ("--outputFile", "d.ms")),
    Case("flag-output-under-a-file", CONVERT,
         lambda ws: ["--fmk=ONNX", f"--modelFile={good(ws)}", f"--outputFile={ws.file('plain', 'x')}/m"], -600,
         ("--outputFile",)),
    # -- config files (--configFile) ----------------------------------------------------------------------------
    Case("config-missing", CONVERT, lambda ws: conv(ws, good(ws), f"--configFile={ws.path('none.cfg')}"), -600,
         ("none.cfg",)),
    Case("config-not-ini", CONVERT, lambda ws: conv(ws, good(ws), cfg(ws, '{"opt_level": 2}\n')), -600,
         ("c.cfg:1",)),
    Case("config-binary", CONVERT, lambda ws: conv(ws, good(ws), cfg(ws, "\x00\xff\xfe binary")), -600, ("c.cfg",)),
    Case("config-is-a-directory", CONVERT, lambda ws: conv(ws, good(ws), f"--configFile={ws.inputs}"), -600,
         ("inputs",)),
    Case("config-line-not-key-value", CONVERT,
         lambda ws: conv(ws, good(ws), cfg(ws, "[graph_kernel_param]\nopt_level=2\nthis line is wrong\n")), -600,
         ("c.cfg:3", "this line is wrong")),
    Case("config-unknown-key-warns", CONVERT,
         lambda ws: conv(ws, good(ws), cfg(ws, "[graph_kernel_param]\nopt_level=2\nno_such_key=1\n")), 0,
         ("no_such_key",), ("out/m.ms",)),
    Case("config-bad-value-warns", CONVERT,
         lambda ws: conv(ws, good(ws), cfg(ws, "[graph_kernel_param]\nopt_level=high\n")), 0, ("opt_level",),
         ("out/m.ms",)),
    # -- fusion switch files (--fusionSwitchFile) ---------------------------------------------------------------
    Case("switch-bad-json", CONVERT, lambda ws: conv(ws, good(ws), switch(ws, '{"Switch": {"GraphFusion": {,}}}')),
         -600, ("fs.json:1:",)),
    Case("switch-wrong-shape", CONVERT, lambda ws: conv(ws, good(ws), switch(ws, '{"Switch": ["ALL"]}')), -600,
         ("fs.json", "Switch")),
    Case("switch-bad-value", CONVERT,
         lambda ws: conv(ws, good(ws), switch(ws, '{"Switch": {"GraphFusion": {"ALL": "maybe"}}}')), -600,
         ("fs.json", "Switch.GraphFusion.ALL")),
    Case("switch-missing", CONVERT, lambda ws: conv(ws, good(ws), f"--fusionSwitchFile={ws.path('no.json')}"), -600,
         ("no.json",)),
    # -- ONNX files -----------------------------------------------------------------------------------------------
    Case("onnx-empty", CONVERT, lambda ws: conv(ws, ws.file("e.onnx", b"")), -200, ("e.onnx", "empty")),
    Case("onnx-truncated", CONVERT,
         lambda ws: conv(ws, ws.file("t.onnx", bad.two_inputs().SerializeToString()[:-7])), -200, ("t.onnx",)),
    Case("onnx-wrong-magic", CONVERT, lambda ws: conv(ws, ws.file("zip.onnx", b"PK\x03\x04" + bytes(60))), -200,
         ("zip.onnx",)),
    Case("onnx-is-an-ms-file", CONVERT, lambda ws: conv(ws, ws.good_ms()), -200, ("good.ms",)),
    Case("onnx-cyclic", CONVERT, lambda ws: conv(ws, ws.onnx("cyc", bad.cyclic())), -200,
         ("cyc.onnx", "cycle", "add_loop")),
    Case("onnx-dangling-input", CONVERT, lambda ws: conv(ws, ws.onnx("dang", bad.dangling_input())), -200,
         ("'ghost'", "add_ghost")),
    Case("onnx-duplicate-output-name", CONVERT, lambda ws: conv(ws, ws.onnx("dup", bad.duplicate_output())), -200,
         ("'t'", "first_t", "second_t")),
    Case("onnx-broadcast-contradiction", CONVERT, lambda ws: conv(ws, ws.onnx("bc", bad.broadcast_contradiction())),
         -500, ("add_bad", "[2, 3]", "[4]")),
    Case("onnx-reshape-contradiction", CONVERT, lambda ws: conv(ws, ws.onnx("rs", bad.reshape_contradiction())),
         -500, ("reshape_bad",)),
    Case("onnx-declared-output-contradiction", CONVERT,
         lambda ws: conv(ws, ws.onnx("od", bad.declared_output_contradiction())), -500, ("'y'", "[5]", "[2, 3]")),
    Case("onnx-output-not-produced", CONVERT, lambda ws: conv(ws, ws.onnx("np", bad.unproduced_output())), -200,
         ("'nowhere'",)),
    Case("onnx-input-without-shape", CONVERT, lambda ws: conv(ws, ws.onnx("ns", bad.shapeless_input())), -500,
         ("'x'", "--inputShape")),
    Case("onnx-map-input", CONVERT, lambda ws: conv(ws, ws.onnx("map", bad.map_input())), -200,
         ("'m'", "map_type")),
    Case("onnx-short-initializer", CONVERT, lambda ws: conv(ws, ws.onnx("si", bad.short_initializer())), -200,
         ("'w'",)),
    Case("onnx-complex64", CONVERT, lambda ws: conv(ws, ws.onnx("cx", bad.elem_type(14))), -200, ("'x'", "complex64")),
    Case("onnx-int2", CONVERT, lambda ws: conv(ws, ws.onnx("i2", bad.elem_type(26))), -200, ("'x'", "int2")),
    Case("onnx-unsupported-op", CONVERT, lambda ws: conv(ws, ws.onnx("cu", bad.custom_op())), -300,
         ("UNSUPPORTED OP LIST:", "acme::Fancy", "fancy0")),
    Case("onnx-zero-size-dims-convert", CONVERT,
         lambda ws: conv(ws, ws.onnx("z", bad.zero_size()), cfg(ws, "[graph_kernel_param]\nopt_level=2\n")), 0, (),
         ("out/m.ms",)),
    # huge declared dims: beyond 2**63 bytes conversion fails; below, conversion needs no data (it converts) and
    # running must fail cleanly, not try to allocate terabytes
    Case("onnx-dims-beyond-int64", CONVERT, lambda ws: conv(ws, ws.onnx("ovf", bad.relu(shape=(2**40, 2**40)))),
         -500, ("'x'", "2**63")),
    Case("onnx-expand-beyond-int64", CONVERT,
         lambda ws: conv(ws, ws.onnx("ovx", bad.huge_expand(shape=(2**40, 2**40))), cfg(ws, "opt_level=2")), -500,
         ("expand_huge", "too large")),
    Case("onnx-huge-input-converts", CONVERT, lambda ws: conv(ws, ws.onnx("huge", bad.huge_input())), 0, (),
         ("out/m.ms",)),
    Case("run-huge-input", BENCH, lambda ws: bench(ms_of(ws, "huge", bad.huge_input())), -1, ("'x'", "too large")),
    Case("run-huge-expand", BENCH, lambda ws: bench(ms_of(ws, "hexp", bad.huge_expand())), -6, ("hexp.ms", "memory")),
    Case("run-zero-size-dims", BENCH, lambda ws: bench(ms_of(ws, "zero", bad.zero_size())), 0),
    # -- .ms files (benchmark --modelFile) -----------------------------------------------------------------------
    Case("ms-missing", BENCH, lambda ws: bench(ws.path("nope.ms")), -200, ("nope.ms",)),
    Case("ms-empty", BENCH, lambda ws: bench(ws.ms("e", b"")), -200, ("e.ms", "empty")),
    Case("ms-truncated", BENCH, lambda ws: bench(ws.ms("t", ws.good_bytes()[:-100])), -200,
         ("t.ms", "truncated")),
    Case("ms-is-an-onnx-file", BENCH, lambda ws: bench(good(ws)), -200, ("good.onnx", "not a converter_lite")),
    Case("ms-flipped-header", BENCH, lambda ws: bench(ws.ms("h", bad.flip(ws.good_bytes(), 40))), -200,
         ("h.ms", "corrupted")),
    Case("ms-flipped-weights", BENCH,
         lambda ws: bench(ws.ms("w", bad.flip_in_section(ws.good_bytes(), "weights"))), -200,
         ("w.ms", "weights")),
    Case("ms-flipped-native-code", BENCH,
         lambda ws: bench(ws.ms("n", bad.flip_in_section(ws.good_bytes(), "native/lib.so"))), -200,
         ("n.ms", "native/lib.so")),
    Case("ms-other-version", BENCH, lambda ws: bench(ws.ms("v", bad.other_version(ws.good_bytes()))),
         -200, ("v.ms", "version")),
    Case("ms-native-code-for-another-cpu", BENCH,
         lambda ws: bench(bad.foreign_cpu(ws.good_ms(), ws.path("cpu.ms"), missing_cpu_feature())), 0,
         ("rebuilt for this host",)),
    # -- benchmark flags and inputs ------------------------------------------------------------------------------
    Case("bench-missing-modelFile", BENCH, lambda ws: ["--loopCount=1"], -600, ("modelFile",)),
    Case("bench-loopCount-zero", BENCH, lambda ws: [*bench(ws.good_ms())[:1], "--loopCount=0"], -600,
         ("LoopCount",)),
    Case("bench-loopCount-not-int", BENCH, lambda ws: [*bench(ws.good_ms())[:1], "--loopCount=ten"], -600,
         ("--loopCount",)),
    Case("bench-numThreads-zero", BENCH, lambda ws: bench(ws.good_ms(), "--numThreads=0"), -600, ("numThreads",)),
    Case("bench-device-gpu", BENCH, lambda ws: bench(ws.good_ms(), "--device=GPU"), -7, ("--device=GPU",)),
    Case("bench-calibration-missing", BENCH,
         lambda ws: bench(ws.good_ms(), f"--benchmarkDataFile={ws.path('no.out')}"), -1, ("no.out",)),
    Case("bench-unknown-flag", BENCH, lambda ws: bench(ws.good_ms(), "--bogusFlag=1"), -600, ("bogusFlag",)),
    Case("bench-inputs-wrong-count", BENCH,
         lambda ws: bench(ms_of(ws, "two", bad.two_inputs()), in_files(ws, ("x.bin", _f32(2, 3)))), -600,
         ("1 file(s)", "2 input(s)")),
    Case("bench-inputs-wrong-size", BENCH,
         lambda ws: bench(ms_of(ws, "two", bad.two_inputs()), in_files(ws, ("x.bin", _f32(5)), ("n.bin", _i64(3)))),
         -600, ("x.bin", "'x'")),
    Case("bench-inputs-wrong-dtype", BENCH,
         lambda ws: bench(ms_of(ws, "two", bad.two_inputs()), in_files(ws, ("x.npy", _f32(2, 3)), ("n.npy", _f32(3)))),
         -600, ("'n'", "int64")),
    Case("bench-inputs-missing-file", BENCH,
         lambda ws: bench(ms_of(ws, "two", bad.two_inputs()), in_files(ws, ("x.bin", _f32(2, 3)), ("gone.bin", None))),
         -1, ("gone.bin",)),
    Case("bench-inputShapes-contradict", BENCH,
         lambda ws: bench(ms_of(ws, "two", bad.two_inputs()), "--inputShapes=1,3:3"), -600, ("--inputShapes", "2,3")),
]


def _run(tool: str, args: list[str], cwd: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    return subprocess.run([sys.executable, "-m", MODULES[tool], *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300, check=False)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def good_ms_file(tmp_path_factory):
    return converter_lite.convert(bad.two_inputs(), str(tmp_path_factory.mktemp("good") / "good"),
                                  graph_kernel_flags="--opt_level=2")


def test_matrix_is_large_and_ids_are_unique():
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path, good_ms_file):
    ws = Workspace(str(tmp_path), good_ms_file)
    args = case.args(ws)
    before = ws.snapshot()
    r = _run(case.tool, args, ws.work)
    text = (r.stdout + r.stderr).replace(ws.root, "<ws>")     # the tmp path holds the case id: hide it
    where = f"\n$ {case.tool} {' '.join(args)}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    assert "Traceback" not in text, where
    assert r.returncode == (0 if case.code == 0 else 1), where
    if case.tool == CONVERT:
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        expected = "CONVERT RESULT SUCCESS:0" if case.code == 0 else f"CONVERT RESULT FAILED:{case.code} "
        assert last.startswith(expected), where
    else:
        lines = (r.stdout if case.code == 0 else r.stderr).strip().splitlines()
        expected = " Success." if case.code == 0 else f" Failed : {case.code}"
        assert lines and lines[-1].startswith("Run Benchmark ") and lines[-1].endswith(expected), where
    for w in case.words:
        assert w in text, f"{w!r} not in the output" + where
    after = ws.snapshot()
    created = sorted(set(after) - set(before))
    assert created == sorted(case.writes), f"files written: {created}" + where
    assert {k: before[k] for k in before} == {k: after.get(k) for k in before}, "an input file changed" + where
