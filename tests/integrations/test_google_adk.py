"""The Google ADK toolset, end to end with ADK's own agent, runner and session service and a
scripted ``BaseLlm`` over the bundled 495-tool catalogue."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

pytest.importorskip("google.adk", reason="needs toolsearch[google-adk]")

from google.adk.agents import LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pydantic import Field

from toolsearch.errors import ConfigError
from toolsearch.integrations.google_adk import STATE_KEY, ToolSearchToolset
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

APP = "toolsearch-test"
Call = tuple[str, dict[str, Any], str]


class CatalogueTool(BaseTool):
    """A catalogue tool as an ADK tool with the catalogue's JSON schema; records its runs."""

    def __init__(self, tool: Tool, ran: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(name=tool.name, description=tool.description)
        self.schema = dict(tool.input_schema)
        self.ran = ran

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self.schema
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        self.ran.append((self.name, args))
        return {"result": f"{self.name} done"}


def adk_tools(tools: list[Tool], ran: list[tuple[str, dict[str, Any]]]) -> list[BaseTool]:
    return [CatalogueTool(t, ran) for t in tools]


class ScriptedLlm(BaseLlm):
    """Replies turn by turn — text, or function calls — and records each request's tools and
    system instruction."""

    model: str = "scripted"
    turns: list[list[Call] | str]
    tools: list[list[str]] = Field(default_factory=list)
    instructions: list[str] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        declared = [
            d.name or ""
            for tool in llm_request.config.tools or []
            if isinstance(tool, types.Tool)
            for d in tool.function_declarations or []
        ]
        assert sorted(declared) == sorted(llm_request.tools_dict)
        self.tools.append(declared)
        self.instructions.append(str(llm_request.config.system_instruction or ""))
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            parts = [types.Part(text=turn)]
        else:
            parts = [
                types.Part(function_call=types.FunctionCall(name=name, args=args, id=call_id))
                for name, args, call_id in turn
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def agent_for(model: ScriptedLlm, toolset: ToolSearchToolset, *others: Any) -> LlmAgent:
    return LlmAgent(
        name="assistant",
        model=model,
        instruction="Help.",
        tools=[toolset, *others],
        **toolset.callbacks(),
    )


async def ask(runner: Runner, text: str, *, user: str = "ana", session: str = "s") -> Any:
    """Run one user message; return every function response by call id."""
    service = runner.session_service
    if await service.get_session(app_name=APP, user_id=user, session_id=session) is None:
        await service.create_session(app_name=APP, user_id=user, session_id=session)
    message = types.Content(role="user", parts=[types.Part(text=text)])
    responses: dict[str, Any] = {}
    async for event in runner.run_async(user_id=user, session_id=session, new_message=message):
        for response in event.get_function_responses():
            responses[response.id or ""] = response.response
    return responses


async def state_of(runner: Runner, *, user: str = "ana", session: str = "s") -> dict[str, Any]:
    found = await runner.session_service.get_session(app_name=APP, user_id=user, session_id=session)
    assert found is not None
    return dict(found.state)


@pytest.mark.anyio
async def test_agent_searches_loads_and_calls_a_tool_and_never_reaches_a_denied_one(
    workbench: list[Tool], script: Any
) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    outside: list[str] = []

    def delete_everything() -> str:
        """Deletes every file."""
        outside.append("delete_everything")
        return "deleted"

    def local_time() -> str:
        """The local time."""
        outside.append("local_time")
        return "12:00"

    model = ScriptedLlm(
        turns=[
            [(TOOL_SEARCH_NAME, {"query": script.query, "max_results": 3}, "s1")],
            [
                (script.wanted, arguments, "c1"),
                (script.denied, {"payment_intent": "p"}, "c2"),
                ("delete_everything", {}, "c3"),
                ("local_time", {}, "c4"),
            ],
            [
                (TOOL_SEARCH_NAME, {"query": script.denied_query}, "s2"),
                (TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, "s3"),
            ],
            "done",
        ]
    )
    toolset = ToolSearchToolset(
        adk_tools(workbench, ran),
        deny=[script.denied, script.denied_server, "delete_everything"],
        backend="bm25",
    )
    runner = InMemoryRunner(
        agent=agent_for(model, toolset, delete_everything, local_time), app_name=APP
    )
    out = await ask(runner, "post hello to #general")

    assert script.wanted in out["s1"]["result"]
    assert script.wanted in out["s1"]["loaded"]
    assert ran == [(script.wanted, arguments)]
    assert out["c1"] == {"result": f"{script.wanted} done"}
    assert out["c2"] == {"error": f"No such tool available: {script.denied}"}
    assert out["c3"] == {"error": "No such tool available: delete_everything"}
    assert outside == ["local_time"]
    assert script.denied not in out["s2"]["result"]
    assert "No matching deferred tools found" in out["s3"]["result"]
    assert model.tools[0] == [TOOL_SEARCH_NAME, "local_time"]
    assert model.tools[1][0] == TOOL_SEARCH_NAME
    assert script.wanted in model.tools[1] and len(model.tools[1]) == 5
    assert all(
        script.denied not in names and "delete_everything" not in names for names in model.tools
    )
    assert "<available-deferred-tools>" in model.instructions[0]
    assert script.denied not in model.instructions[0]
    assert next(iter((await state_of(runner))[STATE_KEY])) == script.wanted
    savings = toolset.savings()
    assert savings.requests == len(model.tools) == 4
    assert 0 < savings.tokens_sent < savings.tokens_without_search
    print("google-adk test agent:", savings.to_json())


@pytest.mark.anyio
async def test_two_users_of_one_agent_keep_their_own_tools(
    workbench: list[Tool], script: Any
) -> None:
    """One toolset and one runner (a module-level agent) serve two users: what one user's
    ToolSearch loaded is not sent, nor runs, in the other's session."""
    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedLlm(
        turns=[
            [(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
            "loaded",
            [(script.wanted, dict(script.arguments), "c1")],
            "no such tool",
            [(script.wanted, dict(script.arguments), "c2")],
            "sent",
        ]
    )
    toolset = ToolSearchToolset(adk_tools(workbench, ran), backend="keyword")
    runner = InMemoryRunner(agent=agent_for(model, toolset), app_name=APP)
    await ask(runner, "load the slack tool", user="ana", session="a")
    other = await ask(runner, "post hello", user="ben", session="b")
    mine = await ask(runner, "post hello", user="ana", session="a")

    assert model.tools[2] == [TOOL_SEARCH_NAME]
    assert other["c1"]["error"].startswith(f"Tool '{script.wanted}' is deferred")
    assert f'"select:{script.wanted}"' in other["c1"]["error"]
    assert model.tools[4] == [TOOL_SEARCH_NAME, script.wanted]
    assert mine["c2"] == {"result": f"{script.wanted} done"}
    assert ran == [(script.wanted, dict(script.arguments))]
    assert STATE_KEY not in await state_of(runner, user="ben", session="b")


@pytest.mark.anyio
async def test_a_saved_session_resumes_with_its_tools(workbench: list[Tool], script: Any) -> None:
    """The found tools come back from the session the session service kept: a new agent,
    toolset and runner (a restarted process) over the same sessions send and run them."""
    sessions = InMemorySessionService()
    first = ScriptedLlm(turns=[[(TOOL_SEARCH_NAME, {"query": script.query}, "s1")], "found"])
    toolset = ToolSearchToolset(adk_tools(workbench, []), backend="bm25")
    before = Runner(agent=agent_for(first, toolset), app_name=APP, session_service=sessions)
    await ask(before, "find the slack tool")

    ran: list[tuple[str, dict[str, Any]]] = []
    second = ScriptedLlm(turns=[[(script.wanted, dict(script.arguments), "c1")], "sent"])
    restarted = ToolSearchToolset(adk_tools(workbench, ran), backend="bm25")
    after = Runner(agent=agent_for(second, restarted), app_name=APP, session_service=sessions)
    out = await ask(after, "post hello")

    assert script.wanted in second.tools[0]
    assert out["c1"] == {"result": f"{script.wanted} done"}
    assert ran == [(script.wanted, dict(script.arguments))]


@pytest.mark.anyio
async def test_a_session_state_set_by_hand_is_read_and_denied_names_are_dropped(
    workbench: list[Tool], script: Any
) -> None:
    model = ScriptedLlm(turns=["hi"])
    toolset = ToolSearchToolset(adk_tools(workbench, []), deny=[script.denied], backend="keyword")
    runner = InMemoryRunner(agent=agent_for(model, toolset), app_name=APP)
    await runner.session_service.create_session(
        app_name=APP,
        user_id="ana",
        session_id="s",
        state={STATE_KEY: [script.denied, script.wanted]},
    )
    await ask(runner, "hi")
    assert model.tools[0] == [TOOL_SEARCH_NAME, script.wanted]


@pytest.mark.anyio
async def test_a_malformed_session_state_is_refused(workbench: list[Tool]) -> None:
    toolset = ToolSearchToolset(adk_tools(workbench, []), backend="keyword")
    runner = InMemoryRunner(agent=agent_for(ScriptedLlm(turns=["hi"]), toolset), app_name=APP)
    await runner.session_service.create_session(
        app_name=APP, user_id="ana", session_id="s", state={STATE_KEY: "mcp__slack__send_message"}
    )
    with pytest.raises(ConfigError, match="session state 'toolsearch:discovered' must map tool"):
        await ask(runner, "hi")


@pytest.mark.anyio
async def test_a_tool_found_in_the_same_response_is_called_again(
    workbench: list[Tool], script: Any
) -> None:
    """A response that calls ToolSearch twice and a tool it loads: both searches are kept
    (parallel state writes merge) and the early call is told what happened."""
    ran: list[tuple[str, dict[str, Any]]] = []
    arguments = dict(script.arguments)
    model = ScriptedLlm(
        turns=[
            [
                (TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1"),
                (TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, "s2"),
                (script.wanted, arguments, "c1"),
            ],
            [(script.wanted, arguments, "c2")],
            "sent",
        ]
    )
    toolset = ToolSearchToolset(adk_tools(workbench, ran), backend="keyword")
    runner = InMemoryRunner(agent=agent_for(model, toolset), app_name=APP)
    out = await ask(runner, "post hello")

    assert "same response" in out["c1"]["error"] and "call it again" in out["c1"]["error"]
    assert out["c2"] == {"result": f"{script.wanted} done"}
    assert ran == [(script.wanted, arguments)]
    assert model.tools[1] == [TOOL_SEARCH_NAME, script.wanted, script.denied] or model.tools[1] == [
        TOOL_SEARCH_NAME,
        script.denied,
        script.wanted,
    ]
    assert set((await state_of(runner))[STATE_KEY]) == {script.wanted, script.denied}


@pytest.mark.anyio
async def test_an_agent_without_the_callbacks_is_refused(workbench: list[Tool]) -> None:
    toolset = ToolSearchToolset(adk_tools(workbench, []), backend="keyword")
    agent = LlmAgent(name="assistant", model=ScriptedLlm(turns=["hi"]), tools=[toolset])
    runner = InMemoryRunner(agent=agent, app_name=APP)
    with pytest.raises(ConfigError, match=r"agent 'assistant' has a ToolSearchToolset but not"):
        await ask(runner, "hi")


@pytest.mark.anyio
async def test_tools_loaded_up_front_are_sent_from_the_start(
    workbench: list[Tool], script: Any
) -> None:
    model = ScriptedLlm(turns=["done"])
    toolset = ToolSearchToolset(
        adk_tools(workbench, []), always_load=[script.wanted], backend="keyword"
    )
    await ask(InMemoryRunner(agent=agent_for(model, toolset), app_name=APP), "hi")
    assert model.tools[0] == [TOOL_SEARCH_NAME, script.wanted]
    with pytest.raises(ConfigError, match="always_load names no tool of the toolset: nope"):
        ToolSearchToolset(adk_tools(workbench, []), always_load=["nope"])


@pytest.mark.anyio
async def test_mcp_tools_run_through_the_hub(
    workbench: list[Tool], hub_script: Any, workspace_config: Any
) -> None:
    from toolsearch.mcp.hub import McpHub

    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedLlm(
        turns=[
            [(TOOL_SEARCH_NAME, {"query": hub_script.select}, "s1")],
            [
                (hub_script.wanted, {"fields": {"title": "x"}}, "c1"),
                (hub_script.failing, {}, "c2"),
            ],
            [(hub_script.denied, {}, "c3")],
            "done",
        ]
    )
    async with McpHub(workspace_config, backend="keyword", startup_timeout=30) as hub:
        assert await hub.wait_ready(timeout=30)
        toolset = ToolSearchToolset(
            adk_tools(workbench, ran), hub=hub, deny=[hub_script.denied], backend="keyword"
        )
        out = await ask(InMemoryRunner(agent=agent_for(model, toolset), app_name=APP), "x")

    assert f"Not found: {hub_script.denied}" in out["s1"]["result"]
    assert "jira_create_ticket ok" in out["c1"]["result"]
    assert "the backing service is down" in out["c2"]["error"]
    assert out["c3"] == {"error": f"No such tool available: {hub_script.denied}"}
    assert model.tools[0] == [TOOL_SEARCH_NAME, hub_script.always_loaded]
    assert hub_script.wanted in model.tools[1]
    assert all(hub_script.denied not in names for names in model.tools)
    assert ran == []


class ProjectToolset(BaseToolset):
    """A toolset of ADK's own kind (as McpToolset is) whose tools depend on the session: a
    user with the ``admin`` state also gets the admin tool."""

    def __init__(self, ran: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__()
        self.ran = ran

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        tools = [Tool("project_list_files", "List the files of the project.")]
        if readonly_context is not None and readonly_context.state.get("admin"):
            tools.append(Tool("project_delete_branch", "Delete a branch of the project."))
        return adk_tools(tools, self.ran)


@pytest.mark.anyio
async def test_a_wrapped_toolset_and_functions_are_deferred_and_listed_per_session() -> None:
    ran: list[tuple[str, dict[str, Any]]] = []

    def weather(city: str) -> str:
        """The weather forecast for a city."""
        ran.append(("weather", {"city": city}))
        return "sunny"

    select = {"query": "select:project_delete_branch,weather"}
    model = ScriptedLlm(
        turns=[
            [(TOOL_SEARCH_NAME, select, "s1")],
            [("project_delete_branch", {}, "c1"), ("weather", {"city": "Oslo"}, "c2")],
            "done",
            [(TOOL_SEARCH_NAME, select, "s2")],
            "done",
        ]
    )
    toolset = ToolSearchToolset([ProjectToolset(ran), weather], backend="keyword")
    runner = InMemoryRunner(agent=agent_for(model, toolset), app_name=APP)
    await runner.session_service.create_session(
        app_name=APP, user_id="ana", session_id="admin", state={"admin": True}
    )
    await ask(runner, "delete the old branch", session="admin")
    other = await ask(runner, "delete it too", user="ben", session="plain")

    assert model.tools[0] == [TOOL_SEARCH_NAME]
    assert sorted(model.tools[1]) == sorted([TOOL_SEARCH_NAME, "weather", "project_delete_branch"])
    assert ran == [("project_delete_branch", {}), ("weather", {"city": "Oslo"})]
    assert "Not found: project_delete_branch" in other["s2"]["result"]
    assert "<available-deferred-tools>" in model.instructions[0]
    assert "project_delete_branch" not in model.instructions[3]
