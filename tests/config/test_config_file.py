"""--configFile INI parsing: [graph_kernel_param] -> sorted --key=value string; errors are -600 with line."""
import pytest

from converter_lite.config import load_config_file, parse_flags, parse_ini, section_to_flags
from converter_lite.errors import RET_INPUT_PARAM_INVALID, ConverterError


def write(tmp_path, text, name="akg.cfg", mode="w"):
    p = tmp_path / name
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text)
    return str(p)


def test_graph_kernel_section_becomes_sorted_flag_string(tmp_path):
    path = write(tmp_path, "# GK config\n\n[graph_kernel_param]\nopt_level=2\n"
                           "  disable_pass = \"cluster.graph_kernel_cluster\"  \ndump_as_text='true'\n"
                           "[common_quant_param]\nquant_type=WEIGHT_QUANT\n")
    flags, other = load_config_file(path)
    assert flags == "--disable_pass=cluster.graph_kernel_cluster --dump_as_text=true --opt_level=2 "
    assert other == {"common_quant_param": {"quant_type": "WEIGHT_QUANT"}}
    c = parse_flags(flags, lambda m: pytest.fail(m))
    assert c.opt_level == 2 and c.dump_as_text and c.disable_pass == ("cluster.graph_kernel_cluster",)


def test_no_graph_kernel_section_gives_empty_string(tmp_path):
    flags, other = load_config_file(write(tmp_path, "[acl_build_options]\ninput_format=NCHW\n"))
    assert flags == "" and other == {"acl_build_options": {"input_format": "NCHW"}}


def test_empty_file(tmp_path):
    assert load_config_file(write(tmp_path, "")) == ("", {})


def test_value_may_contain_equals_and_key_before_section(tmp_path):
    sections = parse_ini("top=1\n[s]\na=b=c\nempty=\n")
    assert sections == {"": {"top": "1"}, "s": {"a": "b=c", "empty": ""}}


def test_repeated_key_keeps_last_value():
    assert parse_ini("[graph_kernel_param]\nopt_level=1\nopt_level=2\n")["graph_kernel_param"] == \
        {"opt_level": "2"}


def test_section_to_flags_sorted():
    assert section_to_flags({"opt_level": "2", "enable_pass": "a,b"}) == "--enable_pass=a,b --opt_level=2 "


@pytest.mark.parametrize("text,line,what", [
    ("[graph_kernel_param]\nopt_level 2\n", 2, "key=value"),
    ("[graph_kernel_param]\nopt_level=2\n\n=3\n", 4, "key=value"),
    ("# c\n[graph_kernel_param\nopt_level=2\n", 2, "section"),
    ("[]\n", 1, "section"),
])
def test_malformed_lines_are_600_with_file_and_line(tmp_path, text, line, what):
    path = write(tmp_path, text)
    with pytest.raises(ConverterError) as e:
        load_config_file(path)
    assert e.value.code == RET_INPUT_PARAM_INVALID
    assert str(e.value).startswith(f"{path}:{line}: ") and what in str(e.value)


def test_missing_file_is_600(tmp_path):
    with pytest.raises(ConverterError) as e:
        load_config_file(str(tmp_path / "nope.cfg"))
    assert e.value.code == RET_INPUT_PARAM_INVALID and "nope.cfg" in str(e.value)


def test_directory_is_600(tmp_path):
    with pytest.raises(ConverterError) as e:
        load_config_file(str(tmp_path))
    assert e.value.code == RET_INPUT_PARAM_INVALID


@pytest.mark.parametrize("data", [b"\xff\xfe\x00[graph_kernel_param]", b"opt_level=2\x00\n", b"\x89PNG\r\n\x1a\n\x00"])
def test_binary_file_is_600(tmp_path, data):
    with pytest.raises(ConverterError) as e:
        load_config_file(write(tmp_path, data, mode="wb"))
    assert e.value.code == RET_INPUT_PARAM_INVALID and "not a text file" in str(e.value)


def test_utf8_bom_and_crlf_are_accepted(tmp_path):
    path = write(tmp_path, "\ufeff[graph_kernel_param]\r\nopt_level=1\r\n".encode(), mode="wb")
    assert load_config_file(path)[0] == "--opt_level=1 "
