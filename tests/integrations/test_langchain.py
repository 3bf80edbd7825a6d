"""The LangChain middleware and the langgraph-bigtool retriever, end to end with LangChain's
fake chat model over the bundled 495-tool catalogue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain.agents", reason="needs toolsearch[langchain]")
pytest.importorskip("langgraph_bigtool", reason="needs toolsearch[langchain]")

from langchain.agents import create_agent
from langchain.agents.middleware import before_model
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import InjectedState, ToolNode
from pydantic import Field

from toolsearch.integrations.langchain import STATE_KEY, BigtoolSearch, ToolSearchMiddleware
from toolsearch.tool import TOOL_SEARCH_NAME, Tool


class RecordingChat(GenericFakeChatModel):
    """LangChain's fake chat model, recording the tools bound and the messages of each call."""

    bound: list[list[str]] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        self.bound.append([convert_to_openai_tool(t)["function"]["name"] for t in tools])
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def model(*turns: list[dict[str, Any]] | str) -> RecordingChat:
    replies = [
        AIMessage(content=t) if isinstance(t, str) else AIMessage(content="", tool_calls=t)
        for t in turns
    ]
    return RecordingChat(messages=iter(replies))


def langchain_tools(tools: list[Tool], ran: list[tuple[str, dict[str, Any]]]) -> list[BaseTool]:
    """Every catalogue tool as a LangChain tool that records its calls."""

    def make(tool: Tool) -> BaseTool:
        def run(**arguments: Any) -> str:
            ran.append((tool.name, arguments))
            return f"{tool.name} done"

        return StructuredTool(
            name=tool.name,
            description=tool.description,
            args_schema=dict(tool.input_schema),
            func=run,
        )

    return [make(t) for t in tools]


