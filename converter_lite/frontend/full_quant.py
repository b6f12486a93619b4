"""``[common_quant_param] quant_type=FULL_QUANT``, the ONNX side: onnxruntime's post-training static quantizer
writes the QDQ model that the converter then imports like any other (MindSpore's full quantization).

``quantize_full`` (before import, on the ONNX model):

1. checks the calibration data against the model (frontend/calibration.py) and fixes the inputs' dynamic dims
   to ``--inputShape``'s (calibration runs at one shape);
2. ``onnxruntime.quantization.shape_inference.quant_pre_process`` (its graph optimizations fold BatchNormalization
   into the Conv before it, so the folded weight is the one quantized; symbolic shape inference is skipped: the
   shapes are static and it would need sympy);
3. ``quantize_static`` with a CalibrationDataReader over the BIN files: QDQ format, uint8 activations (asymmetric),
   int8 weights (symmetric, zero point 0), ``per_channel``, the calibration method (MAX_MIN -> MinMax, KL ->
   Entropy, REMOVAL_OUTLIER -> Percentile at 99.999%) and ``nodes_to_exclude`` (``skip_quant_node`` plus the nodes
   whose weight is below ``min_quant_weight_size`` elements or ``min_quant_weight_channel`` output channels, and
   the Convs the native int8 convolutions do not run: grouped ones other than depthwise, column strides over 2).
   KL's ranges come from onnxruntime's Entropy calibrator built with 512 histogram bins and handed to quantize_static
   (``calibration_cache_path``): quantize_static's own has 128, too few to clip anything (an onnxruntime without
   that parameter gets its own, with a WARNING);
4. ``bias_correction`` (MindSpore's): every quantized Conv/Gemm is run twice on each calibration input, in float on
   the float model's input and quantized (the input through its QuantizeLinear/DequantizeLinear, the dequantized
   weight, the current bias) on the same input; the mean of the difference per output channel, averaged over the
   calibration inputs, is added to the bias (the int32 bias re-quantized with its own scale; a node without bias
   gets one);
5. records each int8 weight (values, scale per channel, axis) so the ``.ms`` stores it in 8 bits
   (passes/full_quant.py ``storage_map``), and, for ``debug_info_save_path``, each quantized node's output on the
   first calibration input in the float and in the quantized model (as the next node reads it: after its
   QuantizeLinear/DequantizeLinear).

Temporary files live in a TemporaryDirectory.  onnxruntime failures are -1 naming the step.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort
from onnxruntime.quantization import (
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization import calibrate as ort_calibrate
from onnxruntime.quantization.shape_inference import quant_pre_process

from ..errors import RET_ERROR, ConverterError
from .calibration import (
    CalibrationInput,
    calibration_inputs,
    fix_input_dims,
    read_feeds,
)
from .protos import load_onnx

log = logging.getLogger("converter_lite")

CALIBRATION_METHODS = {"MAX_MIN": "MinMax", "KL": "Entropy", "REMOVAL_OUTLIER": "Percentile"}
# KL's histogram: TensorRT's search (the reference MindSpore's docs cite) takes 2048 bins; onnxruntime's search is
# Python, ~6x slower at 2048 than at 512 (12 s against 2 s on resnet_mini's 27 activations)
KL_BINS, KL_QUANTIZED_BINS = 512, 128
_QDQ = ("QuantizeLinear", "DequantizeLinear")
_CORRECTED = ("Conv", "Gemm")


@dataclass
class WeightRecord:
    """One int8 weight of the QDQ model: the constant its DequantizeLinear folds into at import (``name``), the
    integers, one float32 scale per slice of ``axis``, the node reading it and the float weight it stands for."""
    name: str
    node: str
    q: np.ndarray
    scale: np.ndarray
    axis: int
    float_weight: np.ndarray | None = None


@dataclass
class FullQuantResult:
    model: onnx.ModelProto                               # the QDQ model
    weights: list[WeightRecord] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)       # nodes reading quantized values
    excluded: list[str] = field(default_factory=list)    # nodes kept float (skip list, thresholds)
    inputs: dict[str, int] = field(default_factory=dict)  # calibration input -> files read
    bias_corrected: int = 0
    activations: list[dict] = field(default_factory=list)  # debug report rows


def quantize_full(model, cfg, input_shapes: dict | None = None, where: str = "model",
                  debug: bool = False) -> FullQuantResult:
    """``model`` (path or ModelProto) -> its QDQ form calibrated as ``cfg`` (FullQuantConfig) says."""
    proto = load_onnx(model)
    if proto is model:
        proto = copy.deepcopy(proto)                    # the caller's model stays as it is
    _name_nodes(proto)
    inputs = calibration_inputs(proto, cfg, input_shapes, where)
    fix_input_dims(proto, {ci.name: (None, ci.shape) for ci in inputs})
    with tempfile.TemporaryDirectory(prefix="converter_lite_fq_") as tmp:
        src, pre_path, out = (os.path.join(tmp, n) for n in ("float.onnx", "pre.onnx", "qdq.onnx"))
        onnx.save(proto, src)
        _ort_step("quant_pre_process", where, quant_pre_process, src, pre_path, skip_symbolic_shape=True)
        pre = onnx.load(pre_path)
        excluded = _excluded(pre, cfg)
        method = getattr(CalibrationMethod, CALIBRATION_METHODS[cfg.activation_quant_method])
        ranges = {}
        if method == CalibrationMethod.Entropy and _takes_ranges():
            ranges["calibration_cache_path"] = os.path.join(tmp, "ranges.json")
            _ort_step("Entropy calibration", where, _entropy_ranges, pre_path, tmp, inputs,
                      ranges["calibration_cache_path"])
        elif method == CalibrationMethod.Entropy:
            log.warning("activation_quant_method=KL: onnxruntime %s's quantize_static takes no precomputed ranges; "
                        "its own Entropy calibration (128 bins) keeps every activation's whole range, as MAX_MIN "
                        "does", ort.__version__)
        _ort_step("quantize_static", where, quantize_static, pre_path, out, _Reader(inputs),
                  quant_format=QuantFormat.QDQ, per_channel=cfg.per_channel, activation_type=QuantType.QUInt8,
                  weight_type=QuantType.QInt8, nodes_to_exclude=excluded, calibrate_method=method, **ranges)
        qdq = onnx.load(out)
    result = FullQuantResult(qdq, excluded=excluded, inputs={ci.name: len(ci.files) for ci in inputs})
    if cfg.bias_correction:
        result.bias_corrected = _ort_step("bias correction", where, correct_biases, pre, qdq, inputs)
    result.nodes = quantized_nodes(qdq)
    result.weights = weight_records(pre, qdq)
    if debug:
        result.activations = _ort_step("the debug report", where, activation_rows, pre, qdq,
                                       read_feeds(inputs, 0), result.nodes)
    return result


def _takes_ranges() -> bool:
    """onnxruntime's quantize_static takes precomputed ranges (``calibration_cache_path``, recent versions)."""
    return "calibration_cache_path" in inspect.signature(quantize_static).parameters \
        and hasattr(ort_calibrate, "save_tensors_data")


