"""The CrewAI integration, end to end with CrewAI's own Agent and executor and a scripted
``BaseLLM`` over the bundled 495-tool catalogue."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import pytest

# no traces or telemetry sent from the tests (the machine has no network for them anyway)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

pytest.importorskip("crewai", reason="needs toolsearch[crewai]")

from crewai import Agent, BaseLLM
from crewai.hooks import HookAborted
from crewai.tools import BaseTool
from crewai.utilities.pydantic_schema_utils import create_model_from_schema
from pydantic import BaseModel, Field

from toolsearch.errors import ConfigError
from toolsearch.integrations.crewai import ToolSearchTools
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

# CrewAI's Agent reads its own deprecated fields while it sets up, even when they are not set
pytestmark = [
    pytest.mark.filterwarnings("ignore:function_calling_llm is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:deprecated$:DeprecationWarning"),
]

Call = tuple[str, dict[str, Any], str]
Ran = list[tuple[str, dict[str, Any]]]


class CatalogueTool(BaseTool):
    """A catalogue tool as a CrewAI tool; records its runs."""

    ran: Any = None

    def _run(self, **arguments: Any) -> str:
        self.ran.append((self.name, {k: v for k, v in arguments.items() if v is not None}))
        return f"{self.name} done"


@pytest.fixture(scope="module")
def arguments_models(workbench: list[Tool]) -> dict[str, type[BaseModel]]:
    """Each catalogue tool's arguments as the pydantic model a CrewAI tool declares."""
    with warnings.catch_warnings():
        # a few catalogue tools have an argument named "schema", which pydantic flags
        warnings.simplefilter("ignore", UserWarning)
        return {
            t.name: create_model_from_schema(dict(t.input_schema), model_name="Arguments")
            for t in workbench
        }


def crewai_tools(models: dict[str, type[BaseModel]], tools: list[Tool], ran: Ran) -> list[BaseTool]:
    return [
        CatalogueTool(name=t.name, description=t.description, args_schema=models[t.name], ran=ran)
        for t in tools
    ]


class PlainTool(BaseTool):
    """A tool given to the agent directly, outside the integration."""

    name: str = "plain"
    description: str = "A plain tool."
    ran: Any = None

    def _run(self) -> str:
        self.ran.append((self.name, {}))
        return f"{self.name} done"


