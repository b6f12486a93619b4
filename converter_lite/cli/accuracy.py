"""Accuracy mode of ``benchmark``: calibration files and MindSpore's mean-bias metric.

Calibration text format (MindSpore ``--benchmarkDataFile``): per output tensor two lines,
``<name> <ndim> <d0> <d1> ...`` then all values flattened, space separated.  An ``.npz`` keyed by output name
is accepted too.

Mean bias (MindSpore ``CompareData``/``CompareOutput``), per tensor, over elements j with expected e, actual a::

    err = |a - e|;  tolerance = 1e-8 + 1e-5 * |e|
    elements with err <= tolerance are ignored; otherwise
        if |e| < FLT_EPSILON: count err, but only when err > 1e-5
        else:                 count err / (|e| + FLT_MIN)
    tensor bias = (sum of counted terms) / (number of counted elements)     (0 when none)
    mean bias   = mean of the tensor biases * 100                            (percent)

The comparison fails when an actual float value is NaN/Inf (MindSpore: "Output tensor has nan or inf data,
compare fail") — except, beyond MindSpore, where the reference has the same NaN/Inf at that position — and when
the mean bias exceeds ``--accuracyThreshold`` (percent).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import RET_ERROR, RET_INPUT_PARAM_INVALID, ConverterError

RELATIVE_TOLERANCE = 1e-5
ABSOLUTE_TOLERANCE = 1e-8
ZERO_ABS_ERROR = 1e-5
FLT_EPSILON = float(np.finfo(np.float32).eps)
FLT_MIN = float(np.finfo(np.float32).tiny)
PRINTED_VALUES = 50
EPS_BIAS = 1e-7      # biases at or below this print as "0%"


def fmt(x: float) -> str:
    """A number the way C++ ``std::cout`` prints a float by default (6 significant digits, %g)."""
    return f"{float(x):g}"


def read_calibration(path: str) -> dict[str, np.ndarray]:
    """Reads a MindSpore calibration text file, or an .npz keyed by output name."""
    if path.lower().endswith(".npz"):
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    out: dict[str, np.ndarray] = {}
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        head = lines[i].split()
        where = f"calibration file {path} line {i + 1}"
        try:
            name, ndim = head[0], int(head[1])
            dims = tuple(int(d) for d in head[2: 2 + ndim])
        except (IndexError, ValueError):
            raise _bad(f"{where}: expected '<name> <ndim> <d0> ...', got {lines[i][:80]!r}") from None
        if len(dims) != ndim or len(head) != 2 + ndim or any(d < 0 for d in dims):
            raise _bad(f"{where}: {ndim} dims announced, got {head[2:]}")
        data_line = lines[i + 1] if i + 1 < len(lines) else ""
        try:
            values = np.array([float(v) for v in data_line.split()], dtype=np.float64)
        except ValueError as e:
            raise _bad(f"calibration file {path} line {i + 2}: {e}") from None
        if values.size != int(np.prod(dims, dtype=np.int64)):
            raise _bad(f"calibration file {path} line {i + 2}: tensor {name!r} of shape {list(dims)} needs "
                       f"{int(np.prod(dims, dtype=np.int64))} values, got {values.size}")
        out[name] = values.reshape(dims)
        i += 2
    if not out:
        raise _bad(f"calibration file {path} holds no tensors")
    return out


def write_calibration(path: str, outputs: dict[str, np.ndarray]) -> None:
    """Writes ``outputs`` in MindSpore's calibration text format (values round-trip exactly)."""
    with open(path, "w", encoding="utf-8") as f:
        for name, a in outputs.items():
            a = np.asarray(a)
            f.write(f"{name} {a.ndim}" + "".join(f" {d}" for d in a.shape) + "\n")
            flat = a.reshape(-1)
            if flat.dtype.kind == "b":
                flat = flat.astype(np.int64)
            f.write(" ".join(repr(v) for v in flat.tolist()) + "\n")


