"""The converter side the runtime may need, handed to it by ``converter_lite.load`` (the runtime imports none of
the converter: a deployment that only runs models needs numpy, not onnx, llvmlite or a C compiler).

* ``reconvert(source, spec, shapes, work_dir) -> .ms path``: converts a model's embedded ONNX source again for
  other sizes of its dynamic dims (runtime/respecialize.py).
"""
from __future__ import annotations

from .pipeline import reconvert  # noqa: F401
