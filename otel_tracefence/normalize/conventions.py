"""Where each tracing convention records a tool call: one table, first match wins.

Sources, in DESIGN.md's order, then the producers read since (docs/CONVENTIONS.md
has the table by producer and version): OpenTelemetry GenAI semantic conventions
(``execute_tool`` spans, ``gen_ai.*`` attributes and span events; MCP spans,
``mcp.method.name``), OpenInference (Arize Phoenix: LlamaIndex, smolagents, ...),
OpenLLMetry (``traceloop.*``, ``gen_ai.completion.*``), Langfuse, LangSmith, the
Vercel AI SDK (``ai.toolCall.*``), older pydantic-ai (``tool_arguments`` /
``tool_response``), ``code.function.parameters.*``, CrewAI, Haystack's own
tracer, Google ADK, Elastic, MLflow and Spring AI. Adding a convention means adding its keys here,
nothing else: the table is read off a span by ``span_kinds.py`` (which spans are tool spans or agent boundaries, the
tool, call id and agent each names) and the other readers of ``normalize/``, and ``read_keys.py`` derives from it
every key and namespace the normalizer reads.
"""

from __future__ import annotations



# The producer's own labels (inputs). Our output annotations are tracefence.step.* etc.
TRACEFENCE_EFFECT = "tracefence.effect"
TRACEFENCE_STATUS = "tracefence.status"
TRACEFENCE_IDEMPOTENCY_KEY = "tracefence.idempotency_key"
TRACEFENCE_RESULT_STABLE = "tracefence.result_stable"  # boolean: false for results that differ between executions
TRACEFENCE_INPUTS = (TRACEFENCE_EFFECT, TRACEFENCE_STATUS, TRACEFENCE_IDEMPOTENCY_KEY, TRACEFENCE_RESULT_STABLE)

GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
EXECUTE_TOOL = "execute_tool"
# The gen_ai.operation.name values of a tool call: the GenAI conventions' and Mastra 0.24's exporter's own
# (@mastra/otel-exporter 0.3, "tool.execute" spans).
EXECUTE_TOOL_OPERATIONS = frozenset({EXECUTE_TOOL, "tool.execute"})
EXECUTE_TOOL_PREFIX = "execute_tool "
# Operations that start a model call or an agent of their own: a tool span below
# one of these belongs to a sub-agent and is a step, not a dispatch attempt.
AGENT_BOUNDARY_OPERATIONS = frozenset({"invoke_agent", "create_agent", "chat", "text_completion", "generate_content", "invoke_workflow"})
AGENT_BOUNDARY_KINDS = {
    "openinference.span.kind": frozenset({"AGENT", "LLM"}),
    "traceloop.span.kind": frozenset({"agent", "workflow"}),
    "mlflow.spanType": frozenset({"AGENT", "LLM", "CHAT_MODEL"}),
}

# Attribute value that marks a tool span, per convention (values compared case-insensitively).
TOOL_KIND_MARKERS = (
    ("openinference.span.kind", "tool"),
    ("traceloop.span.kind", "tool"),
    ("langfuse.observation.type", "tool"),
    ("langsmith.span.kind", "tool"),
    ("mcp.method.name", "tools/call"),
    ("mlflow.spanType", "tool"),
    ("spring.ai.kind", "tool_call"),
    ("logfire.msg_template", "function: {name}"),  # Logfire's OpenAI Agents bridge: its fields in MARKED_TOOL_FIELDS
)
# Tool spans whose fields are plain attribute keys, read only on a span whose kind marker (key, value compared as
# TOOL_KIND_MARKERS') names it that producer's tool span (DECISIONS 991): (producer, marker key, marker value, the keys of
# the tool name, arguments, result and failure, of a JSON schema typing each field, where it was read). A field that is the
# text "null" its schema types null is None: not recorded (992). The failure key is read where the status says error (993).
MARKED_TOOL_FIELDS = (
    ("openllmetry", "traceloop.span.kind", "tool", "traceloop.entity.name", None, None, None, None, "traceloop/openllmetry: a tool span's entity name"),
    ("logfire (OpenAI Agents)", "logfire.msg_template", "function: {name}", "name", "input", "output", "error", "logfire.json_schema",
     "pydantic/logfire 5.6.0 logfire/_internal/integrations/openai_agents.py: a FunctionSpanData span named by its template, the span data's "
     "fields name, input, output, mcp_data as attributes, a SpanError as 'error' with status ERROR; None typed null in logfire.json_schema"),
)
# Attributes whose mere presence marks a tool span: Vercel AI SDK, OpenLLMetry's OpenAI Agents
# instrumentation, CrewAI, Haystack 3.x, Elastic.
TOOL_PRESENCE_MARKERS = (
    "ai.toolCall.name",
    "gen_ai.completion.tool.name",
    "crewai.tool.name",
    "haystack.tool.name",
    "elastic.tool.parameters",
)
# Spans that carry a tool marker but run no tool: Haystack's confirmation hooks record the decision
# to run a call (haystack.tool.name, haystack.tool.call.id), not the call.
NOT_TOOL_SPAN_NAME_PREFIXES = ("haystack.agent.hook.",)
# Spans of these exact names that carry a tool marker but no tool name (TOOL_NAME_KEYS) list tools, they call none: the
# OpenAI Agents SDK's listing of an MCP server's tools (MCPListToolsSpanData, type "mcp_tools"), which OpenInference's
# bridge for the JS SDK names after its type and marks TOOL (Arize-ai/openinference js/packages/
# openinference-instrumentation-openai-agents src/processor.ts, getSpanName / getSpanKind; docs/DECISIONS.md 571).
# Logfire's OpenAI Agents bridge names it by its message template (logfire 5.6.0 MCPListToolsSpanData; DECISIONS 994).
NOT_TOOL_SPAN_NAMES_WITHOUT_TOOL = frozenset({"mcp_tools", "MCP: list tools from server {server}"})
# Attributes whose value True says the call failed, whatever the span status (Haystack 3.x leaves
# its tool spans' status unset and sets haystack.tool.error).
FAILURE_FLAG_KEYS = ("haystack.tool.error",)
# Haystack's model output: replies whose content holds {"tool_call": {tool_name, arguments, id}}
# (the agent's step.llm span in 3.x; a chat generator component's output in 2.x).
HAYSTACK_MODEL_OUTPUT_KEYS = ("haystack.agent.step.llm.output", "haystack.component.output")
# Haystack's own tracer: a ToolInvoker component span runs every tool call of one model turn;
# the calls are in its input messages, their results in its output messages.
HAYSTACK_COMPONENT_TYPE = "haystack.component.type"
HAYSTACK_TOOL_INVOKER = "ToolInvoker"
HAYSTACK_COMPONENT_INPUT = "haystack.component.input"
HAYSTACK_COMPONENT_OUTPUT = "haystack.component.output"
# Conventions whose tool spans are named after the tool itself.
NAME_IS_TOOL_KINDS = ("openinference.span.kind", "langfuse.observation.type", "langsmith.span.kind", "mlflow.spanType")
# A call-method suffix such a name may end with, taken off to give the tool (docs/DECISIONS.md 960): OpenInference's DSPy
# instrumentation (openinference-instrumentation-dspy 0.1.48, _ToolCallWrapper / _AsyncToolCallWrapper) names a tool's
# span ``(tool.name or its class name) + ".__call__"`` / ``+ ".acall"``, with no tool-name attribute. Tool names of the
# model APIs hold no ``.`` (OpenAI and Anthropic: ``^[a-zA-Z0-9_-]+$``), so no such tool is named so.
NAME_IS_TOOL_CALL_SUFFIXES = (".__call__", ".acall")

