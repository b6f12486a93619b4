"""FULL_QUANT's calibration data: ``[data_preprocess_param]`` checked against the model, and its files read.

``calibrate_path=name:dir[,name2:dir2]`` names one directory per graph input; every input needs one (an input
whose value ``--inputValue`` fixes is refused with FULL_QUANT).  A directory's calibration files are its regular
files not starting with ``.``, sorted by name; the first ``calibrate_size`` of them are read, so a directory with
fewer fails.  With ``input_type=BIN`` each file is the raw little-endian tensor of its input: the input's element
type and shape (declared, or given by ``--inputShape`` for the dims the model leaves dynamic), in the layout the
converted model takes (NCHW unless ``--inputDataFormat=NHWC``).  A file of another byte size fails naming it and
the size expected.  Every failure is -600 naming the key, the input, the directory or the file; nothing is read
before all of them are checked, and the files are read one calibration step at a time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import onnx

from ..errors import RET_INPUT_PARAM_INVALID, ConverterError
from ..ir.dtype import DType
from .input_shapes import _fixed_dim, is_range
from .protos import value_info_kind, value_info_type


@dataclass(frozen=True)
class CalibrationInput:
    name: str
    directory: str
    dtype: np.dtype               # little-endian
    shape: tuple[int, ...]
    files: tuple[str, ...]        # the calibrate_size files read, in order

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _fail(msg: str) -> ConverterError:
    return ConverterError(RET_INPUT_PARAM_INVALID, f"[data_preprocess_param] {msg}")


def model_inputs(proto: onnx.ModelProto, input_shapes: dict | None, where: str) -> dict[str, tuple[DType, tuple]]:
    """{graph input: (dtype, static shape)}: the declared dims with ``--inputShape``'s ints for the dynamic ones.
    A dynamic dim that nothing fixes (or only a range bounds) fails: calibration runs the model at one shape."""
    init = {t.name for t in proto.graph.initializer}
    given_all = dict(input_shapes or {})
    out: dict[str, tuple[DType, tuple]] = {}
    for vi in proto.graph.input:
        if vi.name in init and vi.name not in given_all:
            continue                                    # IR < 4: initializers listed as inputs stay constants
        if value_info_kind(vi, where) != "tensor":
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"{where}: input {vi.name!r} is not a tensor: "
                                                          "quant_type=FULL_QUANT calibrates tensor inputs only")
        dtype, dims = value_info_type(vi, where)
        given = given_all.get(vi.name)
        if dims is None:
            dims = [None] * len(given) if given is not None else None
        if dims is None or (given is not None and len(given) != len(dims)):
            raise ConverterError(RET_INPUT_PARAM_INVALID,
                                 f"{where}: input {vi.name!r} has no shape (or --inputShape gives another rank); give "
                                 "its shape with --inputShape: full quantization calibrates at one shape")
        shape = []
        for i, d in enumerate(dims):
            g = given[i] if given is not None else None
            if g is not None and is_range(g):
                raise ConverterError(RET_INPUT_PARAM_INVALID,
                                     f"--inputShape gives input {vi.name!r} a range for dim {i}: quant_type="
                                     "FULL_QUANT calibrates at one shape; give fixed dims")
            if _fixed_dim(d):
                shape.append(int(d))        # the importer checks that --inputShape agrees
            elif g is not None:
                shape.append(int(g))
            else:
                raise ConverterError(RET_INPUT_PARAM_INVALID,
                                     f"{where}: input {vi.name!r} has dynamic dim {i} ({d or '?'}): quant_type="
                                     "FULL_QUANT calibrates at one shape; fix it with --inputShape (the calibration "
                                     "files hold tensors of that shape)")
        out[vi.name] = (dtype, tuple(shape))
    return out


def fix_input_dims(proto: onnx.ModelProto, shapes: dict[str, tuple]) -> None:
    """Writes the static ``shapes`` into ``proto``'s graph inputs (in place): what onnxruntime calibrates."""
    for vi in proto.graph.input:
        if vi.name not in shapes:
            continue
        dims = vi.type.tensor_type.shape.dim
        del dims[:]
        for d in shapes[vi.name][1]:
            dims.add().dim_value = int(d)


