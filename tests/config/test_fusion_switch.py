"""--fusionSwitchFile: Ascend-style JSON; errors are -600 saying where."""
import pytest

from converter_lite.config import FusionSwitch, load_fusion_switch_file, parse_fusion_switch
from converter_lite.errors import RET_INPUT_PARAM_INVALID, ConverterError


def test_seed_example_all_off_with_exceptions():
    fs = parse_fusion_switch('{ "Switch":{ "GraphFusion":{ "ALL":"off", "SoftmaxFusionPass":"on" }, '
                             '"UBFusion":{ "ALL":"off", "FusionVirtualOpSetSwitch":"on" } } }')
    assert fs.graph_fusion.default is False and fs.ub_fusion.default is False
    assert fs.state("GraphFusion", ["SoftmaxFusionPass"]) is True
    assert fs.state("GraphFusion", ["Other"]) is False
    assert fs.names() == ["SoftmaxFusionPass", "FusionVirtualOpSetSwitch"]


def test_all_on_gives_no_opinion_and_off_entries_win():
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"ALL":"on","ConvBatchnormFusionPass":"off"}}}')
    assert fs.state("GraphFusion", ["conv_bn_fusion", "ConvBatchnormFusionPass"]) is False
    assert fs.state("GraphFusion", ["gelu_fusion"]) is None
    assert fs.state("UBFusion", ["matmul_elem_relu_fusion"]) is None    # absent section = all on


def test_explicit_entry_found_in_the_other_section():
    fs = parse_fusion_switch('{"Switch":{"GraphFusion":{"MatMulBiasAddFusionPass":"off"},"UBFusion":{"ALL":"on"}}}')
    assert fs.state("UBFusion", ["MatMulBiasAddFusionPass"]) is False


def test_empty_switch_is_default():
    assert parse_fusion_switch('{"Switch":{}}') == FusionSwitch()


def test_load_from_file(tmp_path):
    p = tmp_path / "fusion_switch.cfg"
    p.write_text('{\n  "Switch": {\n    "GraphFusion": {"ALL": "off"}\n  }\n}\n')
    assert load_fusion_switch_file(str(p)).graph_fusion.default is False


def test_invalid_json_reports_line_and_column(tmp_path):
    p = tmp_path / "fs.cfg"
    p.write_text('{\n  "Switch": {\n    "GraphFusion": {"ALL": "off",}\n  }\n}\n')
    with pytest.raises(ConverterError) as e:
        load_fusion_switch_file(str(p))
    assert e.value.code == RET_INPUT_PARAM_INVALID
    assert str(e.value).startswith(f"{p}:3:") and "invalid JSON" in str(e.value)


@pytest.mark.parametrize("text,where", [
    ('[]', '"Switch"'),
    ('{"switch": {}}', '"Switch"'),
    ('{"Switch": {}, "Extra": 1}', '"Switch"'),
    ('{"Switch": []}', '"Switch" must be an object'),
    ('{"Switch": {"GraphFusion": ["ALL"]}}', "Switch.GraphFusion"),
    ('{"Switch": {"LxFusion": {}}}', "Switch.LxFusion"),
    ('{"Switch": {"GraphFusion": {"ALL": "maybe"}}}', "Switch.GraphFusion.ALL"),
    ('{"Switch": {"UBFusion": {"X": true}}}', "Switch.UBFusion.X"),
    ('{"Switch": {"GraphFusion": {"X": "ON"}}}', "Switch.GraphFusion.X"),
])
def test_wrong_shape_or_value_names_the_key_path(text, where):
    with pytest.raises(ConverterError) as e:
        parse_fusion_switch(text, "fs.json")
    assert e.value.code == RET_INPUT_PARAM_INVALID
    assert str(e.value).startswith("fs.json: ") and where in str(e.value)


def test_unreadable_file_is_600(tmp_path):
    with pytest.raises(ConverterError) as e:
        load_fusion_switch_file(str(tmp_path / "missing.json"))
    assert e.value.code == RET_INPUT_PARAM_INVALID
