"""The graph-kernel optimizer pipeline, as data.

``DEFAULT_PIPELINE`` is the single ordered list of stages; each stage lists its passes by registered name with
the opt_level that turns them on (or the config flag that gates them).  Stage id = index in the pipeline,
pass id = index in its stage (disabled and not-yet-available passes included), so the ids used by
``enable_pass``/``disable_pass`` (``"<S>.<P>"``) are stable.  Full pass name:
``stage<S>_<stagename>_<P>_<passname>`` (e.g. ``stage3_cluster_0_graph_kernel_cluster``).

Levels follow MindSpore Lite: 1 = expand + cluster + build; 2 adds CSE, arithmetic simplification,
transpose/reshape elimination and recompute; 3 adds stitch fusion, parallel fusion and the op combiner.

To add a pass: register its class with ``@register_pass`` (``passes/registry.py``), put its name in the
right stage below, and import its module at the bottom of this file.
"""
from __future__ import annotations

from dataclasses import dataclass

NEVER = 4                       # MindSpore OptLevel_MAX: a level no opt_level reaches


@dataclass(frozen=True)
class PassSpec:
    """One pipeline slot: a registered pass name, the opt_level enabling it, or a gating config flag.

    A flag-gated pass (``flag`` set) has level 1 when ``getattr(config, flag)`` is true, else NEVER
    (MindSpore: ``level = flag ? OptLevel_1 : OptLevel_MAX``).
    """
    name: str
    level: int = 1
    flag: str | None = None


@dataclass(frozen=True)
class StageSpec:
    name: str
    passes: tuple[PassSpec, ...]


def _stage(name: str, *passes: PassSpec) -> StageSpec:
    return StageSpec(name, passes)


P = PassSpec
DEFAULT_PIPELINE: tuple[StageSpec, ...] = (
    _stage("preprocess",
           P("empty_pass", 1), P("constant_folding", 1), P("graph_kernel_cse", 2)),
    _stage("fusion",                    # named pattern fusions (switchable by the fusion switch file too)
           P("conv_bn_fusion", 1), P("transpose_matmul_fusion", 1), P("shape_reshape", 1),
           P("split_concat_fusion", 1), P("layer_norm_fusion", 1), P("gelu_fusion", 1),
           # The next five replace their ops by opaque composite ops (FusedAttention, FusedMatMul,
           # AddLayerNorm, AddRmsNorm) run by reference kernels.  Graph-kernel fusion turns the same ops into
           # native fused kernels (MatMul epilogues, stitched Softmax/LayerNorm), so on the CPU they are
           # opt-in: enable_pass=... or "on" in the fusion switch file.
           P("attention_fusion", NEVER), P("matmul_elem_biasadd_fusion", NEVER),
           P("matmul_elem_relu_fusion", NEVER), P("matmul_elem_gelu_fusion", NEVER),
           P("add_layer_norm_fusion", NEVER), P("add_rms_norm_fusion", NEVER),
           P("conv1d_as_conv2d", 2),        # 1-D Convs on the runtime's 2-D convolution paths
           P("pad_conv_fusion", 1),         # a zero Pad in front of a Conv becomes the Conv's own pads
           P("matmul_integer_to_float", 1),    # MatMulInteger -> Cast -> Mul (-> Add): the int8 GEMM's epilogue
           P("quantized_conv", 1),          # a QDQ model's Conv on the native int8 convolution
           P("quantized_handoff", 1),       # ... handing its output to the next ones as uint8
           P("quantized_moves", 1)),        # ... and its data-movement ops the bytes, equal round trips gone
    _stage("expand",
           P("graph_kernel_expander", 1), P("graph_kernel_op_combiner", 3)),
    _stage("cluster",
           P("graph_kernel_cluster", 1), P("eliminate_redundant_output", 1)),
    _stage("highlevelopt",
           P("arithmetic_simplify", 2), P("graph_kernel_cse", 2), P("transform_op_optimizer", 2),
           P("graph_kernel_recompute", flag="enable_recompute_fusion")),
    _stage("stitch",
           P("stitch_fusion", flag="enable_stitch_fusion"), P("eliminate_redundant_output", 1)),
    _stage("combine",
           P("parallel_fusion", flag="enable_parallel_fusion"),
           P("dynamic_fusion", 1)),         # a model with dynamic dims: row kernels (fuse/dynamic.py)
    _stage("build",
           P("graph_kernel_build", 1)),
)

# The stage whose passes the fusion switch file (--fusionSwitchFile) controls.
FUSION_SWITCH_STAGE = "fusion"
# Passes of that stage whose home section is "UBFusion" (epilogue fusions into a MatMul); all the others
# belong to "GraphFusion".
UB_FUSION_PASSES = frozenset({"matmul_elem_biasadd_fusion", "matmul_elem_relu_fusion",
                              "matmul_elem_gelu_fusion"})
# Ascend/MindSpore CamelCase names accepted in the fusion switch file for our snake_case passes.
FUSION_SWITCH_ALIASES: dict[str, tuple[str, ...]] = {
    "conv_bn_fusion": ("ConvBatchnormFusionPass", "ConvBatchNormFusionPass", "ConvBnFusionPass",
                       "ConvBNFusionPass"),
    "transpose_matmul_fusion": ("TransposeMatMulFusionPass", "TransposeMatmulFusionPass"),
    "shape_reshape": ("ShapeReshapeFusionPass", "ReshapeFusionPass"),
    "split_concat_fusion": ("SplitConcatFusionPass",),
    "layer_norm_fusion": ("LayerNormFusionPass", "LayerNormalizationFusionPass"),
    "gelu_fusion": ("GeluFusionPass", "GeLUFusionPass"),
    "attention_fusion": ("AttentionFusionPass", "FlashAttentionFusionV1", "FlashAttentionFusionV2"),
    "matmul_elem_biasadd_fusion": ("MatMulBiasAddFusionPass", "MatmulBiasaddFusionPass"),
    "matmul_elem_relu_fusion": ("MatMulReluFusionPass", "MatmulReluFusionPass"),
    "matmul_elem_gelu_fusion": ("MatMulGeluFusionPass", "MatmulGeluFusionPass"),
    "add_layer_norm_fusion": ("AddLayerNormFusionPass",),
    "add_rms_norm_fusion": ("AddRmsNormFusionPass", "AddRMSNormFusionPass"),
    "pad_conv_fusion": ("ConvPadFusion", "ConvPadFusionPass", "PadConvFusionPass", "PadFusion"),
}

# -- pass modules (registration side effects); each engineer adds the import of their pass module here --------
from . import (  # noqa: E402,F401  (op combiner, recompute fusion)
    build,  # noqa: E402,F401  (graph_kernel_build: native code)
    combine,
    empty,  # noqa: F401
    expand,  # noqa: E402,F401  (graph_kernel_expander)
    recompute,
)
from .fuse import cluster, dynamic, parallel_fusion, redundant_output, stitch  # noqa: E402,F401  (graph_kernel_cluster, eliminate_redundant_output)  # noqa: E402,F401  (opt_level 3 stitch/parallel fusion)
from .rewrite import (  # noqa: E402,F401
    add_layer_norm,
    add_rms_norm,
    attention,
    conv1d,
    conv_bn,
    gelu,
    layer_norm,
    matmul_biasadd,
    matmul_gelu,
    matmul_integer,
    matmul_relu,
    pad_conv,
    quantized_conv,
    quantized_handoff,
    quantized_moves,
    shape_reshape,
    split_concat,
    transpose_matmul,
)
from .simplify import arith, constant_fold, cse, transform_op  # noqa: E402,F401  (opt_level 2 simplify)
