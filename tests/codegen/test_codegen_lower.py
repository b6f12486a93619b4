"""Lowering of whole sub-graphs: broadcasting by index maps, reductions over inner/outer/multiple axes with
keepdims 0/1, index-map ops, stitched reduce+broadcast chains (softmax, layer norm), multiple outputs, empty
tensors and zero-size dims, and multi-threaded execution (same results for 1 and 2 threads)."""
from __future__ import annotations

import numpy as np
import pytest
from codegen_testutil import (
    F16,
    F32,
    F64,
    I32,
    I64,
    Case,
    build_library,
    check_case,
    make_graph,
    random_array,
    shared_library,
)

from converter_lite.codegen import UnsupportedOpError, build_kernels, check_supported
from converter_lite.codegen.lower import MapStage, plan_kernel

pytestmark = pytest.mark.needs_cc
REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
              "ReduceL2", "ReduceLogSum")
AXES = {"inner": (-1,), "outer": (0,), "middle": (1,), "inner2": (1, 2), "outer_inner": (0, 2), "all": None}


def _axes(b, axes):
    return None if axes is None else b.const(np.array(axes, np.int64))


def _positive(shape_dt):
    def gen(rng):
        return [random_array(rng, dt, s, specials=False, positive=True) for dt, s in shape_dt]
    return gen


