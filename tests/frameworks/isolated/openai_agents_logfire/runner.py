"""The OpenAI Agents SDK under Pydantic Logfire (``logfire.instrument_openai_agents()``), offline.

The SDK's runs are the in-process OpenLLMetry and OpenInference rows' (``openai_agents_scripted``: the scripted model,
the tools, each scenario's script); only the instrumentation differs. Logfire is configured as a user who exports to
their own OpenTelemetry pipeline does: ``send_to_logfire=False`` (no token, nothing sent to Logfire), no console, its
default scrubbing, and the runner's in-memory exporter as an ``additional_span_processors`` entry. Logfire wraps the
SDK's trace provider: each SDK trace and span becomes a Logfire span on Logfire's own tracer provider (``OpenAI Agents
trace: {name}``, ``Agent run: {name!r}``, ``Responses API``, ``Function: {name}``), the span data's fields as
attributes (JSON in attributes, described by ``logfire.json_schema``), attached as the current span while it runs (so
``declare`` in a tool body labels the ``Function`` span). The MCP SDK's client span (mcp 2.x, the global provider: the
runner's) sits below the ``Function`` span.

Beyond the matrix (named on the command line): ``content_off_<scenario>`` (the SDK's
``OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA=false``: no input, output or model content on spans),
``unlabelled_<scenario>`` (the tools do not ``declare``: their effects are the operator's rules, by tool name) and
``scrubbed_write`` (Logfire's default scrubbing meets a write whose argument, result and idempotency key hold
words it scrubs: ``auth``, ``session``).

Offline is checked, not assumed: an audit hook refuses every socket connection and name lookup that is not local
(127.0.0.1, ::1, a Unix socket) and turns each scenario that attempted one into an ``.error`` file naming it (an
attempt before the first scenario, at import or ``configure``, fails them all).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONNECTIONS: dict[str, list[str]] = {}  # scenario ("import" before the first) -> attempted non-local connections
CURRENT = ["import"]
_LOCAL = ("127.0.0.1", "::1", "localhost")


def _audit(event: str, args: tuple) -> None:
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None
    elif event == "socket.getaddrinfo":
        host = args[0]
    else:
        return
    if host is None or (isinstance(host, bytes) and host.decode() in _LOCAL) or host in _LOCAL:
        return
    CONNECTIONS.setdefault(CURRENT[0], []).append(f"{event} {args[:2]!r}")
    raise OSError(f"the conformance runner is offline: {event} {host!r} refused")


sys.addaudithook(_audit)
# Logfire wraps the SDK's trace provider and leaves the SDK's own processor in place, which uploads traces to OpenAI
# when OPENAI_API_KEY is set: not here, whatever the machine's environment holds.
os.environ.pop("OPENAI_API_KEY", None)

import logfire  # noqa: E402 - after the audit hook, so an import-time connection is caught
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

import matrix_tools  # noqa: E402
from matrix_tools import MCP_BILLING_SERVER, declare, ran  # noqa: E402
from openai_agents_scripted import ScriptedModel  # noqa: E402
from openai_agents_scripted import run as run_agents  # noqa: E402
from runner_common import EXPORTER, SCENARIO_KEYS, main, session  # noqa: E402

logfire.configure(
    send_to_logfire=False,
    console=False,
    service_name="billing-agent",
    additional_span_processors=[SimpleSpanProcessor(EXPORTER)],
    inspect_arguments=False,
)
logfire.instrument_openai_agents()


def open_session(customer: str, auth_token: str) -> str:
    """Open a billing session for a customer (a write).

    Args:
        customer: the customer id
        auth_token: the customer's token
    """
    declare("write", idempotency_key="session-17")
    ran("open_session")
    return f"session s_9 opened for customer {customer}"


def _scrubbed_write() -> None:
    from agents import Agent, Runner, function_tool

    turns = [[("call_s1", "open_session", {"customer": "auth0|a", "auth_token": "tok_1"})], "done"]
    Runner.run_sync(Agent(name="billing", model=ScriptedModel(turns), tools=[function_tool(open_session)]), "open a session")


def _extra(scenario: str) -> str:
    """An extra scenario's settings made; the matrix scenario it runs (empty: run here already)."""
    if scenario == "scrubbed_write":
        _scrubbed_write()
        return ""
    if scenario.startswith("content_off_"):
        os.environ["OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA"] = "false"
        return scenario.removeprefix("content_off_")
    if scenario.startswith("unlabelled_"):
        matrix_tools.declare = lambda *args, **kwargs: None  # the tools' bodies look it up at call time
        return scenario.removeprefix("unlabelled_")
    return scenario


def run(scenario: str) -> None:
    CURRENT[0] = scenario
    server = {"command": sys.executable, "args": [str(MCP_BILLING_SERVER)]}
    try:
        scenario = _extra(scenario)
        if not scenario:
            return
        if scenario == "mcp_is_error":
            with session():  # the MCP session's own spans (server/discover, tools/list) start before the SDK's trace: one trace
                run_agents(scenario, mcp_server=server)
        else:
            run_agents(scenario, mcp_server=server)
    finally:
        logfire.force_flush()
        os.environ.pop("OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA", None)
        matrix_tools.declare = declare


def _refuse_online(out: Path, scenarios: list[str]) -> None:
    """A scenario that attempted a connection is an error naming it, not a cell (every one, for an attempt at import)."""
    for scenario in scenarios:
        attempts = CONNECTIONS.get("import", []) + CONNECTIONS.get(scenario, [])
        if attempts:
            (out / f"{scenario}.otlp.pb").unlink(missing_ok=True)
            (out / f"{scenario}.error").write_text("a connection was attempted: " + "; ".join(attempts), encoding="utf-8")


if __name__ == "__main__":
    code = main(run)
    _refuse_online(Path(sys.argv[1]), sys.argv[2:] or SCENARIO_KEYS)
    raise SystemExit(code)
