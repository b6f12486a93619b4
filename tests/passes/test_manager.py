"""passes/manager.py: MindSpore pass-manager rules (levels, flags, enable/disable_pass, fusion switch),
log lines, IR dumps, verification and stats."""
import logging
import os

import pytest
from graphkernel_testing import F32, mul_add_relu

from converter_lite.config import GraphKernelConfig, parse_flags, parse_fusion_switch
from converter_lite.errors import ConverterError
from converter_lite.ir.core import Node, TensorType, Value
from converter_lite.passes.base import Pass
from converter_lite.passes.empty import EmptyPass
from converter_lite.passes.manager import PassFailedError, PassManager, run_graph_kernel_optimizer, setup_logging
from converter_lite.passes.pipeline import DEFAULT_PIPELINE, PassSpec, StageSpec
from converter_lite.passes.registry import PASSES, register_pass

LOG = "converter_lite"


def cfg(text="--opt_level=1", **kw):
    return parse_flags(text, lambda m: None, **kw)


def enabled(text, **kw):
    m, c = PassManager(), cfg(text, **kw)
    return {s.full_name for s in m.slots if m.is_enabled(s, c)}


# -- test-only passes and a small pipeline ---------------------------------------------------------------------
class Touch(Pass):
    """Counts its runs; changes nothing."""
    name = "touch"

    def run(self, graph, ctx):
        ctx.count("touch")
        return False


class Relu2(Pass):
    """Appends TestRelu after the output (a real, valid change)."""
    name = "relu2"

    def run(self, graph, ctx):
        out = Value("relu2_out", graph.outputs[0].type)
        graph.nodes.append(Node("TestRelu", [graph.outputs[0]], [out], name="relu2"))
        graph.outputs = [out]
        return True


class Breaker(Pass):
    """Leaves a wrong stored type behind (invalid IR)."""
    name = "breaker"

    def run(self, graph, ctx):
        graph.nodes[-1].output.type = TensorType(F32, (99,))
        return True


class Crash(Pass):
    name = "crash"

    def run(self, graph, ctx):
        raise KeyError("boom")


class UserError(Pass):
    name = "user_error"

    def run(self, graph, ctx):
        raise ConverterError(-600, "bad parameter")


REGISTRY = {c.name: c for c in (EmptyPass, Touch, Relu2, Breaker, Crash, UserError)}
PIPE = (
    StageSpec("pre", (PassSpec("empty_pass", 1),)),
    StageSpec("work", (PassSpec("touch", 1), PassSpec("relu2", 2), PassSpec("missing_pass", 1),
                       PassSpec("touch", flag="enable_stitch_fusion"))),
)


def run(text="--opt_level=1", pipe=PIPE, graph=None, **kw):
    g = graph or mul_add_relu()
    ctx = run_graph_kernel_optimizer(g, cfg(text, **kw), manager=PassManager(pipe, REGISTRY))
    return g, ctx


# -- names and ids ----------------------------------------------------------------------------------------------
def test_default_pipeline_names_and_ids():
    full = [s.full_name for s in PassManager().slots]
    assert full[0] == "stage0_preprocess_0_empty_pass"
    assert "stage1_fusion_0_conv_bn_fusion" in full
    assert "stage3_cluster_0_graph_kernel_cluster" in full
    assert "stage4_highlevelopt_3_graph_kernel_recompute" in full
    assert full[-1] == "stage7_build_0_graph_kernel_build"
    assert [s.name for s in DEFAULT_PIPELINE] == ["preprocess", "fusion", "expand", "cluster", "highlevelopt",
                                                  "stitch", "combine", "build"]


def test_pass_names_unique_in_order():
    names = PassManager().pass_names()
    assert names[:3] == ["empty_pass", "constant_folding", "graph_kernel_cse"]
    assert len(names) == len(set(names)) and "add_rms_norm_fusion" in names


def test_empty_pass_is_registered():
    assert PASSES["empty_pass"] is EmptyPass


def test_register_pass_rejects_a_second_class_with_the_same_name():
    class Other(Pass):
        name = "empty_pass"
    with pytest.raises(RuntimeError, match="registered twice"):
        register_pass(Other)
    assert PASSES["empty_pass"] is EmptyPass