def _cases() -> list[Case]:
    cases = []

    def add(name, in_types, fn, **kw):
        cases.append(Case(name, make_graph(name, in_types, fn), **kw))

    shape = (5, 7, 33)
    for op in REDUCE_OPS:
        for tag, axes in AXES.items():
            for keep in (0, 1):
                kw = {}
                if op in ("ReduceLogSum", "ReduceProd"):
                    kw["inputs"] = _positive([(F32, shape)])
                if op == "ReduceProd":
                    kw["inputs"] = lambda rng: [rng.uniform(0.8, 1.2, shape).astype(np.float32)]
                add(f"{op}_{tag}_k{keep}", [(F32, shape)],
                    lambda b, x, op=op, axes=axes, keep=keep: b.op(op, x, _axes(b, axes), keepdims=keep), **kw)
    for dt in (F16, F64, I32, I64):
        for tag in ("inner", "outer", "outer_inner"):
            for op in ("ReduceSum", "ReduceMax", "ReduceMean"):
                add(f"{op}_{tag}_{dt.name}", [(dt, (6, 4, 19))],
                    lambda b, x, op=op, tag=tag: b.op(op, x, _axes(b, AXES[tag]), keepdims=1))
    for op in ("ArgMax", "ArgMin"):
        for dt in (F32, F16, I32):
            for axis, keep, last in ((1, 1, 0), (0, 0, 1), (-1, 0, 0), (2, 1, 1)):
                add(f"{op}_{dt.name}_a{axis}k{keep}l{last}", [(dt, (5, 6, 7))], lambda b, x, op=op, a=axis, k=keep,
                    s=last: b.op(op, x, axis=a, keepdims=k, select_last_index=s),
                    inputs=lambda rng, dt=dt: [random_array(rng, dt, (5, 6, 7)) if dt.is_float
                                               else random_array(rng, dt, (5, 6, 7)) // 5])   # ties
    for tag in ("inner", "outer", "all"):
        add(f"ReduceLogSumExp_{tag}", [(F32, (5, 7, 33))], lambda b, x, tag=tag: b.op(
            "ReduceLogSumExp", x, _axes(b, AXES[tag]), keepdims=1))
    add("ReduceLogSumExp_f16", [(F16, (4, 9))], lambda b, x: b.op("ReduceLogSumExp", x, _axes(b, (1,))))
    add("ReduceSum_noop", [(F32, (3, 5))],
        lambda b, x: b.op("ReduceSumSquare", x, None, keepdims=1, noop_with_empty_axes=1))
    # NaN/inf inside reductions (the default inputs carry them): max/min propagate NaN
    add("ReduceMax_nan", [(F32, (4, 40))], lambda b, x: b.op("ReduceMax", x, _axes(b, (1,)), keepdims=0))
    # empty tensors and zero-size dims
    add("ewise_empty", [(F32, (0, 7))], lambda b, x: b.op("Exp", x) * 2.0)
    add("reduce_empty_axis", [(F32, (3, 0))], lambda b, x: b.op("ReduceSum", x, _axes(b, (1,)), keepdims=1))
    add("reduce_empty_max", [(F32, (0, 4))], lambda b, x: b.op("ReduceMax", x, _axes(b, (0,)), keepdims=0))
    add("reduce_empty_mean", [(F32, (2, 0, 3))], lambda b, x: b.op("ReduceMean", x, _axes(b, (1,)), keepdims=0))
    add("reduce_empty_out", [(F32, (0, 5))], lambda b, x: b.op("ReduceSum", x, _axes(b, (1,)), keepdims=0))
    add("scalar_rank0", [(F32, ()), (F32, (3,))], lambda b, x, y: b.op("Sigmoid", x) + y)
    # broadcasting by index maps (no materialization)
    add("bias_add_relu", [(F32, (2, 3, 4, 17)), (F32, (3, 1, 1))], lambda b, x, y: b.op("Relu", x + y))
    add("outer_product", [(F32, (9, 1)), (F32, (1, 13))], lambda b, x, y: x * y - 1.0)
    add("const_tensor", [(F32, (4, 6))], lambda b, x: x * b.const(np.arange(6, dtype=np.float32)) + 1.0)
    # index maps fused with elementwise ops
    add("transpose", [(F32, (3, 4, 5))], lambda b, x: b.op("Transpose", x * 2.0, perm=(2, 0, 1)) + 1.0)
    add("transpose_default", [(F32, (3, 4, 5))], lambda b, x: b.op("Transpose", b.op("Neg", x)))
    add("reshape", [(F32, (6, 10))], lambda b, x: b.op("Reshape", x + 1.0, b.const(np.array([3, 4, 5], np.int64)))
        * b.const(np.arange(5, dtype=np.float32)))
    add("squeeze_unsqueeze", [(F32, (4, 1, 7))], lambda b, x: b.op(
        "Unsqueeze", b.op("Squeeze", x, b.const(np.array([1], np.int64))), b.const(np.array([0], np.int64))) * 3.0)
    add("flatten", [(F32, (2, 3, 5))], lambda b, x: b.op("Flatten", b.op("Exp", x), axis=1))
    add("expand", [(F32, (3, 1))], lambda b, x: b.op("Expand", x, b.const(np.array([2, 3, 8], np.int64))) - 0.5)
    add("slice", [(F32, (10, 12))], lambda b, x: b.op(
        "Slice", x, b.const(np.array([1, -2], np.int64)), b.const(np.array([9, -100], np.int64)),
        b.const(np.array([0, 1], np.int64)), b.const(np.array([2, -3], np.int64))) * 2.0)
    add("slice_clamp", [(F32, (5, 6))], lambda b, x: b.op(
        "Slice", b.op("Abs", x), b.const(np.array([-100], np.int64)), b.const(np.array([100], np.int64))))
    add("concat", [(F32, (2, 3)), (F32, (2, 5)), (F32, (2, 0))], lambda b, x, y, z: b.op(
        "Concat", b.op("Exp", x), y * 2.0, z, axis=1) + 1.0)
    add("concat_outer", [(F32, (2, 3)), (F32, (4, 3))], lambda b, x, y: b.op("Concat", x, y, axis=0) * x.v.type.shape[0])
    add("split", [(F32, (3, 10))], lambda b, x: [b.wrap(v) * 2.0 for v in b.node(
        "Split", x, b.const(np.array([4, 6], np.int64)), n_outputs=2, axis=1).outputs])
    for mode in ("constant", "edge", "reflect", "wrap"):
        add(f"pad_{mode}", [(F32, (4, 5))], lambda b, x, m=mode: b.op(
            "Pad", x * 2.0, b.const(np.array([1, 3, 2, 2], np.int64)), b.const(np.float32(-7.5)), mode=m) + 1.0)
    add("pad_crop_axes", [(I32, (3, 6, 4))], lambda b, x: b.op(
        "Pad", x, b.const(np.array([-1, 2, 1, -2], np.int64)), None, b.const(np.array([1, 2], np.int64))))
    add("pad_empty", [(F32, (0, 3))], lambda b, x: b.op("Pad", x, b.const(np.array([1, 0, 1, 0], np.int64))))
    add("center_crop_pad", [(F32, (5, 6, 3))], lambda b, x: b.op(
        "CenterCropPad", x + 1.0, b.const(np.array([8, 3], np.int64)), axes=(0, 1)) * 2.0)
    add("dropout", [(F32, (3, 7))], lambda b, x: [b.wrap(v) for v in b.node("Dropout", x * 3.0, n_outputs=2).outputs])
    add("tile", [(F32, (2, 3))], lambda b, x: b.op("Tile", x, b.const(np.array([2, 3], np.int64))) + 1.0)
    add("int_bool_mix", [(I32, (4, 9)), (F32, (9,))], lambda b, x, y: b.op(
        "Where", b.op("Greater", b.op("Cast", x, to=1), y), b.op("Cast", x, to=1), y))
    # stitched reduce + broadcast chains
    add("softmax", [(F32, (6, 129))], _softmax)
    add("layer_norm", [(F32, (4, 8, 65)), (F32, (65,)), (F32, (65,))], _layer_norm,
        inputs=lambda rng: [random_array(rng, F32, (4, 8, 65), specials=False),
                            random_array(rng, F32, (65,), specials=False), random_array(rng, F32, (65,))])
    add("multi_out", [(F32, (7, 9)), (F32, (9,))], lambda b, x, y: [
        b.op("Tanh", x + y), b.op("ReduceSum", x * y, _axes(b, (0,)), keepdims=0), x, b.op("ReduceMax", x)])
    add("output_is_input", [(F32, (3,))], lambda b, x: [x, x * 2.0])
    add("reduce_feeds_reduce", [(F32, (4, 6, 10))], lambda b, x: b.op(
        "ReduceMax", b.op("ReduceSum", x, _axes(b, (2,)), keepdims=0), _axes(b, (0,)), keepdims=1))
    add("f16_chain", [(F16, (3, 50)), (F16, (50,))], lambda b, x, y: b.op(
        "ReduceMean", b.op("Exp", (x - y) * 0.25), _axes(b, (1,)), keepdims=1))
    # depthwise convolutions as the DepthwiseConv expander writes them (short inner loops: SHORT_LOOP hints)
    for stride in (1, 2):
        add(f"depthwise_s{stride}", [(F32, (1, 6, 12, 13)), (F32, (6, 1, 1))],
            lambda b, x, w, s=stride: _depthwise(b, x, w, s))
    # deep and shared expression graphs: lowering must neither recurse per op nor revisit shared operands
    add("deep_chain", [(F32, (2, 33))], _deep_chain, inputs=lambda rng: [rng.standard_normal((2, 33)).astype(np.float32)])
    add("shared_dag", [(F32, (4, 33))], _shared_dag,
        inputs=lambda rng: [rng.standard_normal((4, 33)).astype(np.float32) * 0.1])
    return cases


def _depthwise(b, x, w, stride):
    """3x3 taps of x (N, C, H, W) as strided Slices times per-channel weights, clipped (ReLU6)."""
    _, _, h, wd = x.v.type.shape
    oh, ow = (h - 3) // stride + 1, (wd - 3) // stride + 1
    acc = None
    for i in range(3):
        for j in range(3):
            tap = b.op("Slice", x, b.const(np.array([i, j], np.int64)),
                       b.const(np.array([i + stride * (oh - 1) + 1, j + stride * (ow - 1) + 1], np.int64)),
                       b.const(np.array([2, 3], np.int64)), b.const(np.array([stride, stride], np.int64)))
            term = tap * (w * float(1 + i * 3 + j))
            acc = term if acc is None else acc + term
    return b.op("Min", b.op("Max", acc, b.const(np.float32(0))), b.const(np.float32(6)))


def _deep_chain(b, x):
    y = x
    for i in range(1500):
        y = y * 1.0001 + 0.001 if i % 2 else b.op("Relu", y)
    return y


def _shared_dag(b, x):
    y = x
    for _ in range(60):                      # 2**60 paths from the output to x
        y = y * b.op("Sigmoid", y)
    return b.op("ReduceSum", y, b.const(np.array([1], np.int64)))


def _softmax(b, x):
    m = b.op("ReduceMax", x, b.const(np.array([-1], np.int64)), keepdims=1)
    e = b.op("Exp", x - m)
    return e / b.op("ReduceSum", e, b.const(np.array([-1], np.int64)), keepdims=1)


def _layer_norm(b, x, gamma, beta):
    ax = b.const(np.array([-1], np.int64))
    mean = b.op("ReduceMean", x, ax, keepdims=1)
    d = x - mean
    var = b.op("ReduceMean", d * d, ax, keepdims=1)
    return d / b.op("Sqrt", var + 1e-5) * gamma + beta


CASES = _cases()


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "lower", CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_matches_reference(lib, case, rng):
    check_case(lib, case, rng)


def _group_norm(b, x, gamma):
    """GroupNorm as exporters write it: Reshape to [N, G, C/G*H*W], normalize per group, Reshape back, scale."""
    g = b.op("Reshape", x, b.const(np.array([2, 4, 378], np.int64)))
    d = g - b.op("ReduceMean", g, _axes(b, (2,)), keepdims=1)
    n = d * b.op("Reciprocal", b.op("Sqrt", b.op("ReduceMean", d * d, _axes(b, (2,)), keepdims=1) + 1e-5))
    return b.op("Relu", b.op("Reshape", n, b.const(np.array([2, 24, 7, 9], np.int64))) * gamma + 0.5)


def test_reshapes_into_common_factors_keep_per_axis_coordinates():
    """[24, 7, 9] <-> [4, 378] refine into common factors (4, 6, 7, 9): the group coordinate is c // 6 and the
    in-group offset (c % 6) * 63 + h * 9 + w, never a division of the flat index (378 or 4536 = 24 * 7 * 9)."""
    from converter_lite.codegen.abi import lower_kernel
    g = next(c.graph for c in THREADED if c.name == "t_group_norm")
    divs = [line.strip() for line in str(lower_kernel(g, "k")[0]).splitlines() if "udiv" in line or "urem" in line]
    assert any(line.endswith(("udiv i64 %\"d1\", 6", "urem i64 %\"d1\", 6")) for line in divs), divs
    assert not any(line.endswith((", 378", ", 4536", ", 1512")) for line in divs), divs


def _pad_flatten(b, x):
    """PoolFormer's pooling: shifted windows of a zero-padded map, ending in GroupNorm's flattening Reshape."""
    xp = b.op("Pad", x, b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)))
    win = [b.op("Slice", xp, b.const(np.array([dy, dx], np.int64)), b.const(np.array([dy + 9, dx + 11], np.int64)),
                b.const(np.array([2, 3], np.int64))) for dy in range(3) for dx in range(3)]
    total = win[0]
    for w in win[1:]:
        total = total + w
    return b.op("Reshape", total * (1.0 / 9.0) - x, b.const(np.array([2, 1, -1], np.int64)))