def _entropy_ranges(model_path: str, tmp: str, inputs: list[CalibrationInput], path: str) -> None:
    """onnxruntime's Entropy (KL) calibrator with KL_BINS histogram bins: quantize_static would build it with 128
    bins and 128 quantized bins, whose only candidate threshold is the whole range (MAX_MIN's)."""
    calibrator = ort_calibrate.create_calibrator(
        Path(model_path), None, augmented_model_path=os.path.join(tmp, "augmented.onnx"),
        calibrate_method=CalibrationMethod.Entropy,
        extra_options={"num_bins": KL_BINS, "num_quantized_bins": KL_QUANTIZED_BINS})
    calibrator.collect_data(_Reader(inputs))
    ort_calibrate.save_tensors_data(calibrator.compute_data(), path)


def _ort_step(what: str, where: str, fn, *args, **kwargs):
    """Runs one onnxruntime step; its failures (its own exception types) become -1 naming the step.  What the
    quantizer prints (stdout) and logs (on the root logger, below ERROR) is kept out of the converter's output."""
    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(max(level, logging.ERROR))
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return fn(*args, **kwargs)
    except ConverterError:
        raise
    except Exception as e:  # noqa: BLE001  (onnxruntime raises its own types: Fail, InvalidGraph, ValueError...)
        raise ConverterError(RET_ERROR, f"{where}: full quantization: onnxruntime's {what} failed: "
                                        f"{type(e).__name__}: {e}") from None
    finally:
        quiet.setLevel(level)


