"""Which spans are tool spans, tool invokers, tool listings or agent boundaries, and the tool, call id and agent each
names: the conventions table (``conventions.py``) read off one span's attributes and name (DESIGN.md;
docs/CONVENTIONS.md)."""

from __future__ import annotations

import re
from typing import Any, Mapping

import cython

from otel_tracefence.core.canonical import JSONTextError, parse_json_text
from otel_tracefence.normalize.conventions import (
    AGENT_BOUNDARY_KINDS, AGENT_BOUNDARY_OPERATIONS, AGENT_NAME_KEYS, AGENT_SPAN_NAME_SUFFIX, MARKED_AGENT_SPANS, CALL_ID_KEYS, EXECUTE_TOOL, EXECUTE_TOOL_OPERATIONS, EXECUTE_TOOL_PREFIX,
    GEN_AI_OPERATION, GEN_AI_TOOL_NAME, HAYSTACK_COMPONENT_TYPE, HAYSTACK_TOOL_INVOKER, KOOG_TOOL_SPAN_PREFIX, MARKED_TOOL_FIELDS, MCP_TOOL_SPAN_NAME_PATTERN,
    NAME_IS_TOOL_CALL_SUFFIXES, NAME_IS_TOOL_KINDS, NOT_TOOL_SPAN_NAME_PREFIXES, NOT_TOOL_SPAN_NAMES_WITHOUT_TOOL, PLACEHOLDER_CALL_IDS, TOOL_KIND_MARKERS,
    TOOL_MARKER_KEYS, TOOL_NAME_KEYS, TOOL_PRESENCE_KEYS, TRACELOOP_TOOL_SPAN_SUFFIX,
)


@cython.ccall
def _kind_is(attributes: Mapping[str, Any], key: str, value: str) -> bool:
    found = attributes.get(key)
    return isinstance(found, str) and found.lower() == value


@cython.ccall
def marked_fields(attributes: Mapping[str, Any]) -> Any:
    """The ``conventions.MARKED_TOOL_FIELDS`` row whose kind marker the span carries (its producer, marker, the keys of
    its tool name, arguments, result and failure, its schema key, its source), or ``None``: first match wins."""
    for row in MARKED_TOOL_FIELDS:
        found = attributes.get(row[1])
        if isinstance(found, str) and found.lower() == row[2]:
            return row
    return None


NULL_TEXT = "null"  # Python's None as Logfire writes it (JSON), typed null in the span's schema


def marked_field(attributes: Mapping[str, Any], column: int) -> tuple:
    """``(True, value)`` for the field at ``column`` of the ``MARKED_TOOL_FIELDS`` row whose marker the span carries
    (4 arguments, 5 result, 6 failure); ``(False, None)`` when the span carries no marker, its row names no such
    field, the key is absent, or its value is the text ``null`` that the row's schema key types null (Python's None
    written as text: nothing recorded, docs/DECISIONS.md 992). A schema that cannot be read leaves the value as it is."""
    marked = marked_fields(attributes)
    if marked is None or marked[column] is None or marked[column] not in attributes:
        return False, None
    value = attributes[marked[column]]
    if value == NULL_TEXT and marked[7] is not None:
        try:
            schema = parse_json_text(attributes.get(marked[7]) or "{}")
        except (JSONTextError, RecursionError, TypeError):
            schema = None
        properties = schema.get("properties") if isinstance(schema, dict) else None
        typed = properties.get(marked[column]) if isinstance(properties, dict) else None
        if isinstance(typed, dict) and typed.get("type") == NULL_TEXT:
            return False, None
    return True, value


@cython.ccall
def is_tool_invoker(attributes: Mapping[str, Any]) -> bool:
    """True for a Haystack ``ToolInvoker`` component span: one span, every tool call of a model turn."""
    return attributes.get(HAYSTACK_COMPONENT_TYPE) == HAYSTACK_TOOL_INVOKER


@cython.ccall
def is_tool_listing(attributes: Mapping[str, Any], name: str) -> bool:
    """True for a span that lists tools and calls none (``NOT_TOOL_SPAN_NAMES_WITHOUT_TOOL``: its exact name, and no
    tool-name key): neither a tool step nor unread tool activity."""
    if name not in NOT_TOOL_SPAN_NAMES_WITHOUT_TOOL:
        return False
    for key in TOOL_NAME_KEYS:
        if key in attributes:
            return False
    return True


