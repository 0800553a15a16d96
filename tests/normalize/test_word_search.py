"""``word_search.Words``: the prefilters' one scan in C is the substring tests it stands for, on any text (ASCII or
not, any case), and refuses words it cannot scan for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tracefence.normalize.evidence import redacted
from otel_tracefence.normalize.result_errors import _TEMPLATE_HINTS, template_hint
from otel_tracefence.normalize.word_search import Words

_LETTERS = "aAbBeErRoOxX_*[<\\\"' é€İK"  # ASCII of both cases, quotes and escapes, Latin-1, wider characters
_WORDS = ("rror", "ab", "b", "x_", '"*', "\\u003c", "eee")


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=_LETTERS, max_size=40), st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4), st.booleans())
def test_any_in_is_the_substring_tests_it_stands_for(text, words, fold):
    expected = any(word in (text.lower() if fold else text) for word in words)
    assert Words(words, fold=fold).any_in(text) is expected


@pytest.mark.parametrize(("text", "found"), [
    ("", False),
    ("b", True),  # a one-character word at the text's last position
    ("xxB", False),  # case kept without fold
    ("zzab", True),  # a word at the text's end
    ("a", False),  # a text shorter than the word
])  # fmt: skip
def test_any_in_at_the_edges(text, found):
    assert Words(("ab", "b")).any_in(text) is found


@pytest.mark.parametrize("words", [("",), ("é",), ("Ab",)])
def test_words_it_cannot_scan_for_are_refused(words):
    with pytest.raises(ValueError, match="the words are non-empty ASCII, in lower case"):
        Words(words, fold=True)


def test_the_template_prefilter_is_every_hint_in_any_case():
    assert all(template_hint(f'{{"detail": "{hint.upper()}"}}') for hint in _TEMPLATE_HINTS)
    assert template_hint('{"ok": true, "id": "r17"}') is False


def test_a_stand_in_in_mixed_case_is_found_in_a_json_field():
    # The field's pattern compares folded; its prefilter does too ("ReDaCtEd" holds neither "EDACTED" nor "edacted").
    assert redacted('{"card": "ReDaCtEd", "amount": 5}') is True
    assert redacted('{"card": "4242", "amount": 5}') is False


class _AgentText(str):
    """A subclass of ``str``, as the OpenAI Agents SDK's ``AgentText`` is: a recorded value may be one."""


def test_a_subclass_of_str_is_read_as_its_text():
    # Compiled, a ``str`` annotation refused a subclass (TypeError out of evidence.redacted: a trace that crashed).
    assert Words(("rror",), fold=True).any_in(_AgentText("An ERROR")) is True
    assert redacted(_AgentText('{"card": "[REDACTED]"}')) is True
    assert redacted(_AgentText("hello world")) is False
    assert template_hint(_AgentText("timed out")) is True