def tool_messages(messages: list[BaseMessage]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def test_agent_searches_loads_and_calls_a_tool_and_never_reaches_a_denied_one(
    workbench: list[Tool], script: Any, documented: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": script.query, "max_results": 3}, "s1")],
        [
            call(script.wanted, arguments, "c1"),
            call(script.denied, {"payment_intent": "pi_1"}, "c2"),
        ],
        [
            call(TOOL_SEARCH_NAME, {"query": script.denied_query}, "s2"),
            call(TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, "s3"),
            call("mcp__paypal__refund_captured_payment", {}, "c3"),
        ],
        "done",
    )
    middleware = ToolSearchMiddleware(
        langchain_tools(workbench, ran),
        deny=[script.denied, script.denied_server],
        backend="bm25",
    )
    agent = create_agent(chat, middleware=[middleware])
    state = agent.invoke({"messages": [{"role": "user", "content": "post hello to #general"}]})

    results = tool_messages(state["messages"])
    assert script.wanted in results["s1"].content
    assert ran == [(script.wanted, arguments)]
    assert results["c1"].content == f"{script.wanted} done"
    # the denied tools: never bound, never found, refused like tools that do not exist
    for name in (script.denied, "mcp__paypal__refund_captured_payment"):
        assert all(name not in bound for bound in chat.bound)
    assert results["c2"].status == "error"
    assert results["c2"].content == f"No such tool available: {script.denied}"
    assert script.denied not in results["s2"].content
    assert "No matching deferred tools found" in results["s3"].content
    assert results["c3"].content == "No such tool available: mcp__paypal__refund_captured_payment"
    # the first request carries ToolSearch only; the found tools join the next one
    assert chat.bound[0] == [TOOL_SEARCH_NAME]
    assert script.wanted in chat.bound[1]
    assert len(chat.bound[1]) == 4
    assert state[STATE_KEY][0] == script.wanted
    assert "<available-deferred-tools>" in chat.seen[0][0].content
    assert script.denied not in chat.seen[0][0].content
    savings = middleware.savings()
    assert savings.requests == 4
    assert 0 < savings.tokens_sent < savings.tokens_without_search
    print("langchain test agent:", savings.to_json())
    assert savings.to_json() == documented("langchain.md", "langchain test agent")


def test_a_deferred_tool_must_be_loaded_before_it_runs(workbench: list[Tool], script: Any) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    chat = model([call(script.wanted, dict(script.arguments), "c1")], "done")
    middleware = ToolSearchMiddleware(langchain_tools(workbench, ran), backend="keyword")
    state = create_agent(chat, middleware=[middleware]).invoke({"messages": [("user", "hi")]})

    message = tool_messages(state["messages"])["c1"]
    assert message.status == "error"
    assert f"select:{script.wanted}" in message.content
    assert ran == []


def test_loaded_tools_survive_trimming_the_history(workbench: list[Tool], script: Any) -> None:
    """A middleware that keeps only the last message drops every ToolSearch result; the
    loaded tool stays bound and callable, in the next invocation of the thread too."""

    @before_model
    def keep_last_message(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), state["messages"][-1]]}

    ran: list[tuple[str, dict[str, Any]]] = []
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
        "loaded",
        [call(script.wanted, dict(script.arguments), "c1")],
        "sent",
    )
    middleware = ToolSearchMiddleware(langchain_tools(workbench, ran), backend="keyword")
    agent = create_agent(
        chat, middleware=[keep_last_message, middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    agent.invoke({"messages": [("user", "load the slack tool")]}, config)
    state = agent.invoke({"messages": [("user", "now post hello")]}, config)

    kept = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert not any(m.name == TOOL_SEARCH_NAME for m in kept)
    assert script.wanted in chat.bound[2]
    assert ran == [(script.wanted, dict(script.arguments))]


def bigtool_agent(search: BigtoolSearch, chat: RecordingChat) -> Any:
    from langgraph_bigtool import create_agent as create_bigtool_agent

    return create_bigtool_agent(
        chat,
        search.registry,
        retrieve_tools_function=search.retrieve_tools_function,
        retrieve_tools_coroutine=search.retrieve_tools_coroutine,
    ).compile()


def test_bigtool_retrieves_with_toolsearch(workbench: list[Tool], script: Any) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    search = BigtoolSearch(langchain_tools(workbench, ran), deny=[script.denied], backend="bm25")
    assert len(search.registry) == 494
    assert script.denied not in search.registry
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": script.query, "max_results": 2}, "s1")],
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, "s2")],
        "done",
    )
    state = bigtool_agent(search, chat).invoke({"messages": [("user", "post hello")]})

    assert chat.bound[0] == [TOOL_SEARCH_NAME]
    assert chat.bound[1][0] == TOOL_SEARCH_NAME
    assert script.wanted in chat.bound[1]
    assert state["selected_tool_ids"][0] == script.wanted
    assert script.denied not in state["selected_tool_ids"]
    assert all(script.denied not in bound for bound in chat.bound)
    savings = search.request_savings(state["selected_tool_ids"])
    assert 0 < savings.tokens_sent < savings.tokens_without_search


@pytest.mark.xfail(
    raises=AttributeError,
    strict=True,
    reason="langgraph-bigtool 0.0.3 calls ToolNode.inject_tool_args, private since "
    "langgraph-prebuilt 1.0; the retrieved tool cannot run through bigtool's graph",
)
def test_bigtool_runs_a_retrieved_tool(workbench: list[Tool], script: Any) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    search = BigtoolSearch(langchain_tools(workbench, ran), backend="keyword")
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
        [call(script.wanted, dict(script.arguments), "c1")],
        "done",
    )
    bigtool_agent(search, chat).invoke({"messages": [("user", "post hello")]})
    assert ran == [(script.wanted, dict(script.arguments))]


def test_mcp_tools_run_through_the_hub(
    workbench: list[Tool], hub_script: Any, workspace_config: Any
) -> None:
    from toolsearch.mcp.hub import BlockingMcpHub

    ran: list[tuple[str, dict[str, Any]]] = []
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": hub_script.select}, "s1")],
        [
            call(hub_script.wanted, {"fields": {"title": "x"}}, "c1"),
            call(hub_script.failing, {}, "c2"),
            call(hub_script.denied, {}, "c3"),
        ],
        "done",
    )
    with BlockingMcpHub(workspace_config, backend="keyword", startup_timeout=30) as hub:
        assert hub.wait_ready(timeout=30)
        middleware = ToolSearchMiddleware(
            langchain_tools(workbench, ran), hub=hub, deny=[hub_script.denied], backend="keyword"
        )
        state = create_agent(chat, middleware=[middleware]).invoke({"messages": [("user", "x")]})

    results = tool_messages(state["messages"])
    assert f"Not found: {hub_script.denied}" in results["s1"].content
    assert "jira_create_ticket ok" in results["c1"].content
    assert results["c2"].status == "error"
    assert "the backing service is down" in results["c2"].content
    assert results["c3"].content == f"No such tool available: {hub_script.denied}"
    assert chat.bound[0] == [TOOL_SEARCH_NAME, hub_script.always_loaded]
    assert set(chat.bound[1]) == {
        TOOL_SEARCH_NAME,
        hub_script.always_loaded,
        hub_script.wanted,
        hub_script.failing,
    }
    assert ran == []


