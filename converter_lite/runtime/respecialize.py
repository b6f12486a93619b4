"""Running a model with dynamic input dims at shapes other than the ones it was converted for.

The IR is static: a dynamic dim of the ONNX model is fixed at conversion (``--inputShape``, else 1).  So that a
user can still feed the shapes the source model accepts, the converter embeds the ONNX source of such a model
(section ``source/model.onnx``, with ``metadata["reconvert"]``: the graph-kernel config it was built with) and
the graph's ``dynamic_inputs`` metadata lists the axes the source leaves dynamic.

``Reshaper.model_for(feeds)``: when a feed's shape differs from the converted one only on those axes, the model
is converted again from the embedded source for exactly those shapes (same config, same optimizer, native code
from the kernel cache when it was built before) and loaded; the result is cached per shape signature (at most
``MAX_SHAPES``, least recently used dropped).  Every other mismatch is left to ``Model.check_feeds``, which
names the input.  Re-specializing needs the converter (onnx, llvmlite and a C compiler, as converting does):
the runtime does not import it but is handed a ``reconvert`` callable (``pipeline.reconvert``, passed by
``converter_lite.load``); without one, such a feed is an error that says so.  A model without dynamic dims never
takes this path.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
from ..model.format import SOURCE_SECTION

MAX_SHAPES = 8
log = logging.getLogger("converter_lite.runtime")


class Reshaper:
    """Specializations of one loaded model for other input shapes (see the module doc)."""

    def __init__(self, path: str, source: bytes, metadata: Mapping[str, Any], dynamic: Mapping[str, list],
                 declared: Mapping[str, tuple], load: Callable[[str], Any],
                 reconvert: Callable[[bytes, dict, dict, str], str] | None = None):
        self.path, self.source, self.metadata = path, source, metadata
        self.dynamic = {name: frozenset(int(a) for a in axes) for name, axes in dynamic.items()}
        self.declared = dict(declared)
        self._load = load
        self._reconvert = reconvert
        self._models: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, loaded, declared: Mapping[str, tuple], load: Callable[[str], Any],
           reconvert: Callable[[bytes, dict, dict, str], str] | None = None) -> Reshaper | None:
        """The reshaper of a loaded ``.ms`` (``model.format.LoadedModel``), or None when it has no dynamic dims
        or no embedded source."""
        dyn = loaded.graph.metadata.get("dynamic_inputs")
        source = loaded.sections.get(SOURCE_SECTION)
        if not dyn or source is None or "reconvert" not in loaded.metadata:
            return None
        try:
            dynamic = {k: v for k, v in json.loads(dyn).items() if k in declared}
        except ValueError:
            return None
        return cls(loaded.path, bytes(source), loaded.metadata, dynamic, declared, load,
                   reconvert) if dynamic else None

    def shapes_for(self, feeds: Mapping[str, Any]) -> dict[str, tuple] | None:
        """The input shapes to specialize for, or None when the feeds need no re-specialization (they match the
        converted shapes, or differ in a way only ``check_feeds`` should report)."""
        shapes, differs = {}, False
        for name, declared in self.declared.items():
            if declared is None:                       # a sequence or optional: nothing to specialize
                continue
            shape = getattr(feeds.get(name), "shape", None) if isinstance(feeds, Mapping) else None
            if shape is None:
                return None
            shape = tuple(int(d) for d in shape)
            if shape != declared:
                axes = self.dynamic.get(name, frozenset())
                if len(shape) != len(declared) or any(s != d and i not in axes
                                                      for i, (s, d) in enumerate(zip(shape, declared))):
                    return None
                differs = True
            shapes[name] = shape
        return shapes if differs else None

    def model_for(self, shapes: Mapping[str, tuple]):
        """The model specialized for ``shapes`` (converted on first use, then cached)."""
        key = tuple(sorted(shapes.items()))
        with self._lock:
            model = self._models.get(key)
            if model is not None:
                self._models.move_to_end(key)
                return model
            model = self._convert(shapes)
            self._models[key] = model
            while len(self._models) > MAX_SHAPES:
                self._models.popitem(last=False)
            return model

    def _convert(self, shapes: Mapping[str, tuple]):
        described = ", ".join(f"{k}:{list(v)}" for k, v in shapes.items())
        name = os.path.basename(self.path)
        if self._reconvert is None:
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{name}: input shapes {described} differ from the converted ones on dynamic "
                                 "axes; re-specializing needs the converter: load the model with "
                                 "converter_lite.load (not converter_lite.runtime.load)")
        log.info("%s: specializing the model for input shapes %s", name, described)
        with tempfile.TemporaryDirectory(prefix="converter_lite_respecialize_") as tmp:
            try:
                path = self._reconvert(self.source, self.metadata["reconvert"], dict(shapes), tmp)
            except ConverterError as e:
                raise ConverterError(e.code, f"{name}: cannot run with input shapes {described}: "
                                             f"{e.message}") from None
            except Exception as e:        # the converter's own failure must still name the model and shapes
                raise ConverterError(RET_INPUT_PARAM_INVALID, f"{name}: cannot run with "
                                     f"input shapes {described}: {type(e).__name__}: {e}") from None
            model = self._load(path)      # memory-mapped: the file may go once it is loaded
        model.path = self.path                          # errors name the user's file
        return model
