"""Benchmark input data: random (seeded) inputs, input files (.bin raw / .npy / one .npz), --inputShapes.

Random data follows MindSpore's benchmark where it is sensible: floats uniform in [0.1, 1.0) (positive, so Log,
Sqrt and divisions stay finite; rounded to the type, so a low-precision float may reach 0 or 1.0), integers
uniform in [0, 100) clipped to the dtype (int4 [0, 8), uint4 [0, 16)), bools uniform.  An integer
input read as indices by Gather/GatherElements gets the indexed axis as its upper bound, and the model's
metadata may override any input's range with ``"input_ranges": {"name": [low, high]}``.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from ..errors import RET_ERROR, RET_INPUT_PARAM_INVALID, ConverterError
from ..ir.core import Graph, TensorType, Value
from ..ir.dtype import DType

log = logging.getLogger("converter_lite.benchmark")
FLOAT_RANGE = (0.1, 1.0)
INT_RANGE = (0, 100)
# op type -> index of the input that holds indices into input 0 along attrs["axis"] (default 0)
INDEX_INPUTS = {"Gather": 1, "GatherElements": 1}


def _bad(message: str) -> ConverterError:
    return ConverterError(RET_INPUT_PARAM_INVALID, message)


def input_type(model, value: Value, shapes: dict | None) -> TensorType:
    """``value``'s type with the shape ``--inputShapes`` gives it (``shapes``); an input of dynamic dims without
    one runs with each dynamic dim at its lower bound (at least 1), with a warning naming the flag."""
    t: TensorType = value.type
    if shapes and value.name in shapes:
        return TensorType(t.dtype, tuple(shapes[value.name]), t.kind)
    if t.is_tensor and t.shape is None:
        dims = getattr(model, "_dims", None)
        shape = dims.default_shape(value.name) if dims is not None else None
        if shape is None:
            raise _bad(f"input {value.name!r} has no shape known before run time: give it with --inputShapes")
        log.warning("input %r has dynamic dims %s: running at %s (give --inputShapes to choose)", value.name,
                    model.input_shapes.get(value.name), ",".join(map(str, shape)))
        return TensorType(t.dtype, shape, t.kind)
    return t


def random_inputs(model, seed: int = 0, shapes: dict | None = None) -> dict[str, np.ndarray]:
    """One reproducible random array per model input (see the module docstring for the ranges); ``shapes``:
    the inputs' shapes from ``--inputShapes`` (``check_input_shapes``)."""
    rng = np.random.default_rng(seed)
    ranges = model.metadata.get("input_ranges") or {}
    feeds = {}
    for value in model.graph.inputs:
        t: TensorType = input_type(model, value, shapes)
        low, high = ranges.get(value.name) or _default_range(value)
        try:
            feeds[value.name] = random_value(rng, t, low, high)
        except MemoryError as e:        # e.g. a declared dim of 10**12: fail cleanly, naming the input
            raise ConverterError(RET_ERROR, f"input {value.name!r} ({t}) is too large to allocate on this host: "
                                            f"{e}") from None
    return feeds


SEQUENCE_ELEMENTS = 3
ELEMENT_SHAPE = (4,)     # a sequence's or optional's elements have no declared shape: small vectors


def random_value(rng: np.random.Generator, t: TensorType, low: float, high: float):
    """A random feed of ``t``'s kind: an array, a list of arrays for a sequence, the element for an optional."""
    if t.is_tensor:
        return random_array(rng, t, low, high)
    elem = TensorType(t.dtype, ELEMENT_SHAPE)
    if t.kind.endswith("sequence"):
        return [random_array(rng, elem, low, high) for _ in range(SEQUENCE_ELEMENTS)]
    return random_array(rng, elem, low, high)


