"""codegen/support.py: support functions are emitted into every model's shared object and reachable by symbol."""
import ctypes

import numpy as np
from llvmlite import ir

from converter_lite import codegen
from converter_lite.codegen import build_kernels
from converter_lite.codegen.support import SUPPORT
from converter_lite.runtime.native import NativeLibrary

PROBE = "cl_test_support_probe"


def _emit_probe(module: ir.Module) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)]), PROBE)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.mul(fn.args[0], ir.Constant(ir.IntType(64), 3)))
    return fn


def _call_probe(lib: NativeLibrary, x: int) -> int:
    addr = lib.support(PROBE)
    assert addr
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addr)(x)


def test_support_functions_in_linked_and_jit_libraries(monkeypatch):
    monkeypatch.setitem(SUPPORT, PROBE, _emit_probe)
    bundle = build_kernels([], cache_dir="")                       # no fused kernel: the drivers alone
    lib = NativeLibrary.from_sections(bundle.sections)
    assert _call_probe(lib, 14) == 42
    assert lib.support("cl_not_there") is None
    ir_only = build_kernels([], cache_dir="", link=False)         # the untrusted-model path: JIT from the IR
    assert _call_probe(NativeLibrary.from_sections(ir_only.sections, trust_native_code=False), 5) == 15


def test_model_with_only_support_ops_gets_a_library(monkeypatch, tmp_path):
    import onnx
    from onnx import helper

    from converter_lite.api import convert, load
    from converter_lite.model.format import load_model
    from tests.helpers import make_model, tensor_info

    monkeypatch.setitem(SUPPORT, PROBE, _emit_probe)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor_info("x", np.float32, [2, 3])],
                       [tensor_info("y", np.float32, [2, 4])], initializers={"w": w})
    src = tmp_path / "mm.onnx"
    onnx.save(model, src)
    out = convert(str(src), str(tmp_path / "mm"), graph_kernel_flags="--opt_level=2")
    assert "native/lib.so" in load_model(out).sections
    m = load(out)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(m.run({"x": x})["y"], x @ w)
    assert PROBE in codegen.SUPPORT