TOOL_NAME_KEYS = (
    GEN_AI_TOOL_NAME,
    "tool.name",
    "ai.toolCall.name",
    "gen_ai.completion.tool.name",
    "crewai.tool.name",
    "haystack.tool.name",
    "elastic.tool.name",
    "spring.ai.tool.definition.name",
)
CALL_ID_KEYS = ("gen_ai.tool.call.id", "tool_call.id", "tool.id", "ai.toolCall.id", "haystack.tool.call.id")
# Values a producer writes under a call-id key when it has no id, read as no call id (docs/DECISIONS.md 550): Google
# ADK writes "<not specified>" on a tool span whose tool raised, the response event that holds the id never made
# (google/adk-python src/google/adk/telemetry/tracing.py, trace_tool_call).
PLACEHOLDER_CALL_IDS = frozenset({"<not specified>"})
# LangSmith's OpenTelemetry export (langsmith >= 0.3, LANGSMITH_TRACING_MODE=otel) writes every run's inputs and
# outputs as JSON text in the deprecated GenAI keys below, its tool runs' too: {"output": <the ToolMessage, dumped>}
# (langchain-ai/langsmith-sdk python/langsmith/_internal/otel/_otel_exporter.py, _set_io_attributes); read last.
LANGSMITH_INPUT_KEY = "gen_ai.prompt"
LANGSMITH_OUTPUT_KEY = "gen_ai.completion"
ARGUMENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.input",  # Mastra 0.24's exporter (@mastra/otel-exporter 0.3: tool.execute spans)
    "input.value",
    "traceloop.entity.input",
    "langfuse.observation.input",
    "ai.toolCall.args",
    "tool_arguments",
    "gcp.vertex.agent.tool_call_args",
    "elastic.tool.parameters",
    "haystack.agent.step.tool.input",
    "mlflow.spanInputs",
    "spring.ai.tool.call.arguments",
    LANGSMITH_INPUT_KEY,
)
RESULT_KEYS = (
    "gen_ai.tool.call.result",
    "gen_ai.tool.output",  # Mastra 0.24's exporter (@mastra/otel-exporter 0.3: tool.execute spans)
    "output.value",
    "traceloop.entity.output",
    "langfuse.observation.output",
    "ai.toolCall.result",
    "tool_response",
    "gcp.vertex.agent.tool_response",
    "haystack.agent.step.tool.output",
    "mlflow.spanOutputs",
    "spring.ai.tool.call.result",
    LANGSMITH_OUTPUT_KEY,
)
# Wrappers frameworks put around a call's keyword arguments in OpenInference ``input.value``:
# LlamaIndex ``{"kwargs": {...}}``, smolagents ``{"args": [], "kwargs": {...},
# "sanitize_inputs_outputs": ...}``. Taken off only when nothing positional is inside.
ARGUMENT_WRAPPER_KEYS = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
WRAPPED_ARGUMENT_KEYS = ("input.value",)
# A callback's envelope around a tool's arguments, on any argument key (docs/DECISIONS.md 962): an object whose keys
# are all among ``keys`` and hold every one of ``marks``. Its arguments are the value under ``arguments`` (when it is
# not null), else the text under ``text`` read as a JSON or Python literal (else that text); the call id is the string
# at ``call_id``. (keys, marks, arguments, text, call-id path, where it was read.)
ARGUMENT_ENVELOPES = (
    (frozenset({"input_str", "tags", "metadata", "inputs", "kwargs"}), frozenset({"input_str", "inputs"}), "inputs", "input_str", ("kwargs", "tool_call_id"),
     "OpenLLMetry opentelemetry-instrumentation-langchain 0.62.4, callback_handler.py on_tool_start: json.dumps({input_str, tags, metadata, "
     "inputs, kwargs}) as gen_ai.tool.call.arguments and traceloop.entity.input; langchain-core 1.8 BaseTool.run passes inputs=the tool "
     "input, tool_call_id in kwargs"),
)

