"""parse_flags: MindSpore's forgiving graph-kernel flag rules (reference §1.2)."""
import dataclasses
import json
import logging

import pytest

from converter_lite.config import FLAG_KEYS, GraphKernelConfig, parse_flags, resolve_flags


def parse(text, **kw):
    warnings = []
    return parse_flags(text, warnings.append, **kw), warnings


def test_defaults_match_mindspore_lite():
    c, w = parse("")
    assert w == []
    assert c.opt_level == 0 and not c.enabled
    assert c.reduce_fuse_depth == 20 and c.composite_op_limit_size == 200 and c.fusion_ops_level == 1
    assert not c.enable_stitch_fusion and not c.enable_parallel_fusion and not c.enable_recompute_fusion
    assert c.kernel_generator == "AKG" and c.cpu_arch == "" and c.dump_as_text is False
    assert c.fusion_switch is None and c.dump_ir is False and c.dump_dir == "." and c.verify_ir is False


@pytest.mark.parametrize("level,stitch,parallel,recompute", [
    (1, False, False, False), (2, False, False, True), (3, True, True, True)])
def test_opt_level_dependent_defaults(level, stitch, parallel, recompute):
    c, _ = parse(f"--opt_level={level}")
    assert (c.enable_stitch_fusion, c.enable_parallel_fusion, c.enable_recompute_fusion) == \
        (stitch, parallel, recompute)
    assert GraphKernelConfig(opt_level=level).enable_stitch_fusion == stitch


def test_explicit_flag_beats_opt_level_default():
    c, _ = parse("--opt_level=3 --enable_stitch_fusion=false --enable_recompute_fusion=off")
    assert c.enable_stitch_fusion is False and c.enable_parallel_fusion is True
    assert c.enable_recompute_fusion is False


def test_opt_level_above_3_is_clamped_with_warning():
    c, w = parse("--opt_level=7")
    assert c.opt_level == 3
    assert len(w) == 1 and "opt_level" in w[0] and "7" in w[0] and "set to 3" in w[0]


@pytest.mark.parametrize("value", ["-1", "two", "", "1.5"])
def test_bad_opt_level_keeps_default(value):
    c, w = parse(f"--opt_level={value}" if value else "--opt_level")
    assert c.opt_level == 0
    assert len(w) == 1 and "opt_level" in w[0]


def test_default_opt_level_for_enable_graph_kernel():
    assert parse("", default_opt_level=2)[0].opt_level == 2
    assert parse("--opt_level=1", default_opt_level=2)[0].opt_level == 1


@pytest.mark.parametrize("spelling,value", [
    ("", True), ("=true", True), ("=True", True), ("=on", True), ("=1", True),
    ("=false", False), ("=False", False), ("=off", False), ("=0", False)])
def test_bool_spellings(spelling, value):
    c, w = parse(f"--dump_as_text{spelling}")
    assert w == [] and c.dump_as_text is value


@pytest.mark.parametrize("bad", ["yes", "TRUE", "2", "onn"])
def test_bad_bool_keeps_default_and_names_key(bad):
    c, w = parse(f"--enable_debug_mode={bad}")
    assert c.enable_debug_mode is False
    assert len(w) == 1 and f"--enable_debug_mode={bad}" in w[0] and "keeps its default" in w[0]


def test_int_flags():
    c, w = parse("--reduce_fuse_depth=5 --composite_op_limit_size=+64 --online_tuning=2")
    assert (c.reduce_fuse_depth, c.composite_op_limit_size, c.online_tuning) == (5, 64, 2)
    assert len(w) == 1 and "'online_tuning' is accepted but has no effect" in w[0]     # nothing reads it
    c, w = parse("--composite_op_limit_size=12abc")
    assert c.composite_op_limit_size == 200 and "composite_op_limit_size" in w[0]
    c, w = parse("--fusion_ops_level=-1")          # unsigned in MindSpore
    assert c.fusion_ops_level == 1 and "fusion_ops_level" in w[0]
    c, _ = parse("--reduce_fuse_depth=-1")         # -1 means "the target's default"
    assert c.reduce_fuse_depth == 20


def test_string_flags():
    c, w = parse("--cpu_arch=x86_64 --cpu_type=skylake-avx512 --cpu_feature=avx512 --kernel_generator=AKG_V2")
    assert len(w) == 1 and "'kernel_generator' is accepted but has no effect" in w[0]   # nothing reads it
    assert (c.cpu_arch, c.cpu_type, c.cpu_feature, c.kernel_generator) == \
        ("x86_64", "skylake-avx512", "avx512", "AKG_V2")
    c, w = parse("--cpu_arch")
    assert c.cpu_arch == "" and "cpu_arch" in w[0]


