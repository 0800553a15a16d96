"""LiteLLM under its OpenTelemetry callback (``litellm.callbacks = ["otel"]``, litellm/integrations/opentelemetry.py),
scripted offline with ``mock_response`` (a ``ModelResponse`` whose message holds ``tool_calls``).

LiteLLM is a model client, not an agent framework: the agent is a plain loop, as its users write one. It opens
one span for the run, calls ``litellm.completion`` for each model turn and runs each requested tool under a span
it makes itself (``execute_tool <name>``, the GenAI semantic conventions' tool attributes, status ERROR and the
exception on a raise). The callback finds the loop's span current and, having no span of its own to make
(``USE_OTEL_LITELLM_REQUEST_SPAN`` unset), writes the model call onto it: the requested calls as
``gen_ai.completion.<i>.function_call.{name,arguments}`` (no call id; a later call overwrites an earlier one's slot).

The callback runs on LiteLLM's logging thread pool after ``completion`` returns; with one logging thread
(``LOGGING_EXECUTOR_MAX_THREADS=1``) the loop waits for it by queueing a no-op behind it, so every turn's
attributes land before the span ends (a long-running loop gets the same without waiting).
"""

from __future__ import annotations

import json
import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no fetch of the price list
os.environ["LOGGING_EXECUTOR_MAX_THREADS"] = "1"
os.environ.setdefault("OPENAI_API_KEY", "sk-offline-fake")  # never used: every response is mock_response

from opentelemetry.trace import Status, StatusCode  # noqa: E402
from matrix_tools import (  # noqa: E402 - after the environment lines
    CHARGE,
    PAYMENT,
    PLAIN_TOOLS,
    REFUND,
    STATE,
    CannotProduce,
    read_call,
    write_call,
)
from runner_common import PROVIDER, main  # noqa: E402 - after the environment lines

import litellm  # noqa: E402
from litellm import ModelResponse  # noqa: E402
from litellm.litellm_core_utils import thread_pool_executor  # noqa: E402

litellm.callbacks = ["otel"]
tracer = PROVIDER.get_tracer("billing-agent-loop")
TOOLS = {f.__name__: f for f in PLAIN_TOOLS}
SCHEMAS = [{"type": "function", "function": {"name": name, "description": (f.__doc__ or "").split("\n")[0], "parameters": {"type": "object"}}} for name, f in TOOLS.items()]
NO_MCP = "LiteLLM's MCP client opens no span: isError would be this loop's record, not LiteLLM's (framework.py says more)"
AGENT_ONLY = "LiteLLM is a model client with no agent loop of its own"


def reply(turn) -> ModelResponse:
    """One scripted model turn: calls ``(id, name, args)`` or a text."""
    if isinstance(turn, str):
        message = {"role": "assistant", "content": turn}
        finish = "stop"
    else:
        calls = [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}} for cid, name, args in turn]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    return ModelResponse(choices=[{"index": 0, "finish_reason": finish, "message": message}], model="gpt-4o-mini")


def wait_for_callbacks() -> None:
    """Queue a no-op behind the logging thread's pending callbacks and wait for it."""
    thread_pool_executor.executor.submit(lambda: None).result(timeout=30)


def run_tool(call) -> str:
    """Run one requested call under the loop's own span; a raise is recorded and handed to the model as text."""
    cid, name, arguments = call.id, call.function.name, call.function.arguments
    with tracer.start_as_current_span(f"execute_tool {name}", record_exception=False, set_status_on_exception=False) as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("gen_ai.tool.name", name)
        span.set_attribute("gen_ai.tool.call.id", cid)
        span.set_attribute("gen_ai.tool.call.arguments", arguments)
        try:
            result = TOOLS[name](**json.loads(arguments))
        except Exception as exc:  # noqa: BLE001 - the loop hands a tool's failure to the model
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            span.set_attribute("error.type", type(exc).__name__)
            if STATE.get("raise_tool_errors"):
                raise
            return f"error: {exc}"
        span.set_attribute("gen_ai.tool.call.result", result)
        return result


