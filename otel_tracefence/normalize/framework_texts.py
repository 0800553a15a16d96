"""The texts frameworks write where a span's status says nothing: their own error and timeout texts handed to the
model as a tool's output, their answer for a call held for approval, their text for a run paused with calls waiting,
and a producer's stand-in for a hidden value. Tables of the conventions (``conventions.py``), each row with the source
it was read from; read by ``result_errors.py``, ``pending.py`` and ``evidence.py`` (docs/DECISIONS.md 400-403, 600,
952, 956, 958)."""

from __future__ import annotations

# -- Commit on evidence (docs/DECISIONS.md 400-403) -------------------------------------------------------------------
# A framework's own error-to-model or timeout text returned as a tool's output: the call failed although its span
# says ok. Per framework and version: (framework, versions, the text's pattern (``re.match`` at the start of a result
# string, or of a string under a content key inside a JSON result), where it was read). Patterns are written as
# the framework writes the text; only its variable parts are left open.
FRAMEWORK_ERROR_TEMPLATES = (
    ("openai-agents (Python)", ">= 0.0.3", r"An error occurred while running the tool\. Please try again\.",
     "openai/openai-agents-python src/agents/tool.py, default_tool_error_function (failure_error_function's default)"),
    ("openai-agents (Python)", ">= 0.2", r"An error occurred while parsing tool arguments\. Please try again with valid JSON\.",
     "openai/openai-agents-python src/agents/tool.py, default_tool_error_function (a JSON decode error)"),
    ("openai-agents (Python)", ">= 0.4 (function_tool timeout)", r"Tool '[^'\n]*' timed out after [0-9][0-9.e+-]* seconds\.",
     "openai/openai-agents-python src/agents/tool.py, default_tool_timeout_error_message (timeout_behavior error_as_result)"),
    # The JS SDK hands the model the Python SDK's error text (the first row matches it: @openai/agents-core
    # src/tool.ts, defaultToolErrorFunction) and its own timeout text, in milliseconds (docs/DECISIONS.md 570).
    ("openai-agents (JS)", "read in 0.20.0 (tool timeoutMs)", r"Tool '[^'\n]*' timed out after [0-9][0-9.e+-]*ms\.",
     "openai/openai-agents-js packages/agents-core/src/tool.ts, defaultFunctionToolTimeoutErrorMessage (timeoutBehavior error_as_result, the default)"),
    ("langgraph", "prebuilt ToolNode, handle_tool_errors=True", r"Error: (?s:.*)\n Please fix your mistakes\.\s*$",
     "langchain-ai/langgraph libs/prebuilt/langgraph/prebuilt/tool_node.py, TOOL_CALL_ERROR_TEMPLATE"),
    ("langgraph", "prebuilt ToolNode", r"Error executing tool '[^'\n]*' with kwargs (?s:.*) with error:\n",
     "langchain-ai/langgraph libs/prebuilt/langgraph/prebuilt/tool_node.py, TOOL_EXECUTION_ERROR_TEMPLATE"),
    ("langchain-core", "BaseTool, handle_tool_error=True on a ToolException without a message", r"Tool execution error\s*$",
     "langchain-ai/langchain libs/core/langchain_core/tools/base.py, _handle_tool_error"),
    ("langchain-core", "BaseTool, handle_validation_error=True", r"Tool input validation error\s*$",
     "langchain-ai/langchain libs/core/langchain_core/tools/base.py, _handle_validation_error"),
    ("crewai", "ToolUsage, translations errors.tool_usage_exception", r"I encountered an error while trying to use the tool\. This was the error: ",
     "crewAIInc/crewAI src/crewai/translations/en.json, errors.tool_usage_exception"),
    ("crewai", "ToolUsage, translations errors.tool_usage_error", r"I encountered an error: ",
     "crewAIInc/crewAI src/crewai/translations/en.json, errors.tool_usage_error"),
    ("crewai", "read in 1.15.30, a before-tool-call hook that returns False (the call never ran)", r"Tool execution blocked by hook\. Tool: ",
     "crewAIInc/crewAI src/crewai/utilities/tool_utils.py, agent_utils.py and agents/agent_executor.py (docs/DECISIONS.md 984)"),
    ("smolagents", ">= 1.0, execute_tool_call", r"Error executing tool '[^'\n]*' with arguments ",
     "huggingface/smolagents src/smolagents/agents.py, execute_tool_call (AgentToolExecutionError)"),
    # An MCP server's own text for a tool that raised, sent as the isError result's text part: a client that drops
    # isError but keeps the text (or hands it to the model as the call's output) still shows the failure.
    ("mcp (FastMCP / MCPServer)", "1.x and 2.x, Tool.run (ToolError / UnexpectedToolError)", r"Error executing tool [^\s'\n]+(?::\s|\s*$)",
     "modelcontextprotocol/python-sdk src/mcp/server/fastmcp/tools/base.py (1.x), src/mcp/server/mcpserver/tools/base.py (2.x), Tool.run"),
    ("autogen-agentchat", "read in 0.7.5, AssistantAgent._execute_tool_call, a tool the agent lacks (is_error=True)",
     r"Error: tool '[^'\n]*' not found in any workbench\s*$",
     "microsoft/autogen python/packages/autogen-agentchat/src/autogen_agentchat/agents/_assistant_agent.py, _execute_tool_call"),
    ("smolagents", ">= 1.0, a managed agent called as a tool", r"Error executing request to team member '[^'\n]*' with arguments ",
     "huggingface/smolagents src/smolagents/agents.py, execute_tool_call (AgentToolExecutionError)"),
    ("agno", "read in 3.1.10, MCPTools (a tool call that raised or timed out)", r"MCP tool '[^'\n]*' failed: ",
     "agno-agi/agno libs/agno/agno/utils/mcp.py, call_tool's except branch"),
    ("agno", "read in 3.1.10, MCPTools (an isError result)", r"Error from MCP tool '[^'\n]*': ",
     "agno-agi/agno libs/agno/agno/utils/mcp.py, call_tool (result.isError)"),
    ("llama-index-core", "FunctionTool.call / acall (an exception caught, is_error=True)", r"Encountered error: ",
     "run-llama/llama_index llama-index-core/llama_index/core/tools/function_tool.py, call / acall"),
    ("haystack-ai", "ToolInvoker (ToolInvocationError)", r"Failed to invoke Tool `[^`\n]*` with parameters ",
     "deepset-ai/haystack haystack/tools/errors.py, ToolInvocationError (components/tools/tool_invoker.py)"),
    # Any framework: a plain-text result that opens as an error report does (an error word and its text, a Python
    # exception's name or traceback, "<what> failed: <why>"). The text a framework hands the model for a failure it
    # caught is written so (AutoGen's "Error: ...", a tool returning str(exc)); a write's result written so is no
    # evidence it committed (issue 24 section 2: what looks like a failure and is not understood holds the write).
    ("any (a plain-text result that opens as an error report)", "read across frameworks",
     r"(?:(?:(?:Error|ERROR|Exception|EXCEPTION|Failure|FAILURE|Failed|FAILED|Fatal|FATAL)\b\s*[:!-]"
     r"|[A-Z][A-Za-z0-9_.]*(?:Error|Exception|Timeout)(?:\(|:)"
     r"|[^\n:]{0,60}\b(?:[Ff]ailed|[Ee]rror|[Ee]xception|[Tt]imed out)\s*:)"
     r"(?!\s*['\"]?(?:none|None|NONE|null|nil|no|No|false|False|0|n/a|N/A|-)?['\"]?[.\s]*$)"  # "Error: none" says no error
     r"|Traceback \(most recent call last\))",
     "AutoGen f\"Error: {e}\" (autogen_core tools FunctionTool), str(exc) of a Python exception, an API client's "
     "\"Request failed: ...\"; checked not to match a committed write's results in the project's fixtures and cases"),
    # An HTTP client's own text for a response it rejected: axios rejects a response outside validateStatus with an
    # AxiosError whose message is this; a tool returning err.message hands it on. A 5xx, 408 or 429 (the statuses of
    # result_errors.FAILING_HTTP_STATUSES) may have done part of its work; a 4xx refusal did not (docs/DECISIONS.md 971).
    ("axios", "read in 1.x, settle() (validateStatus false)", r"Request failed with status code (?:5[0-9][0-9]|408|429)\s*$",
     "axios/axios lib/core/settle.js: 'Request failed with status code ' + response.status"),
    # Any producer: a whole text that is an HTTP failure's reason phrase (result_errors.HTTP_FAILURE_PHRASES), the status
    # code before it or not ("502 Bad Gateway", nginx's "504 Gateway Time-out"), as servers and proxies write a failed
    # response's body (docs/DECISIONS.md 971).
    ("any (an HTTP failure's reason phrase as the whole result)", "RFC 9110 sections 15.6 and 15.5.9, RFC 6585 section 4",
     r"(?i:(?:[0-9]{3}\s+)?(?:Internal Server Error|Not Implemented|Bad Gateway|Service Unavailable|Gateway Time-?out"
     r"|HTTP Version Not Supported|Request Time-?out|Too Many Requests))[.!]?\s*$",
     "the reason phrases of RFC 9110 and RFC 6585; nginx's error pages (\"504 Gateway Time-out\")"),
    # Any producer: a whole text that is one word naming a failure or an outcome not known ("timeout", "Timed out",
    # "cancelled", "pending"), or a Node.js network error's message ("read ECONNRESET", "connect ECONNREFUSED 10.0.0.1:443",
    # "getaddrinfo ENOTFOUND api.example.com": result_errors.NETWORK_ERROR_CODES' system codes; docs/DECISIONS.md 970, 972).
    ("any (a whole result that is a failure or an unknown outcome's word)", "read across producers",
     r"(?:(?i:time[ds]?[ _-]?out|cancell?ed|aborted|failed|failure|error|errored|pending)[.!]?\s*$"
     r"|(?:(?:read|write|connect|getaddrinfo) )?E(?:CONNRESET|TIMEDOUT|CONNREFUSED|CONNABORTED|PIPE|AI_AGAIN|NOTFOUND"
     r"|HOSTUNREACH|NETUNREACH|NETDOWN)(?:\s|$))",
     "nodejs.org Errors, Common system errors (a system error's message is '<syscall> <code> <address>'); a tool returning str(exc)"),
    # A result object recorded as its Python text rather than JSON: pydantic's str() (``status='failure' result=None
    # error='...'``, agno's FunctionExecutionResult as OpenLLMetry's Agno instrumentation records it) or a dataclass's
    # or model's repr (``Result(status='error', ...)``), whatever the framework: its status field says the call failed.
    ("any (a result object's Python text)", "pydantic str() / repr(), dataclass repr",
     r"(?:[A-Za-z_][A-Za-z0-9_.]*\()?status=['\"](?:failure|failed|error|errored|timeout|timed_out|cancelled|canceled)['\"]",
     "pydantic BaseModel.__str__ / __repr_str__ (field=value pairs), dataclasses' repr; read in agno 3.1.10 FunctionExecutionResult "
     "under opentelemetry-instrumentation-agno 0.62.4"),
)
# A framework's answer for a call it holds for human approval, recorded as the tool's result before the body runs
# (docs/DECISIONS.md 600): (framework, versions, the key of a one-field result object holding the text, or None for a
# result that is the text itself, the text's pattern (``re.fullmatch``), where it was read). Such a span is a pending
# record: its step gets the note approval_pending and is held as before, unless the call's run after the resume
# supersedes it (``normalize/pending.py``).
APPROVAL_PENDING_RESULTS = (
    ("google-adk", "read in 2.13 (FunctionTool / McpTool / BashTool require_confirmation)", "error",
     r"This tool call requires confirmation, please approve or reject\.",
     "google/adk-python src/google/adk/tools/_confirmation_utils.py (tool_context.request_confirmation, then this answer)"),
)
# A framework's own text for a run that paused with tool calls waiting (for approval, user input or an external
# run), recorded as the agent span's output where no span records the calls themselves (framework, versions, the text's
# pattern (``re.fullmatch`` on the output, white space stripped), where it was read). Such a span in a trace where no
# tool step starts after it holds requested calls that cannot be read (docs/DECISIONS.md 958).
PAUSED_RUN_TEXTS = (
    ("agno", "read in 3.1.10 (requires_confirmation, requires_user_input, external_execution)",
     r"I have tools to execute, but (?:I need (?:confirmation|user input)(?:(?:,| or) (?:user input|external execution))*(?:,? or external execution)?|it needs external execution)\.",
     "agno-agi/agno libs/agno/agno/utils/response.py, get_paused_content"),
)

