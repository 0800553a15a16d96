"""What the LangChain-based runners share (``langgraph/``, ``langchain_mcp/``): langchain-core's own fake chat
model answering scripted turns, and the ReAct loop built from LangGraph's parts.

Runs INSIDE those frameworks' environments (imported by their runners, never by the test process).
"""

from __future__ import annotations

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

ASK = {"messages": [("user", "bill customer a")]}


class ScriptedChatModel(GenericFakeChatModel):
    """langchain-core's ``GenericFakeChatModel``, answering the scripted messages in turn; tools bound are
    ignored (the script names the calls)."""

    def bind_tools(self, tools, **kwargs):  # noqa: ANN001, ANN003, ANN201 - the BaseChatModel hook
        return self


def turn(*calls) -> AIMessage:
    """One model turn requesting ``calls`` ((call id, tool name, arguments dict) each)."""
    return AIMessage(content="", tool_calls=[{"id": i, "name": n, "args": dict(a), "type": "tool_call"} for i, n, a in calls])


def model(*turns: AIMessage) -> ScriptedChatModel:
    """The model answering ``turns`` in order, then a final "done"."""
    return ScriptedChatModel(messages=iter([*turns, AIMessage(content="done")]))


def hand_built(llm, tool_node: ToolNode, **node_options):
    """The ReAct loop (model node, ``tools_condition``, tools node) built from LangGraph's parts, for the
    tools node options the prebuilt agent does not take (``retry_policy``, ``timeout``); compiled."""
    graph = StateGraph(MessagesState)

    async def agent(state: MessagesState):
        return {"messages": [await llm.ainvoke(state["messages"])]}

    graph.add_node("agent", agent)
    graph.add_node("tools", tool_node, **node_options)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()