# -- enabling rule ----------------------------------------------------------------------------------------------
def test_levels():
    l1, l2, l3 = (enabled(f"--opt_level={n}") for n in (1, 2, 3))
    assert "stage0_preprocess_2_graph_kernel_cse" not in l1 and "stage0_preprocess_2_graph_kernel_cse" in l2
    assert "stage4_highlevelopt_0_arithmetic_simplify" in l2
    # composite-op pattern fusions are opt-in on the CPU (graph-kernel fusion covers them natively)
    assert not any("attention_fusion" in n or "matmul_elem" in n for n in l3)
    assert "stage1_fusion_6_attention_fusion" in enabled("--opt_level=1 --enable_pass=attention_fusion")
    assert "stage2_expand_1_graph_kernel_op_combiner" in l3 - l2
    assert l1 < l2 < l3


def test_flag_gated_passes():
    stitch, recompute = "stage5_stitch_0_stitch_fusion", "stage4_highlevelopt_3_graph_kernel_recompute"
    assert stitch not in enabled("--opt_level=2") and stitch in enabled("--opt_level=3")
    assert stitch in enabled("--opt_level=1 --enable_stitch_fusion")
    assert stitch not in enabled("--opt_level=3 --enable_stitch_fusion=false")
    assert recompute in enabled("--opt_level=2") and recompute not in enabled("--opt_level=1")
    assert "stage6_combine_0_parallel_fusion" in enabled("--opt_level=1 --enable_parallel_fusion=on")


@pytest.mark.parametrize("item", ["3.0", "cluster.graph_kernel_cluster", "stage3_cluster_0_graph_kernel_cluster",
                                  "graph_kernel_cluster"])
def test_disable_pass_item_forms(item):
    on = enabled(f"--opt_level=2 --disable_pass={item}")
    assert "stage3_cluster_0_graph_kernel_cluster" not in on
    assert "stage3_cluster_1_eliminate_redundant_output" in on


def test_bare_name_switches_every_slot_of_the_pass():
    on = enabled("--opt_level=2 --disable_pass=graph_kernel_cse")
    assert not any(n.endswith("graph_kernel_cse") for n in on)
    on = enabled("--opt_level=2 --disable_pass=4.1")
    assert "stage0_preprocess_2_graph_kernel_cse" in on and "stage4_highlevelopt_1_graph_kernel_cse" not in on


@pytest.mark.parametrize("item", ["4.0", "highlevelopt.arithmetic_simplify", "arithmetic_simplify",
                                  "stage4_highlevelopt_0_arithmetic_simplify"])
def test_enable_pass_turns_on_above_level(item):
    assert "stage4_highlevelopt_0_arithmetic_simplify" in enabled(f"--opt_level=1 --enable_pass={item}")


def test_enable_pass_turns_on_flag_gated_pass():
    assert "stage5_stitch_0_stitch_fusion" in enabled("--opt_level=1 --enable_pass=stitch_fusion")


def test_unknown_pass_names_warn(caplog):
    caplog.set_level(logging.WARNING, logger=LOG)
    run("--opt_level=1 --disable_pass=nope,9.9 --enable_pass=work.touch")
    msgs = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("'nope'" in m and "disable_pass" in m for m in msgs)
    assert any("'9.9'" in m for m in msgs)
    assert not any("work.touch" in m for m in msgs)


def test_fusion_switch_all_off_spares_ub_fusion_and_listed_passes():
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"ALL":"off","ConvBatchnormFusionPass":"on"}}}')
    on = enabled("--opt_level=1", fusion_switch=fs)
    assert "stage1_fusion_0_conv_bn_fusion" in on
    assert "stage1_fusion_5_gelu_fusion" not in on
    assert "stage1_fusion_8_matmul_elem_relu_fusion" not in on     # opt-in, and the file does not list it
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"ALL":"off"},"UBFusion":{"MatMulReluFusionPass":"on"}}}')
    assert "stage1_fusion_8_matmul_elem_relu_fusion" in enabled("--opt_level=1", fusion_switch=fs)
    assert "stage3_cluster_0_graph_kernel_cluster" in on          # only the fusion stage is switched


