"""A closed value given wrong: the message describes it, and names the allowed value it slipped from."""

import pytest

from otel_tracefence.core.value_text import not_one_of

ALLOWED = ("read", "write", "unknown")


@pytest.mark.parametrize(
    "value, message",
    [
        ("Write", "effect (a string of 5 characters) is not one of read, write, unknown; did you mean 'write'?"),
        (" read ", "effect (a string of 6 characters) is not one of read, write, unknown; did you mean 'read'?"),
        ("wrte", "effect (a string of 4 characters) is not one of read, write, unknown; did you mean 'write'?"),
        ("delete", "effect (a string of 6 characters) is not one of read, write, unknown"),
        ("secret-token-value", "effect (a string of 18 characters) is not one of read, write, unknown"),
        ("W" * 65, "effect (a string of 65 characters) is not one of read, write, unknown"),
        (1, "effect (an integer) is not one of read, write, unknown"),
    ],
)
def test_a_closed_value_slip_is_hinted_with_an_allowed_value_never_the_value_given(value, message):
    assert not_one_of("effect", value, ALLOWED) == message
