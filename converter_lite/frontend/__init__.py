"""ONNX front end: the only package that imports ``onnx``."""
from .onnx_import import import_model  # noqa: F401