def test_fusion_switch_ub_section_and_alias():
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"MatMulBiasAddFusionPass":"off"},'
                             '"UBFusion":{"ALL":"off","matmul_elem_gelu_fusion":"on"}}}')
    on = enabled("--opt_level=1", fusion_switch=fs)
    assert "stage1_fusion_7_matmul_elem_biasadd_fusion" not in on
    assert "stage1_fusion_8_matmul_elem_relu_fusion" not in on
    assert "stage1_fusion_9_matmul_elem_gelu_fusion" in on
    assert "stage1_fusion_5_gelu_fusion" in on


def test_fusion_switch_explicit_on_beats_level_and_flags_beat_file():
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"AttentionFusionPass":"on","GeluFusionPass":"off"}}}')
    assert "stage1_fusion_6_attention_fusion" in enabled("--opt_level=1", fusion_switch=fs)
    assert "stage1_fusion_5_gelu_fusion" in enabled("--opt_level=1 --enable_pass=gelu_fusion", fusion_switch=fs)


def test_unknown_fusion_switch_names_warn(caplog):
    caplog.set_level(logging.WARNING, logger=LOG)
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"ZConcatv2dFusionPass":"off"}}}')
    run(fusion_switch=fs)
    assert any("ZConcatv2dFusionPass" in r.getMessage() for r in caplog.records)


# -- running and logging ----------------------------------------------------------------------------------------
def test_info_log_lines(caplog):
    caplog.set_level(logging.DEBUG, logger=LOG)
    run("--opt_level=1")
    msgs = [r.getMessage() for r in caplog.records]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert info[0].startswith('graph_kernel_flags = "--opt_level=1", all flags: {"opt_level": 1, ')
    assert info[1] == "graph kernel passes: empty_pass,touch,relu2,missing_pass"
    assert info[2] == "Run graphkernel optimization begin."
    assert info[-1] == "Run graphkernel optimization end."
    runs = [m for m in info if m.startswith("Run pass ")]
    assert [m.split()[2] for m in runs] == ["stage0_pre_0_empty_pass", "stage1_work_0_touch"]
    assert all(m.endswith(" us.") and m.split()[4].isdigit() for m in runs)
    assert "pass stage1_work_1_relu2 is disabled." in info
    assert "pass stage1_work_3_touch is disabled." in info
    assert any("stage1_work_2_missing_pass" in m and "not available" in m for m in msgs
               if m not in info)                                    # DEBUG, not INFO


def test_opt_level_0_does_nothing(caplog):
    caplog.set_level(logging.DEBUG, logger=LOG)
    g, ctx = run("--opt_level=0 --enable_pass=touch")
    assert caplog.records == [] and ctx.stats == {} and len(g.nodes) == 3


def test_stats_and_changes():
    g, ctx = run("--opt_level=2 --enable_stitch_fusion")
    assert ctx.stats["touch"] == 2                                  # run in two slots
    assert ctx.stats["changed/stage1_work_1_relu2"] == 1 and ctx.stats["changed/stage1_work_0_touch"] == 0
    assert ctx.stats["time_us/stage0_pre_0_empty_pass"] >= 0
    assert [n.op for n in g.nodes][-1] == "TestRelu" and len(g.nodes) == 4


def test_default_pipeline_skips_passes_without_a_class(caplog):
    caplog.set_level(logging.DEBUG, logger=LOG)
    g = mul_add_relu()
    manager = PassManager(DEFAULT_PIPELINE, {"empty_pass": EmptyPass})
    ctx = run_graph_kernel_optimizer(g, cfg("--opt_level=3"), manager=manager)
    assert [k for k in ctx.stats if k.startswith("changed/")] == ["changed/stage0_preprocess_0_empty_pass"]
    assert len(g.nodes) == 3
    skipped = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("stage7_build_0_graph_kernel_build" in m for m in skipped)


# -- IR dumps ---------------------------------------------------------------------------------------------------
def test_ir_dump_per_executed_pass(tmp_path):
    run("--opt_level=2", dump_ir=True, dump_dir=str(tmp_path))
    d = tmp_path / "verbose_ir_files" / "graph_kernel"
    assert sorted(os.listdir(d)) == ["0000_stage0_pre_0_empty_pass.ir", "0001_stage1_work_0_touch.ir",
                                     "0002_stage1_work_1_relu2.ir"]
    first = (d / "0000_stage0_pre_0_empty_pass.ir").read_text()
    last = (d / "0002_stage1_work_1_relu2.ir").read_text()
    assert first.startswith("#IR entry      : @mul_add_relu\n") and "#Total subgraph : 1" in first
    assert "relu2" not in first and "= TestRelu(%3)  # relu2" in last
    assert not any(n.startswith(".tmp") for n in os.listdir(d))