def complete(messages: list, turn, stream: bool, **completion_kwargs):
    """One model turn; ``stream``: ``completion(stream=True)``, its chunks consumed and joined (``stream_chunk_builder``),
    as a streaming caller does."""
    response = litellm.completion(model="openai/gpt-4o-mini", messages=messages, tools=SCHEMAS, mock_response=reply(turn), stream=stream, **completion_kwargs)
    if stream:
        response = litellm.stream_chunk_builder(list(response), messages=messages)
    return response


def agent(turns: list, *, max_turns: int = 6, tools_turns: int | None = None, stream: bool = False, **completion_kwargs) -> None:
    """The loop: a model turn, then every call it requested, until it answers with text. ``tools_turns``: stop
    after that many model turns that asked for calls, before running them (the loop's own step budget)."""
    script = list(turns)
    messages: list = [{"role": "user", "content": "bill customer a"}]
    asked = 0
    with tracer.start_as_current_span("billing agent"):
        try:
            for _ in range(max_turns):
                response = complete(messages, script.pop(0) if script else "done", stream, **completion_kwargs)
                wait_for_callbacks()
                message = response.choices[0].message
                calls = message.tool_calls or []
                if not calls:
                    return
                asked += 1
                if tools_turns is not None and asked > tools_turns:
                    return  # the step budget is spent: the requested calls never run
                messages.append(message.model_dump())
                for call in calls:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": run_tool(call)})
        finally:
            wait_for_callbacks()


STREAMED = {
    "stream_write_commits": ([[write_call()], "done"], {}),
    "stream_tool_error_to_model": ([[("call_f1", "refund_order", REFUND)], "done"], {}),
    "stream_parallel_one_fails": ([[read_call(), ("call_f1", "refund_order", REFUND)], "done"], {}),
    "stream_requested_never_ran": ([[write_call()], "done"], {"tools_turns": 0}),
}


def run(scenario: str) -> None:
    """The matrix's scenarios; ``stream_<scenario>`` (STREAMED's four): the loop's model turns streamed."""
    if scenario in STREAMED:
        turns, options = STREAMED[scenario]
        agent(turns, stream=True, **options)
        return
    if scenario == "read_ok":
        agent([[read_call()], "done"])
    elif scenario == "write_commits":
        agent([[write_call()], "done"])
    elif scenario == "write_raises":
        STATE["raise_tool_errors"] = True  # the loop lets a tool's error out of the run
        agent([[("call_c1", "charge_card", CHARGE)], "done"])
    elif scenario == "write_times_out":
        STATE["raise_tool_errors"] = True  # no tool timeout in LiteLLM: a TimeoutError raised in the tool ends the run
        agent([[("call_p1", "send_payment", PAYMENT)], "done"])
    elif scenario == "tool_error_to_model":
        agent([[("call_f1", "refund_order", REFUND)], "done"])
    elif scenario == "parallel_one_fails":
        agent([[read_call(), ("call_f1", "refund_order", REFUND)], "done"])
    elif scenario == "framework_retries":
        # num_retries retries the MODEL call (a failed completion), never a tool: the tool runs again only
        # because the model asks again after the error the loop handed it
        STATE["flaky"] = True
        agent([[write_call("call_w1")], [write_call("call_w2")], "done"], num_retries=2)
    elif scenario == "requested_never_ran":
        agent([[write_call()], "done"], tools_turns=0)  # the loop's step budget: the model asked, nothing ran
    elif scenario == "approval_interrupt_resume":
        raise CannotProduce(f"{AGENT_ONLY}: no approval or interrupt API (a loop's own approval step would be the loop's, not LiteLLM's)")
    elif scenario == "mcp_is_error":
        raise CannotProduce(NO_MCP)
    else:
        raise CannotProduce(scenario)


if __name__ == "__main__":
    raise SystemExit(main(run))
