"""The OpenAI Agents SDK integration, end to end with the SDK's own scripted model over the
bundled 495-tool catalogue."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("agents.testing", reason="needs toolsearch[openai-agents]")

from agents import Agent, FunctionTool, Runner
from agents.items import ToolCallOutputItem
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ScriptedModel, assistant_message, function_call

from toolsearch.integrations.openai_agents import ToolSearchTools
from toolsearch.tool import TOOL_SEARCH_NAME, Tool


def function_tools(tools: list[Tool], ran: list[tuple[str, str]]) -> list[FunctionTool]:
    """Every catalogue tool as a function tool that records its calls."""

    def make(tool: Tool) -> FunctionTool:
        async def invoke(context: Any, arguments: str) -> str:
            ran.append((tool.name, arguments))
            return f"{tool.name} done"

        return FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=dict(tool.input_schema),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    return [make(t) for t in tools]


def search_call(arguments: dict[str, Any], call_id: str) -> Any:
    return function_call(TOOL_SEARCH_NAME, arguments, call_id=call_id)


def outputs(result: Any) -> dict[str, str]:
    return {
        item.raw_item["call_id"]: str(item.output)
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem)
    }


def tool_names(model: ScriptedModel) -> list[list[str]]:
    return [[t.name for t in call.tools] for call in model.calls]


@pytest.mark.anyio
async def test_agent_searches_loads_and_calls_a_tool_and_never_reaches_a_denied_one(
    workbench: list[Tool], script: Any, documented: Any
) -> None:
    ran: list[tuple[str, str]] = []
    arguments = dict(script.arguments)
    model = ScriptedModel(
        [
            [
                function_call(
                    TOOL_SEARCH_NAME, {"query": script.query, "max_results": 3}, call_id="s1"
                )
            ],
            [
                function_call(script.wanted, arguments, call_id="c1"),
                function_call(script.denied, {"payment_intent": "pi_1"}, call_id="c2"),
            ],
            [
                function_call(TOOL_SEARCH_NAME, {"query": script.denied_query}, call_id="s2"),
                function_call(TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, call_id="s3"),
                function_call("mcp__paypal__refund_captured_payment", {}, call_id="c3"),
            ],
            [assistant_message("done")],
        ]
    )
    search = ToolSearchTools(
        function_tools(workbench, ran),
        deny=[script.denied, script.denied_server],
        backend="bm25",
    )
    agent = Agent(name="assistant", instructions="Help.", model=model, tools=search.tools)
    result = await Runner.run(
        agent, "post hello to #general", run_config=search.run_config(tracing_disabled=True)
    )

    model.assert_complete()
    out = outputs(result)
    assert script.wanted in out["s1"]
    assert [name for name, _ in ran] == [script.wanted]
    assert out["c1"] == f"{script.wanted} done"
    assert out["c2"] == f"No such tool available: {script.denied}"
    assert script.denied not in out["s2"]
    assert "No matching deferred tools found" in out["s3"]
    assert out["c3"] == "No such tool available: mcp__paypal__refund_captured_payment"
    sent = tool_names(model)
    assert sent[0] == [TOOL_SEARCH_NAME]
    assert sent[1][0] == TOOL_SEARCH_NAME and script.wanted in sent[1] and len(sent[1]) == 4
    assert all(script.denied not in names for names in sent)
    instructions = model.calls[0].system_instructions or ""
    assert instructions.startswith("Help.") and "<available-deferred-tools>" in instructions
    assert script.denied not in instructions
    assert search.discovered_in(result.to_input_list())[0] == script.wanted
    savings = search.savings()
    assert savings.requests == 4
    assert 0 < savings.tokens_sent < savings.tokens_without_search
    print("openai-agents test agent:", savings.to_json())
    assert savings.to_json() == documented("openai-agents.md", "openai-agents test agent")


@pytest.mark.anyio
async def test_a_deferred_tool_must_be_loaded_before_it_runs(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, str]] = []
    model = ScriptedModel(
        [
            [function_call(script.wanted, dict(script.arguments), call_id="c1")],
            [assistant_message("done")],
        ]
    )
    search = ToolSearchTools(function_tools(workbench, ran), backend="keyword")
    agent = Agent(name="assistant", model=model, tools=search.tools)
    result = await Runner.run(agent, "hi", run_config=search.run_config(tracing_disabled=True))

    assert f"select:{script.wanted}" in outputs(result)["c1"]
    assert ran == []


@pytest.mark.anyio
async def test_loaded_tools_survive_trimming_the_history(
    workbench: list[Tool], script: Any
) -> None:
    """An input filter that sends only the last input item drops the ToolSearch result; the
    loaded tool stays enabled in the next run of the conversation too."""

    def keep_last_item(data: CallModelData[Any]) -> ModelInputData:
        return ModelInputData(input=data.model_data.input[-1:], instructions=None)

    ran: list[tuple[str, str]] = []
    model = ScriptedModel(
        [
            [function_call(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, call_id="s1")],
            [assistant_message("loaded")],
            [function_call(script.wanted, dict(script.arguments), call_id="c1")],
            [assistant_message("sent")],
        ]
    )
    search = ToolSearchTools(function_tools(workbench, ran), backend="keyword", announce=False)
    agent = Agent(name="assistant", model=model, tools=search.tools)
    config = search.run_config(input_filter=keep_last_item, tracing_disabled=True)
    first = await Runner.run(agent, "load the slack tool", run_config=config)
    await Runner.run(
        agent, [*first.to_input_list(), {"role": "user", "content": "post"}], run_config=config
    )

    assert len(model.calls[2].input) == 1
    assert script.wanted in tool_names(model)[2]
    assert [name for name, _ in ran] == [script.wanted]


@pytest.mark.anyio
async def test_mcp_tools_run_through_the_hub(
    workbench: list[Tool], hub_script: Any, workspace_config: Any
) -> None:
    from toolsearch.mcp.hub import McpHub

    ran: list[tuple[str, str]] = []
    model = ScriptedModel(
        [
            [search_call({"query": hub_script.select}, "s1")],
            [
                function_call(hub_script.wanted, {"fields": {"title": "x"}}, call_id="c1"),
                function_call(hub_script.failing, {}, call_id="c2"),
                function_call(hub_script.denied, {}, call_id="c3"),
            ],
            [assistant_message("done")],
        ]
    )
    async with McpHub(workspace_config, backend="keyword", startup_timeout=30) as hub:
        assert await hub.wait_ready(timeout=30)
        search = ToolSearchTools(
            function_tools(workbench, ran), hub=hub, deny=[hub_script.denied], backend="keyword"
        )
        agent = Agent(name="assistant", model=model, tools=search.tools)
        result = await Runner.run(agent, "x", run_config=search.run_config(tracing_disabled=True))

    out = outputs(result)
    assert f"Not found: {hub_script.denied}" in out["s1"]
    assert "jira_create_ticket ok" in out["c1"]
    assert "the backing service is down" in out["c2"]
    assert out["c3"] == f"No such tool available: {hub_script.denied}"
    sent = tool_names(model)
    assert sent[0] == [TOOL_SEARCH_NAME, hub_script.always_loaded]
    assert set(sent[1]) == {
        TOOL_SEARCH_NAME,
        hub_script.always_loaded,
        hub_script.wanted,
        hub_script.failing,
    }
    assert ran == []


def run_config(search: ToolSearchTools) -> Any:
    return search.run_config(tracing_disabled=True)


@pytest.mark.anyio
async def test_a_denied_tool_given_outside_the_integration_refuses_the_run(
    workbench: list[Tool],
) -> None:
    from toolsearch.errors import ConfigError

    ran: list[tuple[str, str]] = []
    delete_everything = function_tools(
        [Tool("delete_everything", "Delete every file in the workspace.")], ran
    )[0]
    model = ScriptedModel([[function_call("delete_everything", {}, call_id="c1")]])
    search = ToolSearchTools(
        function_tools(workbench[:20], ran), deny=["delete_everything"], backend="keyword"
    )
    agent = Agent(name="a", model=model, tools=[*search.tools, delete_everything])
    with pytest.raises(ConfigError, match=r"'delete_everything' \(the agent's own tools\) outside"):
        await Runner.run(agent, "clean up", run_config=run_config(search))
    assert ran == [] and not model.calls


@pytest.mark.anyio
@pytest.mark.parametrize("rule", ["mcp__workspace", "mcp__workspace__github_delete_repository"])
async def test_server_rules_reach_the_agent_s_mcp_servers(workbench: list[Tool], rule: str) -> None:
    import sys
    from pathlib import Path

    from agents.mcp import MCPServerStdio

    from toolsearch.errors import ConfigError

    server_script = Path(__file__).resolve().parents[1] / "mcp_servers" / "many_tools.py"
    params: Any = {"command": sys.executable, "args": [str(server_script)]}
    model = ScriptedModel([[assistant_message("done")]])
    search = ToolSearchTools(function_tools(workbench[:20], []), deny=[rule], backend="keyword")
    async with MCPServerStdio(name="workspace", params=params) as server:
        agent = Agent(name="a", model=model, tools=search.tools, mcp_servers=[server])
        with pytest.raises(ConfigError, match="MCP server 'workspace'"):
            await Runner.run(agent, "x", run_config=run_config(search))
    assert not model.calls


@pytest.mark.anyio
async def test_one_object_keeps_each_run_s_found_tools_apart(
    workbench: list[Tool], script: Any
) -> None:
    """A module-level agent serves two users: what user A's search loaded is not sent in
    user B's first request; A's next run gets it back from its items."""
    ran: list[tuple[str, str]] = []
    model = ScriptedModel(
        [
            [search_call({"query": f"select:{script.wanted}"}, "s1")],
            [assistant_message("loaded")],  # user A
            [assistant_message("hello")],  # user B
            [function_call(script.wanted, dict(script.arguments), call_id="c1")],
            [assistant_message("sent")],  # user A again
        ]
    )
    search = ToolSearchTools(function_tools(workbench, ran), backend="keyword")
    agent = Agent(name="a", model=model, tools=search.tools)
    first = await Runner.run(agent, "load the slack tool", run_config=run_config(search))
    await Runner.run(agent, "hi", run_config=run_config(search))
    again = [*first.to_input_list(), {"role": "user", "content": "post"}]
    await Runner.run(agent, again, run_config=run_config(search))

    sent = tool_names(model)
    assert script.wanted in sent[1]
    assert sent[2] == [TOOL_SEARCH_NAME]
    assert script.wanted in sent[3]
    assert [name for name, _ in ran] == [script.wanted]


@pytest.mark.anyio
async def test_found_tools_come_back_from_a_session(workbench: list[Tool], script: Any) -> None:
    """A new ToolSearchTools (another process) reads the found tools from the session."""
    from agents import SQLiteSession

    ran: list[tuple[str, str]] = []
    session = SQLiteSession("user-a")
    first_model = ScriptedModel(
        [[search_call({"query": f"select:{script.wanted}"}, "s1")], [assistant_message("ok")]]
    )
    first = ToolSearchTools(function_tools(workbench, ran), backend="keyword")
    agent = Agent(name="a", model=first_model, tools=first.tools)
    await Runner.run(agent, "load it", session=session, run_config=run_config(first))

    model = ScriptedModel(
        [
            [function_call(script.wanted, dict(script.arguments), call_id="c1")],
            [assistant_message("sent")],
        ]
    )
    search = ToolSearchTools(function_tools(workbench, ran), backend="keyword")
    agent = Agent(name="a", model=model, tools=search.tools)
    await Runner.run(agent, "post", session=session, run_config=run_config(search))

    assert script.wanted in tool_names(model)[0]
    assert [name for name, _ in ran] == [script.wanted]


@pytest.mark.anyio
async def test_an_approved_call_runs_when_resumed_from_run_state(workbench: list[Tool]) -> None:
    """A call that needs approval stops the run; the approved RunState, resumed through a
    new ToolSearchTools (another process), runs the call."""
    from agents import RunState

    ran: list[tuple[str, str]] = []

    def tools() -> list[FunctionTool]:
        delete_repo = function_tools([Tool("delete_repo", "Delete a git repository.")], ran)[0]
        delete_repo.needs_approval = True
        return [*function_tools(workbench[:20], ran), delete_repo]

    model = ScriptedModel(
        [
            [search_call({"query": "select:delete_repo"}, "s1")],
            [function_call("delete_repo", {}, call_id="c1")],
            [assistant_message("deleted")],
        ]
    )
    first = ToolSearchTools(tools(), backend="keyword")
    agent = Agent(name="a", model=model, tools=first.tools)
    result = await Runner.run(agent, "delete the repo", run_config=run_config(first))
    state = result.to_state()
    state.approve(result.interruptions[0])
    saved = state.to_json()

    search = ToolSearchTools(tools(), backend="keyword")
    agent = Agent(name="a", model=model, tools=search.tools)
    resumed = await RunState.from_json(agent, saved)
    final = await Runner.run(agent, resumed, run_config=run_config(search))

    assert outputs(final)["c1"] == "delete_repo done"
    assert ran == [("delete_repo", "{}")]
    assert final.final_output == "deleted"


@pytest.mark.anyio
async def test_a_tool_called_in_the_response_that_found_it_gets_a_clear_message(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, str]] = []
    model = ScriptedModel(
        [
            [
                search_call({"query": f"select:{script.wanted}"}, "s1"),
                function_call(script.wanted, dict(script.arguments), call_id="c1"),
            ],
            [function_call(script.wanted, dict(script.arguments), call_id="c2")],
            [assistant_message("sent")],
        ]
    )
    search = ToolSearchTools(function_tools(workbench, ran), backend="keyword")
    agent = Agent(name="a", model=model, tools=search.tools)
    result = await Runner.run(agent, "post", run_config=run_config(search))

    out = outputs(result)
    assert out["c1"].startswith(f"{script.wanted} was loaded by the ToolSearch call in this")
    assert "call it again" in out["c1"]
    assert out["c2"] == f"{script.wanted} done"
