"""kernels/registry.py: one table of native drivers; the build links only the drivers a graph records, and a
.ms carries only what its graph uses."""
import ctypes
import glob
import os

import numpy as np
import onnx
import pytest
from helpers import make_model, tensor_info
from llvmlite import ir
from onnx import helper, numpy_helper

from converter_lite import toolchain
from converter_lite.api import convert, load
from converter_lite.codegen import build_kernels
from converter_lite.errors import ConverterError
from converter_lite.ir.core import Graph, Node, TensorType, Value
from converter_lite.ir.dtype import DType
from converter_lite.kernels import registry
from converter_lite.model.format import load_model
from converter_lite.passes.select_drivers import select_drivers
from converter_lite.runtime.native import NativeLibrary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = "cl_test_probe"


def _emit_probe(module: ir.Module) -> ir.Function:
    fn = ir.Function(module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)]), PROBE)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.mul(fn.args[0], ir.Constant(ir.IntType(64), 3)))
    return fn


def _call_probe(lib: NativeLibrary, x: int) -> int:
    addr = lib.support(PROBE)
    assert addr
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addr)(x)


def test_every_driver_has_one_folder_with_abi_emit_and_bind():
    seen = set()
    for d in registry.DRIVERS:
        folder = os.path.join(ROOT, "converter_lite", "kernels", d.name)
        assert {"abi.py", "emit.py", "bind.py"} <= set(os.listdir(folder)), d.name
        for s in d.symbols:
            assert s not in seen, f"{s} registered twice"
            seen.add(s)
            assert callable(registry.emitter(s))
    assert set(registry.BY_SYMBOL) == seen


def test_an_unknown_symbol_asks_for_reconversion():
    with pytest.raises(ConverterError, match="reconvert"):
        registry.emitter("cl_conv2d_direct_v1_f32")


def _v(name, dtype, shape, const=None):
    return Value(name, TensorType(dtype, shape), const=const)


def _conv(x_shape, w_shape, dtype=DType.float32, **attrs):
    x = _v("x", dtype, x_shape)
    w = Value("w", const=np.zeros(w_shape, dtype.np))
    y = _v("y", dtype, (x_shape[0], w_shape[0], 1, 1))
    return Node("Conv", [x, w], [y], attrs)


@pytest.mark.parametrize("node,want", [
    (_conv((1, 8, 16, 16), (16, 8, 3, 3), pads=(1, 1, 1, 1)), {"cl_conv2d_direct_v2_f32"}),
    (_conv((1, 8, 16, 16), (16, 8, 1, 1)), {"cl_conv2d_direct_v2_f32", "cl_conv1x1_v1_f32"}),
    (_conv((1, 8, 16, 16), (8, 1, 3, 3), group=8), {"cl_dwconv_v3_f32"}),
    (_conv((1, 8, 16, 16), (16, 8, 3, 3), strides=(3, 3)), {"cl_conv2d_tiles_v2_f32"}),
    (_conv((1, 8, 16, 16), (16, 8, 3, 3), dtype=DType.float64), {"cl_conv2d_tiles_v2_f64"}),
    (_conv((1, 3, 32, 32), (16, 3, 16, 16), strides=(16, 16)), {"cl_gemm_tiles_v1", "cl_sgemm_v1"}),
    # 8x8 float32 patches: rows of 32 bytes, below the patch rule's 64, so the runtime convolves them (tiles)
    (_conv((1, 3, 32, 32), (16, 3, 8, 8), strides=(8, 8)), {"cl_conv2d_tiles_v2_f32"}),
    (Node("MatMul", [_v("a", DType.float32, (4, 8)), _v("b", DType.float32, (8, 2))],
          [_v("c", DType.float32, (4, 2))]), {"cl_gemm_tiles_v1", "cl_sgemm_v1"}),
    (Node("MatMul", [_v("a", DType.int32, (4, 8)), _v("b", DType.int32, (8, 2))],
          [_v("c", DType.int32, (4, 2))]), set()),
    (Node("Resize", [_v("x", DType.float32, (1, 2, 4, 4))], [_v("y", DType.float32, (1, 2, 8, 8))],
          {"mode": "linear"}), {"cl_resize_linear_v1_f32"}),
    (Node("Add", [_v("a", DType.float32, (4,)), _v("b", DType.float32, (4,))], [_v("c", DType.float32, (4,))]),
     set()),
])
def test_selection(node, want):
    assert set(registry.select(node)) == want


def test_a_conv_with_computed_weights_records_no_driver():
    node = _conv((1, 8, 16, 16), (16, 8, 3, 3))
    node.inputs[1] = _v("w", DType.float32, (16, 8, 3, 3))
    assert registry.select(node) == ()


