"""Tool activity no convention reads: the test that keeps such a trace from passing as tool-free.

A span that is not read as a tool step (``span_kinds.is_tool_span``) but looks like tool
activity must not let its trace pass with no class (docs/DECISIONS.md, "Unrecognized
tool activity"). A span looks like tool activity when:

* it names its kind by no known convention (see :func:`has_known_kind`), and its span
  name, an attribute key, or the value of an attribute whose key ends in ``type`` or
  ``kind`` holds a tool token: the word ``tool``/``tools`` (also inside ``ToolInvoker``,
  ``tool_calls``, ``toolUse``...) or ``function`` followed by ``call``. Keys that
  describe the tools on offer (definitions, schemas, descriptions, ``tool_choice``)
  and keys that echo the model's input (``gen_ai.prompt.*``, ``llm.input_messages.*``,
  ``gen_ai.input.messages``) are not activity;
* or it is a model span whose recorded finish reason says it asked for tool calls
  (``tool_calls``, ``tool_use``, ``function_call``) while none of the calls could be read;
* or a convention's kind attribute holds its tool value only after folding case, separators
  and invisible characters (``gen_ai.operation.name`` = ``EXECUTE_TOOL``, ``"execute_tool "``,
  ``execute-tool``, ``executeTool``, ``execute_tool`` and a zero-width space: ``textfold.folded_word``),
  or ``gen_ai.operation.name`` is no GenAI operation and holds a tool token (``run_tool``) or names a
  function, an action or MCP (``call_function``, ``execute_action``, ``mcp_call``), or
  ``openinference.span.kind`` holds a value OpenInference does not define (``FUNCTION``),
  or an RPC span's ``rpc.method`` is MCP's ``tools/call`` (an MCP call without ``mcp.*``):
  a value the conventions do not define is not understood, so it is held, never read as
  some value and never passed (docs/DECISIONS.md 190, 203). Checked whatever else the span holds;
* or an attribute key is one the conventions read only after folding (``gen_ai.Operation.name``),
  or an unknown ``tracefence.*`` key (``read_keys.misread_key``, docs/DECISIONS.md 250).

An agent, chain or model span that merely mentions a tool (DESIGN.md) has a known
kind and is left out by the first test. A tool-like span with a recognized tool step
below or above it is covered by that step (``normalize/trace.py`` checks it), such as
pydantic-ai's ``running tools`` span around its ``execute_tool`` spans.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Mapping

import cython

from otel_tracefence.normalize.conventions import (
    AGENT_BOUNDARY_OPERATIONS, EXECUTE_TOOL, GEN_AI_OPERATION, HAYSTACK_COMPONENT_TYPE, MARKED_AGENT_SPANS, MODEL_SPAN_KINDS, OPENLLMETRY_MODEL_SPAN_KEY,
    TOOL_KIND_MARKERS,
    VERCEL_FINISH_REASON_KEY,
)
from otel_tracefence.normalize.span_kinds import is_tool_listing
from otel_tracefence.normalize.read_keys import UNDERSTOOD_KEYS, misread_attribute, misread_message

from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.core.textfold import folded_word, visible

# A convention's kind attribute, and the values it gives spans that are not tools (compared in lower case):
# a span with one of these is an agent, chain, model... span. Any other value (OpenInference
# UNKNOWN, Spring AI's "framework" operation) names no kind, and the name and key test applies.
NON_TOOL_KINDS = {
    GEN_AI_OPERATION: frozenset(
        {"chat", "text_completion", "generate_content", "embeddings", "create_agent", "invoke_agent", "invoke_workflow"}
    ),
    "openinference.span.kind": frozenset({"llm", "chain", "agent", "retriever", "embedding", "reranker", "guardrail", "evaluator"}),
    "traceloop.span.kind": frozenset({"workflow", "task", "agent"}),
    "langfuse.observation.type": frozenset({"span", "generation", "agent", "chain", "retriever", "evaluator", "embedding", "guardrail", "event"}),
    "langsmith.span.kind": frozenset({"llm", "chain", "retriever", "prompt", "parser", "embedding"}),
    "mlflow.spanType": frozenset({"llm", "chat_model", "chain", "agent", "retriever", "embedding", "reranker", "parser"}),
    # The Vercel AI SDK's operation ids other than its tool span's (ai.toolCall): its call and model spans
    # (AI SDK Core, "Telemetry", "Collected Data"), lower-cased as they are compared.
    "ai.operationId": frozenset({
        "ai.generatetext", "ai.generatetext.dogenerate", "ai.streamtext", "ai.streamtext.dostream", "ai.generateobject",
        "ai.generateobject.dogenerate", "ai.streamobject", "ai.streamobject.dostream", "ai.embed", "ai.embed.doembed", "ai.embedmany",
        "ai.embedmany.doembed",
    }),
}
# A producer's own agent span (conventions.MARKED_AGENT_SPANS: Logfire's OpenAI Agents bridge's, which lists the agent's
# tools in ``tools``; docs/DECISIONS.md 994, 1000) is an agent's span, no tool.
for _key, _value, _ in MARKED_AGENT_SPANS:
    NON_TOOL_KINDS[_key] = NON_TOOL_KINDS.get(_key, frozenset()) | {_value}
# OpenLLMetry model spans, MCP method spans, Haystack components, and transport spans (HTTP, database, RPC, messaging
# semantic conventions): their presence alone names the span's kind.
OTHER_KIND_KEYS = (
    "llm.request.type",
    "mcp.method.name",  # MCP method spans (tools/list, initialize...); tools/call ones are tool steps
    HAYSTACK_COMPONENT_TYPE,
    "http.request.method",
    "http.method",
    "db.system",
    "db.system.name",
    "rpc.system",
    "messaging.system",
)
# Span names that give a kind: Haystack 3.x agent, step, hook and pipeline spans (its tool spans,
# haystack.agent.step.tool, are read as steps before this is asked).
KIND_SPAN_NAME_PREFIXES = ("haystack.agent.", "haystack.pipeline.")
NOT_ACTIVITY_TOKENS = frozenset({"definition", "definitions", "schema", "schemas", "description", "descriptions", "choice", "available"})
INPUT_ECHO_PREFIXES = ("gen_ai.prompt.", "gen_ai.prompt", "llm.input_messages.", "gen_ai.input.messages", "gen_ai.system_instructions")
TOOL_FINISH_REASONS = frozenset({"tool_calls", "tool_use", "function_call", "tool-calls", "tool_call"})
# Semantic Kernel for Python writes the singular gen_ai.response.finish_reason, its value str() of its FinishReason enum
# per completion, comma-joined ("FinishReason.TOOL_CALLS" on Python 3.11; semantic_kernel/utils/telemetry/
# model_diagnostics/decorators.py, _set_completion_response): each part is read, the enum's class prefix dropped
# (docs/DECISIONS.md 560).
SK_FINISH_REASON_KEY = "gen_ai.response.finish_reason"
FINISH_REASON_KEYS = ("gen_ai.response.finish_reasons", "llm.response.finish_reason", VERCEL_FINISH_REASON_KEY, SK_FINISH_REASON_KEY)
ENUM_FINISH_REASON = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*\.)?([A-Za-z_-]+)\s*$")  # "FinishReason.TOOL_CALLS" -> "TOOL_CALLS"
FINISH_REASON_KEY_PATTERN = re.compile(r"^gen_ai\.completion\.[0-9]+\.finish_reason$")

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@lru_cache(maxsize=4096)
def _tool_token(text: str, describes: bool = False) -> bool:
    """True when ``text`` holds a tool token (cached: attribute keys repeat across spans). With
    ``describes`` (attribute keys), a key holding a word of ``NOT_ACTIVITY_TOKENS`` (``tool.description``,
    ``tool_choice``, ``available_tools``, ``llm.tools.0.tool.json_schema``) describes tools, no call; span
    names are never excused so (``Tool: update_schema`` is a call)."""
    words = [w.lower() for w in _WORDS.findall(text)]
    for i, word in enumerate(words):
        if word in ("tool", "tools") or (word == "function" and i + 1 < len(words) and words[i + 1] in ("call", "calls")):
            return not (describes and any(w in NOT_ACTIVITY_TOKENS for w in words))
    return False


# Words that, in a ``gen_ai.operation.name`` value no convention defines, name a call of something a tool runs,
# beside the tool token itself: a function (``call_function``), an action (``execute_action``), MCP (``mcp_call``).
# Not ``call``, ``invoke``, ``execute`` or ``run`` alone: ``call_llm``, ``invoke_agent``, ``execute_event_loop_cycle``
# (Strands) and ``agent_run`` are ordinary operations (docs/DECISIONS.md 302). For operation values only: span names
# and keys keep the tool token.
OPERATION_CALL_WORDS = frozenset({"function", "functions", "action", "actions", "mcp"})


@lru_cache(maxsize=1024)
def _operation_names_a_call(operation: str) -> bool:
    """True when an unknown ``gen_ai.operation.name`` value holds the tool token or a word of
    :data:`OPERATION_CALL_WORDS` (as a whole word: ``transaction`` names no action). Cached: values repeat."""
    return _tool_token(operation) or not OPERATION_CALL_WORDS.isdisjoint(w.lower() for w in _WORDS.findall(operation))


@cython.ccall
def has_known_kind(attributes: Mapping[str, Any]) -> bool:
    """True when a convention names the span's kind as something other than a tool (agent, chain,
    model, HTTP...); tool spans were read as steps before this is asked."""
    if not attributes:
        return False
    for key, kinds in NON_TOOL_KINDS.items():
        value = attributes.get(key)
        if isinstance(value, str) and value.lower() in kinds:
            return True
    for key in OTHER_KIND_KEYS:
        if key in attributes:
            return True
    return False


@cython.ccall
def _named_kind(name: str) -> bool:
    return name.startswith(KIND_SPAN_NAME_PREFIXES)


def _finish_reasons(attributes: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    for key in FINISH_REASON_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value.startswith("["):  # a list recorded as JSON text
            found.extend(re.findall(r'"([^"]*)"', value))
            continue
        if key == SK_FINISH_REASON_KEY and isinstance(value, str):
            found.extend(m.group(1) for m in map(ENUM_FINISH_REASON.match, value.split(",")) if m)
            continue
        found.extend(v for v in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(v, str))
    for key, value in attributes.items():
        if key.startswith("gen_ai.completion.") and isinstance(value, str) and FINISH_REASON_KEY_PATTERN.match(key):
            found.append(value)
    return found


def asked_for_tools(span: SpanView) -> bool:
    """True when the span's recorded finish reason says the model asked for tool calls."""
    return any(reason.lower() in TOOL_FINISH_REASONS for reason in _finish_reasons(span.attributes))


