"""Canonical JSON: the json.dumps fast path writes exactly what the rfc8785 library writes."""

import hashlib
import json

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tracefence.core import canonical

from otel_tracefence.core import reasons
from otel_tracefence.core.canonical import NOT_SIMPLE, Canonical, canonicalize, inspect_value, parse_json_text, parse_simple_json

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


any_ints = st.integers(min_value=-(2**70), max_value=2**70)
text_values = st.recursive(
    st.none() | st.booleans() | any_ints | st.text() | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _slow(text: str, max_depth: int) -> Canonical:
    return canonicalize(parse_json_text(text), max_depth=max_depth)


@settings(max_examples=400, deadline=None)
@given(text_values, st.sampled_from([2, 64]), st.booleans())
def test_text_fast_path_gives_what_parse_then_inspect_gives(value, max_depth, ascii_only):
    """JSON text through parse_simple_json + canonicalize(simple=True) gives exactly the canonical form
    (or the reason there is none) of parse_json_text + canonicalize: big integers, floats, non-ASCII
    keys and deep nesting included."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    parsed = parse_simple_json(text, max_depth)
    expected = _slow(text, max_depth)
    if parsed is NOT_SIMPLE:
        return
    assert parsed == json.loads(text)
    assert canonicalize(parsed, max_depth=max_depth, simple=True) == expected


def test_text_fast_path_examples():
    assert parse_simple_json('{"a": 1.5}', 64) is NOT_SIMPLE  # floats take the inspected path
    assert parse_simple_json("[[[1]]]", 2) is NOT_SIMPLE  # more brackets than the depth allowed
    assert parse_simple_json('{"a": NaN}', 64) is NOT_SIMPLE and parse_simple_json('{"a": ', 64) is NOT_SIMPLE
    # Integers of 16 characters or more, which may lie beyond 2**53 - 1, take the inspected path too.
    assert parse_simple_json('{"id": 9007199254740993}', 64) is NOT_SIMPLE and parse_simple_json("[-900719925474099]", 64) is NOT_SIMPLE
    assert _slow('{"id": 9007199254740993}', 64).unavailable == reasons.ARGUMENTS_NOT_I_JSON
    assert parse_simple_json('{"id": 900719925474099, "n": -90071992547409, "s": "12345678901234567890"}', 64) == {
        "id": 900719925474099, "n": -90071992547409, "s": "12345678901234567890"}
    assert canonicalize(parse_simple_json('{"\\u00e9": 1, "z": 2}', 64), simple=True) == canonicalize({"\u00e9": 1, "z": 2})
    assert canonicalize(parse_simple_json('{"b": 1, "a": [2, "x"]}', 64), simple=True).text == '{"a":[2,"x"],"b":1}'


def test_short_text_is_not_bracket_counted():
    """Text shorter than 2 * (max_depth + 1) cannot hold a value nested deeper than max_depth: its brackets are
    not counted, so brackets inside strings do not send it off the fast path; longer text is counted as before."""
    assert parse_simple_json('["[[[["]', 4) == ["[[[["]  # 8 characters < 10
    assert parse_simple_json('["[[[["]', 3) is NOT_SIMPLE  # 8 characters: counted, 5 brackets > 3
    assert parse_simple_json("[[[[]]]]", 3) is NOT_SIMPLE and _slow("[[[[]]]]", 3).unavailable == reasons.ARGUMENTS_TOO_DEEP
    assert canonicalize(parse_simple_json("[[[]]]", 3), max_depth=3, simple=True) == _slow("[[[]]]", 3)


def _outcome(decode, text):
    """What decoding ``text`` gives: ("value", value) or (exception type, message)."""
    try:
        return ("value", decode(text))
    except (ValueError, RecursionError, canonical.JSONTextError, canonical._FloatSeen) as exc:
        return (type(exc), str(exc))


@settings(max_examples=400, deadline=None)
@given(text_values, st.sampled_from(["", " ", "\n\t"]), st.sampled_from(["", " ", " x", "}", ",1"]), st.integers(min_value=0, max_value=40))
def test_direct_scan_decodes_as_the_decoder_does(value, before, after, cut):
    """canonical._decode (the decoder's C scanner called at index 0) gives exactly what the decoder's own
    decode gives, value or error, with whitespace around the value, extra data after it, and text cut off."""
    text = before + json.dumps(value) + after
    for candidate in (text, text[: max(0, len(text) - cut)]):
        for decoder in (canonical._DECODER, canonical._DECODER_NO_FLOAT):
            assert _outcome(lambda t: canonical._decode(decoder, t), candidate) == _outcome(decoder.decode, candidate)
