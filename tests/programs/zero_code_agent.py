"""An agent-shaped program that knows nothing of the SDK: only the OpenTelemetry API and tool_call.

Run under ``opentelemetry-instrument`` with ``OTEL_TRACES_EXPORTER=tracefence``
(tests/sdk/test_zero_code.py). One trace: an ``invoke_agent`` root span with a read
tool call that succeeds and a write tool call that times out (the program
catches the timeout, as an agent loop would, and exits 0).
"""

from opentelemetry import trace

from otel_tracefence.agent.instrument import tool_call

tracer = trace.get_tracer("zero_code_agent")


def main() -> None:
    with tracer.start_as_current_span("invoke_agent billing-agent", attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}):
        with tool_call("get_customer", effect="read", call_id="call-read-1", arguments={"customer": "c-9"}):
            pass
        try:
            with tool_call(
                "invoice.create",
                effect="write",
                idempotency_key="inv-17",
                call_id="call-write-1",
                arguments={"customer": "c-9", "amount_cents": 1200},
            ):
                raise TimeoutError("billing API did not answer in 5 s")
        except TimeoutError:
            pass  # the agent gives up on the call; whether the invoice exists is unknown


if __name__ == "__main__":
    main()
