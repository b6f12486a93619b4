"""``--inputValue`` / ``input_value=``: fix a graph input's value at conversion (value specialization).

MindSpore-style syntax ``name:v;name2:v0,v1`` (the last ``:`` splits the name from the values).  The input stays
an input of the model, so feeds keep their names, but every node reads the constant instead, so an If on it
folds and the graph fuses flat.  The values are recorded in the graph's metadata (``input_values``); the runtime
guards them: a run feeding another value fails with -600 naming the input (runtime/model.py).
"""
from __future__ import annotations

import json

import numpy as np

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
from ..ir.core import TensorType, Value

METADATA_KEY = "input_values"


def parse_input_values(text) -> dict[str, tuple]:
    """``"sr:16000;gain:0.5"`` (or a dict name -> number/sequence/array) -> {name: tuple of numbers}."""
    if isinstance(text, dict):
        out = {}
        for name, v in text.items():
            flat = np.asarray(v).reshape(-1).tolist()
            if not flat or not all(isinstance(x, (int, float, bool)) for x in flat):
                raise ConverterError(RET_INPUT_PARAM_INVALID, f"input_value: {name!r} must be a number or a list "
                                                              f"of numbers, got {v!r}")
            out[str(name)] = tuple(flat)
        return out
    values: dict[str, tuple] = {}
    for item in filter(None, (s.strip() for s in str(text).split(";"))):
        name, sep, vals = item.rpartition(":")
        if not sep or not name or not vals:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue: {item!r} is not of the form name:value")
        try:
            values[name] = tuple(_number(v) for v in vals.split(","))
        except ValueError:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue: value {vals!r} of input {name!r} is not "
                                                          "a number (or comma-separated numbers)") from None
    return values


def _number(text: str):
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def fix_input_values(graph, env: dict, values: dict[str, tuple], where: str) -> None:
    """Makes every node read the constant value of each input in ``values`` (``env``: the importer's name ->
    Value table, before any node is imported); records the values in ``graph.metadata``."""
    inputs = {v.name: v for v in graph.inputs}
    unknown = sorted(set(values) - set(inputs))
    if unknown:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue names {', '.join(unknown)}, which is not an "
                                                      f"input of {where} (inputs: {', '.join(inputs) or 'none'})")
    recorded = {}
    for name, vals in values.items():
        t: TensorType = inputs[name].type
        if not t.is_tensor or t.shape is None:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue: input {name!r} is a {t}; only tensors "
                                                          "of a known shape can be fixed")
        if len(vals) != t.size:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue gives {len(vals)} value(s) for input "
                                                          f"{name!r}, which holds {t.size} ({t})")
        dtype = t.dtype.np
        arr = np.array(vals, dtype=np.float64 if dtype.kind == "f" else object)
        if dtype.kind in "iub" and any(float(x) != int(x) for x in vals):
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue: input {name!r} is {t.dtype.name}; "
                                                          f"{list(vals)} are not all integers")
        try:
            arr = np.array([int(x) for x in vals] if dtype.kind in "iub" else arr, dtype=dtype).reshape(t.shape)
        except OverflowError:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputValue: {list(vals)} do not fit input {name!r} "
                                                          f"({t.dtype.name})") from None
        env[name] = Value(name, const=arr)
        recorded[name] = arr.reshape(-1).tolist()
    graph.metadata[METADATA_KEY] = json.dumps(recorded)
