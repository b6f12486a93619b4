"""Running ``.ms`` models: ``load(path) -> Model``; ``Model.run({name: array}) -> {name: array}``.

Imports numpy and converter_lite's ir/ops/model packages only (never onnx, onnxruntime or llvmlite).
"""
from .model import KernelInfo, Model, load  # noqa: F401

__all__ = ["KernelInfo", "Model", "load"]