def model_span(span: SpanView) -> bool:
    """True for a model call's span: a convention names its kind so (``conventions.MODEL_SPAN_KINDS``, OpenLLMetry's
    ``llm.request.type``), or it recorded a model's finish reason (docs/DECISIONS.md 1010)."""
    attributes = span.attributes
    for key, kinds in MODEL_SPAN_KINDS:
        value = attributes.get(key)
        if isinstance(value, str) and value in kinds:
            return True
    return OPENLLMETRY_MODEL_SPAN_KEY in attributes or bool(_finish_reasons(attributes))


# The kind attributes whose tool value (compared exactly, or in any case where the convention
# reads it so: conventions.TOOL_KIND_MARKERS) makes a span a tool span, with that value folded
# (textfold.folded_word: case, separators, format characters, NFKC).
TOOL_KIND_VALUES = ((GEN_AI_OPERATION, EXECUTE_TOOL), *TOOL_KIND_MARKERS)
TOOL_KIND_FOLDS = tuple((key, value, folded_word(value)) for key, value in TOOL_KIND_VALUES)
RPC_METHOD_KEY = "rpc.method"  # RPC semantic conventions
OPENINFERENCE_KIND_KEY = "openinference.span.kind"
MCP_TOOL_CALL_METHOD = "tools/call"  # MCP's JSON-RPC method that runs a tool
# OpenInference's span kinds (openinference-semantic-conventions, OpenInferenceSpanKindValues).
OPENINFERENCE_KINDS = frozenset({"TOOL", "CHAIN", "LLM", "RETRIEVER", "EMBEDDING", "AGENT", "RERANKER", "UNKNOWN", "GUARDRAIL", "EVALUATOR", "PROMPT"})