def test_trailing_reshapes_are_looped_in_the_shape_before_them():
    """A kernel whose output is a reshape loops over the shape before the reshape (same layout: each element is
    stored at its linear offset), so its index maps see plain coordinates, not divisions of a flat index."""
    g = next(c.graph for c in THREADED if c.name == "t_pad_flatten")
    (stage,) = plan_kernel(g).stages
    assert isinstance(stage, MapStage) and stage.shape == (2, 5, 9, 11) and stage.items[0][1].shape == (2, 1, 495)


def _grn(b, x):
    """ConvNeXt-V2's global response norm on NHWC GELU output: the GELU and its L2 norm over [H, W] per channel."""
    g = x * (b.op("Erf", x * 0.7071) + 1.0) * 0.5
    n = b.op("ReduceL2", g, _axes(b, (1, 2)), keepdims=1)
    return [g * n, n]


# -- transposed map nests (blocked columns, lower._emit_map) ---------------------------------------------------
def _seg(b, x):
    """SegFormer's Mix-FFN: a conv output [1, C, H, W] flattened and transposed to tokens, then Erf-GELU."""
    t = b.op("Transpose", b.op("Reshape", x, b.const(np.array([1, 24, 560], np.int64))), perm=(0, 2, 1))
    return t * (b.op("Erf", t * 0.7071) + 1.0) * 0.5