def random_array(rng: np.random.Generator, t: TensorType, low: float, high: float) -> np.ndarray:
    dt = t.dtype
    if dt is DType.bool:
        return rng.integers(0, 2, size=t.shape).astype(np.bool_)
    if dt.is_float:
        return rng.uniform(low, high, size=t.shape).astype(dt.np)
    if dt is DType.string:
        return np.array(rng.integers(0, 100, size=t.shape).astype(str), dtype=object)
    info = ml_dtypes.iinfo(dt.np)                  # numpy's iinfo does not know int4/uint4
    lo, hi = max(int(low), info.min), min(int(high), info.max + 1)
    if hi <= lo:
        hi = lo + 1
    drawn = np.int8 if dt.is_low_precision else dt.np   # int4/uint4: drawn as int8, then narrowed
    return rng.integers(lo, hi, size=t.shape, dtype=drawn).astype(dt.np, copy=False)


def _default_range(value: Value) -> tuple[float, float]:
    if value.type.dtype.is_float:
        return FLOAT_RANGE
    low, high = INT_RANGE
    for node, i in _readers(value):
        if INDEX_INPUTS.get(node.op) == i and node.inputs[0] is not None and node.inputs[0].type is not None:
            data_shape = node.inputs[0].type.shape
            axis = node.attrs.get("axis", 0)
            if data_shape and -len(data_shape) <= axis < len(data_shape):
                high = min(high, max(int(data_shape[axis]), 1))
    return low, high


def _readers(value: Value, depth: int = 0):
    """``value``'s (node, input position) uses, following it into control-flow bodies: a body's inputs line up
    with its node's (an If's branches start after the condition, an opset-8 Scan's body after sequence_lens)."""
    for node, i in value.uses:
        yield node, i
        if node.op == "GraphKernel" or depth > 8:
            continue
        skip = 1 if node.op == "If" or node.attrs.get("legacy_batch") else 0
        for body in [a for a in node.attrs.values() if isinstance(a, Graph)]:
            if 0 <= i - skip < len(body.inputs):
                yield from _readers(body.inputs[i - skip], depth + 1)


def read_input_files(model, paths: Sequence[str], shapes: dict | None = None) -> dict[str, np.ndarray]:
    """Reads ``--inDataFile``: one raw little-endian file (any extension but .npy/.npz) or .npy file per input
    in input order, or a single .npz keyed by input name.  Dtypes and sizes must match the model exactly (for
    an input of dynamic dims: the shape ``--inputShapes`` gives, or any shape from a .npy/.npz file)."""
    inputs: list[Value] = [_typed(model, v, shapes) for v in model.graph.inputs]
    names = [v.name for v in inputs]
    if len(paths) == 1 and paths[0].lower().endswith(".npz"):
        return _read_npz(paths[0], inputs)
    if any(p.lower().endswith(".npz") for p in paths):
        raise _bad("--inDataFile: an .npz file must be the only input file (it holds every input by name)")
    if len(paths) != len(inputs):
        raise _bad(f"--inDataFile has {len(paths)} file(s) but the model has {len(inputs)} input(s): "
                   f"{', '.join(names)}")
    feeds = {}
    for path, value in zip(paths, inputs):
        if not value.type.is_tensor:
            raise _bad(f"input {value.name!r} is a {value.type.kind}; --inDataFile gives tensors only (feed "
                       "sequences and optionals through the Python API)")
        if path.lower().endswith(".npy"):
            feeds[value.name] = _check(np.load(path, allow_pickle=False), value, path)
        else:
            feeds[value.name] = _read_raw(path, value)
    return feeds


def _typed(model, value: Value, shapes: dict | None) -> Value:
    """``value`` as the input files are checked against: its shape from ``shapes`` where given (a stand-in
    Value; a dynamic input without a given shape keeps ``shape=None``: .npy/.npz files give it)."""
    if shapes and value.name in shapes:
        return Value(value.name, input_type(model, value, shapes))
    return value


