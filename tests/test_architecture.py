"""The layering of converter_lite, checked on every `make test` (issue 15).

The data flows top to bottom::

    api, cli, toolchain          what users call; the converter side handed to the runtime
    pipeline -> frontend, passes the converter (onnx only in frontend/)
    codegen                      llvmlite: fused-kernel lowering and the build (kernels/*/emit.py beside it)
    runtime                      the engine: load, plan, arena, threads, native library; numpy kernels
    kernels                      one folder per hand-written native driver: abi (record), emit, bind
    model                        the .ms format
    ops                          the op catalogue: reference kernels, shape inference, builder, verifier
    ir                           graphs, values, dtypes (a leaf)

The contract (``RULES``): no cycle between packages; ``ir`` imports no other package; the runtime imports none
of the converter (pipeline, passes, frontend, codegen, config, cli, api, toolchain), not even lazily; codegen
imports no runtime and no driver package (the converter hands it the drivers' emitters); a driver's ABI record
and binder import no llvmlite and no codegen; llvmlite only in codegen/ and kernels/*/emit*.py (an emitter may be
split: kernels/qconv/emit_channels.py, emit_epilogue.py), onnx only in
frontend/, onnxruntime only in cli/ and frontend/full_quant.py (FULL_QUANT's static quantizer).  Every import counts, also one inside a function: a lazy import is still a dependency.
"""
from __future__ import annotations

import ast
import fnmatch
import os
import subprocess
import sys
from collections import defaultdict

import pytest

PACKAGE = "converter_lite"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)

CONVERTER = {"pipeline", "passes", "frontend", "codegen", "config", "cli", "api", "toolchain"}
LEAVES = {"errors", "version", "fileio", "tables"}   # leaf modules every layer may use
# unit -> the units it must not import (a unit is a top-level package or module of converter_lite)
RULES: dict[str, set[str]] = {
    "ir": "ALL",                                # only LEAVES
    "ops": CONVERTER | {"runtime", "kernels", "model"},
    "model": CONVERTER | {"runtime", "kernels", "ops"},
    "kernels": {"runtime"} | CONVERTER - {"codegen"},     # emit.py may use the codegen toolkit (checked below)
    "runtime": CONVERTER,
    "codegen": {"runtime", "kernels", "passes", "pipeline", "frontend", "cli", "api", "toolchain", "config"},
}
THIRD_PARTY = {            # third-party package -> the modules allowed to import it (prefixes of dotted names)
    "llvmlite": ("converter_lite.codegen", "converter_lite.kernels.*.emit*"),
    "onnx": ("converter_lite.frontend",),
    # FULL_QUANT: onnxruntime's static quantizer writes the QDQ model the importer reads
    "onnxruntime": ("converter_lite.cli", "converter_lite.frontend.full_quant"),
}


def _modules() -> dict[str, str]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for dirpath, _dirs, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                found[rel.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(module: str, path: str) -> list[tuple[str, int]]:
    """(imported dotted name, line) for every import in the file, relative ones resolved; ``from X import y``
    yields X.y when that is a module of ours, else X."""
    is_pkg = path.endswith("__init__.py")
    package = module if is_pkg else module.rpartition(".")[0]
    out = []
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub if sub in MODULES else target, node.lineno))
    return out


EDGES = {m: _imports(m, p) for m, p in MODULES.items()}