# A producer's stand-in for a value it was told to hide: what it records in place of a tool's arguments or result, or a
# model's output (producer, the exact recorded text, where it was read). Such a value is no value: arguments hidden so
# cannot be compared, a result hidden so is no evidence a write committed (write_outcome_unrecorded), a model output
# hidden so may hold requested calls that cannot be read (requested_call_unread) (docs/DECISIONS.md 952).
REDACTED_VALUES = (
    ("openinference", "__REDACTED__",
     "Arize-ai/openinference python/openinference-instrumentation config.py REDACTED_VALUE (TraceConfig hide_inputs, "
     "hide_outputs, hide_llm_invocation_parameters...; OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS)"),
    ("opentelemetry-collector-contrib redaction processor", "****",
     "processor/redactionprocessor: a blocked value is masked as ****"),
    ("sentry", "[Filtered]", "getsentry data scrubbing: a scrubbed value is [Filtered]"),
    ("rails / many scrubbers", "[FILTERED]", "Rails filter_parameters and the scrubbers that copy it"),
    # Masks written by hand in span processors and log scrubbers: a whole value that is one of these is a stand-in.
    ("hand-written scrubbers", "[REDACTED]", "a common mask"),
    ("hand-written scrubbers", "<REDACTED>", "a common mask"),
    ("hand-written scrubbers", "REDACTED", "a common mask"),
    ("hand-written scrubbers", "***", "a common mask"),
    ("hand-written scrubbers", "<hidden>", "a common mask"),
    ("hand-written scrubbers", "<masked>", "a common mask"),
    ("hand-written scrubbers", "[omitted]", "a common mask"),
    ("hand-written scrubbers", "<redacted>", "a common mask (DECISIONS 979)"),
    ("hand-written scrubbers", "***REDACTED***", "a common mask (DECISIONS 979)"),
    ("hand-written scrubbers", "<omitted>", "a common mask (DECISIONS 979)"),
    ("hand-written scrubbers", "[MASKED]", "a common mask (DECISIONS 979)"),
    ("hand-written scrubbers", "[removed]", "a common mask (DECISIONS 979)"),
    ("hand-written scrubbers", "[content omitted]", "a common mask (DECISIONS 979)"),
)
# Compared folded for case (DECISIONS 979): "<REDACTED>", "<Redacted>" and "<redacted>" are one stand-in.
REDACTED_TEXTS = frozenset(text.casefold() for _, text, _ in REDACTED_VALUES)
# A producer's mark of a part of a value it hid: a value holding one anywhere (a whole value, or one field of a JSON
# object) is no value either, as a stand-in is (producer, the mark, where it was read; docs/DECISIONS.md 986).
REDACTED_MARKS = (
    ("logfire", "[Scrubbed due to '",
     "pydantic/logfire 5.6 logfire/_internal/scrubbing.py: a value whose key or text matches a scrubbing pattern "
     "(password, secret, auth, session, ...) is replaced with [Scrubbed due to '<the matched text>'], on by default"),
)