def test_deny_rules_reach_tools_given_to_create_agent(script: Any) -> None:
    """Plain functions become tools of the middleware; a tool handed to create_agent directly
    stays the framework's, but a deny rule still keeps it from the model and from running."""
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Get the weather forecast for a city."""
        ran.append(f"weather {city}")
        return "sunny"

    def delete_everything() -> str:
        """Delete every file in the workspace."""
        ran.append("deleted")
        return "deleted"

    def get_time(city: str) -> str:
        """Current local time in a city."""
        ran.append(f"time {city}")
        return "noon"

    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": "weather forecast"}, "s1")],
        [
            call("get_weather", {"city": "Oslo"}, "c1"),
            call("delete_everything", {}, "c2"),
            call("get_time", {"city": "Oslo"}, "c3"),
        ],
        "done",
    )
    middleware = ToolSearchMiddleware([get_weather], deny=["delete_everything"], backend="keyword")
    agent = create_agent(chat, tools=[delete_everything, get_time], middleware=[middleware])
    state = agent.invoke({"messages": [("user", "weather in Oslo?")]})

    results = tool_messages(state["messages"])
    assert results["c1"].content == "sunny"
    assert results["c2"].content == "No such tool available: delete_everything"
    assert results["c3"].content == "noon"
    assert sorted(ran) == ["time Oslo", "weather Oslo"]  # the graph runs the calls in parallel
    assert chat.bound[0] == [TOOL_SEARCH_NAME, "get_time"]
    assert chat.bound[1] == [TOOL_SEARCH_NAME, "get_weather", "get_time"]


@pytest.mark.anyio
async def test_async_agents_call_an_async_hub(
    workbench: list[Tool], hub_script: Any, workspace_config: Any
) -> None:
    from toolsearch.mcp.hub import McpHub

    ran: list[tuple[str, dict[str, Any]]] = []
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{hub_script.wanted}"}, "s1")],
        [call(hub_script.wanted, {"fields": {"title": "x"}}, "c1")],
        "done",
    )
    async with McpHub(workspace_config, backend="keyword", startup_timeout=30) as hub:
        assert await hub.wait_ready(timeout=30)
        middleware = ToolSearchMiddleware(
            langchain_tools(workbench, ran), hub=hub, backend="keyword"
        )
        agent = create_agent(chat, middleware=[middleware])
        state = await agent.ainvoke({"messages": [("user", "x")]})

    assert "jira_create_ticket ok" in tool_messages(state["messages"])["c1"].content
    assert hub_script.wanted in chat.bound[1]
    assert middleware.savings().requests == 3


def test_a_structured_system_message_keeps_its_blocks(workbench: list[Tool]) -> None:
    """With the announcement on, a system message of content blocks keeps them, Anthropic's
    cache_control marker included; the announcement is a block of its own after them."""
    from langchain_core.messages import SystemMessage

    cached = {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    chat = model("done")
    middleware = ToolSearchMiddleware(langchain_tools(workbench, []), backend="keyword")
    agent = create_agent(chat, middleware=[middleware], system_prompt=SystemMessage([cached]))
    agent.invoke({"messages": [("user", "hi")]})

    system = chat.seen[0][0]
    assert isinstance(system, SystemMessage)
    assert system.content[0] == cached
    assert system.content[1]["type"] == "text"
    assert system.content[1]["text"].startswith("<available-deferred-tools>")
    assert len(system.content) == 2


def adapter_tools(ran: list[str]) -> list[BaseTool]:
    """Tools of an MCP server named the way langchain-mcp-adapters names them with
    ``tool_name_prefix=True`` (``<server>_<tool>``)."""

    def make(name: str) -> BaseTool:
        def run(**arguments: Any) -> str:
            ran.append(name)
            return f"{name} done"

        schema = {"type": "object", "properties": {}}
        return StructuredTool(name=name, description=name, args_schema=schema, func=run)

    return [make(f"workspace_github_{verb}_repository") for verb in ("delete", "list")]


@pytest.mark.parametrize(
    "rule", ["mcp__workspace", "mcp__workspace__*", "mcp__workspace__github_delete_repository"]
)
def test_server_rules_deny_the_tools_of_an_mcp_adapter(rule: str) -> None:
    ran: list[str] = []
    denied, kept = "workspace_github_delete_repository", "workspace_github_list_repository"
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{denied},{kept}"}, "s1")],
        [call(denied, {}, "c1")],
        "done",
    )
    middleware = ToolSearchMiddleware(
        mcp_tools={"workspace": adapter_tools(ran)}, deny=[rule], backend="keyword"
    )
    state = create_agent(chat, middleware=[middleware]).invoke({"messages": [("user", "x")]})

    results = tool_messages(state["messages"])
    assert f"Not found: {denied}" in results["s1"].content
    assert results["c1"].content == f"No such tool available: {denied}"
    assert ran == []
    assert all(denied not in bound for bound in chat.bound)
    assert (kept in chat.bound[1]) == rule.endswith("delete_repository")


def test_keep_loaded_called_keeps_the_called_tools_and_the_latest_search(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": "slack message", "max_results": 3}, "s1")],
        [call(script.wanted, dict(script.arguments), "c1")],
        [call(TOOL_SEARCH_NAME, {"query": "select:mcp__github__create_issue"}, "s2")],
        "done",
    )
    middleware = ToolSearchMiddleware(
        langchain_tools(workbench, ran), backend="keyword", keep_loaded="called"
    )
    create_agent(chat, middleware=[middleware]).invoke({"messages": [("user", "x")]})

    assert len(chat.bound[1]) == 4
    assert chat.bound[3][0] == TOOL_SEARCH_NAME
    assert set(chat.bound[3][1:]) == {script.wanted, "mcp__github__create_issue"}


#: The one-line fix docs/integrations/langchain.md gives for langgraph-bigtool 0.0.3 on
#: langgraph-prebuilt 1.x: ToolNode injects state, store and runtime itself when it runs a
#: call, so bigtool's call to the removed public method can hand the call on unchanged.
def bigtool_fix(self: Any, call: Any, state: Any, store: Any) -> Any:
    return call


def test_bigtool_runs_a_retrieved_tool_with_the_one_line_fix(
    workbench: list[Tool], script: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ToolNode, "inject_tool_args", bigtool_fix, raising=False)
    ran: list[tuple[str, dict[str, Any]]] = []

    def count_messages(state: Annotated[dict[str, Any], InjectedState]) -> str:
        """Count the messages of the conversation so far."""
        return f"{len(state['messages'])} messages"

    search = BigtoolSearch([*langchain_tools(workbench, ran), count_messages], backend="keyword")
    chat = model(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted},count_messages"}, "s1")],
        [call(script.wanted, dict(script.arguments), "c1"), call("count_messages", {}, "c2")],
        "done",
    )
    state = bigtool_agent(search, chat).invoke({"messages": [("user", "post hello")]})

    results = tool_messages(state["messages"])
    assert results["c1"].content == f"{script.wanted} done"
    assert results["c2"].content == "4 messages"
    assert ran == [(script.wanted, dict(script.arguments))]


def test_a_tool_called_in_the_response_that_found_it_gets_a_clear_message(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    chat = model(
        [
            call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1"),
            call(script.wanted, arguments, "c1"),
        ],
        [call(script.wanted, arguments, "c2")],
        "sent",
    )
    middleware = ToolSearchMiddleware(langchain_tools(workbench, ran), backend="keyword")
    state = create_agent(chat, middleware=[middleware]).invoke({"messages": [("user", "x")]})

    results = tool_messages(state["messages"])
    assert results["c1"].status == "error"
    assert results["c1"].content.startswith(
        f"{script.wanted} was loaded by the ToolSearch call in this same response"
    )
    assert results["c2"].content == f"{script.wanted} done"
    assert ran == [(script.wanted, arguments)]