# GenAI span events that carry a tool call's arguments or result when the attributes do not
# (Strands Agents' default; the GenAI conventions' event form). Read in this order.
TOOL_ARGUMENT_EVENTS = (
    ("gen_ai.tool.message", "content"),
    ("gen_ai.client.inference.operation.details", "gen_ai.tool.call.arguments"),
)
TOOL_RESULT_EVENTS = (
    ("gen_ai.choice", "message"),
    ("gen_ai.client.inference.operation.details", "gen_ai.tool.call.result"),
)
# Events whose messages (parts with "type": "tool_call") may hold a tool span's arguments.
INPUT_MESSAGES_KEY = "gen_ai.input.messages"
OUTPUT_MESSAGES_KEY = "gen_ai.output.messages"
OPERATION_DETAILS_EVENT = "gen_ai.client.inference.operation.details"

# MCP semantic conventions: a tools/call span is named "tools/call <tool>" ("MCP send tools/call
# <tool>" in the MCP Python SDK's client span) and names its tool in gen_ai.tool.name.
MCP_METHOD_KEY = "mcp.method.name"  # MCP semantic conventions: the JSON-RPC method of an MCP span (tools/call, initialize, ...)
MCP_TOOL_SPAN_NAME_PATTERN = r"(?:^|\s)tools/call\s+(\S+)\s*$"
# OpenLLMetry's OpenAI Agents instrumentation names tool spans "<tool>.tool".
TRACELOOP_TOOL_SPAN_SUFFIX = ".tool"
# Koog's execute_tool spans named tool.<Name> (span ids as names, ai.koog.agents.features.opentelemetry, ExecuteToolSpan:
# "...tool.<toolName>"), read as the tool's name only on a span whose operation is execute_tool (docs/DECISIONS.md 444).
KOOG_TOOL_SPAN_PREFIX = "tool."
# pydantic-ai's output tools: the structured answer the model gives by calling a tool the agent declared as output
# (kind "output", default name final_result, _output.DEFAULT_OUTPUT_TOOL_NAME). pydantic-ai runs no tool for them
# (an output type is validated in-process, no execute_tool span; an output function is traced as an execute_tool span
# of its own); each chat span declares them in model_request_parameters.output_tools (docs/DECISIONS.md 444).
OUTPUT_TOOLS_KEY = "model_request_parameters"
OUTPUT_TOOLS_FIELD = "output_tools"
OUTPUT_TOOL_KIND = "output"
# OpenInference says whether input.value / output.value is JSON or plain text.
MIME_TYPE_KEYS = {"input.value": "input.mime_type", "output.value": "output.mime_type"}
CODE_PARAMETER_PREFIX = "code.function.parameters."
CODE_PARAMETER_SUFFIX = ".value"