def tensor_bias(actual: np.ndarray, expected: np.ndarray) -> float:
    """MindSpore's mean bias of one tensor as a fraction (see the module docstring).  Shapes must match."""
    a = np.asarray(actual).astype(np.float64, copy=False).reshape(-1)
    e = np.asarray(expected).astype(np.float64, copy=False).reshape(-1)
    with np.errstate(all="ignore"):
        err = np.abs(a - e)
        abs_e = np.abs(e)
        over = err > ABSOLUTE_TOLERANCE + RELATIVE_TOLERANCE * abs_e
        near_zero = abs_e < FLT_EPSILON
        zero_terms = over & near_zero & (err > ZERO_ABS_ERROR)
        rel_terms = over & ~near_zero
        total = err[zero_terms].sum() + (err[rel_terms] / (abs_e[rel_terms] + FLT_MIN)).sum()
    count = int(zero_terms.sum() + rel_terms.sum())
    return float(total / count) if total > 0 else 0.0


@dataclass
class AccuracyResult:
    """Per-tensor biases and their mean, all in percent; ``lines`` is what benchmark prints."""
    biases: dict[str, float] = field(default_factory=dict)
    mean_bias: float = 0.0
    threshold: float = 0.5
    lines: list[str] = field(default_factory=list)
    uncompared: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.mean_bias <= self.threshold


def compare_outputs(outputs: dict[str, np.ndarray], expected: dict[str, np.ndarray],
                    threshold: float = 0.5) -> AccuracyResult:
    """Compares every expected tensor with the model output of that name (MindSpore ``CompareOutput``).

    Raises ConverterError(-1) with MindSpore's message on a missing output, a shape mismatch or NaN/Inf data.
    """
    res = AccuracyResult(threshold=threshold)
    res.lines.append("================ Comparing Output data ================")
    for name, want in expected.items():
        if name not in outputs:
            raise ConverterError(RET_ERROR, f"Cannot find output node: {name} , compare output data fail. "
                                            f"The model's outputs are: {', '.join(outputs)}")
        got, want = np.asarray(outputs[name]), np.asarray(want)
        if got.shape != want.shape:
            raise ConverterError(RET_ERROR, f"Shape of mslite output({_dims(got.shape)}) and shape source model "
                                            f"output({_dims(want.shape)}) are different (tensor {name})")
        flat = got.reshape(-1)
        res.lines.append(f"Data of node {name} : " + "".join(f"{fmt(v)} " for v in flat[:PRINTED_VALUES].tolist()))
        _check_finite(name, got, want)
        finite = np.isfinite(want) if want.dtype.kind in "fc" else slice(None)
        bias = tensor_bias(got[finite], want[finite])
        res.biases[name] = bias * 100
        shown = "0" if bias <= EPS_BIAS else fmt(bias * 100)
        res.lines.append(f"Mean bias of node/tensor {name} : {shown}%")
    res.uncompared = [n for n in outputs if n not in expected]
    res.mean_bias = sum(res.biases.values()) / len(res.biases) if res.biases else 0.0
    res.lines.append(f"Mean bias of all nodes/tensors: {fmt(res.mean_bias)}%")
    res.lines.append("=" * 55)
    return res


def failure_lines(result: AccuracyResult) -> list[str]:
    """MindSpore's stderr lines when the mean bias is above the threshold."""
    return [f"Mean bias of all nodes/tensors is too big: {fmt(result.mean_bias)}%",
            f"Compare output error {RET_ERROR}", f"Run MarkAccuracy error: {RET_ERROR}"]


def _check_finite(name: str, got: np.ndarray, want: np.ndarray) -> None:
    if got.dtype.kind not in "fc" and want.dtype.kind not in "fc":
        return
    g = got.astype(np.float64, copy=False)
    w = want.astype(np.float64, copy=False)
    bad_got = ~np.isfinite(g)
    bad_want = ~np.isfinite(w)
    same = (g == w) | (np.isnan(g) & np.isnan(w))        # matching inf/-inf, or NaN where NaN is expected
    if np.any((bad_got | bad_want) & ~same):
        raise ConverterError(RET_ERROR, f"Output tensor has nan or inf data, compare fail (tensor {name})")


def _dims(shape: tuple[int, ...]) -> str:
    return "".join(f"{d}," for d in shape)


def _bad(message: str) -> ConverterError:
    return ConverterError(RET_INPUT_PARAM_INVALID, message)
