"""The PydanticAI toolset, end to end with PydanticAI's FunctionModel over the bundled
495-tool catalogue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs toolsearch[pydantic-ai]")

from pydantic_ai import Agent, RunContext
from pydantic_ai import Tool as PydanticTool
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolsearch.errors import ConfigError
from toolsearch.integrations.pydantic_ai import ToolSearchToolset
from toolsearch.tool import TOOL_SEARCH_NAME, Tool


def pydantic_tools(
    tools: list[Tool], ran: list[tuple[str, dict[str, Any]]]
) -> list[PydanticTool[Any]]:
    """Every catalogue tool as a PydanticAI tool with the catalogue's JSON schema."""

    def make(tool: Tool) -> PydanticTool[Any]:
        def run(**arguments: Any) -> str:
            ran.append((tool.name, arguments))
            return f"{tool.name} done"

        return PydanticTool.from_schema(
            run,
            name=tool.name,
            description=tool.description,
            json_schema=dict(tool.input_schema),
        )

    return [make(t) for t in tools]


class Script:
    """A FunctionModel function that replies turn by turn and records what each call saw."""

    def __init__(self, *turns: list[ToolCallPart] | str) -> None:
        self.turns = list(turns)
        self.tools: list[list[str]] = []
        self.instructions: list[str | None] = []
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tools.append([t.name for t in info.function_tools])
        self.instructions.append(info.instructions)
        self.seen.append(list(messages))
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(parts=list(turn))


def call(name: str, args: dict[str, Any], call_id: str) -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id=call_id)


def returns(messages: Sequence[ModelMessage]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart | RetryPromptPart):
                    found[part.tool_call_id] = part
    return found


@pytest.mark.anyio
async def test_agent_searches_loads_and_calls_a_tool_and_never_reaches_a_denied_one(
    workbench: list[Tool], script: Any, documented: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": script.query, "max_results": 3}, "s1")],
        [call(script.wanted, arguments, "c1"), call(script.denied, {"payment_intent": "p"}, "c2")],
        [
            call(TOOL_SEARCH_NAME, {"query": script.denied_query}, "s2"),
            call(TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, "s3"),
        ],
        "done",
    )
    toolset = ToolSearchToolset(
        pydantic_tools(workbench, ran),
        deny=[script.denied, script.denied_server],
        backend="bm25",
    )
    agent = Agent(FunctionModel(model), toolsets=[toolset], instructions="Help.")
    result = await agent.run("post hello to #general")

    out = returns(result.all_messages())
    assert script.wanted in out["s1"].content
    assert ran == [(script.wanted, arguments)]
    assert out["c1"].content == f"{script.wanted} done"
    # PydanticAI refuses a call to a tool it was not given; the model reads toolsearch's text
    assert out["c2"].outcome == "retried"
    assert out["c2"].content == f"No such tool available: {script.denied}"
    assert script.denied not in str(out["s2"].content)
    assert "No matching deferred tools found" in out["s3"].content
    assert model.tools[0] == [TOOL_SEARCH_NAME]
    assert model.tools[1][0] == TOOL_SEARCH_NAME
    assert script.wanted in model.tools[1] and len(model.tools[1]) == 4
    assert all(script.denied not in names for names in model.tools)
    assert "<available-deferred-tools>" in (model.instructions[0] or "")
    assert script.denied not in (model.instructions[0] or "")
    assert toolset.discovered_in(result.all_messages())[0] == script.wanted
    savings = toolset.savings()
    assert savings.requests == len(model.tools) == 4
    assert 0 < savings.tokens_sent < savings.tokens_without_search
    print("pydantic-ai test agent:", savings.to_json())
    assert savings.to_json() == documented("pydantic-ai.md", "pydantic-ai test agent")


@pytest.mark.anyio
async def test_loaded_tools_survive_trimming_the_history(
    workbench: list[Tool], script: Any
) -> None:
    """A history processor (PydanticAI's ProcessHistory) that keeps only the last message
    drops the ToolSearch result; the loaded tool stays listed and callable in the next run of
    the conversation too."""

    def keep_last_message(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    ran: list[tuple[str, dict[str, Any]]] = []
    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
        "loaded",
        [call(script.wanted, dict(script.arguments), "c1")],
        "sent",
    )
    toolset = ToolSearchToolset(pydantic_tools(workbench, ran), backend="keyword")
    trim = ProcessHistory(keep_last_message)
    agent = Agent(FunctionModel(model), toolsets=[toolset], capabilities=[trim])
    first = await agent.run("load the slack tool")
    await agent.run("now post hello", message_history=first.all_messages())

    assert len(model.seen[2]) == 1
    assert script.wanted in model.tools[2]
    assert ran == [(script.wanted, dict(script.arguments))]