# Effect hints: MCP tool annotations (readOnlyHint) and the HTTP method (RFC 9110 section 9.2.1 safe methods).
MCP_READ_ONLY_HINT_KEYS = ("mcp.tool.annotations.readOnlyHint", "mcp.tool.annotations.read_only_hint", "gen_ai.tool.annotations.readOnlyHint")
HTTP_METHOD_KEYS = ("http.request.method", "http.method")
# The method as sent, when the instrumentation recorded another in http.request.method (HTTP conventions: a framework
# that reads methods case-insensitively records the canonical one there, an unknown one as _OTHER; docs/DECISIONS.md 374).
HTTP_METHOD_ORIGINAL_KEY = "http.request.method_original"
HTTP_OTHER_METHOD = "_OTHER"
# MCP: destructiveHint=true says the tool may perform destructive updates (a write); false says only that its
# writes are additive, which is no read.
MCP_DESTRUCTIVE_HINT_KEYS = ("mcp.tool.annotations.destructiveHint", "mcp.tool.annotations.destructive_hint", "gen_ai.tool.annotations.destructiveHint")
# HTTP methods, compared as written: method tokens are case-sensitive (RFC 9110 section 9.1), and the HTTP
# conventions' http.request.method lists them in upper case (any other method is recorded as _OTHER). The
# safe methods only read (9.2.1); the others RFC 9110 and RFC 5789 (PATCH) define may write; any other token
# (get, Post, _OTHER, PURGE) says nothing known of its effect (docs/DECISIONS.md 204).
HTTP_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
HTTP_UNSAFE_METHODS = frozenset({"POST", "PUT", "DELETE", "CONNECT", "PATCH"})
# HTTP client spans (HTTP semantic conventions, current keys first, then the pre-1.21 ones):
# a tool step's effect dispatched twice shows as two client spans with one unsafe method and URL.
HTTP_URL_KEYS = ("url.full", "http.url")
HTTP_URL_PART_KEYS = (("server.address", "server.port", "url.path"), ("http.host", None, "http.target"))
HTTP_STATUS_KEYS = ("http.response.status_code", "http.status_code")
HTTP_SERVER_ERROR = range(500, 600)  # RFC 9110 section 15.6
HTTP_CLIENT_ERROR = range(400, 500)  # RFC 9110 section 15.5; an error on a client span only (HTTP semantic conventions, "Status")
RPC_SYSTEM_KEY = "rpc.system"  # RPC client spans (gRPC, JSON-RPC...): rpc.service, rpc.method
RPC_METHOD = "RPC"  # the method RPC requests are counted under: not a safe HTTP method
# gRPC's status code on an RPC span (RPC semantic conventions, "gRPC"): 0 is OK. On a client span every other code sets
# status Error; on a server span only these do (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE,
# DATA_LOSS), the others being the caller's fault (docs/DECISIONS.md 372).
RPC_GRPC_STATUS_KEY = "rpc.grpc.status_code"
GRPC_SERVER_ERRORS = frozenset({2, 4, 12, 13, 14, 15})
# The keys that record a span's own response status: HTTP's and gRPC's.
RESPONSE_STATUS_KEYS = (*HTTP_STATUS_KEYS, RPC_GRPC_STATUS_KEY)
# Idempotency evidence a request records (docs/DECISIONS.md 420-423). HTTP semantic conventions: a request header is
# http.request.header.<key>, <key> the header's name in lower case, the value an array of strings (one per value, or
# one comma-joined); before semantic conventions 1.21 the name's dashes were written as underscores; producers also
# write a plain string, or keep the name's case. gRPC metadata the same way (RPC conventions, "gRPC":
# rpc.grpc.request.metadata.<key>; rpc.request.metadata.<key> in later versions). Responses: the same with
# "response". A header name is compared in lower case with underscores read as dashes.
REQUEST_HEADER_PREFIXES = ("http.request.header.", "rpc.grpc.request.metadata.", "rpc.request.metadata.")
RESPONSE_HEADER_PREFIXES = ("http.response.header.", "rpc.grpc.response.metadata.", "rpc.response.metadata.")
# The request headers that carry an idempotency key: Idempotency-Key (IETF draft-ietf-httpapi-idempotency-key-header;
# Stripe, Adyen, Square's Connect v2 HTTP form, the OpenAI Agents examples), and its X- form (older APIs).
IDEMPOTENCY_KEY_HEADERS = frozenset({"idempotency-key", "x-idempotency-key"})
# The response headers that say the server answered with the response stored for the key, making no new effect
# (Stripe: "Idempotent-Replayed: true"), and the value that says so (compared in lower case).
REPLAYED_RESPONSE_HEADERS = frozenset({"idempotent-replayed", "x-idempotent-replayed"})
REPLAYED_TRUE = "true"

# Timeouts and cancellations, by exception or error type (error.type, exception.type, status message).
TIMEOUT_PATTERN = r"time[ds]?[ _-]?out(?!put)|deadline"
CANCEL_PATTERN = r"cancel"