class ScriptedLLM(BaseLLM):
    """Replies turn by turn — text, or native tool calls — and records each call's tools and
    system message."""

    turns: list[list[Call] | str]
    tools: list[list[str]] = Field(default_factory=list)
    systems: list[str] = Field(default_factory=list)
    native: bool = True

    def call(self, messages: Any, tools: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.tools.append([t["function"]["name"] for t in tools or []])
        self.systems.append(next(m["content"] for m in messages if m["role"] == "system"))
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            return turn
        return [
            {"id": call_id, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for n, a, call_id in turn
        ]

    def supports_function_calling(self) -> bool:
        return self.native


def agent_for(llm: ScriptedLLM, tools: list[BaseTool]) -> Agent:
    return Agent(role="assistant", goal="Help.", backstory="A helper.", llm=llm, tools=tools)


def results(output: Any) -> dict[str, str]:
    """Each tool call's result, by call id, from the run's messages."""
    return {m["tool_call_id"]: m["content"] for m in output.messages if m.get("role") == "tool"}


SEARCH = "tool_search"  # CrewAI sends every tool under a sanitised name


def test_agent_searches_loads_and_calls_a_tool_and_never_reaches_a_denied_one(
    workbench: list[Tool], script: Any, arguments_models: Any
) -> None:
    ran: Ran = []
    arguments = dict(script.arguments)
    llm = ScriptedLLM(
        model="scripted",
        turns=[
            [(TOOL_SEARCH_NAME, {"query": script.query, "max_results": 3}, "s1")],
            [
                (script.wanted, arguments, "c1"),
                (script.denied, {"payment_intent": "p"}, "c2"),
                ("delete_everything", {}, "c3"),
                ("plain", {}, "c4"),
                ("mcp__gmail__send_email", {}, "c5"),
            ],
            [
                (TOOL_SEARCH_NAME, {"query": script.denied_query}, "s2"),
                (TOOL_SEARCH_NAME, {"query": f"select:{script.denied}"}, "s3"),
            ],
            "done",
        ],
    )
    deny = [script.denied, script.denied_server, "delete_everything"]
    with ToolSearchTools(
        crewai_tools(arguments_models, workbench, ran), deny=deny, backend="bm25"
    ) as search:
        outside = [PlainTool(ran=ran), PlainTool(name="delete_everything", ran=ran)]
        output = agent_for(llm, [*search.tools, *outside]).kickoff("post hello to #general")
        savings = search.savings()

    out = results(output)
    assert output.raw == "done"
    assert script.wanted in out["s1"]
    # CrewAI may run one response's calls in parallel, in any order
    assert len(ran) == 2 and (script.wanted, arguments) in ran and ("plain", {}) in ran
    assert out["c1"] == f"{script.wanted} done"
    assert out["c2"] == f"No such tool available: {script.denied}"
    assert out["c3"] == "No such tool available: delete_everything"
    assert out["c5"].startswith("Tool 'mcp__gmail__send_email' is deferred")
    assert '"select:mcp__gmail__send_email"' in out["c5"]
    assert script.denied not in out["s2"]
    assert "No matching deferred tools found" in out["s3"]
    assert llm.tools[0] == [SEARCH, "plain"]
    assert llm.tools[1][0] == SEARCH and len(llm.tools[1]) == 5
    assert "mcp_slack_send_message" in llm.tools[1]
    assert all("delete_everything" not in names for names in llm.tools)
    assert all("mcp_stripe_create_refund" not in names for names in llm.tools)
    assert llm.systems[0].count("<available-deferred-tools>") == 1
    assert script.denied not in llm.systems[0]
    assert savings.requests == len(llm.tools) == 4
    assert 0 < savings.tokens_sent < savings.tokens_without_search
    print("crewai test agent:", savings.to_json())


def test_two_runs_of_one_agent_keep_their_own_tools(
    workbench: list[Tool], script: Any, arguments_models: Any
) -> None:
    """One ToolSearchTools and one agent (a module-level agent) serve two users in turn:
    what the first run loaded is neither sent nor run in the second."""
    ran: Ran = []
    llm = ScriptedLLM(
        model="scripted",
        turns=[
            [(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
            [(script.wanted, dict(script.arguments), "c1")],
            "sent",
            [(script.wanted, dict(script.arguments), "c2")],
            "not loaded",
        ],
    )
    with ToolSearchTools(
        crewai_tools(arguments_models, workbench, ran), backend="keyword"
    ) as search:
        agent = agent_for(llm, search.tools)
        agent.kickoff("post hello")
        second = results(agent.kickoff("post hello too"))

    assert llm.tools[1] == [SEARCH, "mcp_slack_send_message"]
    assert llm.tools[3] == [SEARCH]
    assert second["c2"].startswith(f"Tool '{script.wanted}' is deferred")
    assert ran == [(script.wanted, dict(script.arguments))]


def test_a_conversation_passed_back_resumes_with_its_tools(
    workbench: list[Tool], script: Any, arguments_models: Any
) -> None:
    """The found tools come back from the messages CrewAI keeps: a new ToolSearchTools and
    agent (a restarted process) given the earlier conversation send and run them."""
    with ToolSearchTools(
        crewai_tools(arguments_models, workbench, []), backend="keyword"
    ) as search:
        llm = ScriptedLLM(
            model="scripted",
            turns=[[(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")], "found"],
        )
        history = agent_for(llm, search.tools).kickoff("find the slack tool").messages

    ran: Ran = []
    llm = ScriptedLLM(
        model="scripted", turns=[[(script.wanted, dict(script.arguments), "c1")], "sent"]
    )
    with ToolSearchTools(
        crewai_tools(arguments_models, workbench, ran), backend="keyword"
    ) as restarted:
        conversation = [m for m in history if m["role"] != "system"]
        conversation.append({"role": "user", "content": "now post hello"})
        out = results(agent_for(llm, restarted.tools).kickoff(conversation))

    assert llm.tools[0] == [SEARCH, "mcp_slack_send_message"]
    assert out["c1"] == f"{script.wanted} done"
    assert ran == [(script.wanted, dict(script.arguments))]


def test_an_llm_without_native_tool_calls_is_refused(
    workbench: list[Tool], arguments_models: Any
) -> None:
    llm = ScriptedLLM(model="scripted", turns=["hi"], native=False)
    with (
        ToolSearchTools(crewai_tools(arguments_models, workbench, []), backend="keyword") as search,
        pytest.raises(HookAborted, match="needs an LLM with native function calling"),
    ):
        agent_for(llm, search.tools).kickoff("hi")


def test_tools_loaded_up_front_and_bad_options(
    workbench: list[Tool], script: Any, arguments_models: Any
) -> None:
    llm = ScriptedLLM(model="scripted", turns=["done"])
    tools = crewai_tools(arguments_models, workbench, [])
    with ToolSearchTools(tools, always_load=[script.wanted], backend="keyword") as search:
        agent_for(llm, search.tools).kickoff("hi")
    assert llm.tools[0] == [SEARCH, "mcp_slack_send_message"]
    with pytest.raises(ConfigError, match="always_load names no given tool: nope"):
        ToolSearchTools(tools, always_load=["nope"])
    twins = [PlainTool(name="get-time", ran=[]), PlainTool(name="get_time", ran=[])]
    with pytest.raises(ConfigError, match="CrewAI would call tools 'get-time' and 'get_time'"):
        ToolSearchTools(twins)


def test_a_tool_name_with_spaces_is_found_and_called_by_crewais_name() -> None:
    ran: Ran = []
    llm = ScriptedLLM(
        model="scripted",
        turns=[
            [(TOOL_SEARCH_NAME, {"query": "select:check_the_clock"}, "s1")],
            [("check_the_clock", {}, "c1")],
            "done",
        ],
    )
    with ToolSearchTools([PlainTool(name="Check the clock", ran=ran)]) as search:
        out = results(agent_for(llm, search.tools).kickoff("what time is it"))
    assert llm.tools[1] == [SEARCH, "check_the_clock"]
    assert out["c1"] == "Check the clock done"
    assert ran == [("Check the clock", {})]


def test_closing_unregisters_the_hooks(workbench: list[Tool], arguments_models: Any) -> None:
    """After close, an agent with the tools runs as plain CrewAI: nothing narrows or refuses."""
    from crewai.hooks import get_after_tool_call_hooks, get_before_llm_call_hooks

    before = (len(get_before_llm_call_hooks()), len(get_after_tool_call_hooks()))
    search = ToolSearchTools(crewai_tools(arguments_models, workbench, []), backend="keyword")
    assert len(get_before_llm_call_hooks()) == before[0] + 1
    search.close()
    assert (len(get_before_llm_call_hooks()), len(get_after_tool_call_hooks())) == before


def test_a_crew_task_finds_and_calls_a_tool_and_its_denied_task_tool_never_runs(
    workbench: list[Tool], script: Any, arguments_models: Any
) -> None:
    """The CrewAI idiom: a Crew whose task hands the agent a tool of its own."""
    from crewai import Crew, Task

    ran: Ran = []
    arguments = dict(script.arguments)
    llm = ScriptedLLM(
        model="scripted",
        turns=[
            [(TOOL_SEARCH_NAME, {"query": f"select:{script.wanted}"}, "s1")],
            [(script.wanted, arguments, "c1"), ("delete_everything", {}, "c2")],
            "posted",
        ],
    )
    deny = ["delete_everything"]
    with ToolSearchTools(crewai_tools(arguments_models, workbench, ran), deny=deny) as search:
        agent = agent_for(llm, search.tools)
        task = Task(
            description="Post hello to #general.",
            expected_output="Whether it was posted.",
            agent=agent,
            tools=[*search.tools, PlainTool(name="delete_everything", ran=ran)],
        )
        output = Crew(agents=[agent], tasks=[task]).kickoff()

    assert output.raw == "posted"
    assert llm.tools[0] == [SEARCH]
    assert llm.tools[1] == [SEARCH, "mcp_slack_send_message"]
    assert ran == [(script.wanted, arguments)]
