"""The one register-into-a-table decorator behind the per-op tables (reference kernels, expanders, scalar
emitters, index maps, legacy upgrades):

    emitter = registrar(SCALAR_EMITTERS, "scalar emitter")
    @emitter("Add", "Sub")
    def _add_sub(...): ...

A key registered twice is an error naming the table and the key, raised at import.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def registrar(table: dict, what: str, make: Callable[..., Any] | None = None) -> Callable[..., Callable]:
    """A decorator factory ``register(*keys, **options)`` storing the decorated function (or
    ``make(key, fn, **options)``) under each key of ``table``."""
    def register(*keys: str, **options):
        def deco(fn):
            for key in keys:
                if key in table:
                    raise RuntimeError(f"{what} {key!r} registered twice")
                table[key] = fn if make is None else make(key, fn, **options)
            return fn
        return deco
    return register
