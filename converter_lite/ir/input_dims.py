"""Symbolic input dims: what shapes a model with dynamic dims admits, recorded at conversion, checked at run time.

A model converted without ``--inputShape`` for its dynamic dims keeps them dynamic: its graph input has
``shape=None`` and the graph's metadata ``input_dims`` (stored in the ``.ms``) says, per input, each dim: a
fixed ``int``, or a ``Dim`` symbol (the ONNX ``dim_param`` name, or ``<input>_d<axis>`` for ``-1``/``0``/``?``/
an empty dim) with an optional range ``[lo, hi]`` given as ``--inputShape=x:1,1-512``.

``InputDims.check(name, shape)`` is the run-time admission check (-600 naming the input and dim: wrong rank,
a fixed dim changed, a dim outside its range, a negative dim).  Several inputs naming the same symbol are not
required to agree (onnxruntime does not require it either): a model that does need it fails in the kernel that
combines them, naming that node.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError

METADATA_KEY = "input_dims"
WARM_KEY = "warm_shapes"        # small input shapes the model admits: a warm-up plan at load (runtime/model.py)


@dataclass(frozen=True)
class Dim:
    """A dynamic dim: its symbol and inclusive range (``hi`` None: unbounded)."""
    name: str
    lo: int = 0
    hi: int | None = None

    def admits(self, n: int) -> bool:
        return n >= self.lo and (self.hi is None or n <= self.hi)

    def describe(self) -> str:
        if self.lo == 0 and self.hi is None:
            return repr(self.name)
        return f"{self.name!r} in [{self.lo}, {'inf' if self.hi is None else self.hi}]"

    def to_json(self):
        d = {"sym": self.name}
        if self.lo:
            d["min"] = self.lo
        if self.hi is not None:
            d["max"] = self.hi
        return d


def _dim_from_json(d, where: str):
    if isinstance(d, int) and d >= 0:
        return d
    if isinstance(d, dict) and isinstance(d.get("sym"), str):
        lo, hi = d.get("min", 0), d.get("max")
        if isinstance(lo, int) and (hi is None or isinstance(hi, int)):
            return Dim(d["sym"], lo, hi)
    raise ConverterError(RET_INPUT_PARAM_INVALID, f"{where}: bad input dim record {d!r} (the file is damaged)")


class InputDims:
    """Per input name: its dims (``int`` or ``Dim``)."""

    def __init__(self, dims: dict[str, list]):
        self.dims = dims

    @staticmethod
    def of_metadata(metadata: dict, where: str = "model") -> InputDims | None:
        text = metadata.get(METADATA_KEY)
        if not text:
            return None
        try:
            raw = json.loads(text)
        except ValueError:
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"{where}: input_dims metadata is not JSON") from None
        return InputDims({name: [_dim_from_json(d, where) for d in dims] for name, dims in raw.items()})

    def to_metadata(self) -> str:
        return json.dumps({n: [d.to_json() if isinstance(d, Dim) else d for d in dims]
                           for n, dims in self.dims.items()})

    def symbolic(self) -> dict[str, list]:
        """``{name: [int | "symbol", ...]}`` (``Model.input_shapes``)."""
        return {n: [d.name if isinstance(d, Dim) else d for d in dims] for n, dims in self.dims.items()}

    def check(self, name: str, shape: tuple[int, ...]) -> None:
        """Raises -600 naming ``name`` and the dim when ``shape`` is not one the input admits."""
        dims = self.dims.get(name)
        if dims is None:
            return
        declared = "[" + ", ".join(d.name if isinstance(d, Dim) else str(d) for d in dims) + "]"
        if len(shape) != len(dims):
            raise _bad(f"input {name!r}: expected rank {len(dims)} (dims {declared}), got shape {list(shape)}")
        for axis, (d, n) in enumerate(zip(dims, shape)):
            if isinstance(d, Dim):
                if not d.admits(n):
                    raise _bad(f"input {name!r}: dim {axis} ({d.describe()}) is {n}, outside its range "
                               f"(dims {declared})")
            elif n != d:
                raise _bad(f"input {name!r}: dim {axis} is fixed to {d} by the model, got {n} (dims {declared}, "
                           f"shape given {list(shape)})")

    def default_shape(self, name: str) -> tuple[int, ...] | None:
        """The shape with every dynamic dim at its lower bound (at least 1), or None for an unknown input."""
        dims = self.dims.get(name)
        if dims is None:
            return None
        return tuple(max(d.lo, 1) if isinstance(d, Dim) else d for d in dims)


def _bad(message: str) -> ConverterError:
    return ConverterError(RET_INPUT_PARAM_INVALID, message)