TRANSPOSED = {   # output last axis longer than a block, not a multiple of it; gathers near (< 2 KB) and far
    "near": make_graph("tr_near", [(F32, (2, 200, 48)), (F32, (48,))], lambda b, x, y: b.op(
        "Transpose", x + y, perm=(0, 2, 1))),
    "far": make_graph("tr_far", [(F32, (1, 40, 1030))], lambda b, x: b.op("Transpose", b.op("Abs", x),
                                                                          perm=(0, 2, 1))),
    "reshape_gelu": make_graph("tr_gelu", [(F32, (1, 24, 8, 70))], _seg),
    "to_planes": make_graph("tr_planes", [(F32, (1, 300, 36)), (F32, (36,))], lambda b, x, y: b.op(
        "Reshape", b.op("Transpose", x + y, perm=(0, 2, 1)), b.const(np.array([1, 36, 3, 100], np.int64)))),
    "outer_axes": make_graph("tr_outer", [(F32, (3, 5, 70, 20))], lambda b, x: b.op(
        "Transpose", b.op("Neg", x), perm=(0, 1, 3, 2)) - 1.0),
}


def test_transposed_nests_are_blocked():
    """A nest whose innermost loop gathers along a transposed axis runs in blocks of columns (the block loop
    ``tb``): 64 columns when the gathered elements are near, 16 when far apart; a plain broadcast is not."""
    from converter_lite.codegen.abi import lower_kernel
    from converter_lite.codegen.lower import TRANSPOSE_BLOCK, TRANSPOSE_BLOCK_FAR
    for name, block in (("near", TRANSPOSE_BLOCK), ("far", TRANSPOSE_BLOCK_FAR),
                        ("reshape_gelu", TRANSPOSE_BLOCK_FAR), ("to_planes", TRANSPOSE_BLOCK),
                        ("outer_axes", TRANSPOSE_BLOCK)):
        text = str(lower_kernel(TRANSPOSED[name], "k")[0])
        assert "tb.head:" in text and f'mul i64 %"tb", {block}' in text, name
    g = make_graph("plain", [(F32, (4, 256)), (F32, (256,))], lambda b, x, y: x + y)
    assert "tb.head" not in str(lower_kernel(g, "k")[0])


