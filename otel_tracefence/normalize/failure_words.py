"""The words that make a recorded result a failure report: a status-like field's code (``INTERNAL_SERVER_ERROR``,
``card_declined``; docs/DECISIONS.md 1020) and a text result no framework template knows (a timeout, an exception's
class name, a 5xx page; 1031). Read by ``result_errors.py`` and ``values.py``; the words of an attribute key's outcome
are ``conventions.FAILURE_EVIDENCE_WORDS`` (974), which these build on."""

from __future__ import annotations

from otel_tracefence.normalize.conventions import FAILURE_EVIDENCE_WORDS

# The words of a status-like result field's string value that name a failure or an outcome not known
# (docs/DECISIONS.md 1020): the error, timeout and cancellation words of conventions.FAILURE_EVIDENCE_WORDS but "err" (the prefix of ids such as
# err_7f3a, and of Node.js codes that are refusals, ERR_BAD_REQUEST), and the words of the codes APIs return for a
# call that failed or was turned down: SERVICE_UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, card_declined,
# PERMISSION_DENIED, request_rejected, connection_refused, HOST_UNREACHABLE. "internal" and "unknown" are read as whole
# values only (GRPC_FAILING_CODES, UNKNOWN_OUTCOME_WORDS in result_errors): as one word of many they may name a kind
# (internal_transfer). "timed" followed by "out" is a timeout too.
FAILURE_CODE_WORDS = frozenset(
    {word for word, kind in FAILURE_EVIDENCE_WORDS.items() if kind in ("error", "timeout", "cancellation") and word != "err"}
    | {"failing", "unavailable", "exceeded", "exhausted", "declined", "denied", "rejected", "refused", "unreachable"}
)
# A word just before a failure word that negates it (HTTP/2's NO_ERROR, RFC 9113 section 7; not_failed, non_error), and
# one just after it ("error_free"): such a failure word names no failure.
NEGATING_WORDS_BEFORE = frozenset({"no", "not", "non", "without"})
NEGATING_WORDS_AFTER = frozenset({"free"})
# A text result (not JSON) that reads as a failure report no framework template knows (docs/DECISIONS.md 1031): a
# timeout (timed out, timeout, deadline exceeded), an exception's or an error's class name before its message
# (``java.net.SocketTimeoutException:``, ``openai.APITimeoutError:``), a traceback, an HTTP 5xx status line or the reason
# phrase of a 5xx (or 429), and in other languages the word for an error, a failure or a timeout. Any case. Not a word
# that only mentions an error ("an error occurred earlier", "error=None", "Error: none", "no errors", "0 errors",
# "timeout was not reached"): the earlier decisions keep those results (402, 971). A write whose result is such text
# has an unknown outcome: held.
FAILURE_TEXT_PATTERN = (
    r"(?i)(?<!\bno )(?<!\b0 )(?:\b(?:timed[ -]?out|time[ -]?out|timeouts?|deadline exceeded|traceback|bad gateway"
    r"|service unavailable|gateway time-?out|internal server error|too many requests|http(?:/[0-9](?:\.[0-9])?)?[ /]5[0-9][0-9]"
    r"|fehler|zeitüberschreitung|fehlgeschlagen|erro|falha|falhou|tempo esgotado|échec|erreur|délai dépassé|ошибка|сбой"
    r"|тайм-аут|превышено время)\b|\b[a-z_.]*(?:exception|error)(?=:)|错误|失败|超时|エラー|失敗|タイムアウト)"
    r"(?!\s*(?:[=:]\s*(?:none|null|nil|false|0)\b|(?:was |is |has )?not\b))"
)