class _Reader(CalibrationDataReader):
    """The calibration files, one of each input per ``get_next`` (None when done), read when asked for."""

    def __init__(self, inputs: list[CalibrationInput]):
        self.inputs, self.step = inputs, 0

    def get_next(self):
        if not self.inputs or self.step >= len(self.inputs[0].files):
            return None
        self.step += 1
        return read_feeds(self.inputs, self.step - 1)

    def __len__(self) -> int:
        return len(self.inputs[0].files) if self.inputs else 0


def _name_nodes(proto: onnx.ModelProto) -> None:
    """Gives unnamed nodes unique names: onnxruntime's exclusion list, the report and the bias correction match
    nodes by name."""
    taken = {n.name for n in proto.graph.node if n.name}
    for i, n in enumerate(proto.graph.node):
        if not n.name:
            name, k = f"{n.op_type}_{i}", 0
            while name in taken:
                k += 1
                name = f"{n.op_type}_{i}_{k}"
            n.name = name
            taken.add(name)


def _initializers(proto: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in proto.graph.initializer}


def weight_slot(node: onnx.NodeProto, inits: dict) -> tuple[int, int] | None:
    """(input position, output-channel axis) of ``node``'s constant weight (passes/weight_quant.py's slots)."""
    ins = list(node.input)

    def const(i: int) -> bool:
        return i < len(ins) and ins[i] in inits and len(inits[ins[i]].dims) >= 2

    attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "Conv" and const(1):
        return 1, 0
    if node.op_type == "ConvTranspose" and const(1):
        return 1, 1 if int(attrs.get("group", 1)) == 1 else 0
    if node.op_type == "MatMul" and const(1):
        return 1, -1
    if node.op_type == "Gemm" and const(1):
        return 1, 0 if attrs.get("transB", 0) else 1
    if node.op_type == "Gather" and const(0) and int(attrs.get("axis", 0)) == 0:
        return 0, 0
    return None


def int8_conv_runs(node: onnx.NodeProto, weight_dims: list[int] | None = None) -> bool:
    """Whether a native int8 convolution takes this Conv's geometry: one group and a column stride of 1 or 2
    (kernels/qconv/abi.py), or depthwise (``group`` = the weight's output channels, one input channel each:
    ``weight_dims`` ``[group, 1, kh, kw]``) with a column stride of 1 or 2 and a column dilation of 1
    (kernels/qconv_depthwise/abi.py).  The others stay float32: quantized, they would run in float on the
    dequantized weights with a quantize/dequantize step on each side (mobilenet_v2_half's depthwise convolutions,
    before the int8 depthwise driver, made its FULL_QUANT model 1.10x the float one), and their weights are a
    small part of the file."""
    from ..kernels.qconv.abi import STRIDES
    from ..kernels.qconv_depthwise.abi import STRIDES as DW_STRIDES
    attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
    strides = list(attrs.get("strides", [1, 1]))
    group = int(attrs.get("group", 1))
    if len(strides) != 2:
        return False
    if group == 1:
        return int(strides[1]) in STRIDES
    dilations = list(attrs.get("dilations", [1, 1]))
    return weight_dims is not None and len(weight_dims) == 4 and int(weight_dims[0]) == group and \
        int(weight_dims[1]) == 1 and int(strides[1]) in DW_STRIDES and len(dilations) == 2 and int(dilations[1]) == 1


