"""Canonical JSON: the json.dumps fast path writes exactly what the rfc8785 library writes."""

import hashlib

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tracefence import reasons
from otel_tracefence.canonical import canonicalize, inspect_value

SAFE_INT = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
scalars = st.none() | st.booleans() | SAFE_INT | st.text() | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_canonical_form_equals_rfc8785_library(value):
    try:
        expected = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):
        assert canonicalize(value).unavailable == reasons.ARGUMENTS_NOT_I_JSON
        return
    got = canonicalize(value, max_depth=512)
    assert got.text is not None and got.text.encode("utf-8") == expected
    assert got.sha256 == hashlib.sha256(expected).hexdigest()


def test_fast_path_is_taken_only_when_it_is_exact():
    assert inspect_value({"a": [1, "x"]}, 64) == (2, True)
    assert inspect_value({"a": 1.5}, 64)[1] is False  # floats: ES6 number formatting differs from repr
    assert inspect_value({"\u00e9": 1}, 64)[1] is False  # non-ASCII keys: UTF-16 order may differ
    assert inspect_value([2**53], 64)[1] is False


def test_key_order_and_whitespace_do_not_matter():
    assert canonicalize({"b": 1, "a": {"d": [1, 2], "c": None}}).text == '{"a":{"c":null,"d":[1,2]},"b":1}'
    assert canonicalize({"b": 1, "a": 2}).sha256 == canonicalize({"a": 2, "b": 1}).sha256


def test_values_without_a_canonical_form_are_unavailable_never_approximated():
    assert canonicalize({"id": 2**60}).unavailable == reasons.ARGUMENTS_NOT_I_JSON
    assert canonicalize({"s": "\ud800"}).unavailable == reasons.ARGUMENTS_NOT_I_JSON
    deep = []
    node = deep
    for _ in range(100):
        node.append([])
        node = node[0]
    assert canonicalize(deep, max_depth=64).unavailable == reasons.ARGUMENTS_TOO_DEEP
    assert canonicalize({"x": "y" * 100}, max_bytes=50).unavailable == reasons.ARGUMENTS_TOO_LARGE