def test_no_dump_without_flag(tmp_path):
    run("--opt_level=2", dump_dir=str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_dump_as_text_writes_records_and_svgs(tmp_path):
    class Recorder(Pass):
        name = "recorder"

        def run(self, graph, ctx):
            ctx.record("graph_kernel_cluster.txt", "Source nodes of fused_0 = mul, add")
            return False
    pipe = (StageSpec("pre", (PassSpec("recorder", 1),)),)
    g = mul_add_relu()
    run_graph_kernel_optimizer(g, cfg("--opt_level=1 --dump_as_text", dump_dir=str(tmp_path)),
                               manager=PassManager(pipe, {"recorder": Recorder}))
    d = tmp_path / "graph_kernel_dump"
    assert (d / "graph_kernel_cluster.txt").read_text() == "Source nodes of fused_0 = mul, add\n"
    assert {"fusion_before.svg", "fusion_after.svg", "fusion_before_after.svg"} <= set(os.listdir(d))


# -- verification and failures ----------------------------------------------------------------------------------
BREAK_PIPE = (StageSpec("pre", (PassSpec("empty_pass", 1),)), StageSpec("bad", (PassSpec("breaker", 1),)))


@pytest.mark.parametrize("text,kw", [("--opt_level=1", {"verify_ir": True}),
                                     ("--opt_level=1 --enable_debug_mode", {})])
def test_verifier_names_the_pass(text, kw):
    with pytest.raises(PassFailedError) as e:
        run(text, pipe=BREAK_PIPE, **kw)
    assert e.value.code == -1 and e.value.pass_full_name == "stage1_bad_0_breaker"
    assert "stage1_bad_0_breaker" in str(e.value) and "stored as f32[99]" in str(e.value)


def test_no_verification_by_default():
    run("--opt_level=1", pipe=BREAK_PIPE)


def test_pass_exception_is_wrapped_with_pass_name(caplog):
    pipe = (StageSpec("x", (PassSpec("crash", 1),)),)
    with pytest.raises(PassFailedError, match=r"stage0_x_0_crash failed: KeyError") as e:
        run(pipe=pipe)
    assert isinstance(e.value.__cause__, KeyError)
    assert any(r.levelname == "ERROR" for r in caplog.records)


def test_converter_error_from_pass_propagates_unchanged():
    pipe = (StageSpec("x", (PassSpec("user_error", 1),)),)
    with pytest.raises(ConverterError) as e:
        run(pipe=pipe)
    assert e.value.code == -600 and not isinstance(e.value, PassFailedError)


# -- logging setup ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("glog_v,level", [("0", logging.DEBUG), ("1", logging.INFO), ("2", logging.WARNING),
                                          ("3", logging.ERROR), (None, logging.WARNING), ("x", logging.WARNING)])
def test_setup_logging_levels(glog_v, level):
    logger = logging.getLogger(LOG)
    old_level, old_handlers = logger.level, list(logger.handlers)
    try:
        setup_logging(glog_v)
        setup_logging(glog_v)                                       # idempotent: one handler
        assert logger.level == level
        ours = [h for h in logger.handlers if getattr(h, "_converter_lite", False)]
        assert len(ours) == 1
        rec = logging.LogRecord(LOG, logging.INFO, "manager.py", 1, "Run pass x in 3 us.", None, None, "run")
        assert ours[0].format(rec).startswith("[INFO] CONVERTER(")
        assert ours[0].format(rec).endswith("run] Run pass x in 3 us.")
    finally:
        logger.setLevel(old_level)
        logger.handlers[:] = old_handlers


def test_graph_kernel_config_direct_construction_works_with_manager():
    g = mul_add_relu()
    ctx = run_graph_kernel_optimizer(g, GraphKernelConfig(opt_level=1), manager=PassManager(PIPE, REGISTRY))
    assert ctx.stats["touch"] == 1


def test_every_registered_pass_has_a_pipeline_slot():
    names = set(PassManager().pass_names())
    missing = sorted(n for n in PASSES if n not in names)
    assert not missing, f"registered passes that DEFAULT_PIPELINE never runs: {missing}"
