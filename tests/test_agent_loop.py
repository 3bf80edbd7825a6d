"""The reference loop and the model clients (never on the network)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from toolsearch.agent.assemble import NextRequest
from toolsearch.agent.clients import (
    AnthropicClient,
    ChatCompletionsClient,
    ClientError,
    OpenAIClient,
    ScriptedClient,
    api_key_configured,
    reply_from_anthropic,
    reply_from_chat_completion,
    reply_from_openai,
)
from toolsearch.agent.loop import AgentLoop, ToolOutput, echo_runner
from toolsearch.agent.messages import (
    ToolCall,
    assistant_message,
    text_block,
    tool_use_block,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

ON = ModeSettings()
POOL = [
    Tool("Read", "read a file", always_load=True),
    Tool("mcp__slack__send_message", "Send a message to a Slack channel"),
    Tool("mcp__slack__read_channel", "Read a Slack channel"),
    Tool("mcp__github__create_issue", "Create a GitHub issue"),
]


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return assistant_message([tool_use_block(call_id, name, arguments)])


def loop_for(steps: list[Any], **options: Any) -> AgentLoop:
    options.setdefault("runner", echo_runner)
    return AgentLoop(
        ScriptedClient(steps, final_text=options.pop("final_text", None)),
        POOL,
        backend="keyword",
        settings=options.pop("settings", ON),
        **options,
    )


def test_search_then_call_then_stop() -> None:
    loop = loop_for(
        [
            call("s", "ToolSearch", query="slack send message"),
            call("c", "mcp__slack__send_message", channel="x"),
            assistant_message("sent"),
        ]
    )
    result = loop.run("send")
    assert result.stop_reason == "end_turn"
    assert [len(t.calls) for t in result.turns] == [1, 1, 0]
    search = result.turns[0].calls[0]
    assert search.kind == "search" and search.search is not None
    assert search.search.names[0] == "mcp__slack__send_message"
    assert "mcp__slack__send_message" in result.turns[0].newly_discovered
    ran = result.turns[1].calls[0]
    assert ran.kind == "tool"
    assert ran.result["content"] == 'mcp__slack__send_message ran with {"channel": "x"}'
    assert result.messages[-1] == assistant_message("sent")


def test_select_names_not_found_are_told_to_the_model() -> None:
    loop = loop_for(
        [
            call("s", "ToolSearch", query="select:mcp__slack__send_message,NoSuch"),
            call("n", "ToolSearch", query="select:NoSuch,Other"),
            assistant_message("done"),
        ]
    )
    result = loop.run("go")
    some, none = result.turns[0].calls[0].result, result.turns[1].calls[0].result
    assert some["content"] == [
        {"type": "tool_reference", "tool_name": "mcp__slack__send_message"},
        {"type": "text", "text": "Not found: NoSuch"},
    ]
    assert none["content"] == "No matching deferred tools found\nNot found: NoSuch, Other"
    assert "mcp__slack__send_message" in result.discovered


def test_turn_limit() -> None:
    loop = loop_for([call(f"r{i}", "Read", n=i) for i in range(10)], max_turns=3)
    result = loop.run("loop forever")
    assert result.stop_reason == "max_turns"
    assert len(result.turns) == 3


def test_bad_max_turns() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        loop_for([], max_turns=0)


def test_tool_search_errors_and_no_match_are_results_not_exceptions() -> None:
    loop = loop_for(
        [
            assistant_message(
                [
                    tool_use_block("a", "ToolSearch", {"query": "x", "max_results": 0}),
                    tool_use_block("b", "ToolSearch", {"query": 5}),
                    tool_use_block("c", "ToolSearch", {"query": "zzzz"}),
                ]
            )
        ],
        final_text="ok",
    )
    calls = loop.run("go").turns[0].calls
    assert calls[0].result["is_error"] and "between 1 and 100" in calls[0].result["content"]
    assert calls[1].result["is_error"] and "'query' must be a string" in calls[1].result["content"]
    assert calls[2].result["content"] == "No matching deferred tools found"


def test_pending_servers_appear_in_the_no_match_text() -> None:
    loop = loop_for(
        [call("c", "ToolSearch", query="zzzz")], final_text="ok", pending_servers=["jira"]
    )
    text = loop.run("go").turns[0].calls[0].result["content"]
    assert "Some MCP servers are still connecting: jira" in text


def test_unknown_tools_and_tool_search_while_off_are_rejected() -> None:
    loop = loop_for(
        [
            assistant_message(
                [tool_use_block("a", "Nope", {}), tool_use_block("b", "ToolSearch", {"query": "x"})]
            )
        ],
        final_text="ok",
        settings=ModeSettings(enable_tool_search="false"),
    )
    calls = loop.run("go").turns[0].calls
    assert [c.kind for c in calls] == ["rejected", "rejected"]
    assert calls[0].result["content"] == "No such tool available: Nope"
    # with search off every tool is inline and callable without a search
    direct = loop_for(
        [call("c", "mcp__github__create_issue", title="t")],
        final_text="ok",
        settings=ModeSettings(enable_tool_search="false"),
    )
    assert direct.run("go").turns[0].calls[0].kind == "tool"


@pytest.mark.parametrize(
    ("output", "content", "is_error"),
    [
        ("text", "text", False),
        (ToolOutput("bad", is_error=True), "bad", True),
        ([text_block("a")], [text_block("a")], False),
        ({"ok": 1}, '{"ok": 1}', False),
        (None, "", False),
        (42, "42", False),
    ],
)
def test_runner_outputs(output: Any, content: Any, is_error: bool) -> None:
    loop = loop_for([call("c", "Read")], final_text="ok", runner=lambda c, t: output)
    result = loop.run("go").turns[0].calls[0].result
    assert result["content"] == content
    assert bool(result.get("is_error")) is is_error


def test_runner_exceptions_become_error_results() -> None:
    def boom(call: ToolCall, tool: Tool) -> str:
        raise RuntimeError("disk on fire")

    result = loop_for([call("c", "Read")], final_text="ok", runner=boom).run("go")
    block = result.turns[0].calls[0].result
    assert block["is_error"] and block["content"] == "RuntimeError: disk on fire"


def test_no_runner_configured() -> None:
    loop = AgentLoop(
        ScriptedClient([call("c", "Read")], final_text="ok"), POOL, backend="keyword", settings=ON
    )
    block = loop.run("go").turns[0].calls[0].result
    assert block["is_error"] and "no tool runner" in block["content"]


def test_async_runner_needs_arun() -> None:
    async def runner(call: ToolCall, tool: Tool) -> str:
        await asyncio.sleep(0)
        return f"async {tool.name}"

    with pytest.raises(ConfigError, match="arun"):
        loop_for([call("c", "Read")], final_text="ok", runner=runner).run("go")
    result = asyncio.run(loop_for([call("c", "Read")], final_text="ok", runner=runner).arun("go"))
    assert result.turns[0].calls[0].result["content"] == "async Read"


def test_set_tools_between_turns_announces_the_difference() -> None:
    loop = loop_for([], pending_servers=["linear"])
    history: list[Any] = [{"role": "user", "content": "hi"}]
    first = loop.assemble(history)
    history.extend(first.persist)
    assert "mcp__linear__create_issue" not in (first.announcement or "")
    loop.set_tools([*POOL, Tool("mcp__linear__create_issue", "Create a Linear issue")])
    second = loop.assemble(history)
    assert second.delta is not None and second.delta.added == ("mcp__linear__create_issue",)
    assert loop.engine.search("linear issue").names[0] == "mcp__linear__create_issue"
    assert loop.engine.pending_servers == ()


def test_loop_respects_deny_rules_and_agents() -> None:
    from toolsearch.agent.subagents import parse_agent

    agent = parse_agent({"name": "a", "tools": ["ToolSearch", "mcp__slack"], "prompt": "Be brief."})
    loop = loop_for([call("c", "ToolSearch", query="issue")], final_text="ok", agent=agent)
    assert loop.system == "Be brief."
    result = loop.run("go")
    content = result.turns[0].calls[0].result["content"]
    assert content == "No matching deferred tools found"  # a list of tool_reference blocks if any
    assert {t.name for t in loop.pool.tools} == {
        "ToolSearch",
        "mcp__slack__read_channel",
        "mcp__slack__send_message",
    }


# -- clients --------------------------------------------------------------------------------


def test_scripted_client_records_requests_and_runs_out() -> None:
    client = ScriptedClient([lambda request: assistant_message(f"{len(request.tools)} tools")])
    loop = AgentLoop(client, POOL, backend="keyword", settings=ON)
    result = loop.run("count")
    assert isinstance(client.requests[0], NextRequest)
    assert result.messages[-1]["content"] == "2 tools"  # Read and ToolSearch
    with pytest.raises(ClientError, match="1 steps"):
        client.complete(client.requests[0])
    with pytest.raises(ClientError, match="assistant message"):
        ScriptedClient([{"role": "user", "content": "x"}]).complete(client.requests[0])


def test_real_clients_need_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not api_key_configured("anthropic")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicClient("claude-x")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIClient("gpt-x")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        ChatCompletionsClient("any")
    assert api_key_configured("openai", {"OPENAI_API_KEY": "k"})


def test_anthropic_reply_conversion_from_sdk_objects() -> None:
    from anthropic.types import Message

    response = Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "content": [
                {"type": "text", "text": "Searching."},
                {
                    "type": "tool_use",
                    "id": "tu_1",
                    "name": "ToolSearch",
                    "input": {"query": "slack"},
                },
            ],
        }
    )
    reply = reply_from_anthropic(response)
    assert reply.message == assistant_message(
        [text_block("Searching."), tool_use_block("tu_1", "ToolSearch", {"query": "slack"})]
    )
    assert reply.stop_reason == "tool_use"
    assert reply.usage["input_tokens"] == 10


def test_openai_reply_conversion_maps_tool_search_calls() -> None:
    from openai.types.responses import Response

    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-x",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "message",
                    "id": "m1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
                },
                {
                    "type": "tool_search_call",
                    "id": "ts1",
                    "call_id": "call_ts",
                    "execution": "client",
                    "status": "completed",
                    "arguments": {"query": "slack"},
                },
                {
                    "type": "function_call",
                    "call_id": "call_f",
                    "name": "Read",
                    "arguments": '{"file_path": "/a"}',
                },
            ],
        }
    )
    reply = reply_from_openai(response)
    assert reply.message["content"] == [
        text_block("Hi"),
        tool_use_block("call_ts", "ToolSearch", {"query": "slack"}),
        tool_use_block("call_f", "Read", {"file_path": "/a"}),
    ]
    assert reply.stop_reason == "tool_use"


def test_chat_completion_reply_conversion_and_bad_arguments() -> None:
    response = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "Read", "arguments": "{}"},
                        }
                    ],
                },
            }
        ]
    }
    assert reply_from_chat_completion(response).message["content"] == [
        tool_use_block("c1", "Read", {})
    ]
    response["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "{not json"  # type: ignore[index]
    with pytest.raises(ClientError, match="not valid JSON"):
        reply_from_chat_completion(response)
    with pytest.raises(ClientError, match="no choices"):
        reply_from_chat_completion({"choices": []})


def test_clients_send_the_payload_to_the_sdk() -> None:
    sent: dict[str, Any] = {}

    def create(**kwargs: Any) -> dict[str, Any]:
        sent.update(kwargs)
        return {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"}

    fake = SimpleNamespace(messages=SimpleNamespace(create=create))
    client = AnthropicClient("claude-x", client=fake, max_tokens=99)
    result = AgentLoop(client, POOL, backend="keyword", settings=ON, system="sys").run("hi")
    assert result.messages[-1]["content"] == [text_block("ok")]
    assert sent["model"] == "claude-x" and sent["max_tokens"] == 99 and sent["system"] == "sys"
    assert [t["name"] for t in sent["tools"]] == ["Read", "ToolSearch"]

    def respond(**kwargs: Any) -> dict[str, Any]:
        sent.clear()
        sent.update(kwargs)
        return {"output": [{"type": "message", "content": [{"type": "output_text", "text": "ok"}]}]}

    openai_client = OpenAIClient(
        "gpt-x", client=SimpleNamespace(responses=SimpleNamespace(create=respond))
    )
    AgentLoop(openai_client, POOL, backend="keyword", settings=ON).run("hi")
    assert sent["model"] == "gpt-x" and "input" in sent
    assert any(t["type"] == "tool_search" for t in sent["tools"])


class LastWordsBackend:
    """A deliberately odd third-party backend: ranks by how many query words end a name."""

    def index(self, tools: Any) -> None:
        self.tools = list(tools)

    def search(self, query: Any, k: int) -> list[Any]:
        from toolsearch.backend import Hit

        scored = [
            Hit(t.name, float(sum(t.name.endswith(w) for w in query.terms))) for t in self.tools
        ]
        return sorted((h for h in scored if h.score > 0), key=lambda h: -h.score)[:k]


@pytest.mark.parametrize("backend", ["keyword", LastWordsBackend()], ids=["keyword", "custom"])
def test_the_loop_works_the_same_with_any_backend(backend: Any) -> None:
    steps = [
        call("s", "ToolSearch", query="select:mcp__github__create_issue"),
        call("c", "mcp__github__create_issue", title="t"),
        call("s2", "ToolSearch", query="message"),
        assistant_message("done"),
    ]
    loop = AgentLoop(ScriptedClient(steps), POOL, runner=echo_runner, backend=backend, settings=ON)
    result = loop.run("go")
    assert [c.kind for t in result.turns for c in t.calls] == ["search", "tool", "search"]
    assert "mcp__github__create_issue" in result.discovered
    assert result.turns[1].request.tool_names[-1] == "mcp__github__create_issue"