def test_lists_split_on_commas_dropping_empty_items():
    c, w = parse("--enable_pass=a,,b, --disable_expand_ops=GeLU --enable_cluster_ops_only=Add,Mul")
    assert w == []
    assert c.enable_pass == ("a", "b") and c.disable_expand_ops == ("GeLU",)
    assert c.enable_cluster_ops_only == ("Add", "Mul")
    c, w = parse("--disable_pass=,,")
    assert c.disable_pass == () and "disable_pass" in w[0]


def test_repeated_key_first_wins():
    c, w = parse("--opt_level=1 --opt_level=3")
    assert c.opt_level == 1
    assert len(w) == 1 and "'opt_level'" in w[0] and "repeated" in w[0]
    c, w = parse("--opt_level=bad --opt_level=2")   # the first occurrence wins even if invalid
    assert c.opt_level == 0 and len(w) == 2


@pytest.mark.parametrize("token", ["opt_level=2", "--", "--=2", "--opt_level=", "--opt_level=2=3", "-opt_level=2"])
def test_invalid_tokens_warn_and_are_ignored(token):
    c, w = parse(f"{token} --dump_as_text")
    assert c.dump_as_text is True and c.opt_level == 0
    assert len(w) == 1 and f"'{token}'" in w[0] and "is invalid" in w[0] and "--key=value" in w[0]


def test_spaces_separate_tokens_runs_collapse():
    c, w = parse("  --opt_level=2    --dump_as_text  ")
    assert w == [] and c.opt_level == 2 and c.dump_as_text


def test_unknown_flags_warn_in_mindspore_words():
    c, w = parse("--opt_level=2 --zzz=1 --aaa")
    assert c.opt_level == 2
    assert w[0] == "Unknown flag: aaa" and w[1] == "Unknown flag: zzz"
    assert "unknown" in w[2]


def test_hardware_only_keys_are_accepted_with_a_warning():
    c, w = parse("--enable_cce_lib --enable_low_precision=true --disable_cce_lib_ops=MatMul")
    assert c.enable_cce_lib and c.enable_low_precision and c.disable_cce_lib_ops == ("MatMul",)
    assert len(w) == 3 and all("GPU/Ascend" in x for x in w)
    assert any("enable_cce_lib'" in x for x in w)


def test_simplify_expr_ids():
    c, w = parse("--disable_simplify_exprs=3,17")
    assert w == []
    assert not c.simplify_rule_enabled(3) and not c.simplify_rule_enabled(17) and c.simplify_rule_enabled(1)
    c, _ = parse("--enable_simplify_exprs_only=5 --disable_simplify_exprs=5")
    assert c.simplify_rule_enabled(5) and not c.simplify_rule_enabled(1)
    c, w = parse("--disable_simplify_exprs=x1")
    assert "disable_simplify_exprs" in w[0] and "x1" in w[0]


def test_default_warn_goes_to_converter_lite_logger(caplog):
    caplog.set_level(logging.WARNING, logger="converter_lite")
    parse_flags("--nope=1")
    assert any(r.levelname == "WARNING" and r.getMessage() == "Unknown flag: nope" for r in caplog.records)


def test_converter_only_fields_and_raw_text():
    c = parse_flags("--opt_level=1", lambda m: None, dump_ir=True, dump_dir="/tmp/x", verify_ir=True)
    assert c.dump_ir and c.dump_dir == "/tmp/x" and c.verify_ir and c.flags_text == "--opt_level=1"


def test_flags_json_lists_every_mindspore_key_and_no_converter_field():
    c, _ = parse("--opt_level=2 --enable_pass=a")
    d = json.loads(c.flags_json())
    assert list(d) == list(FLAG_KEYS)
    assert d["opt_level"] == 2 and d["enable_pass"] == ["a"] and d["reduce_fuse_depth"] == 20
    assert "dump_dir" not in d and "fusion_switch" not in d


def test_config_is_frozen_and_hashable():
    c, _ = parse("--opt_level=2 --enable_pass=a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.opt_level = 3
    assert hash(c) == hash(parse("--opt_level=2 --enable_pass=a")[0])
    with pytest.raises(ValueError):
        GraphKernelConfig(opt_level=4)


@pytest.mark.parametrize("cfg,env,expected", [
    ("--opt_level=2 ", None, "--opt_level=2 "),
    ("--opt_level=2 ", "", "--opt_level=2 "),
    ("--opt_level=2 ", "   ", "--opt_level=2 "),
    ("--opt_level=2 ", "--opt_level=1", "--opt_level=1"),
    (None, "--opt_level=3", "--opt_level=3"),
    (None, None, ""),
])
def test_env_flags_replace_config_flags(cfg, env, expected):
    assert resolve_flags(cfg, env) == expected


def test_env_replaces_not_merges():
    text = resolve_flags("--opt_level=2 --dump_as_text ", "--disable_pass=x")
    c, _ = parse(text)
    assert c.opt_level == 0 and not c.dump_as_text and c.disable_pass == ("x",)
