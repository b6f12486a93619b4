"""The ``.ms`` offline model file: ``save_model`` / ``load_model`` (format.py) and the graph encoding
(graph_codec.py)."""
from .format import (FORMAT_VERSION, MAGIC, SUPPORTED_VERSIONS, LoadedModel, load_model,  # noqa: F401
                     save_model)

__all__ = ["FORMAT_VERSION", "MAGIC", "SUPPORTED_VERSIONS", "LoadedModel", "load_model", "save_model"]