def _excluded(pre: onnx.ModelProto, cfg) -> list[str]:
    """``skip_quant_node`` + the nodes whose weight is below the thresholds + the Convs the native int8
    convolution does not run (``int8_conv_runs``) (names of the preprocessed model)."""
    names = {n.name for n in pre.graph.node}
    unknown = [s for s in cfg.skip_quant_node if s not in names]
    if unknown:
        log.warning("[common_quant_param] skip_quant_node names %s, which is not a node of the model (after "
                    "onnxruntime's preprocessing, which folds BatchNormalization into the Conv before it)",
                    ", ".join(unknown))
    out = [s for s in cfg.skip_quant_node if s in names]
    inits = _initializers(pre)
    for n in pre.graph.node:
        slot = weight_slot(n, inits)
        if slot is None or n.name in out:
            continue
        if n.op_type == "Conv" and not int8_conv_runs(n, list(inits[n.input[slot[0]]].dims)):
            out.append(n.name)
            continue
        dims = list(inits[n.input[slot[0]]].dims)
        if int(np.prod(dims)) < max(1, cfg.min_quant_weight_size) or dims[slot[1]] < cfg.min_quant_weight_channel:
            out.append(n.name)
    return out


def _array(inits: dict, name: str) -> np.ndarray | None:
    return onh.to_array(inits[name]) if name in inits else None


def _producers(proto: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in proto.graph.node for o in n.output}