def _read_raw(path: str, value: Value) -> np.ndarray:
    t = value.type
    if t.dtype is DType.string:
        raise _bad(f"input {value.name!r} is a string tensor; give it as .npy or .npz, not raw binary")
    if t.shape is None:
        raise _bad(f"input {value.name!r} has dynamic dims: a raw file needs its shape from --inputShapes (or "
                   "give a .npy/.npz file, which holds its shape)")
    size = os.path.getsize(path)
    if size != t.nbytes:
        raise _bad(f"input file {path} has {size} bytes; input {value.name!r} ({t}) needs {t.nbytes} bytes of "
                   f"raw little-endian {t.dtype.name}")
    with open(path, "rb") as f:
        data = f.read()
    return np.frombuffer(data, dtype=t.dtype.np.newbyteorder("<")).astype(t.dtype.np, copy=False).reshape(t.shape)


def _read_npz(path: str, inputs: list[Value]) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    names = [v.name for v in inputs]
    if set(arrays) != set(names):
        positional = [f"arr_{i}" for i in range(len(inputs))]
        if sorted(arrays) == sorted(positional):       # np.savez(path, a, b): take them in input order
            arrays = {v.name: arrays[k] for v, k in zip(inputs, positional)}
        else:
            missing = [n for n in names if n not in arrays]
            extra = [k for k in arrays if k not in names]
            raise _bad(f"--inDataFile {path}: keys must be the model's input names ({', '.join(names)}); "
                       f"missing: {', '.join(missing) or '-'}; unknown: {', '.join(extra) or '-'}")
    return {v.name: _check(arrays[v.name], v, path) for v in inputs}


def _check(array: np.ndarray, value: Value, path: str) -> np.ndarray:
    t = value.type
    if t.dtype is DType.string:
        ok = array.dtype.kind in "OUS"
    else:
        ok = array.dtype == t.dtype.np
    if not ok:
        raise _bad(f"input file {path}: input {value.name!r} needs dtype {t.dtype.name} ({t}), the file has "
                   f"{array.dtype}")
    if t.shape is not None and tuple(array.shape) != t.shape:
        raise _bad(f"input file {path}: input {value.name!r} needs shape {list(t.shape)} ({t}), the file has "
                   f"{list(array.shape)}")
    return array


def parse_input_shapes(spec: str) -> list[tuple[int, ...]]:
    """MindSpore's ``--inputShapes``: dims separated by ``,``, inputs by ``:`` (``1,3,224,224:1,128``)."""
    shapes = []
    for part in spec.split(":"):
        part = part.strip()
        try:
            shapes.append(tuple(int(d) for d in part.split(",")) if part else ())
        except ValueError:
            raise _bad(f"--inputShapes={spec}: {part!r} is not a comma-separated list of integers") from None
    return shapes


def check_input_shapes(model, spec: str):
    """``--inputShapes`` -> (the model to run, ``{input: shape}`` or None).  A model with dynamic dims runs at any
    shape it admits (checked here: -600 naming the input and dim); the plan for them is built now (``resize``),
    not in the first timed run.  A static model needs the converted shapes, except on the axes the source model
    left dynamic, where it is specialized again (``Model.specialized``, runtime/respecialize.py)."""
    shapes = parse_input_shapes(spec)
    inputs = list(model.graph.inputs)
    if len(shapes) != len(inputs):
        raise _bad(f"--inputShapes={spec} gives {len(shapes)} shape(s) but the model has {len(inputs)} input(s): "
                   + ", ".join(f"{n} {d}" for n, d in model.input_shapes.items()))
    if getattr(model, "_shape_plans", None) is not None:
        given = {v.name: shape for shape, v in zip(shapes, inputs)}
        model.resize(given)
        return model, given
    if getattr(model, "_reshaper", None) is not None:
        return model.specialized({v.name: shape for shape, v in zip(shapes, inputs)}), None
    for shape, v in zip(shapes, inputs):
        if shape != v.type.shape:
            raise _bad(f"--inputShapes: input {v.name!r} has the static shape {','.join(map(str, v.type.shape))}, "
                       f"not {','.join(map(str, shape))}; shapes are fixed at conversion "
                       "(re-convert with converter_lite --inputShape to change them)")
    return model, None
