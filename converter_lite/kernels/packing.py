"""Packed copies of constant weights, made once per weight array and shared by every plan that binds it.

A model with dynamic dims builds one plan per input shape (runtime/shape_plans.py); the drivers' weight layouts
(GEMM panels, convolution blocks) do not depend on the shape, so packing them again for each plan would make
every new shape pay for it (a third of the first run of a YOLOv8n at a new image size).  ``shared(array, key,
make)`` returns ``make()`` the first time and the same packed object afterwards, for as long as ``array`` (a
constant of the loaded model, by identity) is alive: the entry goes with the array (a weak reference).
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_packed: dict[tuple, tuple] = {}
_lock = threading.Lock()


def shared(array, key: tuple, make: Callable[[], T]) -> T:
    k = (id(array), *key)
    with _lock:
        hit = _packed.get(k)
    if hit is not None and hit[0]() is array:
        return hit[1]
    value = make()
    try:
        ref = weakref.ref(array, lambda _r, k=k, table=_packed: table.pop(k, None))   # (table: alive at exit)
    except TypeError:                       # not weakly referenceable: not shared
        return value
    with _lock:
        _packed[k] = (ref, value)
    return value