# -- Commit on evidence (docs/DECISIONS.md 400-403) -------------------------------------------------------------------
# A run paused for human input records its pause as its agent span's output: a finish reason among these on an
# ``invoke_agent`` span's output event, its message the framework's record of the pause (Strands Agents: StopReason
# "interrupt", "Agent was interrupted for human input", strands-agents/sdk-python src/strands/types/event_loop.py;
# the message is str(AgentResult), the Python repr of the interrupts, src/strands/agent/agent_result.py __str__,
# written by src/strands/telemetry/tracer.py end_agent_span). Text there that is not JSON holds no requested call
# (docs/DECISIONS.md 601); JSON is read as any output is.
PAUSE_FINISH_REASONS = frozenset({"interrupt"})
# Keys by which an output-message part of a type no convention defines refers to a call (docs/DECISIONS.md 961): a part
# whose every reference names a call another part of the same message requests (same id; same tool and arguments where
# it repeats them) adds no call and is read, not held as unread. Read from: the Vercel AI SDK 7 (`ai` 7.x, @ai-sdk/otel:
# {"type": "tool_approval_request", "approval_id", "tool_call_id"}) and the Microsoft Agent Framework 1.26
# (agent_framework/_types.py FunctionApprovalRequestContent: {"type": "function_approval_request", "function_call":
# {"type": "function_call", "call_id", "name", "arguments"}, "user_input_request": true}). A nested object that is
# itself a call part refers to that call; a top-level key below refers by id alone.
CALL_REFERENCE_KEYS = ("tool_call_id", "toolCallId", "call_id", "tool_use_id", "toolUseId")
# Requested calls a framework records only in its own output fields, with no call id (docs/DECISIONS.md 963): a module's
# prediction (an object, or JSON text of one or of a list of them) on OUTPUT_FIELDS_KEY, or a model's raw answer there
# in the framework's sections (OUTPUT_FIELD_SECTION: "[[ ## <field> ## ]]" then the field's text). Per form: (the fields
# that mark it, the tool-name field, the arguments field, the calls field (a list of {"name", "args"[, "id"]}, or an
# object holding that list under the same name), where it was read).
OUTPUT_FIELDS_KEY = "output.value"
OUTPUT_FIELD_SECTION = r"\[\[ ## (\w+) ## \]\]"
OUTPUT_FIELD_CALLS = (
    (frozenset({"next_tool_name"}), "next_tool_name", "next_tool_args", None,
     "DSPy 3.4.1 dspy/predict/react.py ReAct: the signature's output fields next_thought, next_tool_name, next_tool_args"),
    (frozenset({"next_thought", "tool_calls"}), None, None, "tool_calls",
     "DSPy 3.4.1 dspy/predict/react_v2.py ReActV2: output fields next_thought, tool_calls (dspy.ToolCalls, "
     "adapters/types/tool.py: {tool_calls: [{id, name, args}]})"),
)
PAUSE_FINISH_REASON_KEY = "finish_reason"  # the output event's attribute (GenAI event form: gen_ai.choice)
INVOKE_AGENT = "invoke_agent"
# Keys inside a JSON result whose string value is the text a framework handed the model (a LangChain ToolMessage's
# content, an MCP or AI SDK text part): where a template is looked for besides a result that is itself a string.
TEMPLATE_TEXT_KEYS = frozenset({"content", "text", "output", "result", "observation"})
# A LangChain message as langchain_core.load.dumpd serializes it ({"lc": 1, "type": "constructor", "id": [...,
# "ToolMessage"], "kwargs": {...}}: OpenLLMetry's and OpenInference's LangChain handlers record tool outputs so): its
# kwargs are the message, read as a result's top (its "status": "error" says the call failed). A ToolMessage dumped
# as a plain object ({"type": "tool", "tool_call_id": ..., "status": ...}) is read so too, wherever it is.
LANGCHAIN_SERIALIZED_MARKER = ("lc", "constructor", "kwargs")
LANGCHAIN_TOOL_MESSAGE = "ToolMessage"
TOOL_MESSAGE_SHAPE = ("type", "tool", "tool_call_id")

# Which producer recorded a tool span, and whether it records a tool's result by default: (producer, the attribute
# key whose presence marks its spans, records results by default, where that default was read). First match wins. A
# write with no result whose producer records results is not shown committed (write_outcome_unrecorded), unless the
# trace's other tool spans of that producer carry none either (content capture off). A producer recording none by
# default (opt-in content) is taken at its word; a producer not listed is judged by the trace alone (DECISIONS 401).
PRODUCER_RESULT_DEFAULTS = (
    ("openinference", "openinference.span.kind", True,
     "Arize-ai/openinference TraceConfig: hide_outputs (OPENINFERENCE_HIDE_OUTPUTS) is false by default"),
    ("openllmetry", "traceloop.span.kind", True, "traceloop/openllmetry: TRACELOOP_TRACE_CONTENT is true by default"),
    ("openllmetry", "traceloop.entity.name", True, "traceloop/openllmetry: TRACELOOP_TRACE_CONTENT is true by default"),
    ("openllmetry", "gen_ai.completion.tool.name", True, "traceloop/openllmetry openai-agents instrumentation: content traced by default"),
    ("vercel-ai", "ai.toolCall.name", True, "vercel/ai experimental_telemetry: recordOutputs is true by default"),
    ("langfuse", "langfuse.observation.type", True, "langfuse: observation output recorded by default"),
    ("mlflow", "mlflow.spanType", True, "mlflow tracing: span outputs recorded by default"),
    ("google-adk", "gcp.vertex.agent.tool_call_args", True, "google/adk-python telemetry: tool_response recorded by default"),
    ("logfire", "logfire.msg_template", True, "pydantic/logfire instrument_openai_agents: output recorded unless OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false"),
    ("gen_ai", GEN_AI_OPERATION, False,
     "OpenTelemetry GenAI semantic conventions: content capture is opt-in (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)"),
)

# The last word of an attribute key that names what a call returned (``gen_ai.tool.output``, ``mastra.tool.result``,
# ``output``): on a write span with no result read, such a key the normalizer does not read may hold the result in a
# form no convention reads, so the write is not shown committed (write_outcome_unrecorded, docs/DECISIONS.md 953).
RESULT_KEY_WORDS = frozenset({"output", "outputs", "result", "results", "response", "returnvalue", "return"})

# Producer paths whose span status is no evidence of a call's outcome, and MCP's isError records: status_paths.py.

# Frameworks' own status attributes on a tool span, read as the call's outcome: a value that is no success value
# (SUCCESS_STATUS_VALUES) makes an ok step's status error (noted framework_status_error). Strands Agents sets
# gen_ai.tool.status ("success" / "error", strands-agents/sdk-python src/strands/telemetry/tracer.py end_tool_call_span);
# OpenLLMetry's LangChain handler sets gen_ai.task.status (traceloop/openllmetry opentelemetry-instrumentation-langchain).
FRAMEWORK_STATUS_KEYS = ("gen_ai.tool.status", "gen_ai.task.status")