# -- threads ---------------------------------------------------------------------------------------------------
def _concat_se(b, x, y, scale, pe):
    """MixNet's mixed depthwise outputs concatenated on channels -> BatchNorm -> SiLU, plus an operand that
    broadcasts over the channels, and the SE block's mean over [H, W] in the same kernel."""
    z = b.op("Concat", x, y, axis=1) * scale + pe
    z = z * b.op("Sigmoid", z)
    return [z, b.op("ReduceMean", z, _axes(b, (2, 3)), keepdims=1)]


def _bn_silu(b, x, scale, shift):
    """A CNN epilogue: BatchNorm's per-channel scale and shift, then SiLU, over [N, C, H, W]."""
    z = x * scale + shift
    return z * b.op("Sigmoid", z)


def _concat_partial(b, x, y, row):
    """As _concat_se with an operand broadcast over H only ([1, C, 1, W]): the block is not one row."""
    z = b.op("Concat", x, y, axis=1) + row
    return [z, b.op("ReduceSum", z * z, _axes(b, (2, 3)), keepdims=1)]


THREADED = [
    Case("t_ewise", make_graph("t_ewise", [(F32, (301, 257))], lambda b, x: b.op("Sigmoid", x) * x)),
    Case("t_bcast", make_graph("t_bcast", [(F32, (3, 97, 211)), (F32, (97, 1))], lambda b, x, y: x * y + 1.0)),
    Case("t_softmax", make_graph("t_softmax", [(F32, (257, 130))], _softmax)),
    Case("t_reduce_outer", make_graph("t_reduce_outer", [(F32, (300, 77))],
                                      lambda b, x: b.op("ReduceSum", x, _axes(b, (0,)), keepdims=1))),
    Case("t_reduce_all", make_graph("t_reduce_all", [(F32, (40, 50))], lambda b, x: b.op("ReduceMax", x))),
    Case("t_small", make_graph("t_small", [(F32, (3,))], lambda b, x: x + 1.0)),
    # the outer form split along the innermost (channel) axis: chunks of OUTER_ALIGN channels (200 = 3 + a part)
    Case("t_reduce_channels", make_graph("t_reduce_channels", [(F32, (1, 9, 7, 200))], lambda b, x: b.op(
        "ReduceL2", x, _axes(b, (1, 2)), keepdims=1))),
    Case("t_grn", make_graph("t_grn", [(F32, (1, 6, 5, 130))], _grn), atol=2e-5),     # 1 + erf cancels
    Case("t_pad_flatten", make_graph("t_pad_flatten", [(F32, (2, 5, 9, 11))], _pad_flatten)),
    Case("t_group_norm", make_graph("t_group_norm", [(F32, (2, 24, 7, 9)), (F32, (24, 1, 1))], _group_norm),
         atol=1e-5),
    Case("t_concat_se", make_graph("t_concat_se", [(F32, (1, 5, 9, 11)), (F32, (1, 7, 9, 11)), (F32, (12, 1, 1)),
                                                   (F32, (1, 1, 9, 11))], _concat_se)),
    Case("t_bn_silu", make_graph("t_bn_silu", [(F32, (2, 12, 9, 11)), (F32, (12, 1, 1)), (F32, (1, 12, 1, 1))],
                                 _bn_silu)),
    # blocks whose last axis has extent 1 (MVN's [3, 3, 3, 1], a fuzz case's Concat of [1, 2, 1] pieces) keep the
    # per-axis loops: Index.linear() skips extent-1 axes, where the one-row view would put the block offset
    Case("t_block_last_one", make_graph("t_block_last_one", [(F32, (3, 4, 5, 1)), (F32, (4, 1, 1))],
                                        lambda b, x, s: x * s + 1.0)),
    Case("t_concat_last_one", make_graph("t_concat_last_one", [(F32, (1, 2, 1)), (F32, (1, 1, 1))],
                                         lambda b, x, y: b.op("Concat", x / y, x / y, axis=0))),
    Case("t_concat_partial", make_graph("t_concat_partial", [(F32, (1, 5, 9, 11)), (F32, (1, 7, 9, 11)),
                                                             (F32, (1, 12, 1, 11))], _concat_partial)),
] + [Case(f"t_{name}", graph) for name, graph in TRANSPOSED.items()]