def is_tool_span(attributes: Mapping[str, Any], name: str) -> bool:
    """True when a span records a tool call under any known convention (DESIGN.md, docs/CONVENTIONS.md).

    Called for every span: plain loops over a dict, no generators.
    """
    operation = attributes.get(GEN_AI_OPERATION)
    if isinstance(operation, str) and operation in EXECUTE_TOOL_OPERATIONS:  # any OTLP value may come (a list: unhashable)
        return True
    if TOOL_MARKER_KEYS.isdisjoint(attributes):  # most spans: no marker at all
        return False
    if name.startswith(NOT_TOOL_SPAN_NAME_PREFIXES):
        return False
    if is_tool_listing(attributes, name):
        return False
    if operation is None and GEN_AI_TOOL_NAME in attributes:
        return True
    for key, value in TOOL_KIND_MARKERS:
        found = attributes.get(key)
        if found is not None and isinstance(found, str) and found.lower() == value:
            return True
    for key in TOOL_PRESENCE_KEYS:
        if key in attributes:
            return True
    return is_tool_invoker(attributes)


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


_MCP_TOOL_SPAN_NAME = re.compile(MCP_TOOL_SPAN_NAME_PATTERN)


def agent_name(attributes: Mapping[str, Any], name: str) -> str | None:
    """The name of the agent an agent span runs (``gen_ai.agent.name``; OpenInference ``AGENT``
    spans named ``<agent>.run``; the name field of a span a producer's own marker makes an agent's,
    ``conventions.MARKED_AGENT_SPANS``), or ``None`` for a span that is not an agent's."""
    if attributes.get(GEN_AI_OPERATION) != "invoke_agent" and attributes.get("openinference.span.kind") != "AGENT":
        for key, value, name_key in MARKED_AGENT_SPANS:  # docs/DECISIONS.md 1000
            if _kind_is(attributes, key, value):
                found = attributes.get(name_key)
                return found if isinstance(found, str) and found else None
        return None
    for key in AGENT_NAME_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return name.removesuffix(AGENT_SPAN_NAME_SUFFIX) or None


def tool_name(attributes: Mapping[str, Any], name: str) -> str | None:
    """The tool's name, first match wins; ``None`` when no convention records one.

    Attributes first (``TOOL_NAME_KEYS``; then the tool-name key of a producer whose marker the span carries,
    ``MARKED_TOOL_FIELDS``: OpenLLMetry's ``traceloop.entity.name``, Logfire's ``name``), then the span name: ``execute_tool <tool>`` (GenAI), ``<tool>.tool``
    (OpenLLMetry's OpenAI Agents spans), ``tool.<tool>`` on an ``execute_tool`` span (Koog),
    ``[MCP send ]tools/call <tool>`` (MCP), and the
    whole name for conventions that name tool spans after the tool (OpenInference, ...), less a trailing call-method
    suffix (``NAME_IS_TOOL_CALL_SUFFIXES``: DSPy's ``lookup_customer.__call__``, ``charge_card.acall``; DECISIONS 960).
    """
    for key in TOOL_NAME_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    marked = marked_fields(attributes)
    if marked is not None:
        value = attributes.get(marked[3])
        if isinstance(value, str) and value:
            return value
    traceloop_tool = _kind_is(attributes, "traceloop.span.kind", "tool")
    if name.startswith(EXECUTE_TOOL_PREFIX) and len(name) > len(EXECUTE_TOOL_PREFIX):
        return name[len(EXECUTE_TOOL_PREFIX):]
    if name.startswith(KOOG_TOOL_SPAN_PREFIX) and len(name) > len(KOOG_TOOL_SPAN_PREFIX) and attributes.get(GEN_AI_OPERATION) == EXECUTE_TOOL:
        return name[len(KOOG_TOOL_SPAN_PREFIX):]
    if traceloop_tool and name.endswith(TRACELOOP_TOOL_SPAN_SUFFIX) and len(name) > len(TRACELOOP_TOOL_SPAN_SUFFIX):
        return name[: -len(TRACELOOP_TOOL_SPAN_SUFFIX)]
    if attributes.get("mcp.method.name") == "tools/call" or "tools/call" in name:
        match = _MCP_TOOL_SPAN_NAME.search(name)
        if match:
            return match.group(1)
    if name and _named_after_tool(attributes):
        return _without_call_suffix(name)
    return None


def _named_after_tool(attributes: Mapping[str, Any]) -> bool:
    """True when a kind key of ``NAME_IS_TOOL_KINDS`` says ``tool``: that convention names the span after the tool."""
    for key in NAME_IS_TOOL_KINDS:
        if _kind_is(attributes, key, "tool"):
            return True
    return False


def _without_call_suffix(name: str) -> str:
    """``name`` less one trailing ``NAME_IS_TOOL_CALL_SUFFIXES`` entry, unless nothing would be left."""
    for suffix in NAME_IS_TOOL_CALL_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def call_id(attributes: Mapping[str, Any]) -> str | None:
    """The tool-call id the model minted, or ``None`` (none recorded, or a producer's placeholder for none)."""
    for key in CALL_ID_KEYS:
        value = attributes.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) and value not in PLACEHOLDER_CALL_IDS:
            return str(value)
    return None
