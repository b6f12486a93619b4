"""String ops (ops/strings.py) against onnxruntime; the data-dependent shapes of StringSplit and of
StringNormalizer with stopwords (DynamicShapeError unless the input is constant)."""
from __future__ import annotations

import numpy as np
import pytest
from test_tensor_harness import check, check_rejects, ir_node, ours

from converter_lite.ir.dtype import DType
from converter_lite.ops.registry import DynamicShapeError, infer_dynamic, infer_types


def S(*v, shape=None):
    a = np.array(list(v), dtype=object)
    return a.reshape(shape) if shape is not None else a


WORDS = S("Hello", "", "a b  c", " lead", "trail ", "ÄÖü straße", "x,y,,z", "日本語", shape=(2, 4))
LOCALE = "C.UTF-8"      # onnxruntime needs an installed locale for StringNormalizer


# -- StringConcat ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", [(WORDS, WORDS), (WORDS, S("!")), (S("-", "+", shape=(2, 1)), WORDS),
                                 (S("x", shape=()), S("y", shape=())), (S(shape=(0, 3)), S("z"))])
def test_string_concat(a, b):
    check("StringConcat", {"a": a, "b": b}, opset=20)


# -- RegexFullMatch ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", [r"[a-z ]+", r".*\s.*", r"(\w+)@(\w+)\.com", r"", r"\p{L}+" if False else
                                     r"[^,]*,[^,]*", r"x,y,,z|Hello"])
def test_regex_full_match(pattern):
    check("RegexFullMatch", {"x": WORDS}, opset=20, pattern=pattern)
    check("RegexFullMatch", {"x": S("ann@site.com", "bob@x.org", "a@b.com ")}, opset=20, pattern=pattern)


def test_regex_rejects_bad_pattern():
    check_rejects("RegexFullMatch", {"x": WORDS}, pattern="(")
    check_rejects("RegexFullMatch", {"x": np.zeros(2, np.float32)}, pattern="a")


# -- StringSplit -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs", [{}, {"delimiter": ","}, {"delimiter": " "}, {"delimiter": ""},
                                   {"delimiter": ",", "maxsplit": 1}, {"maxsplit": 0}, {"maxsplit": 1},
                                   {"delimiter": ",,"}])
@pytest.mark.parametrize("x", [WORDS, S("   ", "", " a b ", "a  b c  "), S(shape=(0,)), S("one", shape=())])
def test_string_split(attrs, x):
    check("StringSplit", {"x": x}, n_outputs=2, opset=20, infer=False, **attrs)
    check("StringSplit", {"x": x}, n_outputs=2, const=("x",), opset=20, **attrs)


def test_string_split_on_any_whitespace():
    """The spec's whitespace (onnxruntime only splits on spaces)."""
    y, z = ours("StringSplit", {"x": S("a\tb\nc ", "\u3000x")}, 2)
    assert y.tolist() == [["a", "b", "c"], ["x", "", ""]] and z.tolist() == [3, 1]


def test_string_split_inference_is_dynamic():
    node = ir_node("StringSplit", {"x": WORDS}, 2, (), {})
    with pytest.raises(DynamicShapeError):
        infer_types(node)
    assert [t.dtype for t in infer_dynamic(node)] == [DType.string, DType.int64]


# -- StringNormalizer --------------------------------------------------------------------------------------------
NORM = [{}, {"case_change_action": "NONE", "stopwords": ["a", "World"]},
        {"stopwords": ["monday", "HELLO"], "is_case_sensitive": 1},
        {"stopwords": ["monday", "HELLO"], "is_case_sensitive": 0, "case_change_action": "UPPER"},
        {"stopwords": ["x", "Monday", "tuesday", "y"], "case_change_action": "LOWER"}]


@pytest.mark.parametrize("attrs", NORM)
@pytest.mark.parametrize("x", [S("monday", "Hello", "world", "a", "MONDAY"), S("Monday", "tuesday", shape=(1, 2)),
                               S("tuesday", "x", "y", shape=(1, 3)), S("z"), S("Straße", "ÄÖü", "ǅ", "İ")])
def test_string_normalizer(attrs, x):
    check("StringNormalizer", {"x": x}, opset=10, infer=not attrs.get("stopwords"), locale=LOCALE, **attrs)
    check("StringNormalizer", {"x": x}, const=("x",), opset=10, locale=LOCALE, **attrs)


def test_string_normalizer_case_change():
    x = S("Monday", "Straße", "ÄBC", "x", shape=(1, 4))
    assert ours("StringNormalizer", {"x": x}, case_change_action="UPPER")[0].tolist() == \
        [["MONDAY", "STRAßE", "ÄBC", "X"]]
    y = ours("StringNormalizer", {"x": x[0]}, case_change_action="LOWER", stopwords=("x", "MONDAY"))[0]
    assert y.tolist() == ["straße", "äbc"]
    assert ours("StringNormalizer", {"x": S("a")}, stopwords=("A",))[0].tolist() == [""]


def test_string_normalizer_inference():
    x = S("a", "b", shape=(1, 2))
    assert infer_types(ir_node("StringNormalizer", {"x": x}, 1, (), {}))[0].shape == (1, 2)
    with pytest.raises(DynamicShapeError):
        infer_types(ir_node("StringNormalizer", {"x": x}, 1, (), {"stopwords": ("a",)}))
    check_rejects("StringNormalizer", {"x": S("a", "b", shape=(2, 1))})
    check_rejects("StringNormalizer", {"x": x}, case_change_action="TITLE")