def test_per_channel_epilogue_runs_each_plane_as_one_loop():
    """BatchNorm + SiLU over [2, 12, 9, 11]: the scale and shift broadcast over each 9 x 11 plane, so the stage
    loops over (image, channel) and then the plane's 99 elements in one loop, with no division of any offset;
    an operand broadcast over H only ([1, C, 1, W], t_concat_partial) keeps the per-row loops."""
    from converter_lite.codegen.abi import lower_kernel
    g = next(c.graph for c in THREADED if c.name == "t_bn_silu")
    ir_text = str(lower_kernel(g, "k")[0])
    assert 'icmp slt i64 %"d2", 99' in ir_text
    assert not [line for line in ir_text.splitlines() if "udiv" in line or "urem" in line]


def test_concat_before_a_spatial_reduction_keeps_exact_coordinates():
    """The SE mean over [H, W] of a channel Concat indexes the block as one row: no division of any element's
    offset (the Concat's channel coordinate came from divisions of the flat offset, and the loop did not
    vectorize).  With an operand broadcast over H only, the block is not one row; the Concat's output is
    returned, so its map stage runs first (reuse.plan_stored_first) and the reduction reads it back: no
    divisions there either (before, the reduction evaluated it from flat offsets, with divisions)."""
    from converter_lite.codegen.abi import lower_kernel
    g = next(c.graph for c in THREADED if c.name == "t_concat_se")
    divs = [line.strip() for line in str(lower_kernel(g, "k")[0]).splitlines() if "udiv" in line or "urem" in line]
    assert not divs, divs
    g = next(c.graph for c in THREADED if c.name == "t_concat_partial")
    assert not any("udiv" in line for line in str(lower_kernel(g, "k")[0]).splitlines())


def test_outer_reductions_split_channels_in_wide_chunks():
    from converter_lite.codegen.reduce import OUTER_ALIGN, ReduceStage
    g = next(c.graph for c in THREADED if c.name == "t_reduce_channels")
    (stage,) = [s for s in plan_kernel(g).stages if isinstance(s, ReduceStage)]
    assert stage.part_axis == 3 and stage.part_align == OUTER_ALIGN >= 16
    inner = make_graph("inner", [(F32, (8, 40))], lambda b, x: b.op("ReduceSum", x, _axes(b, (1,)), keepdims=1))
    (stage,) = plan_kernel(inner).stages
    assert stage.part_align == 1


@pytest.fixture(scope="module")
def threaded_lib(tmp_path_factory):
    return shared_library(tmp_path_factory, "lower_threads", THREADED, num_threads=2, parallel_threshold=1)


