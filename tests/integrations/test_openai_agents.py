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
    workbench: list[Tool], script: Any
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
    assert search.discovered[0] == script.wanted
    savings = search.savings()
    assert savings.requests == 4
    assert 0 < savings.tokens_sent < savings.tokens_without_search
    print("openai-agents test agent:", savings.to_json())


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
