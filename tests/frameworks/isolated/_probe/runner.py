"""A probe of the runner protocol (tests/frameworks/test_isolated_runner_protocol.py): plain SDK spans."""

import json

from opentelemetry.trace import Status, StatusCode
from matrix_tools import INVOICE, CannotProduce, create_invoice
from runner_common import PROVIDER, main

tracer = PROVIDER.get_tracer("probe")


def run(scenario: str) -> None:
    if scenario == "approval_interrupt_resume":
        raise CannotProduce("the probe has no approval")
    if scenario == "mcp_is_error":
        raise SystemExit(0)  # the last scenario: the runner leaves no file for it
    with tracer.start_as_current_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("execute_tool create_invoice") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "create_invoice")
            span.set_attribute("gen_ai.tool.call.id", "call_w1")
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(INVOICE))
            result = create_invoice(**INVOICE)
            span.set_attribute("gen_ai.tool.call.result", result)
            span.set_status(Status(StatusCode.OK))
            if scenario == "write_raises":
                1 / 0


if __name__ == "__main__":
    raise SystemExit(main(run))