@pytest.mark.anyio
async def test_tools_loaded_up_front_are_listed_from_the_start(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    model = Script("done")
    toolset = ToolSearchToolset(
        pydantic_tools(workbench, ran), always_load=[script.wanted], backend="keyword"
    )
    await Agent(FunctionModel(model), toolsets=[toolset]).run("hi")

    assert model.tools[0] == [TOOL_SEARCH_NAME, script.wanted]


@pytest.mark.anyio
async def test_always_load_must_name_a_tool_of_the_toolset(workbench: list[Tool]) -> None:
    toolset = ToolSearchToolset(pydantic_tools(workbench, []), always_load=["mcp__slack__sned"])
    with pytest.raises(
        ConfigError, match="always_load names no tool of the toolset: mcp__slack__sned"
    ):
        await Agent(FunctionModel(Script("done")), toolsets=[toolset]).run("hi")


@pytest.mark.anyio
async def test_context_argument_is_kept_for_wrapped_tools() -> None:
    """A wrapped tool that takes the run context still receives it."""
    seen: list[str] = []

    def whoami(ctx: RunContext[str], greeting: str) -> str:
        """Greets the user by their name."""
        seen.append(f"{greeting} {ctx.deps}")
        return "ok"

    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": "select:whoami"}, "s1")],
        [call("whoami", {"greeting": "hi"}, "c1")],
        "done",
    )
    toolset = ToolSearchToolset([whoami], backend="keyword")
    await Agent(FunctionModel(model), toolsets=[toolset], deps_type=str).run("x", deps="ana")
    assert seen == ["hi ana"]


@pytest.mark.anyio
async def test_mcp_tools_run_through_the_hub(
    workbench: list[Tool], hub_script: Any, workspace_config: Any
) -> None:
    from toolsearch.mcp.hub import McpHub

    ran: list[tuple[str, dict[str, Any]]] = []
    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": hub_script.select}, "s1")],
        [
            call(hub_script.wanted, {"fields": {"title": "x"}}, "c1"),
            call(hub_script.failing, {}, "c2"),
        ],
        [call(hub_script.denied, {}, "c3")],
        "done",
    )
    async with McpHub(workspace_config, backend="keyword", startup_timeout=30) as hub:
        assert await hub.wait_ready(timeout=30)
        toolset = ToolSearchToolset(
            pydantic_tools(workbench, ran), hub=hub, deny=[hub_script.denied], backend="keyword"
        )
        result = await Agent(FunctionModel(model), toolsets=[toolset]).run("x")

    out = returns(result.all_messages())
    assert f"Not found: {hub_script.denied}" in out["s1"].content
    assert "jira_create_ticket ok" in out["c1"].content
    assert "the backing service is down" in str(out["c2"].content)
    assert out["c2"].outcome == "failed"
    assert out["c3"].content == f"No such tool available: {hub_script.denied}"
    assert model.tools[0] == [TOOL_SEARCH_NAME, hub_script.always_loaded]
    assert hub_script.wanted in model.tools[1]
    assert all(hub_script.denied not in names for names in model.tools)
    assert ran == []


@pytest.mark.anyio
async def test_a_denied_tool_given_outside_the_toolset_refuses_the_run(
    workbench: list[Tool],
) -> None:
    ran: list[str] = []

    def delete_everything() -> str:
        """Delete every file in the workspace."""
        ran.append("deleted")
        return "deleted"

    model = Script([call("delete_everything", {}, "c1")], "done")
    toolset = ToolSearchToolset(
        pydantic_tools(workbench[:20], []), deny=["delete_everything"], backend="keyword"
    )
    agent = Agent(FunctionModel(model), toolsets=[toolset], tools=[delete_everything])
    with pytest.raises(ConfigError, match="'delete_everything' outside the ToolSearchToolset"):
        await agent.run("clean up")
    assert ran == [] and model.tools == []