# An attribute the normalizer does not read whose key names one of these (its words: split at separators and case
# changes, lower-cased) is failure evidence on a write step unless its value is a success value (docs/DECISIONS.md 400).
FAILURE_EVIDENCE_WORDS = {
    "status": "status", "statuses": "status", "outcome": "status", "outcomes": "status",  # 974: an outcome is a status
    "error": "error", "errors": "error", "err": "error", "exception": "error", "exceptions": "error", "fault": "error",  # SOAP's Fault (1032)
    "failure": "error", "failures": "error", "failed": "error", "fail": "error", "fails": "error",
    "timeout": "timeout", "timeouts": "timeout", "timedout": "timeout",
    "success": "success", "succeeded": "success", "successful": "success",
    # A call cancelled, aborted or interrupted part-way: its outcome is not known (docs/DECISIONS.md 974). Words of the
    # outcome only: "cancel" or "abort" alone may name a setting (a cancel URL).
    "cancelled": "cancellation", "canceled": "cancellation", "cancellation": "cancellation", "aborted": "cancellation",
    "interrupted": "cancellation",
}
# An attribute key's or a code's words: runs of letters split where the case changes ("timedOut", "HTTPError"), and
# runs of digits; anything else separates them ("_", "-", ".", white space). Read by evidence.outcome_kind and by
# result_errors' word codes (docs/DECISIONS.md 1020).
WORD_PATTERN = r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+"
# Values that say all went well, compared folded (textfold.folded_word): for a status, for a success flag, for an error,
# failure or timeout attribute (that no error, failure or timeout happened).
SUCCESS_STATUS_VALUES = frozenset({"ok", "success", "succeeded", "successful", "completed", "complete", "done", "finished", "unset", "statuscodeok", "statuscodeunset"})
SUCCESS_FLAG_VALUES = frozenset({"true", "yes", "1"})
NO_FAILURE_VALUES = frozenset({"", "false", "no", "none", "null", "0", "nil", "ok"})
# A timeout attribute holding a number or a duration is a setting, not an outcome.
DURATION_VALUE_PATTERN = r"^\s*[0-9]+(?:\.[0-9]+)?\s*(?:ns|us|µs|ms|s|sec|secs|seconds|m|min|mins|minutes|h)?\s*$"

