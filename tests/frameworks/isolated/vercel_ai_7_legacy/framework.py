"""The Vercel AI SDK 7 under ``@ai-sdk/otel``'s ``LegacyOpenTelemetry`` integration: the ``ai.generateText`` /
``ai.generateText.doGenerate`` / ``ai.toolCall`` spans of AI SDK 4-6 (``ai.toolCall.name`` / ``.id`` / ``.args`` /
``.result``; ``ai.response.toolCalls``, whose ``input`` is now a JSON object where 5 and 6 wrote a JSON string), for
users who keep the spans their dashboards read. The agent and scenarios are the AI SDK 7 row's
(``../vercel_ai_common.mjs``); only the integration differs.

The legacy integration opens an ``ai.toolCall`` span only inside a step: a call approved with ``needsApproval`` runs
when the resumed agent starts, before its first step, and gets no span at all (the tool's own ``declare`` lands on
the application's span around the run). The approved write's outcome is then nowhere in the trace."""

from tests.frameworks.isolated.vercel_ai_7.framework import CELLS as SEVEN
from tests.frameworks.isolated.vercel_ai_7.framework import TOOL_RULES as SEVEN_RULES
from tests.frameworks.matrix_table import COMMITTED, Cell, Framework, cell

FRAMEWORK = Framework(
    "vercel_ai_7_legacy", "Vercel AI SDK 7", "ai", "@ai-sdk/otel LegacyOpenTelemetry", "@ai-sdk/otel", module="", isolated="node"
)
TOOL_RULES = SEVEN_RULES

K = FRAMEWORK.key
NEVER_RAN = ("create_invoice", "review", ("effect_unknown", "requested_not_recorded"))
SPAN_LESS_RUN = ("", "review", ("malformed_tool", "result_not_recorded", "arguments_not_recorded"))
ONLY_HERE = {
    "write_commits": cell(K, "write_commits", "injected", (COMMITTED,), "an ai.toolCall span with ai.toolCall.result and no error: committed"),
    "requested_never_ran": cell(
        K, "requested_never_ran", "review", (NEVER_RAN,),
        "needsApproval, never answered: only ai.response.toolCalls shows the call (no approval part is recorded in it)",
    ),
    "approval_interrupt_resume": cell(
        K, "approval_interrupt_resume", "review", (NEVER_RAN, SPAN_LESS_RUN),
        "approved and run, but LegacyOpenTelemetry records no ai.toolCall span for a call run before the resumed agent's first step: "
        "only the request shows it (requested_not_recorded), and the tool's declare labels the application's span around the run, "
        "a labelled span naming no tool (malformed_tool). The integration would have to open the tool span outside a step too",
    ),
}
CELLS = [ONLY_HERE.get(c.scenario) or Cell(K, c.scenario, c.replay_class, c.steps, c.reason.replace("execute_tool span", "ai.toolCall span"), None, c.cannot) for c in SEVEN]
