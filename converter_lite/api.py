"""The Python API of SPEC §5: ``convert`` and ``load``."""
from __future__ import annotations

import os

from .errors import ConverterError  # noqa: F401  (re-exported)


def convert(model_file, output_file, config_file: str | None = None, optimize: str = "general",
            input_shape=None, *, enable_graph_kernel: bool | None = None, graph_kernel_flags: str | None = None,
            fusion_switch_file: str | None = None, fp16: bool = False, input_value=None,
            bf16: bool = False) -> str:
    """Converts an ONNX model to a ``.ms`` file and returns its path.

    Args:
        model_file: path of the ONNX model (or an ``onnx.ModelProto``).
        output_file: output path; ``.ms`` is appended unless present.
        config_file: INI file whose ``[graph_kernel_param]`` section holds graph-kernel flags (``opt_level``...).
        optimize: ``none`` (no fusion) or ``general``.
        input_shape: ``{"name": (d0, d1)}`` or MindSpore's ``"name:d0,d1;name2:..."`` to fix dynamic dims.
        enable_graph_kernel: MindSpore's switch: True means ``opt_level=2`` unless the flags say otherwise.
        graph_kernel_flags: flag string like ``MS_DEV_GRAPH_KERNEL_FLAGS`` (``"--opt_level=3 --disable_pass=..."``).
        fusion_switch_file: Ascend-style JSON switching named fusion passes.
        fp16: store float32 weights as float16 (MindSpore's ``--fp16=on``); runs still compute in float32.
        input_value: ``{"sr": 16000}`` or ``"sr:16000"`` fixes inputs' values (``--inputValue``): control flow on
            them folds; a run feeding another value fails with -600 naming the input.
        bf16: MatMul/Gemm on constant float32 weights as bfloat16 products (``--bf16=on``): weights stored as
            bfloat16, activations rounded to bfloat16 per call, float32 sums (AVX-512 BF16's ``vdpbf16ps``).
            Opt-in (less precise); raises -600 where the CPU lacks ``avx512_bf16``.

    Raises:
        ConverterError: with a MindSpore status code (-300 unsupported op, -600 bad parameter, -200 bad file...).
    """
    from .pipeline import build_config, convert_model

    config = build_config(config_file, graph_kernel_flags=graph_kernel_flags,
                          enable_graph_kernel=enable_graph_kernel, fusion_switch_file=fusion_switch_file,
                          dump_dir=os.getcwd())
    return convert_model(model_file, output_file, config=config, optimize=optimize,
                         input_shape=input_shape, fp16=fp16, input_value=input_value, bf16=bf16).output_path


def load(path, num_threads: int = 2, **kwargs):
    """Loads a ``.ms`` file; returns a ``Model`` whose ``run({name: array})`` returns ``{name: array}``.

    Unlike ``converter_lite.runtime.load``, it hands the runtime the converter's toolchain (toolchain.py), so a
    model with dynamic dims can be re-specialized for other input sizes."""
    from . import toolchain
    from .runtime.model import load as _load

    kwargs.setdefault("toolchain", toolchain)
    return _load(os.fspath(path), num_threads=num_threads, **kwargs)
