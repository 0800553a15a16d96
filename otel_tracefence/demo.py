"""``make demo``: a small agent, built with a real agent framework, run through the span processor.

The agent is pydantic-ai with its offline ``FunctionModel`` (no network, no API
key): a scripted model asks for tool calls, and pydantic-ai's own OpenTelemetry
instrumentation makes the spans (OpenTelemetry GenAI conventions). The tools
label their effect and idempotency key with :func:`otel_tracefence.agent.instrument.declare`.
Five conversations give five traces: reads only, a committed write, a write that
times out, an idempotency key reused with other arguments, and the timed-out invoice
tried again in a new run (the billing API answers this time): the write index holds the
retry, ``retry_of_held_write``, naming the first trace. In the committed
one, the invoice is made for the customer id the lookup returned: the plan links
the two steps (``consumes_result_of``).

The spans go through :class:`~otel_tracefence.sdk.TraceFenceSpanProcessor` to an
in-memory exporter (to print the plans) and to an OTLP/JSON file
(``out/demo-spans.otlp.jsonl``); review-class traces go to the SQLite review queue
(``out/demo-review.db``), which is listed.

The billing stand-in (:mod:`otel_tracefence.demo_billing`) keeps its invoices in ``out/demo-billing.json`` and can
be asked for them by idempotency key: ``tracefence reconcile`` with the demo's reconciler for ``invoice.create``
resolves both held invoices (the retry made the invoice once), and leaves the ticket's conflict open (no reconciler
knows tickets).

Then two recorded conversations are replayed through
:class:`~otel_tracefence.agent.replay.ReplayGuard`, read back from the OTLP/JSON file:
pydantic-ai's ``FunctionModel`` gives the model outputs the trace recorded, the
committed invoice's result is injected (its tool function is called 0 times) and
the timed-out one is refused with :class:`~otel_tracefence.agent.replay.NonReplayableTraceError`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from otel_tracefence import demo_billing
from otel_tracefence.pipeline import annotate
from otel_tracefence.agent.instrument import declare
from otel_tracefence.normalize import SpanView
from otel_tracefence.otlp.json_writer import OtlpJsonFileSpanExporter
from otel_tracefence.pipeline.plan import group_request
from otel_tracefence.otlp.json_reader import read_otlp_json
from otel_tracefence.agent.replay import Inject, NonReplayableTraceError, ReplayGuard
from otel_tracefence.review.open import open_review_store
from otel_tracefence.sdk import TraceFenceSpanProcessor

OUT = Path("out")

RETRIED = "invoice globex, retried"
# What the scripted model asks for, per conversation: (tool, arguments).
CONVERSATIONS = {
    "look up a customer": [("customer.lookup", {"customer": "acme"}), ("read_file", {"path": "runbooks/billing.md"})],
    "invoice acme": [("customer.lookup", {"customer": "acme"}), ("invoice.create", {"customer": "cus_4f9a21", "amount_cents": 1250, "idempotency_key": "inv-acme-1250"})],
    "invoice globex": [("invoice.create", {"customer": "globex", "amount_cents": 990, "idempotency_key": "inv-globex-990"})],
    "close ticket 7": [
        ("ticket.update", {"ticket": 7, "state": "closed", "idempotency_key": "tk-7"}),
        ("ticket.update", {"ticket": 7, "state": "reopened", "idempotency_key": "tk-7"}),
    ],
    # The timed-out invoice, tried again in a new run: the same call, key and amount.
    RETRIED: [("invoice.create", {"customer": "globex", "amount_cents": 990, "idempotency_key": "inv-globex-990"})],
}
BILLING_ANSWERS_GLOBEX = False
"""The billing stand-in times out for globex until the retried conversation (set by :func:`run`)."""


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


CALLS: Counter = Counter()
"""How many times each tool function ran (the replay shows that the write ran 0 times)."""


def customer_lookup(customer: str) -> dict:
    CALLS["customer.lookup"] += 1
    declare("read")
    return {"customer": customer, "id": "cus_4f9a21", "plan": "pro"}


def read_file(path: str) -> str:
    CALLS["read_file"] += 1
    declare("read")
    return "# billing runbook"


def invoice_create(customer: str, amount_cents: int, idempotency_key: str) -> dict:
    CALLS["invoice.create"] += 1
    declare("write", idempotency_key=idempotency_key)
    if customer == "globex" and not BILLING_ANSWERS_GLOBEX:
        raise TimeoutError("billing API did not answer within 10 s")
    return {"invoice": demo_billing.create_invoice(customer, amount_cents, idempotency_key)["invoice"]}


def ticket_update(ticket: int, state: str, idempotency_key: str) -> dict:
    CALLS["ticket.update"] += 1
    declare("write", idempotency_key=idempotency_key)
    return {"ticket": ticket, "state": state}


TOOLS = {"customer.lookup": customer_lookup, "read_file": read_file, "invoice.create": invoice_create, "ticket.update": ticket_update}


def build_agent(model: Any = None, wrap: Callable[..., Any] | None = None) -> Agent:
    """The billing agent: the scripted model by default; ``wrap(function, tool=name)`` wraps each tool (a replay guard)."""
    agent = Agent(model or FunctionModel(scripted_model), name="billing")
    for name, function in TOOLS.items():
        agent.tool_plain(name=name)(wrap(function, tool=name) if wrap is not None else function)
    return agent


def recorded_responses(views: Sequence[SpanView]) -> list[ModelResponse]:
    """The model outputs a trace recorded: ``gen_ai.output.messages`` of its ``chat`` spans, in start order."""
    responses = []
    for view in sorted(views, key=lambda v: (v.start_time_unix_nano, v.sequence)):
        if view.attributes.get("gen_ai.operation.name") != "chat":
            continue
        parts: list[Any] = []
        for message in json.loads(view.attributes.get("gen_ai.output.messages", "[]")):
            for part in message.get("parts", []):
                if part.get("type") == "tool_call":
                    parts.append(ToolCallPart(part["name"], part.get("arguments"), tool_call_id=part["id"]))
                elif part.get("type") == "text":
                    parts.append(TextPart(part["content"]))
        responses.append(ModelResponse(parts=parts))
    return responses


def replay_model(responses: Sequence[ModelResponse]) -> FunctionModel:
    """A ``FunctionModel`` that answers each request with the next recorded response: the model is pinned."""

    def replayed(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(1 for m in messages if isinstance(m, ModelResponse))
        return responses[turn]

    return FunctionModel(replayed)


def trace_views(path: Path) -> dict[str, list[SpanView]]:
    """The spans of an OTLP/JSON file, by trace id."""
    return group_request(read_otlp_json(path.read_text()).request)


def replay(path: Path, trace_id: str, prompt: str) -> None:
    """Replay one recorded conversation through a ReplayGuard (injected mode) and print what happened."""
    print(f"replay of {prompt!r} (trace {trace_id}), injected mode:")
    try:
        guard = ReplayGuard.from_file(path, trace_id, mode="injected")
    except NonReplayableTraceError as exc:
        print(f"  refused before any call: NonReplayableTraceError: {exc}\n")
        return
    CALLS.clear()

    def wrap(function: Callable[..., Any], tool: str) -> Callable[..., Any]:
        def report(answer: Inject) -> str:
            print(f"  step {answer.step.index} {tool}: not called; injected the recorded result {answer.result}")
            return answer.result

        def live(*args: Any, **kwargs: Any) -> Any:
            print(f"  {tool}: executed live (a declared read with stable results)")
            return function(*args, **kwargs)

        return guard.wrap(functools.wraps(function)(live), tool=tool, decode=report)

    agent = build_agent(replay_model(recorded_responses(trace_views(path)[trace_id])), wrap)
    agent.run_sync(prompt)
    summary = guard.summary()
    counts = ", ".join(f"{name} {CALLS[name]}" for name in TOOLS if name in {s.tool for s in guard.steps})
    print(f"  tool functions called: {counts}")
    print(f"  {summary}\n")


def run() -> int:
    OUT.mkdir(exist_ok=True)
    for stale in (OUT / "demo-spans.otlp.jsonl", OUT / "demo-review.db", demo_billing.ledger_path()):
        stale.unlink(missing_ok=True)
    memory = InMemorySpanExporter()
    store = open_review_store(OUT / "demo-review.db")
    provider = TracerProvider(resource=Resource.create({"service.name": "billing-agent"}))
    provider.add_span_processor(
        TraceFenceSpanProcessor(
            SimpleSpanProcessor(memory), SimpleSpanProcessor(OtlpJsonFileSpanExporter(OUT / "demo-spans.otlp.jsonl")), review_sink=store
        )
    )
    agent = build_agent()
    agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)
    trace_of: dict[str, str] = {}
    global BILLING_ANSWERS_GLOBEX
    for prompt in CONVERSATIONS:
        BILLING_ANSWERS_GLOBEX = prompt == RETRIED
        try:
            agent.run_sync(prompt)
        except TimeoutError as exc:
            print(f"agent run {prompt!r} failed: {exc}")
        provider.force_flush()
        root = next(s for s in reversed(memory.get_finished_spans()) if s.parent is None)
        trace_of[prompt] = f"{root.context.trace_id:032x}"

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
                earlier = ",".join(span.attributes.get(annotate.RELATED_TRACES, ()))
                earlier = f"  earlier trace: {earlier}" if earlier else ""
                print(f"  {span.attributes['gen_ai.tool.call.id']:<22} {span.attributes['gen_ai.tool.name']:<16} {decision:<9} {reasons}  related: {related}{earlier}")
    provider.shutdown()
    command = tracefence_command()
    print(f"\nannotated spans: {OUT / 'demo-spans.otlp.jsonl'}  (try: {command} plan {OUT / 'demo-spans.otlp.jsonl'} --format table)")
    print(f"tools they show: {command} tools {OUT / 'demo-spans.otlp.jsonl'}")
    print(f"review queue: {OUT / 'demo-review.db'}  (try: {command} review --db {OUT / 'demo-review.db'} show <trace id prefix>)\n")
    sys.stdout.flush()
    from otel_tracefence.cli import main

    status = main(["review", "--db", str(OUT / "demo-review.db"), "list", "--format", "table"])
    config = OUT / "demo-reconcile.yaml"
    config.write_text(f"reconcilers:\n  invoice.create: {demo_billing.__name__}:{demo_billing.find_invoice.__name__}\n", encoding="utf-8")
    print(f"\nreconciled with the billing stand-in (try: {command} reconcile --db {OUT / 'demo-review.db'} --config {config})")
    sys.stdout.flush()
    status = status or main(["reconcile", "--db", str(OUT / "demo-review.db"), "--config", str(config)])
    print("")
    for prompt in ("invoice acme", "invoice globex"):
        replay(OUT / "demo-spans.otlp.jsonl", trace_of[prompt], prompt)
    return status


if __name__ == "__main__":
    sys.exit(run())
