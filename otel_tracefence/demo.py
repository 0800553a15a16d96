"""``make demo``: a small agent, built with a real agent framework, run through the span processor.

The agent is pydantic-ai with its offline ``FunctionModel`` (no network, no API
key): a scripted model asks for tool calls, and pydantic-ai's own OpenTelemetry
instrumentation makes the spans (OpenTelemetry GenAI conventions). The tools
label their effect and idempotency key with :func:`otel_tracefence.instrument.declare`.
Four conversations give four traces: reads only, a committed write, a write that
times out, and an idempotency key reused with other arguments.

The spans go through :class:`~otel_tracefence.sdk.TraceFenceSpanProcessor` to an
in-memory exporter (to print the plans) and to an OTLP/JSON file
(``out/demo-spans.otlp.jsonl``); review-class traces go to the SQLite review queue
(``out/demo-review.db``), which is listed at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_tracefence import annotate
from otel_tracefence.instrument import declare
from otel_tracefence.otlp_json import OtlpJsonFileSpanExporter
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor

OUT = Path("out")

# What the scripted model asks for, per conversation: (tool, arguments).
CONVERSATIONS = {
    "look up a customer": [("customer.lookup", {"customer": "acme"}), ("read_file", {"path": "runbooks/billing.md"})],
    "invoice acme": [("customer.lookup", {"customer": "acme"}), ("invoice.create", {"customer": "acme", "amount_cents": 1250, "idempotency_key": "inv-acme-1250"})],
    "invoice globex": [("invoice.create", {"customer": "globex", "amount_cents": 990, "idempotency_key": "inv-globex-990"})],
    "close ticket 7": [
        ("ticket.update", {"ticket": 7, "state": "closed", "idempotency_key": "tk-7"}),
        ("ticket.update", {"ticket": 7, "state": "reopened", "idempotency_key": "tk-7"}),
    ],
}


def tracefence_command() -> str:
    """How to run ``tracefence`` from here: ``tracefence`` when it is on the PATH (the virtual environment
    is active), else the path of the script beside this interpreter (``.venv/bin/tracefence``)."""
    script = Path(sys.executable).parent / "tracefence"
    if not script.exists() or shutil.which("tracefence") == str(script):
        return "tracefence"
    try:
        relative = os.path.relpath(script)
    except ValueError:  # another drive (Windows)
        return str(script)
    return str(script) if relative.startswith("..") else relative


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the conversation's tool calls one at a time, then answer."""
    prompt = next(p.content for p in messages[0].parts if getattr(p, "part_kind", "") == "user-prompt")
    calls = CONVERSATIONS[prompt]
    done = sum(1 for m in messages for p in m.parts if getattr(p, "part_kind", "") in ("tool-return", "retry-prompt"))
    if done < len(calls):
        tool, args = calls[done]
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"call_{prompt.split()[-1]}_{done + 1}")])
    return ModelResponse(parts=[TextPart("done")])


def build_agent() -> Agent:
    agent = Agent(FunctionModel(scripted_model), name="billing")

    @agent.tool_plain(name="customer.lookup")
    def customer_lookup(customer: str) -> dict:
        declare("read")
        return {"customer": customer, "plan": "pro"}

    @agent.tool_plain(name="read_file")
    def read_file(path: str) -> str:
        declare("read")
        return "# billing runbook"

    @agent.tool_plain(name="invoice.create")
    def invoice_create(customer: str, amount_cents: int, idempotency_key: str) -> dict:
        declare("write", idempotency_key=idempotency_key)
        if customer == "globex":
            raise TimeoutError("billing API did not answer within 10 s")
        return {"invoice": f"in_{customer}_{amount_cents}"}

    @agent.tool_plain(name="ticket.update")
    def ticket_update(ticket: int, state: str, idempotency_key: str) -> dict:
        declare("write", idempotency_key=idempotency_key)
        return {"ticket": ticket, "state": state}

    return agent


def run() -> int:
    OUT.mkdir(exist_ok=True)
    for stale in (OUT / "demo-spans.otlp.jsonl", OUT / "demo-review.db"):
        stale.unlink(missing_ok=True)
    memory = InMemorySpanExporter()
    store = SQLiteReviewStore(OUT / "demo-review.db")
    provider = TracerProvider(resource=Resource.create({"service.name": "billing-agent"}))
    provider.add_span_processor(
        TraceFenceSpanProcessor(
            SimpleSpanProcessor(memory), SimpleSpanProcessor(OtlpJsonFileSpanExporter(OUT / "demo-spans.otlp.jsonl")), review_sink=store
        )
    )
    agent = build_agent()
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)
    for prompt in CONVERSATIONS:
        try:
            agent.run_sync(prompt)
        except TimeoutError as exc:
            print(f"agent run {prompt!r} failed: {exc}")
    provider.force_flush()

    spans = memory.get_finished_spans()
    traces: dict[int, list] = {}
    for span in spans:
        traces.setdefault(span.context.trace_id, []).append(span)
    for trace_id, trace_spans in traces.items():
        root = next(s for s in trace_spans if s.parent is None)
        print(f"\ntrace {trace_id:032x} ({root.name}): class {root.attributes.get(annotate.REPLAY_CLASS)}")
        for span in sorted(trace_spans, key=lambda s: s.start_time):
            decision = span.attributes.get(annotate.STEP_DECISION)
            if decision:
                reasons = ",".join(span.attributes[annotate.STEP_REASONS])
                related = ",".join(span.attributes[annotate.STEP_RELATED_CALL_IDS]) or "-"
                print(f"  {span.attributes['gen_ai.tool.call.id']:<22} {span.attributes['gen_ai.tool.name']:<16} {decision:<9} {reasons}  related: {related}")
    provider.shutdown()
    command = tracefence_command()
    print(f"\nannotated spans: {OUT / 'demo-spans.otlp.jsonl'}  (try: {command} plan {OUT / 'demo-spans.otlp.jsonl'} --format table)")
    print(f"tools they show: {command} tools {OUT / 'demo-spans.otlp.jsonl'}")
    print(f"review queue: {OUT / 'demo-review.db'}  (try: {command} review --db {OUT / 'demo-review.db'} show <trace id prefix>)\n")
    sys.stdout.flush()
    from otel_tracefence.cli import main

    return main(["review", "--db", str(OUT / "demo-review.db"), "list", "--format", "table"])


if __name__ == "__main__":
    sys.exit(run())