def _resolve(pairs, names: list[str]) -> dict[str, str]:
    """calibrate_path's (name, dir) pairs, split at the first ``:``, matched to the input names (which may hold
    ``:`` themselves: ``onnx::x:/data`` is input ``onnx::x``, directory ``/data``)."""
    out: dict[str, str] = {}
    for name, directory in pairs:
        item = f"{name}:{directory}"
        if name not in names:
            longer = sorted((n for n in names if item.startswith(n + ":") and len(item) > len(n) + 1), key=len)
            if not longer:
                raise _fail(f"calibrate_path names {name!r}, which is not an input of the model (inputs: "
                            f"{', '.join(names) or 'none'})")
            name, directory = longer[-1], item[len(longer[-1]) + 1:]
        if name in out:
            raise _fail(f"calibrate_path names input {name!r} twice")
        out[name] = directory
    missing = [n for n in names if n not in out]
    if missing:
        raise _fail(f"calibrate_path has no directory for input(s) {', '.join(missing)}: every model input needs "
                    "its calibration data (input_name:dir, comma-separated)")
    return out


def _files(directory: str, size: int) -> tuple[str, ...]:
    if not os.path.exists(directory):
        raise _fail(f"calibrate_path: directory {directory} does not exist")
    if not os.path.isdir(directory):
        raise _fail(f"calibrate_path: {directory} is not a directory")
    try:
        names = sorted(n for n in os.listdir(directory) if not n.startswith(".")
                       and os.path.isfile(os.path.join(directory, n)))
    except OSError as e:
        raise _fail(f"calibrate_path: cannot list directory {directory}: {e.strerror or e}") from None
    if not names:
        raise _fail(f"calibrate_path: directory {directory} holds no calibration file")
    if len(names) < size:
        raise _fail(f"calibrate_size={size}, but directory {directory} holds only {len(names)} file(s)")
    return tuple(os.path.join(directory, n) for n in names[:size])


def calibration_inputs(proto: onnx.ModelProto, cfg, input_shapes: dict | None, where: str) -> list[CalibrationInput]:
    """Checks ``cfg``'s (FullQuantConfig) calibration data against ``proto``'s inputs; fails -600 naming what is
    wrong.  Reads no file: sizes are checked from the directory listing."""
    inputs = model_inputs(proto, input_shapes, where)
    dirs = _resolve(cfg.calibrate_path, list(inputs))
    out = []
    for name, (dtype, shape) in inputs.items():
        if dtype.np.kind not in "fiub":
            raise ConverterError(RET_INPUT_PARAM_INVALID, f"{where}: input {name!r} is {dtype.name}: BIN calibration "
                                                          "files hold numeric tensors only")
        ci = CalibrationInput(name, dirs[name], dtype.np.newbyteorder("<"), shape, _files(dirs[name],
                                                                                           cfg.calibrate_size))
        for f in ci.files:
            got = os.path.getsize(f)
            if got != ci.nbytes:
                raise _fail(f"calibration file {f} holds {got} bytes; input {name!r} ({dtype.name}{list(shape)}) "
                            f"takes {ci.nbytes} bytes (input_type=BIN: the raw little-endian tensor)")
        out.append(ci)
    return out


def read_feeds(inputs: list[CalibrationInput], step: int) -> dict[str, np.ndarray]:
    """The ``step``-th calibration feed: one file of each input, as native-endian arrays."""
    feeds = {}
    for ci in inputs:
        try:
            data = np.fromfile(ci.files[step], dtype=ci.dtype)
        except OSError as e:
            raise _fail(f"cannot read calibration file {ci.files[step]}: {e.strerror or e}") from None
        if data.nbytes != ci.nbytes:
            raise _fail(f"calibration file {ci.files[step]} holds {data.nbytes} bytes; input {ci.name!r} takes "
                        f"{ci.nbytes} bytes")
        feeds[ci.name] = data.astype(ci.dtype.newbyteorder("="), copy=False).reshape(ci.shape)
    return feeds