@pytest.mark.anyio
async def test_one_toolset_keeps_each_conversation_s_found_tools_apart(
    workbench: list[Tool], script: Any
) -> None:
    """A module-level agent serves two users: what user A's search loaded is not sent in
    user B's first request, and A's next run gets it back from its history."""
    ran: list[tuple[str, dict[str, Any]]] = []
    toolset = ToolSearchToolset(pydantic_tools(workbench, ran), backend="keyword")
    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
        "loaded",  # user A
        "hello",  # user B
        [call(script.wanted, dict(script.arguments), "c1")],
        "sent",  # user A again
    )
    agent = Agent(FunctionModel(model), toolsets=[toolset])
    first = await agent.run("load the slack tool")
    await agent.run("hi")
    await agent.run("post hello", message_history=first.all_messages())

    assert script.wanted in model.tools[1]
    assert model.tools[2] == [TOOL_SEARCH_NAME]
    assert script.wanted in model.tools[3]
    assert ran == [(script.wanted, dict(script.arguments))]


@pytest.mark.anyio
async def test_found_tools_come_back_from_the_history_alone(
    workbench: list[Tool], script: Any
) -> None:
    """A new toolset (another process, after a restart) reads the found tools from the
    message history it is given; no discovered= needed."""
    ran: list[tuple[str, dict[str, Any]]] = []
    first_model = Script(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")], "loaded"
    )
    first_toolset = ToolSearchToolset(pydantic_tools(workbench, ran), backend="keyword")
    first = await Agent(FunctionModel(first_model), toolsets=[first_toolset]).run("load it")

    model = Script([call(script.wanted, dict(script.arguments), "c1")], "sent")
    toolset = ToolSearchToolset(pydantic_tools(workbench, ran), backend="keyword")
    history = first.all_messages()
    await Agent(FunctionModel(model), toolsets=[toolset]).run("post", message_history=history)

    assert script.wanted in model.tools[0]
    assert ran == [(script.wanted, dict(script.arguments))]
    assert toolset.discovered_in(history) == (script.wanted,)


@pytest.mark.anyio
async def test_calls_to_unloaded_or_denied_tools_do_not_end_the_run(
    workbench: list[Tool], script: Any
) -> None:
    """With PydanticAI's default retries (1), two calls of a tool that is not loaded (and two
    of a denied one) each get a retry message; the run goes on to search and call."""
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    model = Script(
        [call(script.wanted, arguments, "c1"), call(script.denied, {}, "d1")],
        [call(script.wanted, arguments, "c2"), call(script.denied, {}, "d2")],
        [call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
        [call(script.wanted, arguments, "c3")],
        "done",
    )
    toolset = ToolSearchToolset(
        pydantic_tools(workbench, ran), deny=[script.denied], backend="keyword"
    )
    result = await Agent(FunctionModel(model), toolsets=[toolset]).run("post hello")

    out = returns(result.all_messages())
    assert result.output == "done"
    for refused in ("c1", "c2"):
        assert out[refused].outcome == "retried"
        assert f'ToolSearch with query "select:{script.wanted}"' in str(out[refused].content)
    assert out["d2"].outcome == "retried"
    assert out["d2"].content == f"No such tool available: {script.denied}"
    # the model read toolsearch's text, not PydanticAI's unknown-tool one
    assert f"select:{script.wanted}" in str(returns(model.seen[1])["c1"].content)
    assert ran == [(script.wanted, arguments)]


@pytest.mark.anyio
async def test_the_model_that_never_searches_still_hits_the_retry_limit(
    workbench: list[Tool], script: Any
) -> None:
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    model = Script(*([[call(script.wanted, {}, f"c{i}")] for i in range(6)]), "done")
    toolset = ToolSearchToolset(pydantic_tools(workbench, []), backend="keyword", max_refusals=2)
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        await Agent(FunctionModel(model), toolsets=[toolset]).run("post hello")


@pytest.mark.anyio
async def test_keep_loaded_called_keeps_the_called_tools_and_the_latest_search(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": "slack message", "max_results": 3}, "s1")],
        [call(script.wanted, dict(script.arguments), "c1")],
        [call(TOOL_SEARCH_NAME, {"query": "select:mcp__github__create_issue"}, "s2")],
        "done",
    )
    toolset = ToolSearchToolset(
        pydantic_tools(workbench, ran), backend="keyword", keep_loaded="called"
    )
    await Agent(FunctionModel(model), toolsets=[toolset]).run("x")

    assert len(model.tools[1]) == 4
    assert model.tools[3][0] == TOOL_SEARCH_NAME
    assert set(model.tools[3][1:]) == {script.wanted, "mcp__github__create_issue"}


def workspace_toolset() -> Any:
    """PydanticAI's own MCP toolset over the many_tools test server, prefixed the way
    load_mcp_toolsets prefixes with the server's name."""
    pytest.importorskip("fastmcp", reason="needs PydanticAI's MCP client (pydantic-ai-slim[mcp])")
    import sys
    from pathlib import Path

    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    server = Path(__file__).resolve().parents[1] / "mcp_servers" / "many_tools.py"
    transport = StdioTransport(command=sys.executable, args=[str(server)])
    # a generous start-up limit: the server starts a Python process on a loaded machine
    return MCPToolset(Client(transport, init_timeout=60)).prefixed("workspace")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "rule", ["mcp__workspace", "mcp__workspace__*", "mcp__workspace__github_delete_repository"]
)
async def test_server_rules_deny_tools_of_pydantic_ai_s_mcp_toolset(rule: str) -> None:
    wanted, denied = "workspace_github_list_issue", "workspace_github_delete_repository"
    model = Script(
        [call(TOOL_SEARCH_NAME, {"query": f"select:{denied},{wanted}"}, "s1")],
        [call(denied, {}, "c1")],
        "done",
    )
    toolset = ToolSearchToolset(workspace_toolset(), deny=[rule], backend="keyword")
    result = await Agent(FunctionModel(model), toolsets=[toolset]).run("x")

    out = returns(result.all_messages())
    assert f"Not found: {denied}" in out["s1"].content
    assert out["c1"].outcome == "retried"
    assert all(denied not in names for names in model.tools)
    if rule == "mcp__workspace__github_delete_repository":
        assert wanted in model.tools[1]
    else:
        assert model.tools[1] == [TOOL_SEARCH_NAME]