def _dequantize(node: onnx.NodeProto, inits: dict) -> np.ndarray:
    """A DequantizeLinear of initializers, evaluated: ``(q - zero_point) * scale`` in float32."""
    q, s = _array(inits, node.input[0]), _array(inits, node.input[1]).astype(np.float32)
    zp = _array(inits, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    shape = [1] * q.ndim
    if s.size > 1:
        shape[axis % q.ndim] = -1
    qi = q.astype(np.int64) - (0 if zp is None else zp.astype(np.int64).reshape(shape if zp.size > 1 else ()))
    return (qi.astype(np.float32) * s.reshape(shape if s.size > 1 else ())).astype(np.float32)


def weight_records(pre: onnx.ModelProto, qdq: onnx.ModelProto) -> list[WeightRecord]:
    """Every DequantizeLinear of an int8 initializer with zero point 0 (per tensor or per axis): the weights
    the importer folds into float32 constants, which the ``.ms`` stores as these integers and scales."""
    inits, pre_inits = _initializers(qdq), _initializers(pre)
    consumers: dict[str, onnx.NodeProto] = {}
    for n in qdq.graph.node:
        for i in n.input:
            consumers.setdefault(i, n)
    pre_nodes = {n.name: n for n in pre.graph.node}
    out = []
    for n in qdq.graph.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in inits or n.input[1] not in inits:
            continue
        q = _array(inits, n.input[0])
        if q.dtype != np.int8 or q.ndim == 0 or q.size == 0 or any(a.name == "block_size" and a.i
                                                                    for a in n.attribute):
            continue
        zp = _array(inits, n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if zp is not None and np.any(zp):
            continue
        scale = _array(inits, n.input[1]).astype(np.float32).reshape(-1)
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1) % q.ndim if scale.size > 1 else 0
        if scale.size == 1:
            scale = np.full(q.shape[0], scale[0], np.float32)
        elif scale.size != q.shape[axis]:
            continue
        user = consumers.get(n.output[0])
        w = None
        if user is not None and user.name in pre_nodes:
            pn = pre_nodes[user.name]
            k = list(user.input).index(n.output[0])
            w = _array(pre_inits, pn.input[k]) if k < len(pn.input) else None
        out.append(WeightRecord(n.output[0], user.name if user is not None else "", np.ascontiguousarray(q),
                                scale, axis, w if w is not None and w.shape == q.shape else None))
    return out


def quantized_nodes(qdq: onnx.ModelProto) -> list[str]:
    """Nodes (not Q/DQ themselves) that read a DequantizeLinear's output: the ones computing on quantized values."""
    prod = _producers(qdq)
    return [n.name for n in qdq.graph.node if n.op_type not in _QDQ
            and any(prod.get(i) is not None and prod[i].op_type == "DequantizeLinear" for i in n.input)]


def _session(proto: onnx.ModelProto):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # Q/DQ computed as written
    so.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _with_outputs(proto: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    m = copy.deepcopy(proto)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
            have.add(n)
    return m


@dataclass
class _Target:
    node: onnx.NodeProto          # in the QDQ model
    float_out: str                # the float model's output of the same node
    quant_out: str                # the output of its quantized copy in the probe model
    bias: np.ndarray              # current (dequantized) bias, one per output channel
    beta: float


def correct_biases(pre: onnx.ModelProto, qdq: onnx.ModelProto, inputs: list[CalibrationInput]) -> int:
    """MindSpore's bias correction (module doc, step 4) on ``qdq`` in place; returns the nodes corrected."""
    inits, prod = _initializers(qdq), _producers(qdq)
    pre_nodes = {n.name: n for n in pre.graph.node}
    uses: dict[str, int] = {}
    for n in qdq.graph.node:
        for i in n.input:
            uses[i] = uses.get(i, 0) + 1
    probe = copy.deepcopy(pre)
    targets: list[_Target] = []
    for n in qdq.graph.node:
        pn = pre_nodes.get(n.name)
        if n.op_type not in _CORRECTED or pn is None or pn.op_type != n.op_type or len(n.input) < 2:
            continue
        x_dq, w_dq = prod.get(n.input[0]), prod.get(n.input[1])
        if x_dq is None or w_dq is None or x_dq.op_type != "DequantizeLinear" or w_dq.op_type != "DequantizeLinear" \
                or w_dq.input[0] not in inits or any(i not in inits for i in x_dq.input[1:] if i):
            continue
        attrs = {a.name: oh.get_attribute_value(a) for a in n.attribute}
        beta = float(attrs.get("beta", 1.0)) if n.op_type == "Gemm" else 1.0
        bias = _current_bias(n, inits, prod, uses)
        if beta == 0.0 or bias is False:
            continue
        k = len(targets)
        w = _dequantize(w_dq, inits)
        channels = w.shape[0] if n.op_type == "Conv" or attrs.get("transB", 0) else w.shape[1]
        b = np.zeros(channels, np.float32) if bias is None else np.broadcast_to(bias, (channels,)).astype(np.float32)
        params = [i for i in x_dq.input[1:] if i]
        names = [f"__bc{k}_{j}" for j in range(len(params))]
        probe.graph.initializer.extend([onh.from_array(onh.to_array(inits[p]), nm) for p, nm in zip(params, names)]
                                       + [onh.from_array(w, f"__bc{k}_w"), onh.from_array(b, f"__bc{k}_b")])
        qattrs = {a.name: oh.get_attribute_value(a) for a in x_dq.attribute}
        probe.graph.node.extend([
            oh.make_node("QuantizeLinear", [pn.input[0], *names], [f"__bc{k}_xq"], **qattrs),
            oh.make_node("DequantizeLinear", [f"__bc{k}_xq", *names], [f"__bc{k}_xd"], **qattrs),
            oh.make_node(n.op_type, [f"__bc{k}_xd", f"__bc{k}_w", f"__bc{k}_b"], [f"__bc{k}_y"], **attrs)])
        targets.append(_Target(n, pn.output[0], f"__bc{k}_y", b, beta))
    if not targets:
        return 0
    sess = _session(_with_outputs(probe, [x for t in targets for x in (t.float_out, t.quant_out)]))
    fetch = [x for t in targets for x in (t.float_out, t.quant_out)]
    sums = [np.zeros_like(t.bias, np.float64) for t in targets]
    steps = len(inputs[0].files)
    for step in range(steps):
        got = dict(zip(fetch, sess.run(fetch, read_feeds(inputs, step))))
        for t, s in zip(targets, sums):
            yf, yq = got[t.float_out].astype(np.float64), got[t.quant_out].astype(np.float64)
            axes = tuple(a for a in range(yf.ndim) if a != 1)
            s += yf.mean(axis=axes) - yq.mean(axis=axes)
    for t, s in zip(targets, sums):
        _set_bias(t, (t.bias + (s / steps) / t.beta).astype(np.float32), qdq, inits, prod)
    return len(targets)


def _current_bias(n: onnx.NodeProto, inits: dict, prod: dict, uses: dict):
    """The bias ``n`` adds (dequantized), None without one, False where it cannot be corrected alone (shared,
    computed, or not one value per channel)."""
    if len(n.input) < 3 or not n.input[2]:
        return None
    name = n.input[2]
    if uses.get(name, 0) > 1:
        return False
    if name in inits:
        b = _array(inits, name)
    else:
        dq = prod.get(name)
        if dq is None or dq.op_type != "DequantizeLinear" or any(i not in inits for i in dq.input if i) \
                or uses.get(dq.input[0], 0) > 1:
            return False
        b = _dequantize(dq, inits)
        if b.ndim != 1 or b.size == 1:
            return False                                   # a quantized bias is re-quantized per channel only
    return b.reshape(-1) if b.size == 1 or b.ndim == 1 else False


def _set_bias(t: _Target, bias: np.ndarray, qdq: onnx.ModelProto, inits: dict, prod: dict) -> None:
    n = t.node
    if len(n.input) < 3 or not n.input[2]:
        name = f"{n.name}_bias_corrected"
        qdq.graph.initializer.append(onh.from_array(bias, name))
        while len(n.input) < 2:
            n.input.append("")
        n.input.append(name)
        return
    name = n.input[2]
    if name in inits:
        inits[name].CopyFrom(onh.from_array(bias.astype(onh.to_array(inits[name]).dtype), name))
        return
    dq = prod[name]
    q_init = inits[dq.input[0]]
    s = _array(inits, dq.input[1]).astype(np.float64).reshape(-1)
    zp = _array(inits, dq.input[2]).astype(np.float64).reshape(-1) if len(dq.input) > 2 and dq.input[2] else 0.0
    old = onh.to_array(q_init)
    info = np.iinfo(old.dtype)
    q = np.clip(np.rint(bias.astype(np.float64) / s) + zp, info.min, info.max).astype(old.dtype)
    q_init.CopyFrom(onh.from_array(q.reshape(old.shape), q_init.name))


def activation_rows(pre: onnx.ModelProto, qdq: onnx.ModelProto, feeds: dict, nodes: list[str]) -> list[dict]:
    """One debug-report row per output of a quantized node: the float model's value against the quantized
    model's as the next node reads it (after its QuantizeLinear/DequantizeLinear), on ``feeds``."""
    float_names = {o for n in pre.graph.node for o in n.output} | {i.name for i in pre.graph.input}
    types = {vi.name: vi.type.tensor_type.elem_type for vi in
             list(onnx.shape_inference.infer_shapes(pre).graph.value_info) + list(pre.graph.output)}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in qdq.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    by_name = {n.name: n for n in qdq.graph.node}
    pairs = []                                              # (node, tensor, quantized value's name)
    for name in nodes:
        n = by_name[name]
        for o in n.output:
            q = next((c for c in consumers.get(o, []) if c.op_type == "QuantizeLinear"), None)
            dq = next((c for c in consumers.get(q.output[0], []) if c.op_type == "DequantizeLinear"), None) \
                if q is not None else None
            read = dq.output[0] if dq is not None else o
            ref = o if o in float_names else read if read in float_names else None   # a graph output: DQ's name
            if ref is not None and types.get(ref, onnx.TensorProto.FLOAT) == onnx.TensorProto.FLOAT:
                pairs.append((n, ref, read))
    if not pairs:
        return []
    ref = dict(zip([o for _, o, _ in pairs], _session(_with_outputs(pre, [o for _, o, _ in pairs])).run(
        [o for _, o, _ in pairs], feeds)))
    got = dict(zip([q for _, _, q in pairs], _session(_with_outputs(qdq, [q for _, _, q in pairs])).run(
        [q for _, _, q in pairs], feeds)))
    rows = []
    for n, o, q in pairs:
        a, b = ref[o].astype(np.float64).reshape(-1), got[q].astype(np.float64).reshape(-1)
        denom = float(np.linalg.norm(a) * np.linalg.norm(b))
        rows.append({"kind": "activation", "node": n.name, "op": n.op_type, "tensor": o,
                     "shape": "x".join(map(str, ref[o].shape)), "bits": 8, "axis": "",
                     "max_abs_error": float(np.abs(a - b).max()) if a.size else 0.0,
                     "cosine": float(a @ b / denom) if denom > 0 else float(np.array_equal(a, b))})
    return rows