def _known_operations() -> frozenset[str]:
    """The ``gen_ai.operation.name`` values of the GenAI conventions (the installed
    ``opentelemetry-semantic-conventions``' ``GenAiOperationNameValues``) and those the normalizer reads."""
    try:
        from opentelemetry.semconv._incubating.attributes.gen_ai_attributes import GenAiOperationNameValues

        conventions = {value.value for value in GenAiOperationNameValues}
    except ImportError:  # pragma: no cover - a dependency of opentelemetry-sdk
        conventions = set()
    return frozenset({*conventions, *NON_TOOL_KINDS[GEN_AI_OPERATION], *AGENT_BOUNDARY_OPERATIONS, EXECUTE_TOOL})


KNOWN_OPERATIONS = _known_operations()
# Every key :func:`_kind_not_understood` reads: a span holding none of them (most spans) is answered by one
# C-level pass over its keys.
_KIND_KEYS = frozenset({*(key for key, _ in TOOL_KIND_VALUES), OPENINFERENCE_KIND_KEY, RPC_METHOD_KEY})


def _kind_not_understood(attributes: Mapping[str, Any]) -> str | None:
    """A kind value that names a tool only after folding (case, separators, format characters, NFKC:
    ``EXECUTE_TOOL``, ``execute-tool``, ``executeTool``, ``"execute_tool\\u200b"``), a GenAI operation
    no convention defines that names a tool (``run_tool``), an OpenInference kind the convention does
    not define, or an MCP ``tools/call`` recorded as RPC (for the reason's message); ``None`` otherwise."""
    if _KIND_KEYS.isdisjoint(attributes):
        return None
    # ``in`` then ``[]``: two C-level mapping operations, cheaper than a ``get`` method call for the keys not there
    for key, value, fold in TOOL_KIND_FOLDS:
        found = attributes[key] if key in attributes else None
        if isinstance(found, str) and folded_word(found) == fold:  # not read as a tool span: not as written
            return f"its attribute {key}={found!r} is {value!r} only after folding its case, separators or invisible characters"
    operation = attributes[GEN_AI_OPERATION] if GEN_AI_OPERATION in attributes else None
    if isinstance(operation, str) and operation not in KNOWN_OPERATIONS and _operation_names_a_call(visible(operation)):
        return f"its attribute {GEN_AI_OPERATION}={operation!r} is no GenAI operation, and it names a tool"
    kind = attributes[OPENINFERENCE_KIND_KEY] if OPENINFERENCE_KIND_KEY in attributes else None
    if isinstance(kind, str) and kind.upper() not in OPENINFERENCE_KINDS:
        return f"its attribute openinference.span.kind={kind!r} is no OpenInference span kind"
    method = attributes[RPC_METHOD_KEY] if RPC_METHOD_KEY in attributes else None
    if isinstance(method, str) and folded_word(method) == MCP_TOOL_CALL_METHOD:
        return f"its attribute {RPC_METHOD_KEY}={method!r} (an MCP tool call recorded as an RPC span, with no mcp.method.name)"
    return None


def tool_activity_sign(span: SpanView) -> str | None:
    """What makes an unread span look like tool activity (for the reason's message), or ``None``."""
    attributes = span.attributes
    if is_tool_listing(attributes, span.name):  # a listing of tools, no call (DECISIONS 571)
        return None
    odd_kind = _kind_not_understood(attributes) if attributes else None
    if odd_kind is not None:
        return odd_kind
    misread = misread_attribute(attributes) if attributes and not attributes.keys() <= UNDERSTOOD_KEYS else None  # DECISIONS 250
    if misread is not None:
        return f"its {misread_message(*misread)}"
    if not has_known_kind(attributes) and not _named_kind(span.name):
        if span.name and _tool_token(span.name):
            return f"its name {span.name!r}"
        for key, value in attributes.items():
            if key.startswith(INPUT_ECHO_PREFIXES):
                continue
            if _tool_token(key, describes=True):
                return f"its attribute {key!r}"
            if isinstance(value, str) and key.lower().endswith(("type", "kind")) and _tool_token(value):
                return f"its attribute {key}={value!r}"
    return None
