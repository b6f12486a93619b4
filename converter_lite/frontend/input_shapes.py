"""Input shapes at import: ``--inputShape`` parsing, which declared dims are dynamic (-1, 0, '?', empty, named:
only a positive dim_value is fixed), and the -600 that names the inputs to give when dims defaulted to 1 break
shape inference (``explain_defaulted_dims``, called once by the pipeline)."""
from __future__ import annotations

from ..errors import RET_INFER_ERR, RET_INPUT_PARAM_INVALID, ConverterError
from .protos import load_onnx


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


def _dim_placeholder(d, axis: int) -> str:
    """What a user must write for a dynamic dim in a hint: its name when it is a plain identifier, else ``D<axis>``."""
    if isinstance(d, str) and d.isidentifier():
        return d
    return f"D{axis}"


def _hint_dims(dims: list) -> list[str]:
    return [str(d) if _fixed_dim(d) else _dim_placeholder(d, i) for i, d in enumerate(dims)]


def _shape_flag_hint(name: str, dims: list) -> str:
    return f"{name}:{','.join(_hint_dims(dims))}"


def _where_of(model) -> str:
    """How errors name a model given as a path or a ModelProto."""
    where = model if isinstance(model, str) else getattr(model, "graph", None) and model.graph.name or "model"
    return str(where)


def defaulted_inputs(model, input_shapes: dict | None = None) -> list[tuple[str, list]]:
    """(name, declared dims) of each graph input whose dynamic dims the import sets to 1 because ``input_shapes``
    does not give it (see ``_GraphImporter._inputs``)."""
    proto = load_onnx(model)
    given = input_shapes or {}
    inits = {t.name for t in proto.graph.initializer}
    out = []
    for vi in proto.graph.input:
        if vi.name in given or vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        dims = [int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
        if not all(_fixed_dim(d) for d in dims):
            out.append((vi.name, dims))
    return out


def explain_defaulted_dims(error: ConverterError, model, input_shapes: dict | None = None) -> ConverterError:
    """A shape-inference failure (-500) of a model whose dynamic input dims were defaulted to 1 is most likely
    the user's to fix: -600 naming those inputs and the ``--inputShape`` to pass, the original message kept.
    Any other error, or one where no input was defaulted, comes back unchanged."""
    if error.code != RET_INFER_ERR:
        return error
    try:
        defaulted = defaulted_inputs(model, input_shapes)
    except ConverterError:
        return error
    if not defaulted:
        return error
    where = _where_of(model)
    detail = error.message
    if detail.startswith(f"{where}: "):
        detail = detail[len(where) + 2:]
    if len(defaulted) == 1:
        name, dims = defaulted[0]
        who = f"input {name!r} has dynamic dims {[_dim_label(d) for d in dims if not _fixed_dim(d)]}"
    else:
        who = "inputs " + ", ".join(f"{name!r} {[_dim_label(d) for d in dims if not _fixed_dim(d)]}"
                                    for name, dims in defaulted) + " have dynamic dims"
    flag = ";".join(_shape_flag_hint(name, dims) for name, dims in defaulted)
    if len(defaulted) > 1:
        flag = f'"{flag}"'
    api = ", ".join(f"{name!r}: [{', '.join(_hint_dims(dims))}]" for name, dims in defaulted)
    return ConverterError(RET_INPUT_PARAM_INVALID, f"{where}: {who} (defaulted to 1); with those defaults: "
                                                   f"{detail}; give them with --inputShape={flag} (API: "
                                                   f"input_shape={{{api}}})")
