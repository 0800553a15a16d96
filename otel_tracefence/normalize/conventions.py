"""Where each tracing convention records a tool call: one table, first match wins.

Sources, in DESIGN.md's order: OpenTelemetry GenAI semantic conventions
(``execute_tool`` spans, ``gen_ai.*``; MCP spans, ``mcp.method.name``),
OpenInference (Arize Phoenix), OpenLLMetry (``traceloop.*``), Langfuse,
LangSmith, the Vercel AI SDK (``ai.toolCall.*``), older pydantic-ai
(``tool_arguments`` / ``tool_response``) and ``code.function.parameters.*``.
Adding a convention means adding its keys here, nothing else.
"""

from __future__ import annotations

from typing import Any, Mapping

# The producer's own labels (inputs). Our output annotations are tracefence.step.* etc.
TRACEFENCE_EFFECT = "tracefence.effect"
TRACEFENCE_STATUS = "tracefence.status"
TRACEFENCE_IDEMPOTENCY_KEY = "tracefence.idempotency_key"
TRACEFENCE_INPUTS = (TRACEFENCE_EFFECT, TRACEFENCE_STATUS, TRACEFENCE_IDEMPOTENCY_KEY)

GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
EXECUTE_TOOL = "execute_tool"
EXECUTE_TOOL_PREFIX = "execute_tool "
# Operations that start a model call or an agent of their own: a tool span below
# one of these belongs to a sub-agent and is a step, not a dispatch attempt.
AGENT_BOUNDARY_OPERATIONS = frozenset({"invoke_agent", "create_agent", "chat", "text_completion", "generate_content", "invoke_workflow"})
AGENT_BOUNDARY_KINDS = {
    "openinference.span.kind": frozenset({"AGENT", "LLM"}),
    "traceloop.span.kind": frozenset({"agent", "workflow"}),
}

# Attribute value that marks a tool span, per convention (values compared case-insensitively).
TOOL_KIND_MARKERS = (
    ("openinference.span.kind", "tool"),
    ("traceloop.span.kind", "tool"),
    ("langfuse.observation.type", "tool"),
    ("langsmith.span.kind", "tool"),
    ("mcp.method.name", "tools/call"),
)
# Attributes whose mere presence marks a tool span.
TOOL_PRESENCE_MARKERS = ("ai.toolCall.name",)
# Conventions whose tool spans are named after the tool itself.
NAME_IS_TOOL_KINDS = ("openinference.span.kind", "langfuse.observation.type", "langsmith.span.kind")

CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "tool.id", "ai.toolCall.id")
ARGUMENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "input.value",
    "traceloop.entity.input",
    "langfuse.observation.input",
    "ai.toolCall.args",
    "tool_arguments",
)
RESULT_KEYS = (
    "gen_ai.tool.call.result",
    "output.value",
    "traceloop.entity.output",
    "langfuse.observation.output",
    "ai.toolCall.result",
    "tool_response",
)
# OpenInference says whether input.value / output.value is JSON or plain text.
MIME_TYPE_KEYS = {"input.value": "input.mime_type", "output.value": "output.mime_type"}
CODE_PARAMETER_PREFIX = "code.function.parameters."
CODE_PARAMETER_SUFFIX = ".value"

# Effect hints: MCP tool annotations (readOnlyHint) and the HTTP method (RFC 9110 section 9.2.1 safe methods).
MCP_READ_ONLY_HINT_KEYS = ("mcp.tool.annotations.readOnlyHint", "mcp.tool.annotations.read_only_hint", "gen_ai.tool.annotations.readOnlyHint")
HTTP_METHOD_KEYS = ("http.request.method", "http.method")
HTTP_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

# Timeouts and cancellations, by exception or error type (error.type, exception.type, status message).
TIMEOUT_PATTERN = r"time[d _-]?out|deadline"
CANCEL_PATTERN = r"cancel"

# Where a model's output records the tool calls it requested.
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
OPENINFERENCE_TOOL_CALL_PATTERN = r"^llm\.output_messages\.([0-9]+)\.message\.tool_calls\.([0-9]+)\.tool_call\.(id|function\.name|function\.arguments)$"


def _kind_is(attributes: Mapping[str, Any], key: str, value: str) -> bool:
    found = attributes.get(key)
    return isinstance(found, str) and found.lower() == value


_PRESENCE_KEYS = TOOL_PRESENCE_MARKERS + TRACEFENCE_INPUTS


def is_tool_span(attributes: Mapping[str, Any], name: str) -> bool:
    """True when a span records one tool call under any known convention (DESIGN.md).

    Called for every span: plain loops over a dict, no generators.
    """
    operation = attributes.get(GEN_AI_OPERATION)
    if operation == EXECUTE_TOOL:
        return True
    if operation is None and GEN_AI_TOOL_NAME in attributes:
        return True
    for key, value in TOOL_KIND_MARKERS:
        found = attributes.get(key)
        if found is not None and isinstance(found, str) and found.lower() == value:
            return True
    for key in _PRESENCE_KEYS:
        if key in attributes:
            return True
    return False


def is_agent_boundary(attributes: Mapping[str, Any]) -> bool:
    """True for an agent or model span: tool spans under it are a sub-agent's steps.

    Only string values count: an attribute may hold any OTLP value (an array, a kvlist).
    """
    operation = attributes.get(GEN_AI_OPERATION)
    if isinstance(operation, str) and operation in AGENT_BOUNDARY_OPERATIONS:
        return True
    for key, values in AGENT_BOUNDARY_KINDS.items():
        kind = attributes.get(key)
        if isinstance(kind, str) and kind in values:
            return True
    return False


def tool_name(attributes: Mapping[str, Any], name: str) -> str | None:
    """The tool's name, first match wins; ``None`` when no convention records one."""
    for key in (GEN_AI_TOOL_NAME, "tool.name", "ai.toolCall.name"):
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    if _kind_is(attributes, "traceloop.span.kind", "tool"):
        value = attributes.get("traceloop.entity.name")
        if isinstance(value, str) and value:
            return value
    if name.startswith(EXECUTE_TOOL_PREFIX) and len(name) > len(EXECUTE_TOOL_PREFIX):
        return name[len(EXECUTE_TOOL_PREFIX):]
    if any(_kind_is(attributes, key, "tool") for key in NAME_IS_TOOL_KINDS) and name:
        return name
    return None


def call_id(attributes: Mapping[str, Any]) -> str | None:
    """The tool-call id the model minted, or ``None``."""
    for key in CALL_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
            return str(value)
    return None
