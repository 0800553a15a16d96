"""Where a producer's span status is no evidence of a tool call's outcome: one table of producer paths, and MCP's
``isError`` records (docs/DECISIONS.md 780, 800, 955, 981, 988). Read by ``evidence.status_blind_path`` and
``attempts.py``; split from ``conventions.py``, whose tables say where a convention records a call.
"""

from __future__ import annotations

import re

# Producer paths whose span status is known not to carry a failure: a write's ok (or unset) status is evidence of
# commit only where the producer's path ends a failed call's span ERROR (docs/DECISIONS.md 780). One entry per path:
# (path, the attributes (key, value) every span of the producer carries, the path's marker: an attribute key present
# on the span, whether that marker is the path that reports failures (True: every other span of the producer is
# held) or the path that drops them (False: the marked spans are held), whether a recorded result is evidence on
# that path (True: the result carries the failure the status drops, so an ok write with a result reads as before;
# False: held with or without one), where it was read). A write on a held path is ``write_outcome_unrecorded``.
STATUS_EVIDENCE_PATHS = (
    ("autogen BaseTool.run_json (FunctionTool)", (("gen_ai.system", "autogen"),), "gen_ai.tool.description", True, False,
     "microsoft/autogen autogen-core 0.7.5 tools/_base.py run_json: trace_tool_span with the tool's description, an exception "
     "ends it ERROR; autogen-ext McpWorkbench.call_tool opens the same span without one and catches isError and every "
     "exception inside it (autogen_ext/tools/mcp/_workbench.py)"),
    # A LangChain tool whose error is handled (handle_tool_error, LangGraph's ToolNode handle_tool_errors, the
    # default) returns its error as a ToolMessage with status "error": the callback sees a normal end, so OpenLLMetry's
    # handler leaves the span unset and writes gen_ai.task.status=success; only the ToolMessage, recorded when content
    # is traced, shows the failure (docs/DECISIONS.md 955).
    ("OpenLLMetry's LangChain handler (LangGraph)", (("traceloop.span.kind", "tool"), ("gen_ai.provider.name", "langgraph")),
     "traceloop.entity.name", False, True,
     "traceloop/openllmetry opentelemetry-instrumentation-langchain 0.62.4 callback_handler.py on_tool_end (a handled "
     "error ends the run normally); read with langgraph 1.2.22, langchain-core 1.8.1"),
    ("OpenLLMetry's LangChain handler", (("traceloop.span.kind", "tool"), ("gen_ai.provider.name", "langchain")),
     "traceloop.entity.name", False, True,
     "traceloop/openllmetry opentelemetry-instrumentation-langchain 0.62.4 callback_handler.py on_tool_end"),
    # Agno turns a raised tool into a returned FunctionExecutionResult(status='failure'), so OpenLLMetry's wrapper ends
    # the tool span OK whatever the call did; only traceloop.entity.output, recorded when content is traced, shows it
    # (docs/DECISIONS.md 981).
    ("OpenLLMetry's Agno instrumentation", (("traceloop.span.kind", "tool"), ("gen_ai.system", "agno")),
     "traceloop.entity.name", False, True,
     "traceloop/openllmetry opentelemetry-instrumentation-agno 0.62.4 _tool_wrappers.py (FunctionCall.execute / aexecute "
     "wrapped: the span ends OK when execute returns); read with agno 3.1.10"),
)

# A recorded result that is MCP content parts alone (a JSON object whose ``type`` is one of these, or a non-empty list
# of them) is a CallToolResult whose ``isError`` was dropped: the MCP specification (Tools, "Error Handling") reports
# a tool's failure inside an ordinary result, ``isError: true``, so a producer that keeps the content alone cannot
# end a failed call's span in error, whoever it is (the OpenAI Agents SDK for Python under OpenLLMetry and for
# JavaScript under OpenInference were seen doing it). An ok write whose result has that shape is
# ``write_outcome_unrecorded`` unless the MCP server's own span of the call says ok (``MCP_SERVER_REPORTS_IS_ERROR``;
# docs/DECISIONS.md 800).
MCP_CONTENT_PART_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
# The same parts recorded as the MCP Python SDK's own repr of its models (``str()`` of ``CallToolResult.content``, or
# of a framework's wrapper holding them): ``TextContent(type='text', text='card declined', annotations=None,
# meta=None)``, pydantic's repr of mcp.types (mcp 1.x and 2.x). Semantic Kernel 1.45's MCPStdioPlugin records its
# function result so (``[TextContent(inner_content=TextContent(type='text', ...), ...)]``, tests/frameworks/isolated/
# semantic_kernel). Held as the JSON parts are, unless the text holds the flag itself as false.
MCP_CONTENT_PART_REPR = re.compile(r"\b(?:Text|Image|Audio)Content\(type='(?:text|image|audio)'|\b(?:EmbeddedResource\(type='resource'|ResourceLink\(type='resource_link')")
MCP_IS_ERROR_FALSE_REPR = ("isError=False", "is_error=False")
# The MCP server span of a tools/call (span kind SERVER, ``mcp.method.name`` tools/call) records isError as error.type
# ``tool_error`` with status ERROR (MCP semantic conventions; the MCP Python SDK 2.1.1 does, tests/frameworks/
# test_framework_mcp.py): an ok one below a write's step is evidence its call was no tool error (DECISIONS 800).
MCP_SERVER_REPORTS_IS_ERROR = ("server", "tools/call")
# The MCP client span of a tools/call (span kind CLIENT) as the MCP Python SDK 2.x records it: no result, and UNSET on
# an isError result (only a JSON-RPC error ends it in error). As a write's own step, its status is no evidence the
# write committed, unless the server's span of the call below it says ok (docs/DECISIONS.md 988).
MCP_CLIENT_DROPS_IS_ERROR = ("client", "tools/call")