def _unit(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else "<root>"


def _unit_graph() -> dict[str, set[str]]:
    graph = defaultdict(set)
    for m, imports in EDGES.items():
        for target, _ in imports:
            a, b = _unit(m), _unit(target)
            if b is not None and a != b and a != "<root>":
                graph[a].add(b)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_import_scanner_sees_the_package():
    assert "converter_lite.ir.core" in MODULES and "converter_lite.runtime.model" in MODULES
    assert any(t == "converter_lite.ir.core" for t, _ in EDGES["converter_lite.ops.registry"])


def test_no_cycle_between_packages():
    assert _cycle(_unit_graph()) is None, f"package cycle: {' -> '.join(_cycle(_unit_graph()))}"


def test_no_cycle_between_subpackages():
    """The same one level down (passes.fuse -> passes.expand and back would be a cycle)."""
    graph = defaultdict(set)
    for m, imports in EDGES.items():
        for target, _ in imports:
            if target.startswith(PACKAGE + ".") and target.split(".")[:3] != m.split(".")[:3]:
                a, b = ".".join(m.split(".")[:3]), ".".join(target.split(".")[:3])
                if a in MODULES and b in MODULES and (MODULES[a].endswith("__init__.py")
                                                      or MODULES[b].endswith("__init__.py")):
                    graph[a].add(b)
    cycle = _cycle(graph)
    assert cycle is None, f"subpackage cycle: {' -> '.join(cycle)}"


@pytest.mark.parametrize("unit", sorted(RULES))
def test_layer_imports_nothing_above_it(unit):
    banned = RULES[unit]
    bad = []
    for m, imports in EDGES.items():
        if _unit(m) != unit:
            continue
        for target, line in imports:
            t = _unit(target)
            if t is None or t == unit or t in LEAVES:
                continue
            if banned == "ALL" or t in banned:
                if unit == "kernels" and t == "codegen":
                    continue                    # checked per file by test_driver_abi_and_binders_...
                bad.append(f"{MODULES[m]}:{line} imports {target}")
    assert not bad, f"{unit} must not import these:\n" + "\n".join(bad)


def test_driver_abi_and_binders_import_no_codegen_or_llvmlite():
    """Only a driver's emit*.py may use llvmlite and the codegen toolkit: the runtime imports abi/bind."""
    bad = []
    for m, imports in EDGES.items():
        parts = m.split(".")
        if _unit(m) != "kernels" or parts[-1].startswith("emit"):
            continue
        for target, line in imports:
            if target.split(".")[0] == "llvmlite" or _unit(target) == "codegen" or \
                    target.split(".")[-1].startswith("emit"):
                bad.append(f"{MODULES[m]}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def _allowed(module: str, patterns: tuple[str, ...]) -> bool:
    parts = module.split(".")
    for p in patterns:
        pp = p.split(".")
        if len(parts) >= len(pp) and all(fnmatch.fnmatchcase(b, a) for a, b in zip(pp, parts)):
            return True
    return False


@pytest.mark.parametrize("lib", sorted(THIRD_PARTY))
def test_third_party_boundaries(lib):
    bad = [f"{MODULES[m]}:{line} imports {target}" for m, imports in EDGES.items() for target, line in imports
           if target.split(".")[0] == lib and not _allowed(m, THIRD_PARTY[lib])]
    assert not bad, f"{lib} may be imported only by {THIRD_PARTY[lib]}:\n" + "\n".join(bad)


def _closure(start: str) -> set[str]:
    """Every module of ours reachable from ``start`` through imports (lazy ones included)."""
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m in seen or m not in MODULES:
            continue
        seen.add(m)
        for target, _ in EDGES[m]:
            # importing a.b.c runs a/__init__ and a/b/__init__ too
            parts = target.split(".")
            todo += [".".join(parts[:k]) for k in range(2, len(parts) + 1)]
    return seen


def test_runtime_reaches_no_converter_code_even_indirectly():
    """What ``converter_lite.runtime`` can ever import (following every import, lazy ones too) holds no
    converter package and no llvmlite/onnx: a deployment machine needs numpy only."""
    reach = _closure("converter_lite.runtime")
    bad = sorted(m for m in reach if _unit(m) in CONVERTER or (_unit(m) == "kernels" and m.endswith(".emit")))
    assert not bad, bad
    third = {t.split(".")[0] for m in reach for t, _ in EDGES[m]}
    assert not third & {"llvmlite", "onnx", "onnxruntime"}, third & {"llvmlite", "onnx", "onnxruntime"}


def test_a_rule_break_is_caught(tmp_path):
    """The checker itself: a graph with a cycle is reported, and a banned import is seen."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from ..codegen import build\n")
    MODULES["converter_lite.runtime.fake_m"] = str(p)
    try:
        found = _imports("converter_lite.runtime.fake_m", str(p))
    finally:
        del MODULES["converter_lite.runtime.fake_m"]
    assert found == [("converter_lite.codegen.build", 2)]


def test_loading_and_running_needs_no_converter_modules(tmp_path):
    """A converted model with native code loads and runs through ``converter_lite.runtime`` while importing
    llvmlite, onnx, codegen, passes, pipeline or frontend is impossible (blocked in sys.modules)."""
    from converter_lite.api import convert
    model = os.path.join(os.path.dirname(ROOT), "models", "conv_net.onnx")
    cfg = tmp_path / "akg.cfg"
    cfg.write_text("[graph_kernel_param]\nopt_level=2\n")
    ms = convert(model, str(tmp_path / "m"), config_file=str(cfg))
    # the package root imports api.py, which imports the converter only inside convert()
    blocked = ["llvmlite", "onnx", "onnxruntime"] + [f"{PACKAGE}.{u}" for u in sorted(CONVERTER - {"api"})]
    code = ("import sys\n"
            f"for name in {blocked!r}: sys.modules[name] = None\n"
            "import numpy as np\n"
            "from converter_lite.runtime import load\n"
            f"m = load({ms!r})\n"
            "assert m.uses_native_code\n"
            "feeds = {n: np.ones(t.shape, t.dtype.np) for n, t in zip(m.input_names, m.input_types)}\n"
            "out = m.run(feeds)\n"
            "assert all(np.isfinite(v).all() for v in out.values())\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]


def test_no_cycle_between_modules():
    """Not even two modules of one package import each other (lazy imports included): each idea has a
    direction."""
    graph = defaultdict(set)
    for m, imports in EDGES.items():
        for target, _ in imports:
            if target in MODULES and target != m and not MODULES[target].endswith("__init__.py") \
                    and not MODULES[m].endswith("__init__.py"):
                graph[m].add(target)
    cycle = _cycle(graph)
    assert cycle is None, f"module cycle: {' -> '.join(cycle)}"