# Where a model's output records the tool calls it requested.
GEN_AI_OUTPUT_MESSAGES = OUTPUT_MESSAGES_KEY
OPENINFERENCE_TOOL_CALL_PATTERN = r"^llm\.output_messages\.([0-9]+)\.message\.tool_calls\.([0-9]+)\.tool_call\.(id|function\.name|function\.arguments)$"
# Calls flattened into indexed gen_ai.completion.* keys (docs/DECISIONS.md 440), one rule for every producer that writes them:
# older OpenLLMetry, gen_ai.completion.<i>.tool_calls.<j>.{id,name,arguments}; LiteLLM's OpenTelemetry callback
# (litellm/integrations/opentelemetry.py, OpenTelemetry._tool_calls_kv_pair: the i-th tool call of the response in
# completion slot i, fields name and arguments, no id) and OpenLLMetry's legacy function_call form,
# gen_ai.completion.<i>.function_call.{name,arguments}; the Traceloop SDK before the gen_ai rename wrote the same under
# llm.completions.<i>.
OPENLLMETRY_TOOL_CALL_PATTERN = (
    r"^(?:gen_ai\.completion|llm\.completions)\.([0-9]+)\.(?:tool_calls\.([0-9]+)|function_call)\.(id|name|arguments)$"
)
INDEXED_COMPLETION_PREFIXES = ("gen_ai.completion.", "llm.completions.")
# Every prefix of indexed keys that may hold requested calls (OpenInference's and the completion keys above), each
# followed by a slot index: read on any span that carries one, whatever its kind (LiteLLM writes onto whatever span
# is current, an ASGI server span; DECISIONS 440).
INDEXED_CALL_PREFIXES = ("llm.output_messages.", *INDEXED_COMPLETION_PREFIXES)
# A tool's result that is a LangChain ToolMessage names the call it answers (docs/DECISIONS.md 443), in each form it is
# recorded: LangChain's serialized form ({"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs":
# {"tool_call_id"}}, OpenLLMetry's LangChain handler, under "output"), a message's dict ({"type": "tool", "data":
# {"tool_call_id"}}, langchain_core.messages.message_to_dict, OpenInference LangChain's output.value) or its fields
# ({"type": "tool", "tool_call_id"}). The keys a result wraps one such message under:
TOOL_MESSAGE_WRAPPER_KEYS = ("output", "outputs")
TOOL_MESSAGE_CLASS = "ToolMessage"
TOOL_MESSAGE_TYPE = "tool"
# A framework's summary span: an ``execute_tool`` span opened after parallel calls that carries their merged
# responses and no call of its own (docs/DECISIONS.md 441). Its tool name is a placeholder in parentheses, which no
# model can call (OpenAI function names are ^[a-zA-Z0-9_-]{1,64}$, MCP tool names letters, digits, _-.):
# Google ADK's ``execute_tool (merged)`` span, ``gen_ai.tool.name`` = ``(merged tools)``, arguments ``N/A``
# (google/adk-python, src/google/adk/telemetry/tracing.py, trace_merged_tool_calls); trpc-agent-go's
# ``execute_tool (merged tools)``, the same attributes (trpc-group/trpc-agent-go, telemetry/trace, TraceMergedToolCalls).
SUMMARY_TOOL_NAME_PATTERN = r"^\s*\(.*\)\s*$"
OPENLLMETRY_MODEL_SPAN_KEY = "llm.request.type"  # on every OpenLLMetry model span
# Events on a model span that carry its output (GenAI event form, Strands Agents).
OUTPUT_EVENTS = (("gen_ai.choice", "message"), (OPERATION_DETAILS_EVENT, OUTPUT_MESSAGES_KEY))
# LangSmith's OpenTelemetry export (langsmith >= 0.3, LANGSMITH_TRACING_MODE=otel): a model run's span
# (langsmith.span.kind "llm") records the run's outputs in LANGSMITH_OUTPUT_KEY (above), LangChain's LLMResult:
# {"generations": [[{"message": <the AIMessage, serialized {"lc": 1, "type": "constructor", "id": [...,
# "AIMessage"], "kwargs": {...}} or as its fields>}]]}, whose "tool_calls" are LangChain's
# [{"name", "args" (an object), "id", "type": "tool_call"}] (langchain_core.messages.tool.ToolCall;
# langchain-ai/langsmith-sdk python/langsmith/_internal/otel/_otel_exporter.py, _set_io_attributes).
LANGSMITH_KIND_KEY = "langsmith.span.kind"
LANGSMITH_MODEL_KINDS = frozenset({"llm"})
# The Vercel AI SDK's model spans (ai.generateText.doGenerate, ai.streamText.doStream, and the ai.generateText /
# ai.streamText spans around them) record the calls the model asked for as JSON text of
# [{"toolCallId", "toolName", "args" (JSON text, AI SDK 4) or "input" (AI SDK 5)}] ("Telemetry", AI SDK Core), its
# output in these keys when recordOutputs is on (the default), and its finish reason ("tool-calls") apart.
VERCEL_TOOL_CALLS_KEY = "ai.response.toolCalls"
VERCEL_OUTPUT_KEYS = (VERCEL_TOOL_CALLS_KEY, "ai.response.text")
VERCEL_FINISH_REASON_KEY = "ai.response.finishReason"
# Call records in the Vercel AI SDK's shape ({"toolCallId", "toolName", "args" or "input"}) in a framework's own
# output objects, where no model span records the calls (docs/DECISIONS.md 959): per key, the JSON object is a record
# itself, or holds a list of them under CALL_RECORD_LIST_FIELD, or is a list of them. Only objects with both a call id
# and a tool name are read. Mastra 1.x (@mastra/observability 1.17.9, @mastra/otel-exporter 1.4.0: the chat span's
# gen_ai.output.messages drops the calls; agent_step's model_step output holds them, a suspended run's output and the
# stream's chunk records name them).
# Mastra 0.24 (@mastra/otel-exporter 0.3) writes the same records under a plain "output" on its model.step and
# model.chunk spans.
CALL_RECORD_KEYS = ("mastra.model_step.output", "mastra.model_generation.output", "mastra.agent_run.output", "mastra.model_chunk.output", "output")
CALL_RECORD_ARGUMENT_FIELDS = ("input", "args", "toolInput")
# A content part with no type holding a Gemini FunctionCall under either spelling (google-genai Part: functionCall by
# alias, function_call by field name), its arguments under "args" (OpenAI's legacy message: "arguments") (978).
GEMINI_PART_CALL_KEYS = ("functionCall", "function_call")
# A span's whole completion as JSON chat messages (Langtrace: gen_ai.completion, OpenAI's messages with tool_calls),
# read as gen_ai.output.messages when it is no LangSmith model run's LLMResult (978).
COMPLETION_JSON_KEY = "gen_ai.completion"  # the first present is the call's arguments
CALL_RECORD_LIST_FIELD = "toolCalls"
# A model provider's raw response recorded as a span's output (OpenInference ``output.value``: all that is left of the
# calls with OPENINFERENCE_HIDE_OUTPUT_MESSAGES, or where an instrumentation records no indexed output messages), read
# for requested calls when the span's other keys gave none (docs/DECISIONS.md 967). Per provider format: (name, the
# path to the call objects (a key, or "*" for every item of a list), the call id's key, the tool name's path, the
# arguments' key, where it was read).
# The keys such a body is recorded under, in this order: OpenInference's, Logfire's on its OpenAI Agents "Responses API"
# span (the SDK's Response as JSON; pydantic/logfire 5.6.0 integrations/openai_agents.py ResponseSpanData; DECISIONS 994).
# Google ADK v1's call_llm span records the model's LlmResponse (the Gemini response's content) as JSON (978).
PROVIDER_RESPONSE_KEYS = ("output.value", "response", "gcp.vertex.agent.llm_response")
PROVIDER_RESPONSE_CALLS = (
    ("OpenAI Chat Completions", ("choices", "*", "message", "tool_calls", "*"), "id", ("function", "name"), ("function", "arguments"),
     "platform.openai.com API reference, chat completion object: choices[].message.tool_calls[]"),
    ("OpenAI Responses", ("output", "*"), "call_id", ("name",), ("arguments",),
     "platform.openai.com API reference, response object: output[] items of type function_call"),
    ("Anthropic Messages", ("content", "*"), "id", ("name",), ("input",),
     "docs.anthropic.com Messages API: content[] blocks of type tool_use"),
    ("Amazon Bedrock Converse", ("output", "message", "content", "*", "toolUse"), "toolUseId", ("name",), ("input",),
     "Bedrock Converse API: output.message.content[].toolUse"),
    ("Google Gemini", ("candidates", "*", "content", "parts", "*", "functionCall"), "id", ("name",), ("args",),
     "Gemini API generateContent response: candidates[].content.parts[].functionCall"),
    ("Google ADK LlmResponse", ("content", "parts", "*", "function_call"), "id", ("name",), ("args",),
     "google/adk-python 1.x call_llm span gcp.vertex.agent.llm_response: content.parts[].function_call (DECISIONS 978)"),
    ("Google ADK LlmResponse (camel case)", ("content", "parts", "*", "functionCall"), "id", ("name",), ("args",),
     "google-genai Content by alias: content.parts[].functionCall (DECISIONS 978)"),
    # A run's chat transcript in OpenAI's message format, recorded as an agent's or a chain's output: where no model
    # span records the requests (a model client no instrumentation wraps), the transcript is their only record
    # (docs/DECISIONS.md 982).
    ("OpenAI chat transcript", ("messages", "*", "tool_calls", "*"), "id", ("function", "name"), ("function", "arguments"),
     "crewAIInc/crewAI 1.15.30 TaskOutput.messages (OpenInference's AGENT span output.value): chat messages, tool_calls[]"),
    ("OpenAI chat transcripts of a crew", ("tasks_output", "*", "messages", "*", "tool_calls", "*"), "id", ("function", "name"), ("function", "arguments"),
     "crewAIInc/crewAI 1.15.30 CrewOutput.tasks_output[].messages (OpenInference's CHAIN span of Crew.kickoff)"),
)


