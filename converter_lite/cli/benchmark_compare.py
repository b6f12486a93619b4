"""``benchmark --compareModel=model.onnx``: reference outputs from onnxruntime on the source model.

onnxruntime is imported here, lazily, and nowhere else in the runtime path (SPEC §5: running a ``.ms`` needs
numpy only).
"""
from __future__ import annotations

import numpy as np

from ..errors import RET_ERROR, RET_GRAPH_FILE_ERR, RET_INPUT_PARAM_INVALID, ConverterError


def onnxruntime_outputs(onnx_path: str, feeds: dict[str, np.ndarray], output_names: list[str],
                        num_threads: int = 2) -> dict[str, np.ndarray]:
    """Runs ``onnx_path`` with onnxruntime on ``feeds`` and returns its outputs under the ``.ms`` model's
    output names (matched by name, or by position when the converter renamed them and the counts agree)."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise ConverterError(RET_ERROR, f"--compareModel needs onnxruntime, which cannot be imported ({e})") from None
    so = ort.SessionOptions()
    so.intra_op_num_threads = num_threads
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    except Exception as e:      # onnxruntime raises its own exception types (Fail, InvalidGraph, NoSuchFile...)
        raise ConverterError(RET_GRAPH_FILE_ERR, f"--compareModel={onnx_path}: onnxruntime cannot load it: "
                                                 f"{str(e).strip().splitlines()[0] if str(e).strip() else e}") from None
    ort_inputs = [i.name for i in sess.get_inputs()]
    missing = [n for n in ort_inputs if n not in feeds]
    if missing:
        raise ConverterError(RET_INPUT_PARAM_INVALID,
                             f"--compareModel={onnx_path}: its inputs {', '.join(missing)} are not inputs of the "
                             f".ms model ({', '.join(feeds)})")
    try:
        values = sess.run(None, {n: feeds[n] for n in ort_inputs})
    except Exception as e:
        raise ConverterError(RET_ERROR, f"--compareModel={onnx_path}: onnxruntime failed: {e}") from None
    ort_names = [o.name for o in sess.get_outputs()]
    by_name = dict(zip(ort_names, values))
    if all(n in by_name for n in output_names):
        return {n: by_name[n] for n in output_names}
    if len(ort_names) == len(output_names):
        return dict(zip(output_names, values))
    raise ConverterError(RET_INPUT_PARAM_INVALID,
                         f"--compareModel={onnx_path}: its outputs ({', '.join(ort_names)}) do not match the .ms "
                         f"model's outputs ({', '.join(output_names)})")