@pytest.mark.anyio
async def test_a_denied_mcp_server_given_outside_the_toolset_refuses_the_run(
    workbench: list[Tool],
) -> None:
    model = Script("done")
    toolset = ToolSearchToolset(
        pydantic_tools(workbench[:20], []), deny=["mcp__workspace"], backend="keyword"
    )
    agent = Agent(FunctionModel(model), toolsets=[toolset, workspace_toolset()])
    with pytest.raises(
        ConfigError, match=r"the tool 'workspace_[a-z_]*' outside the ToolSearchToolset"
    ):
        await agent.run("x")


@pytest.mark.anyio
async def test_pydantic_ai_s_own_tool_search_loses_found_tools_when_history_is_trimmed() -> None:
    """Why ToolSearchToolset does not build on PydanticAI's ToolSearch capability
    (docs/integrations/pydantic-ai.md): with a custom search function its found tools live
    only in the message history, so a history processor that trims it unloads them and the
    call is refused; ToolSearchToolset keeps them (test_loaded_tools_survive_trimming...)."""
    from pydantic_ai.capabilities import ToolSearch

    def send_message(text: str) -> str:
        """Send a slack message."""
        return "sent"

    def search(ctx: Any, queries: Sequence[str], tools: Sequence[Any]) -> list[str]:
        return [t.name for t in tools if any(q in (t.description or "") for q in queries)]

    def keep_last_message(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    model = Script(
        [call("search_tools", {"queries": ["slack"]}, "s1")],
        "loaded",
        [call("send_message", {"text": "hi"}, "c1")],
        "done",
    )
    capabilities: list[Any] = [ToolSearch(strategy=search, tools="all")]
    agent = Agent(FunctionModel(model), tools=[send_message], capabilities=capabilities)
    first = await agent.run("load")
    trimmed = Agent(
        FunctionModel(model),
        tools=[send_message],
        capabilities=[*capabilities, ProcessHistory(keep_last_message)],
    )
    result = await trimmed.run("post", message_history=first.all_messages())

    assert model.tools[1] == ["send_message", "search_tools"]
    refused = returns(result.all_messages())["c1"]
    assert refused.outcome == "retried"
    assert "'send_message' is not available yet" in str(refused.content)


@pytest.mark.anyio
async def test_a_tool_called_in_the_response_that_found_it_gets_a_clear_message(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    model = Script(
        [
            call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1"),
            call(script.wanted, arguments, "c1"),
        ],
        [call(script.wanted, arguments, "c2")],
        "sent",
    )
    toolset = ToolSearchToolset(pydantic_tools(workbench, ran), backend="keyword")
    result = await Agent(FunctionModel(model), toolsets=[toolset]).run("post")

    out = returns(result.all_messages())
    assert out["c1"].outcome == "retried"
    assert str(out["c1"].content).startswith(
        f"{script.wanted} was loaded by the ToolSearch call in this same response"
    )
    assert out["c2"].content == f"{script.wanted} done"
    assert ran == [(script.wanted, arguments)]