TOOL_PRESENCE_KEYS = TOOL_PRESENCE_MARKERS + TRACEFENCE_INPUTS
# Every key whose presence can make a span a tool span below (the operation aside): a span with none is not one.
TOOL_MARKER_KEYS = frozenset((GEN_AI_TOOL_NAME, HAYSTACK_COMPONENT_TYPE, *(key for key, _ in TOOL_KIND_MARKERS), *TOOL_PRESENCE_KEYS))

AGENT_NAME_KEYS = ("gen_ai.agent.name", "agent.name")
# Agent spans a producer marks by a kind attribute of its own, not by a convention's operation or span kind
# (docs/DECISIONS.md 1000): (marker key, marker value compared in lower case, the key of the agent's name). Logfire's
# OpenAI Agents bridge names an AgentSpanData span by its message template, the agent's name in 'name' (pydantic/logfire
# 5.6.0 integrations/openai_agents.py); it lists the agent's tools in 'tools' and is no tool span (activity.py).
MARKED_AGENT_SPANS = (("logfire.msg_template", "agent run: {name!r}", "name"),)
# openai-agents: a handoff is a tool call the model asks for, named transfer_to_<agent> by default
# (Handoff.default_tool_name), which the SDK runs as the switch to that agent and records as a span whose operation is
# "handoff" (OpenLLMetry's openai-agents instrumentation: gen_ai.operation.name=handoff), not as a tool span.
HANDOFF_OPERATION = "handoff"
HANDOFF_TOOL_PREFIX = "transfer_to_"
# An agent run's record of its input and of its output, per producer: (kind key, kind value, input key, output key).
# A run span that recorded its input and no output, in a trace with no tool span, cannot show the run was tool-free:
# its output, the only record of what it asked for, is missing (a stream consumed outside the span, a run abandoned or
# failed; OpenLLMetry's Agno instrumentation records no output for a streamed run; docs/DECISIONS.md 987). One that
# recorded neither, in a trace with no step and no model span (MODEL_SPAN_KINDS), is held too (AutoGen, 1010).
AGENT_RUN_RECORDS = (
    ("traceloop.span.kind", "agent", "traceloop.entity.input", "traceloop.entity.output"),
    ("openinference.span.kind", "AGENT", "input.value", "output.value"),
    ("gen_ai.operation.name", "invoke_agent", "gen_ai.input.messages", "gen_ai.output.messages"),
)
# A model call's span, per convention (kind key -> its model values, compared exactly): the span where a model's answer,
# and so the calls it asked for or its finish reason, would be recorded. OpenLLMetry's model spans carry
# OPENLLMETRY_MODEL_SPAN_KEY instead. A trace whose agent run recorded no output and that holds no such span (and no
# span with a finish reason) recorded nothing of what the model asked for (docs/DECISIONS.md 1010).
MODEL_SPAN_KINDS = (
    (GEN_AI_OPERATION, frozenset({"chat", "text_completion", "generate_content"})),
    ("openinference.span.kind", frozenset({"LLM"})),
    ("mlflow.spanType", frozenset({"LLM", "CHAT_MODEL"})),
    (LANGSMITH_KIND_KEY, LANGSMITH_MODEL_KINDS),
    ("langfuse.observation.type", frozenset({"generation"})),
    ("ai.operationId", frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate", "ai.streamObject.doStream"})),
)
AGENT_SPAN_NAME_SUFFIX = ".run"  # smolagents names an agent's span "<agent name>.run"