@pytest.mark.parametrize("case", THREADED, ids=[c.name for c in THREADED])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threads_give_the_same_result(threaded_lib, case, threads, rng):
    # a full reduction has no kept axis to split: it stays on one thread
    assert threaded_lib.kernel(case.name).parallel == (case.name != "t_reduce_all")
    check_case(threaded_lib, case, rng, num_threads=threads)


def test_small_kernels_stay_single_threaded(tmp_path):
    case = THREADED[0]
    bundle = build_kernels([(case.name, case.graph)], cache_dir=str(tmp_path), num_threads_hint=2,
                           parallel_threshold=10 ** 9)
    assert not bundle.specs[case.name].parallel
    bundle = build_kernels([(case.name, case.graph)], cache_dir=str(tmp_path), num_threads_hint=1,
                           parallel_threshold=1)
    assert not bundle.specs[case.name].parallel


# -- planning ----------------------------------------------------------------------------------------------------
def test_same_shape_chains_use_the_flat_fast_path():
    g = make_graph("flat", [(F32, (8, 16)), (F32, ())], lambda b, x, s: b.op("Tanh", x * s + 0.1) * 2.0)
    (stage,) = plan_kernel(g).stages
    assert isinstance(stage, MapStage) and stage.flat
    g = make_graph("nest", [(F32, (8, 16)), (F32, (16,))], lambda b, x, y: x + y)
    (stage,) = plan_kernel(g).stages
    assert not stage.flat


def test_short_inner_loops_carry_vectorize_hints():
    """A loop nest with a short innermost extent is widened with a masked tail (contiguous taps) or a scalar
    tail (strided taps), never fully unrolled; long ones are interleaved; a short reduced axis is widened."""
    from converter_lite.codegen.abi import lower_kernel
    for stride, predicate in ((1, True), (2, False)):
        case = next(c for c in CASES if c.name == f"depthwise_s{stride}")
        text = str(lower_kernel(case.graph, "k")[0])
        assert "llvm.loop.unroll.disable" in text and "distinct" in text
        assert ("llvm.loop.vectorize.predicate.enable" in text) == predicate
    g = make_graph("long", [(F32, (4, 256)), (F32, (256,))], lambda b, x, y: x + y)
    text = str(lower_kernel(g, "k")[0])
    assert "llvm.loop.interleave.count" in text and "llvm.loop.unroll.disable" not in text
    g = make_graph("ln32", [(F32, (40, 32))], lambda b, x: b.op("ReduceSum", x, _axes(b, (1,)), keepdims=1))
    assert "llvm.loop.unroll.disable" in str(lower_kernel(g, "k")[0])


