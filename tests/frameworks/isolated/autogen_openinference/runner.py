"""AutoGen AgentChat 0.7 under OpenInference's autogen-agentchat instrumentation: the native runner's scenarios
(``../autogen/runner.py``, loaded from its file) with the instrumentor on and an OpenAI model client.

OpenInference traces the LLM call only through autogen-ext's ``BaseOpenAIChatCompletionClient`` (its
``create`` / ``create_stream``), so the scripted model here is autogen-ext's ``OpenAIChatCompletionClient``
over an ``httpx.MockTransport`` answering Chat Completions JSON, turn by turn, offline: the spans are the
instrumentation's own, from the client's real response parsing. autogen-core's ``execute_tool`` spans stay on
(they cannot be turned off), so each call has OpenInference's TOOL span with autogen-core's span inside it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import httpx
from autogen_core import FunctionCall
from autogen_ext.models.openai import OpenAIChatCompletionClient
from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor
from runner_common import PROVIDER, main

_spec = importlib.util.spec_from_file_location("autogen_scenarios", Path(__file__).parents[1] / "autogen" / "runner.py")
scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenarios)

AutogenAgentChatInstrumentor().instrument(tracer_provider=PROVIDER)


def _completion(turn) -> dict:
    """One Chat Completions response body for a scripted turn (a CreateResult of FunctionCalls, or text)."""
    content = getattr(turn, "content", turn)
    if isinstance(content, list) and all(isinstance(c, FunctionCall) for c in content):
        calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in content]
        message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": str(content)}, "stop"
    return {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": "gpt-4o",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }  # fmt: skip


def _streamed(body: dict) -> bytes:
    """The completion as Chat Completions streams it (server-sent events): one chunk whose delta holds the message
    (each tool call with its index), a chunk with the finish reason, a usage chunk, then ``[DONE]``."""
    message, finish = body["choices"][0]["message"], body["choices"][0]["finish_reason"]
    delta = {"role": "assistant", "content": message["content"]}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**head, "choices": [], "usage": body["usage"]},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def openai_client(turns: list) -> OpenAIChatCompletionClient:
    """An OpenAI client whose every request is answered by the next of ``turns`` (the last repeated)."""
    remaining = list(turns)

    def answer(request: httpx.Request) -> httpx.Response:
        turn = remaining.pop(0) if len(remaining) > 1 else remaining[0]
        if json.loads(request.content).get("stream"):
            return httpx.Response(200, content=_streamed(_completion(turn)), headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=_completion(turn))

    transport = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return OpenAIChatCompletionClient(model="gpt-4o", api_key="scripted", base_url="http://model.invalid/v1", http_client=transport)


if __name__ == "__main__":
    raise SystemExit(main(functools.partial(scenarios.run, model_client=openai_client)))