def test_the_build_links_only_the_drivers_named(monkeypatch):
    bundle = build_kernels([], cache_dir="", drivers={PROBE: _emit_probe})
    lib = NativeLibrary.from_sections(bundle.sections)
    assert _call_probe(lib, 14) == 42
    assert lib.support("cl_sgemm_v1") is None and bundle.target["support"] == [PROBE]
    ir_only = build_kernels([], cache_dir="", drivers={PROBE: _emit_probe}, link=False)
    from converter_lite.runtime.native import kernel_ir
    assert PROBE.encode() not in kernel_ir(ir_only.sections)       # re-emitted by the JIT, not stored
    rebuilt = NativeLibrary.from_sections(ir_only.sections, trust_native_code=False,
                                          jit=lambda ll, syms: _jit(ll, syms))
    assert _call_probe(rebuilt, 5) == 15


def _jit(ll, symbols):
    from converter_lite.codegen.jit import jit_library
    assert list(symbols) == [PROBE]
    return jit_library(ll, {PROBE: _emit_probe})


def test_the_runtime_alone_cannot_rebuild_and_says_how(monkeypatch):
    from converter_lite.runtime import native
    monkeypatch.setattr(native, "_loaded", {})              # nothing rebuilt earlier in this process
    ir_only = build_kernels([], cache_dir="", drivers={PROBE: _emit_probe}, link=False)
    with pytest.raises(ConverterError, match="converter_lite.load"):
        NativeLibrary.from_sections(ir_only.sections, trust_native_code=False)


def _matmul_model(tmp_path):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor_info("x", np.float32, [2, 3])],
                       [tensor_info("y", np.float32, [2, 4])], initializers={"w": w})
    src = tmp_path / "mm.onnx"
    onnx.save(model, src)
    return src, w


def test_a_model_with_only_driver_ops_links_just_those(tmp_path):
    src, w = _matmul_model(tmp_path)
    out = convert(str(src), str(tmp_path / "mm"), graph_kernel_flags="--opt_level=2")
    loaded = load_model(out)
    assert "native/lib.so" in loaded.sections
    import json
    assert json.loads(bytes(loaded.sections["native/target.json"]))["support"] == \
        ["cl_gemm_tiles_v1", "cl_run_steps_v1", "cl_sgemm_v1"]
    assert [list(n.attrs.get("native_drivers")) for n in loaded.graph.nodes] == [["cl_gemm_tiles_v1", "cl_sgemm_v1"]]
    x = np.ones((2, 3), np.float32)
    for trust in (True, False):
        np.testing.assert_allclose(load(out, trust_native_code=trust).run({"x": x})["y"], x @ w)


def test_select_drivers_visits_fused_kernels(tmp_path):
    inner = Graph("k")
    a, b = _v("a", DType.float32, (4, 8)), _v("b", DType.float32, (8, 2))
    inner.inputs = [a, b]
    mm = Node("MatMul", [a, b], [_v("c", DType.float32, (4, 2))])
    inner.nodes = [mm]
    outer = Graph("g")
    outer.nodes = [Node("GraphKernel", [], [], {"graph": inner, "kernel_name": "k"})]
    assert select_drivers(outer) == {"cl_gemm_tiles_v1", "cl_sgemm_v1"}
    assert mm.attrs["native_drivers"] == ["cl_gemm_tiles_v1", "cl_sgemm_v1"]


def _weights(path):
    """Bytes of the model's initializers, control-flow bodies' included."""
    def graph_bytes(g):
        own = sum(numpy_helper.to_array(t).nbytes for t in g.initializer)
        return own + sum(graph_bytes(a.g) for n in g.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
    return graph_bytes(onnx.load(path).graph)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx"))),
                         ids=lambda p: os.path.basename(p)[:-5])
def test_a_ms_carries_only_what_its_graph_uses(path, tmp_path):
    """Issue 15: MyNet's .ms at opt_level 2 is at most 64 KB; every sample model's at most its weights + 256 KB
    (each linked every driver before: 4.6-5.5 MB)."""
    out = convert(path, str(tmp_path / "m"), graph_kernel_flags="--opt_level=2")
    size = os.path.getsize(out)
    bodies = len(load_model(out).graph.all_graphs()) - 1       # each control-flow body has kernels of its own
    limit = 64 << 10 if os.path.basename(path) == "mynet.onnx" else _weights(path) + (256 << 10) * max(1, bodies)
    assert size <= limit, f"{os.path.basename(out)}: {size} bytes > {limit}"
