"""Running ``.ms`` models: ``load(path) -> Model``; ``Model.run({name: array}) -> {name: array}``.

The engine: model.py (load, Model), program.py (the graph as numbered values and steps), concat_views.py
(Concats whose inputs write their output), transpose_views.py (Transposes batched MatMuls read in place),
arena.py (one buffer for every intermediate), plan.py (binding and running the steps, threads.py; zero-copy I/O
in direct_io.py), native.py (the model's native library), shape_plans.py (a plan per input shape of a model
with dynamic dims: concretize.py, one shared_arena.py block), respecialize.py (other input shapes, through a
converter the caller hands in); fast/ holds the numpy kernels.  It executes what the converter recorded
in the graph (each node's native drivers, convolution epilogues) and decides nothing about fusion.  Imports numpy
and converter_lite's ir/ops/model/kernels packages only (never onnx, onnxruntime, llvmlite or any of the
converter: tests/test_architecture.py); the converter's help (JIT rebuilds, re-specialization) comes in as
``load(..., toolchain=)``, which ``converter_lite.load`` passes.
"""
from .model import KernelInfo, Model, load  # noqa: F401

__all__ = ["KernelInfo", "Model", "load"]
