"""The one table of hand-written native drivers: ``DRIVERS``, one line per driver folder.

Each folder (kernels/<name>/) holds ``abi.py`` (``SYMBOLS``, the record layout, ``OPS`` it serves, ``select(node)``
-> the symbols a node may use, optional ``ALWAYS``), ``emit.py`` (llvmlite: ``EMITTERS = {symbol: emit(module)}``)
and ``bind.py`` (numpy + ctypes).  Importing this registry loads the ABI modules only: the runtime uses it
without llvmlite; ``emitter(symbol)`` imports an emitter on demand (the converter side and the JIT rebuild).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType

from ..errors import RET_ERROR, ConverterError
from .node_facts import selecting

DRIVERS_ATTR = "native_drivers"     # node attribute: the driver symbols the converter recorded for the node
NAMES = ("runlist", "gemm", "conv_tiles", "conv_direct", "conv_pointwise", "conv_depthwise", "resize_linear",
         "resize_nearest", "depth_to_space", "pool2d", "qgemm", "qconv", "qconv_depthwise", "bgemm", "transpose", "rnn")


@dataclass(frozen=True)
class Driver:
    name: str                         # the folder
    abi: ModuleType

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(self.abi.SYMBOLS)

    @cached_property
    def ops(self) -> frozenset[str]:
        return frozenset(self.abi.OPS)

    @property
    def epilogue(self) -> bool:
        """Whether the driver computes a following residual Add and clamps in its epilogue."""
        return bool(getattr(self.abi, "EPILOGUE", False))

    @property
    def always(self) -> bool:
        return bool(getattr(self.abi, "ALWAYS", False))

    def select(self, node) -> tuple[str, ...]:
        return tuple(self.abi.select(node)) if node.op in self.ops else ()


DRIVERS: tuple[Driver, ...] = tuple(Driver(n, importlib.import_module(f"{__package__}.{n}.abi")) for n in NAMES)
BY_SYMBOL: dict[str, Driver] = {s: d for d in DRIVERS for s in d.symbols}
ALWAYS: tuple[str, ...] = tuple(s for d in DRIVERS if d.always for s in d.symbols)
WITH_EPILOGUE: frozenset[str] = frozenset(s for d in DRIVERS if d.epilogue for s in d.symbols)


def select(node, among=None) -> tuple[str, ...]:
    """Every driver symbol ``node`` may run on, in registry order; ``among`` (symbols), when given, limits the
    drivers asked to those offering one of them (a dynamic node re-selecting among its recorded candidates)."""
    drivers = DRIVERS if among is None else [d for d in DRIVERS if not d.ops.isdisjoint((node.op,))
                                             and any(s in among for s in d.abi.SYMBOLS)]
    selecting(node)
    try:
        return tuple(s for d in drivers for s in d.select(node) if among is None or s in among)
    finally:
        selecting(None)


def candidates(node) -> tuple[str, ...]:
    """Every driver symbol serving ``node``'s op, whatever its shapes (a node whose shapes are known only at run
    time; ``select`` decides among them once they are)."""
    return tuple(s for d in DRIVERS if node.op in d.ops for s in d.symbols)


def emitter(symbol: str) -> Callable:
    """The function emitting ``symbol`` into an ``llvmlite.ir.Module`` (imports the driver's emit.py)."""
    driver = BY_SYMBOL.get(symbol)
    if driver is None:
        raise ConverterError(RET_ERROR, f"native driver {symbol!r} is unknown to this converter_lite (the model "
                                        "was converted by another version): reconvert the model")
    return importlib.import_module(f"{__package__}.{driver.name}.emit").EMITTERS[symbol]


def emitters(symbols) -> dict[str, Callable]:
    return {s: emitter(s) for s in sorted(set(symbols))}
