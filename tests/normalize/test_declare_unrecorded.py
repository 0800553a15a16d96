"""Issue 13: declare() with no recording tool span to label warns once per tool name, with the remedy,
and counts every such call in ``tracefence.declare.unrecorded``. A fresh interpreter per case, since the
tracer and meter providers are set globally as an application sets them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT

SETUP = """
import json
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_tracefence.agent.instrument import declare

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("app")


def report():
    counts = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    counts[m.name + " " + json.dumps(dict(p.attributes), sort_keys=True)] = p.value
    print(json.dumps({"metrics": counts, "spans": [[s.name, dict(s.attributes)] for s in exporter.get_finished_spans()]}))
"""


def run(body: str) -> tuple[dict, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", SETUP + textwrap.dedent(body) + "\nreport()\n"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr.splitlines()


def key(tool: str) -> str:
    return "tracefence.declare.unrecorded " + json.dumps({"gen_ai.tool.name": tool, "tracefence.component": "instrument"}, sort_keys=True)


def warning(tool: str, why: str, rule: str) -> str:
    return (
        f"tracefence: declare() in tool {tool!r} recorded nothing: {why} to label, so its calls plan without this label "
        f"(effect_unknown unless a rule says otherwise). Label the tool in the configuration instead: tool_rules: [{{{rule}}}]. "
        'See docs/processor.md, "Labelling tools", for your framework.'
    )


def test_no_current_span_warns_once_per_tool_and_counts_every_call():
    out, stderr = run(
        """
        def create_invoice(key):
            declare("write", idempotency_key=key)

        def search():
            declare("read")

        create_invoice("inv-1"); create_invoice("inv-2"); search()
        declare("write", tool="payments.charge")
        """
    )
    assert stderr == [
        warning("create_invoice", "there is no current span", 'match: "create_invoice", effect: write, idempotency_key_argument: <argument name>'),
        warning("search", "there is no current span", 'match: "search", effect: read'),
        warning("payments.charge", "there is no current span", 'match: "payments.charge", effect: write'),
    ]
    assert out == {"metrics": {key("create_invoice"): 2, key("search"): 1, key("payments.charge"): 1}, "spans": []}


def test_a_current_span_that_is_no_tool_span_is_not_labelled():
    # As inside a tool of OpenInference's LangChain instrumentation: the current span is the chain's.
    out, stderr = run(
        """
        def lookup():
            declare("read")

        with tracer.start_as_current_span("AgentExecutor", attributes={"openinference.span.kind": "CHAIN"}):
            lookup()
            lookup()
        """
    )
    assert stderr == [warning("lookup", "the current span 'AgentExecutor' is not a tool span", 'match: "lookup", effect: read')]
    assert out == {"metrics": {key("lookup"): 2}, "spans": [["AgentExecutor", {"openinference.span.kind": "CHAIN"}]]}


def test_a_tool_span_is_labelled_silently():
    out, stderr = run(
        """
        def create_invoice():
            declare("write", idempotency_key="inv-1")

        with tracer.start_as_current_span("execute_tool create_invoice", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_invoice"}):
            create_invoice()
        with tracer.start_as_current_span("lookup", attributes={"openinference.span.kind": "TOOL"}):
            declare("read")
        with tracer.start_as_current_span("FunctionTool.call"):  # kind set only at the end, as LlamaIndex's
            declare("read")
        """
    )
    assert stderr == []
    assert out == {
        "metrics": {},
        "spans": [
            ["execute_tool create_invoice", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "create_invoice", "tracefence.effect": "write", "tracefence.idempotency_key": "inv-1"}],
            ["lookup", {"openinference.span.kind": "TOOL", "tracefence.effect": "read"}],
            ["FunctionTool.call", {"tracefence.effect": "read"}],
        ],
    }


def test_a_model_span_is_not_labelled():
    out, stderr = run(
        """
        def search():
            declare("read")

        with tracer.start_as_current_span("chat gpt-5", attributes={"gen_ai.operation.name": "chat"}):
            search()
        """
    )
    assert stderr == [warning("search", "the current span 'chat gpt-5' is not a tool span", 'match: "search", effect: read')]
    assert out == {"metrics": {key("search"): 1}, "spans": [["chat gpt-5", {"gen_ai.operation.name": "chat"}]]}


def test_an_unsampled_trace_is_silent():
    out, stderr = run(
        """
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
        quiet = TracerProvider(sampler=ALWAYS_OFF).get_tracer("q")
        with quiet.start_as_current_span("execute_tool x"):
            declare("write")
        """
    )
    assert (stderr, out) == ([], {"metrics": {}, "spans": []})
