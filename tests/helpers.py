"""Shared test helpers: build ONNX models with onnx.helper and run them with onnxruntime (the oracle)."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort

# onnx 1.23 writes IR version 14 by default, which onnxruntime 1.31 refuses: always pin it.
IR_VERSION = 10
OPSET = 21


def tensor_info(name: str, dtype, shape):
    """A graph input/output declaration; ``dtype`` is a numpy dtype, ``shape`` a list (None/str = dynamic)."""
    elem = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return oh.make_tensor_value_info(name, elem, shape)


def make_model(nodes, inputs, outputs, initializers=None, opset: int = OPSET, functions=None,
               name: str = "test", ir_version: int = IR_VERSION) -> onnx.ModelProto:
    """``inputs``/``outputs``: lists of ValueInfoProto (see ``tensor_info``); ``initializers``: dict name->array."""
    inits = [onh.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = oh.make_graph(nodes, name, inputs, outputs, initializer=inits)
    opsets = [oh.make_opsetid("", opset)]
    if functions:
        domains = {f.domain for f in functions}
        opsets += [oh.make_opsetid(d, 1) for d in domains if d]
    model = oh.make_model(graph, opset_imports=opsets, functions=functions or [], ir_version=ir_version)
    return model


def single_op_model(op_type: str, inputs: dict, n_outputs: int = 1, opset: int = OPSET, const_inputs=(),
                    **attrs) -> onnx.ModelProto:
    """A model of one node.  ``inputs``: ordered name -> array (None = omitted optional input).  Inputs whose
    names are in ``const_inputs`` become initializers.  Output types are left to onnxruntime's inference."""
    names = [("" if v is None else k) for k, v in inputs.items()]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = oh.make_node(op_type, names, outs, **attrs)
    ins = [tensor_info(k, v.dtype, list(v.shape)) for k, v in inputs.items()
           if v is not None and k not in const_inputs]
    inits = {k: v for k, v in inputs.items() if v is not None and k in const_inputs}
    outputs = [oh.make_value_info(o, onnx.TypeProto()) for o in outs]
    return make_model([node], ins, outputs, inits, opset=opset)


def run_ort(model: onnx.ModelProto, feeds: dict, optimize: bool = False) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    return sess.run(None, {k: v for k, v in feeds.items() if k in names})


def assert_close(actual, expected, rtol: float = 1e-5, atol: float = 1e-6, what: str = "") -> None:
    """Same dtype, same shape, values close; NaNs must match NaNs and infinities must match exactly."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "fc":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def check_infer(op, inputs, const, attrs, outs):
    """The op table's inference for a node of ``op`` over ``inputs`` (names in ``const`` become constants)
    gives exactly the types of the kernel's outputs ``outs``."""
    from converter_lite.ir.core import Node, TensorType, Value
    from converter_lite.ops.registry import OPS, infer_types

    assert OPS[op].infer is not None, f"{op} has no inference function"
    vals = [None if v is None else Value(k, const=v) if k in const else Value(k, TensorType.of(v))
            for k, v in inputs.items()]
    node = Node(op, vals, [Value(f"out{i}") for i in range(len(outs))], dict(attrs))
    assert infer_types(node)[:len(outs)] == [TensorType.of(o) for o in outs], f"{op}: inference disagrees"


def all_drivers_library(link: bool = True, trust: bool = True):
    """A NativeLibrary holding every hand-written driver of kernels/registry.py and no fused kernel (linked, or
    the IR JIT-compiled through the toolchain), for tests that call the drivers directly."""
    from converter_lite import toolchain
    from converter_lite.codegen import build_kernels
    from converter_lite.kernels.registry import BY_SYMBOL, emitters
    from converter_lite.runtime.native import NativeLibrary

    bundle = build_kernels([], cache_dir="", drivers=emitters(BY_SYMBOL), link=link)
    return NativeLibrary.from_sections(bundle.sections, trust_native_code=trust, jit=toolchain.jit)


def record_drivers(graph):
    """``graph`` with every node's native drivers recorded, as the converter does before the build (a graph built
    by hand for a Plan otherwise runs every node on numpy)."""
    from converter_lite.passes.select_drivers import select_drivers

    select_drivers(graph)
    return graph
