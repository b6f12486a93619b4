"""Input shapes at import: ``--inputShape`` parsing (fixed dims and ranges ``lo-hi``), and which declared dims
are dynamic (-1, 0, '?', empty, named: only a positive dim_value is fixed).  Dims left dynamic are recorded as
symbols (ir/input_dims.py) by the importer."""
from __future__ import annotations

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError


def parse_input_shapes(text: str) -> dict[str, tuple]:
    """MindSpore ``--inputShape`` syntax: ``name:d0,d1;name2:d0`` (the last ``:`` splits name from dims).  A dim
    may be a range ``lo-hi`` (a tuple ``(lo, hi)`` here): it bounds a dynamic dim instead of fixing it."""
    shapes: dict[str, tuple] = {}
    for item in filter(None, (s.strip() for s in text.split(";"))):
        name, sep, dims = item.rpartition(":")
        if not sep or not name or not dims:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"--inputShape: {item!r} is not of the form name:d0,d1,...")
        shapes[name] = tuple(_parse_dim(d.strip(), name) for d in dims.split(","))
    return shapes


def _parse_dim(text: str, name: str):
    lo, sep, hi = text.partition("-") if not text.startswith("-") else ("", "", "")
    try:
        if sep:
            bounds = (int(lo), int(hi))
        else:
            value = int(text)
    except ValueError:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputShape: dims of input {name!r} are not integers (or "
                                                      f"ranges lo-hi): {text!r}") from None
    if sep:
        if bounds[0] < 0 or bounds[1] < bounds[0]:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputShape: range {text!r} of input {name!r} is empty "
                                                          "or negative (write lo-hi with 0 <= lo <= hi)")
        return bounds
    if value < 0:
        raise ConverterError(RET_INPUT_PARAM_INVALID, f"--inputShape: input {name!r} has a negative dim")
    return value


def is_range(d) -> bool:
    return isinstance(d, tuple)


def _fixed_dim(d) -> bool:
    """Only a positive dim_value fixes a dim of a graph input: -1 and 0 (older exporters' "unknown"), ``'?'``, an
    empty dim (neither dim_value nor dim_param) and a named dim_param are all dynamic."""
    return isinstance(d, int) and d > 0


def _dim_label(d):
    """A declared dim as messages show it: its value or name, ``'?'`` for an empty one."""
    return "?" if d is None else d


def _dims_text(dims: list) -> list:
    return [_dim_label(d) for d in dims]


def _where_of(model) -> str:
    """How errors name a model given as a path or a ModelProto."""
    where = model if isinstance(model, str) else getattr(model, "graph", None) and model.graph.name or "model"
    return str(where)
