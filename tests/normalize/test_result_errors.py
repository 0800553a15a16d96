"""error_shape, which reads only the keys some shape looks for, against the plain walk it replaced."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_tracefence.core.config import ResultErrorShape
from otel_tracefence.normalize.result_errors import DEFAULT_SHAPES, MAX_DEPTH, WRAPPER_DEPTH, WRAPPER_KEYS, error_shape
from otel_tracefence.core.textfold import folded_word

EXTRA = (ResultErrorShape(key="outcome", equals="FAILED"), ResultErrorShape(key="ok", equals=True, anywhere=True))
# Near-misses (folded) and the wrappers whose object is read as the top too (docs/DECISIONS.md 342).
KEYS = sorted({shape.key for shape in DEFAULT_SHAPES + EXTRA}) + ["id", "content", "data", "result", "Error", "timedOut", "Status", "OUTCOME", "is-error",
                                                                  "Body", "errorMessage"]
scalars = st.none() | st.booleans() | st.integers(-10, 700) | st.sampled_from(
    ["error", "Failed", "failure", "ok", "", "x", "FAILED", "timeout", "cancelled", "pending", "ECONNRESET", "Bad Gateway", "DeadlineExceeded"])
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4), max_leaves=15
)


def _tops(result):
    """The objects read as the top besides the result: under wrapper keys (folded, 371) down to WRAPPER_DEPTH wrappers,
    and the one object of a list of one object with its wrappers one level less deep (docs/DECISIONS.md 973)."""
    if isinstance(result, list) and len(result) == 1 and isinstance(result[0], dict):
        return [result[0], *_under_wrappers(result[0], WRAPPER_DEPTH - 1)]
    return _under_wrappers(result, WRAPPER_DEPTH) if isinstance(result, dict) else []


def _under_wrappers(obj, depth):
    if depth == 0:
        return []
    inner = [value for key, value in obj.items() if isinstance(value, dict) and folded_word(key) in WRAPPER_KEYS]
    return inner + [deeper for value in inner for deeper in _under_wrappers(value, depth - 1)]


def _reference(result, shapes):
    """Every object from the result down (the walk's order), every shape in order: the first that says error. The
    top is the result and the objects under its wrapper keys; a key no shape names is read as a shape's key it folds to."""
    named = {shape.key for shape in shapes}
    tops = _tops(result)
    stack = [(result, 0)]
    while stack:
        node, level = stack.pop()
        if level > MAX_DEPTH:
            continue
        if isinstance(node, dict):
            top = level == 0 or any(node is inner for inner in tops)
            for shape in shapes:
                keys = [k for k in node if k == shape.key or (k not in named and folded_word(k) == folded_word(shape.key))]
                if (top or shape.anywhere) and any(shape.says_error(node[k]) for k in keys):
                    return shape
            stack.extend((child, level + 1) for child in node.values() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((child, level + 1) for child in node if isinstance(child, (dict, list)))
    return None


@settings(max_examples=600, deadline=None)
@given(values, st.booleans())
def test_error_shape_is_the_first_shape_the_plain_walk_finds(value, extra):
    shapes = DEFAULT_SHAPES + EXTRA if extra else DEFAULT_SHAPES
    assert error_shape(value, shapes) is _reference(value, shapes)


def test_the_first_shape_in_order_wins_whatever_the_key_order():
    # "isError" (first shape) after "ok": false in the object's own order: still the first shape is named.
    assert error_shape({"ok": False, "isError": True}, DEFAULT_SHAPES).key == "isError"
    assert error_shape({"ok": False, "id": 3}, DEFAULT_SHAPES).key == "ok"
    assert error_shape({"ok": True, "id": "r1"}, DEFAULT_SHAPES) is None
    # Below the top only shapes that look anywhere: a nested "ok": false is no error, a nested isError is.
    assert error_shape({"invoice": {"ok": False}}, DEFAULT_SHAPES) is None
    assert error_shape({"data": {"ok": False}}, DEFAULT_SHAPES).key == "ok"  # a wrapper's object is read as the top
    assert error_shape({"content": [{"type": "error"}], "ok": True}, DEFAULT_SHAPES).key == "type"


def test_what_a_default_shape_said_of_a_short_scalar_is_remembered_and_is_what_it_says():
    from otel_tracefence.normalize import result_errors

    result_errors._SAID.clear()  # a cache: other tests may have filled it to its bound
    values = [True, False, None, 0, 1, 1.0, 499, 500, 500.0, 599.5, 600, -1, "error", "ERROR", "Failed", "failure", "ok", "", "x" * 64,
              "y" * 65, [], ["e"], {"a": 1}]
    for position, shape in enumerate(DEFAULT_SHAPES):
        for value in values:
            said = shape.says_error(value)
            assert result_errors._says_error(shape, position, value, True) == said  # asked, remembered if it may be
            assert result_errors._says_error(shape, position, value, True) == said  # and read back
            assert result_errors._says_error(shape, position, value, False) == said
            remembered = (position, type(value), value) in result_errors._SAID if not isinstance(value, (list, dict)) else False
            assert remembered == (not isinstance(value, (list, dict)) and value != "y" * 65), (position, value)
    status = DEFAULT_SHAPES.index(ResultErrorShape(key="status", equals="error"))
    assert result_errors._SAID[(status, str, "ERROR")] is True and result_errors._SAID[(status, str, "ok")] is False
    # True and 1 are different values to a shape (``is True``), and stay apart in what is remembered.
    is_error = DEFAULT_SHAPES.index(ResultErrorShape(key="isError", equals=True, anywhere=True))
    assert (result_errors._SAID[(is_error, bool, True)], result_errors._SAID[(is_error, int, 1)]) == (True, False)


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 700), st.floats(allow_nan=True), st.sampled_from(["error", "Failed", "ok", "", "x"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(["isError", "is_error", "type", "error", "status", "ok", "success", "errors",
                                                             "status_code", "statusCode", "http_status", "content", "data", "body", "state",
                                                             "code", "exception", "message"]), inner, max_size=4)),
    max_leaves=12,
))
def test_remembered_answers_give_the_shapes_a_plain_index_gives(result):
    from otel_tracefence.normalize import result_errors

    plain = dict(result_errors._DEFAULT_INDEX)  # not the default index itself: nothing remembered is read
    if isinstance(result, dict):
        assert result_errors._first_shape(result, True, result_errors._DEFAULT_INDEX) == result_errors._first_shape(result, True, plain)
    assert error_shape(result, DEFAULT_SHAPES) == _reference(result, DEFAULT_SHAPES)