def test_huge_flat_outputs_use_non_temporal_stores(tmp_path, monkeypatch):
    """Flat stages writing more than STREAM_BYTES use non-temporal stores from the output's first 64-byte
    boundary on (ordinary stores before it and for the tail); every offset in the line gives the reference
    result, also when a thread's part ends before the boundary (a 3 x 5 output)."""
    from converter_lite.codegen import lower
    from converter_lite.codegen.abi import lower_kernel
    monkeypatch.setattr(lower, "STREAM_BYTES", 1024)
    g = make_graph("stream", [(F32, (37, 50))], lambda b, x: b.op("Tanh", x * 0.5 + 0.1) * 2.0)
    assert "!nontemporal" in str(lower_kernel(g, "k")[0])
    lib = build_library([Case("stream", g)], str(tmp_path), num_threads=2, parallel_threshold=1)
    x = np.random.default_rng(0).standard_normal((37, 50)).astype(np.float32)
    ref = np.tanh(x * np.float32(0.5) + np.float32(0.1)) * np.float32(2.0)
    for off in (0, 1, 4, 15):                            # aligned and unaligned output buffers
        raw = np.empty(37 * 50 + 32, np.float32)
        start = (-raw.ctypes.data // 4) % 16 + off
        out = raw[start:start + 37 * 50].reshape(37, 50)
        for threads in (1, 2):
            out[...] = np.nan
            lib.kernel("stream")([x], [out], num_threads=threads)
            np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-6)
    monkeypatch.setattr(lower, "STREAM_BYTES", 32)
    small = make_graph("small", [(F32, (3, 5))], lambda b, x: b.op("Tanh", x * 0.5 + 0.1) * 2.0)
    assert "!nontemporal" in str(lower_kernel(small, "k")[0])
    lib = build_library([Case("small", small)], str(tmp_path / "s"), num_threads=2, parallel_threshold=1)
    x = x[:3, :5].copy()
    for off in (0, 3, 9):
        raw = np.full(15 + 32, np.nan, np.float32)
        start = (-raw.ctypes.data // 4) % 16 + off
        out = raw[start:start + 15].reshape(3, 5)
        lib.kernel("small")([x], [out], num_threads=2)
        np.testing.assert_allclose(out, np.tanh(x * np.float32(0.5) + np.float32(0.1)) * np.float32(2.0),
                                   rtol=2e-6, atol=1e-6)
        assert np.isnan(raw[:start]).all() and np.isnan(raw[start + 15:]).all()     # nothing written outside


def test_streaming_outputs_of_different_alignment_take_the_ordinary_loop(tmp_path, monkeypatch):
    from converter_lite.codegen import lower
    monkeypatch.setattr(lower, "STREAM_BYTES", 1024)
    g = make_graph("two", [(F32, (37, 50))], lambda b, x: [b.op("Tanh", x), x * 2.0])
    lib = build_library([Case("two", g)], str(tmp_path), num_threads=2, parallel_threshold=1)
    x = np.random.default_rng(1).standard_normal((37, 50)).astype(np.float32)
    raw = np.empty(2 * 37 * 50 + 128, np.float32)
    a0 = (-raw.ctypes.data // 4) % 16
    a = raw[a0 + 1:a0 + 1 + 37 * 50].reshape(37, 50)
    b = raw[a0 + 37 * 50 + 48 + 6:a0 + 37 * 50 + 48 + 6 + 37 * 50].reshape(37, 50)
    lib.kernel("two")([x], [a, b], num_threads=2)
    np.testing.assert_allclose(a, np.tanh(x), rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(b, x * np.float32(2.0))


def test_softmax_plan_materializes_only_the_reductions():
    g = make_graph("sm", [(F32, (4, 8))], _softmax)
    plan = plan_kernel(g)
    assert [type(s).__name__ for s in plan.stages] == ["ReduceStage", "ReduceStage", "MapStage"]
    assert len(plan.temps) == 2


def test_unsupported_op_names_the_op(tmp_path):
    g = make_graph("bad", [(F32, (4, 4))], lambda b, x: b.op("Hardmax", x) + 1.0)
    with pytest.raises(UnsupportedOpError) as e:
        check_supported(g, "bad")
    assert e.value.op == "Hardmax" and "Hardmax" in str(e.value) and e.value.kernel == "bad"
    with pytest.raises(UnsupportedOpError):
        build_kernels([("bad", g)], cache_dir=str(tmp_path))
    ok = make_graph("ok", [(F32, (4,))], lambda b, x: x + 1.0)
    bundle = build_kernels([("bad", g), ("ok", ok)], cache_dir=str(tmp_path), on_unsupported="skip")
    assert list(bundle.specs) == ["ok"] and "Hardmax" in bundle.skipped["bad"]


def test_row_stitching_applies_to_row_wise_chains():
    """softmax/layer norm run row chunk by row chunk; anything mixing rows keeps whole-tensor stages."""
    from converter_lite.codegen.schedule import ROW_CHUNK_ELEMS, row_chunking
    assert row_chunking(plan_kernel(make_graph("sm", [(F32, (64, 128))], _softmax))) == (64, ROW_CHUNK_ELEMS // 128)
    ln = make_graph("ln", [(F32, (16, 512)), (F32, (512,)), (F32, (512,))], _layer_norm)
    assert row_chunking(plan_kernel(ln)) == (16, ROW_CHUNK_ELEMS // 512)
    over_rows = make_graph("r0", [(F32, (8, 4))], lambda b, x: x - b.op("ReduceMean", x, _axes(b, (0,))))
    assert row_chunking(plan_kernel(over_rows)) is None
    dropped = make_graph("kd", [(F32, (8, 8))], lambda b, x: [
        x - b.op("ReduceMax", x, _axes(b, (1,)), keepdims=0), b.op("ReduceSum", x, _axes(b, (1,)), keepdims=0)])
    assert row_chunking(plan_kernel(dropped)) is None           # [8] broadcasts along columns, not rows
    moved = make_graph("tr", [(F32, (8, 8))], lambda b, x: b.op("Transpose", x - b.op(
        "ReduceMax", x, _axes(b, (1,)), keepdims=1)))
    assert row_chunking(plan_kernel(moved)) is None
