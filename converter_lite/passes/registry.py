"""The pass registry: pass name -> Pass class, filled by ``@register_pass``.

The pipeline (``passes/pipeline.py``) refers to passes by name only, so a pass is added by writing its class,
decorating it, and importing its module in ``pipeline.py``.  Registration is explicit (no reflection).
"""
from __future__ import annotations

from .base import Pass

PASSES: dict[str, type[Pass]] = {}


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: registers ``cls`` under ``cls.name``; a second class with the same name is an error."""
    name = cls.name
    if not name or name == Pass.name:
        raise RuntimeError(f"pass class {cls.__qualname__} has no name")
    old = PASSES.get(name)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise RuntimeError(f"pass {name!r} registered twice ({old.__module__}.{old.__qualname__} and "
                           f"{cls.__module__}.{cls.__qualname__})")
    PASSES[name] = cls
    return cls
