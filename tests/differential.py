"""The differential check used by the fuzz test and its regression tests: onnxruntime (ORT_DISABLE_ALL) is the
oracle; converter_lite converts the model at each opt_level, loads the ``.ms`` and runs it on the same inputs.

Tolerances: float32 rtol 1e-4 / atol 1e-5, values that went through float16 arithmetic rtol/atol 1e-2, integers
and bools exact, NaN == NaN.  An element outside the float tolerance still passes when the graph is ill-conditioned
there: the model is also run by onnxruntime in float64 (every float32 tensor made float64; Erf, which has no
float64 kernel, computed in float32) and our value is no further from the float64 result than 4x onnxruntime's
own float32 error.  A real bug is wrong by far more than the float32 noise of the computation.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import traceback

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnx.printer
from helpers import run_ort

import converter_lite

LEVELS = (0, 1, 2, 3)
F32_TOL = (1e-4, 1e-5)
LOOSE_TOL = (1e-2, 1e-2)
FLOAT, DOUBLE, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16


class FuzzFailure(AssertionError):
    pass


def float64_model(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """``model`` with float32 replaced by float64, or None if it uses float16 (no faithful float64 twin)."""
    g = model.graph
    infos = [*g.input, *g.output, *g.value_info]
    if (any(v.type.tensor_type.elem_type == FLOAT16 for v in infos)
            or any(t.data_type == FLOAT16 for t in g.initializer)
            or any(n.op_type == "Cast" and n.attribute[0].i == FLOAT16 for n in g.node)):
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for v in [*g.input, *g.output, *g.value_info]:
        if v.type.tensor_type.elem_type == FLOAT:
            v.type.tensor_type.elem_type = DOUBLE
    for t in g.initializer:
        if t.data_type == FLOAT:
            t.CopyFrom(onh.from_array(onh.to_array(t).astype(np.float64), t.name))
    nodes = []
    for n in g.node:
        if n.op_type == "Cast" and n.attribute[0].i == FLOAT:
            n.attribute[0].i = DOUBLE
        if n.op_type == "Erf":
            tmp_in, tmp_out = n.input[0] + "__f32_" + n.name, n.output[0] + "__f32_" + n.name
            nodes += [oh.make_node("Cast", [n.input[0]], [tmp_in], to=FLOAT),
                      oh.make_node("Erf", [tmp_in], [tmp_out]),
                      oh.make_node("Cast", [tmp_out], [n.output[0]], to=DOUBLE)]
            continue
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    return m


def reference(model: onnx.ModelProto, feeds: dict) -> tuple[list, list | None]:
    """onnxruntime's float32 outputs and (when there is a float64 twin) the float64 ones."""
    ref32 = run_ort(model, feeds)
    m64 = float64_model(model)
    if m64 is None:
        return ref32, None
    feeds64 = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    return ref32, run_ort(m64, feeds64)


def mismatch(ours: np.ndarray, ref32: np.ndarray, ref64: np.ndarray | None, loose: bool) -> str | None:
    """Why ``ours`` does not match the reference, or None."""
    ours = np.asarray(ours)
    if ours.dtype != ref32.dtype or ours.shape != ref32.shape:
        return f"got {ours.dtype}{list(ours.shape)}, expected {ref32.dtype}{list(ref32.shape)}"
    if ours.dtype.kind not in "fc":
        bad = ours != ref32
    else:
        rtol, atol = LOOSE_TOL if loose or ours.dtype == np.float16 else F32_TOL
        o, e = ours.astype(np.float64), ref32.astype(np.float64)
        bad = ~np.isclose(o, e, rtol=rtol, atol=atol, equal_nan=True)
        if ref64 is not None and bad.any():
            noise = np.abs(e - ref64)
            bad &= ~(np.abs(o - ref64) <= atol + rtol * np.abs(ref64) + 4 * noise)
    if not np.any(bad):
        return None
    idx = np.argwhere(np.atleast_1d(bad))[0]
    at = tuple(int(i) for i in idx) if ours.ndim else ()
    return (f"{int(np.sum(bad))} of {ours.size} elements differ; first at {list(at)}: got {ours[at]!r}, "
            f"expected {ref32[at]!r}")


def run_converted(model: onnx.ModelProto, feeds: dict, level: int, workdir: str, on_load=None) -> dict:
    ms = converter_lite.convert(model, os.path.join(workdir, f"fuzz_l{level}"),
                                graph_kernel_flags=f"--opt_level={level}")
    loaded = converter_lite.load(ms)
    if on_load is not None:
        on_load(level, loaded)
    return loaded.run(feeds)


def _save(model: onnx.ModelProto, feeds: dict) -> str | None:
    """Keeps a failing case in $FUZZ_FAILURE_DIR (model + inputs) for minimising by hand."""
    d = os.environ.get("FUZZ_FAILURE_DIR")
    if not d:
        return None
    os.makedirs(d, exist_ok=True)
    data = model.SerializeToString()
    base = os.path.join(d, hashlib.sha1(data).hexdigest()[:12])
    with open(base + ".onnx", "wb") as f:
        f.write(data)
    np.savez(base + ".npz", **feeds)
    return base


def check_case(model: onnx.ModelProto, feeds: dict, loose: dict[str, bool] | None = None, levels=LEVELS,
               on_load=None) -> None:
    """Raises FuzzFailure naming the opt_level, output and difference (with the graph as text).
    ``on_load(level, model)`` sees each loaded converted model (statistics)."""
    try:
        onnx.checker.check_model(model, full_check=True)
        ref32, ref64 = reference(model, feeds)
    except Exception as e:          # an invalid test model: a bug of the generator or the test, not ours
        raise AssertionError(f"invalid test model ({e})\n{onnx.printer.to_text(model)}") from e
    names = [o.name for o in model.graph.output]
    problems = []
    with tempfile.TemporaryDirectory(prefix="fuzz_") as workdir:
        for level in levels:
            try:
                ours = run_converted(model, feeds, level, workdir, on_load)
            except Exception:  # noqa: BLE001  (any crash is a finding, reported with its traceback)
                problems.append(f"opt_level {level}: crashed:\n{traceback.format_exc(limit=-6)}")
                continue
            if list(ours) != names:
                problems.append(f"opt_level {level}: outputs {list(ours)}, expected {names}")
                continue
            for i, name in enumerate(names):
                why = mismatch(ours[name], ref32[i], None if ref64 is None else ref64[i],
                               (loose or {}).get(name, False))
                if why:
                    problems.append(f"opt_level {level}: output {name}: {why}")
    if problems:
        saved = _save(model, feeds)
        feeds_txt = "\n".join(f"  {k} = {v.dtype}{list(v.shape)} {np.array2string(v.ravel()[:12])}"
                              for k, v in feeds.items())
        raise FuzzFailure("\n".join(problems) + f"\n--- graph ---\n{onnx.printer.to_text(model)}\n--- inputs ---\n"
                          + feeds_txt + (f"\nsaved as {saved}.onnx/.npz" if saved else ""))
