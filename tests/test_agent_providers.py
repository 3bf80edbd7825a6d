"""Provider payloads validated against the official SDKs' typed request params.

Validation uses pydantic over the SDKs' TypedDicts with ``extra="forbid"`` (a misspelt key
fails), consuming every lazily validated iterable. Whole requests are checked against
``MessageCreateParamsNonStreaming`` / ``ResponseCreateParamsNonStreaming`` /
``CompletionCreateParamsNonStreaming``; the deferral-specific pieces also against their own
types (``ToolParam.defer_loading``, ``ToolReferenceBlockParam``, the server-side
``ToolSearchToolRegex20251119Param`` / ``ToolSearchToolBm25_20251119Param``,
``ToolSearchToolParam``, ``FunctionToolParam.defer_loading``, the ``tool_search_call`` input item
and ``ResponseToolSearchOutputItemParamParam``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pydantic = pytest.importorskip("pydantic")
anthropic_types = pytest.importorskip("anthropic.types")
responses_types = pytest.importorskip("openai.types.responses")

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming  # noqa: E402
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam  # noqa: E402
from openai.types.chat.completion_create_params import (  # noqa: E402
    CompletionCreateParamsNonStreaming,
)
from openai.types.responses.response_create_params import (  # noqa: E402
    ResponseCreateParamsNonStreaming,
)
from openai.types.responses.response_input_item_param import ToolSearchCall  # noqa: E402

from toolsearch.agent.assemble import NextRequest, assemble_request  # noqa: E402
from toolsearch.agent.clients import ScriptedClient  # noqa: E402
from toolsearch.agent.loop import AgentLoop, echo_runner  # noqa: E402
from toolsearch.agent.messages import (  # noqa: E402
    Message,
    assistant_message,
    reference_block,
    text_block,
    tool_use_block,
    user_message,
)
from toolsearch.agent.mode import ModeSettings  # noqa: E402
from toolsearch.agent.providers.anthropic import (  # noqa: E402
    MAX_DEFERRED_TOOLS,
    AnthropicAdapter,
    check_server_search_input,
    check_tools,
)
from toolsearch.agent.providers.plain import LOADED_HEADER  # noqa: E402
from toolsearch.catalog import load_catalog  # noqa: E402
from toolsearch.errors import QueryError  # noqa: E402
from toolsearch.tool import Tool  # noqa: E402

ON = ModeSettings()
FORBID = pydantic.ConfigDict(extra="forbid")


def _consume(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _consume(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_consume(v) for v in value]
    if isinstance(value, Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_consume(v) for v in value]
    return value


def validate(kind: Any, value: Any) -> Any:
    """Validate ``value`` as ``kind`` with extra keys forbidden; return the validated data."""
    adapter = pydantic.TypeAdapter(list[kind], config=FORBID)
    return _consume(adapter.validate_python([value]))[0]


def test_validator_catches_a_misspelt_key() -> None:
    with pytest.raises(pydantic.ValidationError):
        validate(anthropic_types.ToolParam, {"name": "x", "input_schema": {}, "defer_loadin": True})
    with pytest.raises(pydantic.ValidationError):
        validate(
            anthropic_types.MessageParam,
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "a",
                        "content": [{"type": "tool_reference", "toolname": "x"}],
                    }
                ],
            },
        )


STEPS = [
    assistant_message(
        [
            text_block("Looking."),
            tool_use_block("s1", "ToolSearch", {"query": "slack send message"}),
        ]
    ),
    assistant_message(
        [
            tool_use_block("c1", "mcp__slack__send_message", {"channel": "c", "text": "hi"}),
            tool_use_block("s2", "ToolSearch", {"query": "zzzz nothing"}),
            tool_use_block("s3", "ToolSearch", {"query": "x", "max_results": 0}),
        ]
    ),
    assistant_message([tool_use_block("c2", "Read", {"file_path": "/tmp/a"})]),
    assistant_message("All done."),
]


def conversation(provider: str | AnthropicAdapter) -> tuple[list[NextRequest], list[Message]]:
    tools = load_catalog("datasets/starter")
    client = ScriptedClient(
        STEPS, provider="anthropic" if not isinstance(provider, str) else provider
    )
    loop = AgentLoop(
        client,
        tools,
        runner=echo_runner,
        backend="keyword",
        settings=ON,
        provider=provider,
        system="You are helpful.",
    )
    result = loop.run("Send hi to slack")
    return client.requests, result.messages


def test_anthropic_client_side_payload_validates() -> None:
    requests, _ = conversation("anthropic")
    last = requests[-1].payload
    validate(MessageCreateParamsNonStreaming, {"model": "claude-x", "max_tokens": 10, **last})
    deferred = [t for t in last["tools"] if t.get("defer_loading")]
    assert deferred, "discovered deferred tools are sent with defer_loading"
    for tool in last["tools"]:
        validate(anthropic_types.ToolParam, tool)
    assert {t["name"] for t in deferred} == requests[-1].loaded
    assert not any(t.get("defer_loading") for t in requests[0].payload["tools"])
    results = [
        b
        for m in last["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    refs = [r for b in results if isinstance(b["content"], list) for r in b["content"]]
    for block in results:
        validate(anthropic_types.ToolResultBlockParam, block)
    for ref in refs:
        if ref["type"] == "tool_reference":
            validate(anthropic_types.ToolReferenceBlockParam, ref)
    assert any(r["type"] == "tool_reference" for r in refs)
    assert "toolsearch" not in json.dumps(last["messages"]).replace("toolsearch.", "")


def test_anthropic_cache_breakpoint_goes_on_the_last_non_deferred_tool() -> None:
    requests, _ = conversation(AnthropicAdapter(cache_tools=True))
    tools = requests[-1].payload["tools"]
    marked = [t["name"] for t in tools if "cache_control" in t]
    plain = [t["name"] for t in tools if not t.get("defer_loading")]
    assert marked == [plain[-1]]
    validate(
        MessageCreateParamsNonStreaming, {"model": "m", "max_tokens": 1, **requests[-1].payload}
    )


@pytest.mark.parametrize(
    ("variant", "kind", "sdk_type"),
    [
        ("regex", "tool_search_tool_regex_20251119", "ToolSearchToolRegex20251119Param"),
        ("bm25", "tool_search_tool_bm25_20251119", "ToolSearchToolBm25_20251119Param"),
    ],
)
def test_anthropic_server_side_variants(variant: str, kind: str, sdk_type: str) -> None:
    tools = load_catalog("datasets/starter")
    name = f"tool_search_tool_{variant}"
    argument = "pattern" if variant == "regex" else "query"
    history: list[Message] = [
        user_message("send to slack"),
        assistant_message(
            [
                {
                    "type": "server_tool_use",
                    "id": "srv1",
                    "name": name,
                    "input": {argument: "slack"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srv1",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [reference_block("mcp__slack__send_message")],
                    },
                },
                tool_use_block("c1", "mcp__slack__send_message", {"channel": "c", "text": "t"}),
            ]
        ),
        user_message([{"type": "tool_result", "tool_use_id": "c1", "content": "sent"}]),
    ]
    request = assemble_request(
        tools,
        history,
        provider=AnthropicAdapter(server_search=variant),
        settings=ON,  # type: ignore[arg-type]
    )
    payload = request.payload
    validate(MessageCreateParamsNonStreaming, {"model": "m", "max_tokens": 1, **payload})
    search = payload["tools"][0]
    assert search == {"type": kind, "name": name}
    validate(getattr(anthropic_types, sdk_type), search)
    names = [t["name"] for t in payload["tools"]]
    assert "ToolSearch" not in names
    deferred = {t["name"] for t in payload["tools"] if t.get("defer_loading")}
    assert deferred == {t.name for t in request.pool.deferred}  # every deferred tool is sent
    assert request.announcement is None
    assert request.loaded == {"mcp__slack__send_message"}
    validate(anthropic_types.ServerToolUseBlockParam, payload["messages"][1]["content"][0])
    validate(anthropic_types.ToolSearchToolResultBlockParam, payload["messages"][1]["content"][1])


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("tool_search_tool_regex", {"pattern": "a" * 201}, "201 characters; the limit is 200"),
        ("tool_search_tool_bm25", {"query": "a" * 501}, "501 characters; the limit is 500"),
        ("tool_search_tool_bm25", {"query": "ok", "limit": 0}, "from 1 to 10000"),
        ("tool_search_tool_bm25", {"query": "ok", "limit": 10_001}, "from 1 to 10000"),
        ("tool_search_tool_regex", {"pattern": "ok", "limit": "5"}, "from 1 to 10000"),
        ("tool_search_tool_regex", {}, "'pattern' must be a string"),
        ("web_search", {"query": "x"}, "not a server-side tool search tool"),
    ],
)
def test_server_side_query_limits(name: str, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        check_server_search_input(name, arguments)


def test_server_side_limits_at_the_edges_pass() -> None:
    check_server_search_input("tool_search_tool_regex", {"pattern": "a" * 200})
    check_server_search_input("tool_search_tool_bm25", {"query": "a" * 500, "limit": 10_000})
    check_server_search_input("tool_search_tool_bm25", {"query": "a", "limit": 1})


def test_server_side_bad_query_in_the_history_fails_before_sending() -> None:
    history = [
        user_message("x"),
        assistant_message(
            [
                {
                    "type": "server_tool_use",
                    "id": "s",
                    "name": "tool_search_tool_regex",
                    "input": {"pattern": "a" * 300},
                }
            ]
        ),
    ]
    with pytest.raises(QueryError, match="limit is 200"):
        assemble_request(
            [Tool("Read"), Tool("mcp__a__x")],
            history,
            provider=AnthropicAdapter(server_search="regex"),
            settings=ON,
        )


def test_tools_list_rules() -> None:
    search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    deferred = {"name": "mcp__a__x", "input_schema": {"type": "object"}, "defer_loading": True}
    with pytest.raises(QueryError, match="cache_control"):
        check_tools([{**deferred, "cache_control": {"type": "ephemeral"}}], server_side=False)
    with pytest.raises(QueryError, match="at least one non-deferred"):
        check_tools([{**search, "defer_loading": True}, deferred], server_side=True)
    read = {"name": "Read", "input_schema": {"type": "object"}}
    with pytest.raises(QueryError, match="itself cannot be deferred"):
        check_tools([{**search, "defer_loading": True}, read, deferred], server_side=True)
    with pytest.raises(QueryError, match="exactly one search tool"):
        check_tools([deferred], server_side=True)
    check_tools([search, deferred], server_side=True)


def test_more_than_ten_thousand_deferred_tools_is_a_clear_error() -> None:
    pool = [Tool("Read")] + [Tool(f"mcp__big__t{i}") for i in range(MAX_DEFERRED_TOOLS + 1)]
    with pytest.raises(QueryError, match="at most 10000"):
        assemble_request(
            pool, [user_message("x")], provider=AnthropicAdapter(server_search="bm25"), settings=ON
        )
    # client-side search has no such limit: only discovered tools are sent
    request = assemble_request(pool, [user_message("x")], provider="anthropic", settings=ON)
    assert len(request.payload["tools"]) == 2


def test_openai_responses_payload_validates() -> None:
    requests, _ = conversation("openai")
    last = requests[-1].payload
    validate(ResponseCreateParamsNonStreaming, {"model": "gpt-x", **last})
    search_tools = [t for t in last["tools"] if t["type"] == "tool_search"]
    assert len(search_tools) == 1 and search_tools[0]["execution"] == "client"
    validate(responses_types.ToolSearchToolParam, search_tools[0])
    functions = [t for t in last["tools"] if t["type"] == "function"]
    for function in functions:
        validate(responses_types.FunctionToolParam, function)
    assert {f["name"] for f in functions if f.get("defer_loading")} == requests[-1].loaded
    calls = [i for i in last["input"] if i.get("type") == "tool_search_call"]
    outputs = [i for i in last["input"] if i.get("type") == "tool_search_output"]
    assert len(calls) == 3 and len(outputs) == 3
    for call in calls:
        validate(ToolSearchCall, call)
    for output in outputs:
        validate(responses_types.ResponseToolSearchOutputItemParamParam, output)
    assert {c["call_id"] for c in calls} == {o["call_id"] for o in outputs}
    loaded = [t["name"] for o in outputs for t in o["tools"]]
    assert "mcp__slack__send_message" in loaded
    assert all(t["defer_loading"] for o in outputs for t in o["tools"])
    texts = [i["content"] for i in last["input"] if i.get("role") == "user"]
    assert any("No matching deferred tools found" in t for t in texts)
    assert any("max_results must be between 1 and 100" in t for t in texts)
    assert not any(
        i.get("type") == "function_call" and i["name"] == "ToolSearch" for i in last["input"]
    )


def test_openai_with_search_off_renders_tool_search_calls_as_functions() -> None:
    _, history = conversation("openai")
    off = assemble_request(
        load_catalog("datasets/starter"),
        history,
        provider="openai",
        settings=ModeSettings(enable_tool_search="false"),
    )
    validate(ResponseCreateParamsNonStreaming, {"model": "gpt-x", **off.payload})
    assert not any(t["type"] == "tool_search" for t in off.payload["tools"])
    assert not any(i.get("type", "").startswith("tool_search") for i in off.payload["input"])
    outputs = [i["output"] for i in off.payload["input"] if i.get("type") == "function_call_output"]
    assert "[Tool references removed - tool search not enabled]" in outputs
    assert not any(t.get("defer_loading") for t in off.payload["tools"])


def test_plain_payload_validates_and_carries_schemas_as_text() -> None:
    requests, _ = conversation("plain")
    last = requests[-1].payload
    validate(CompletionCreateParamsNonStreaming, {"model": "any", **last})
    for tool in last["tools"]:
        validate(ChatCompletionToolParam, tool)
    for message in last["messages"]:
        validate(ChatCompletionMessageParam, message)
    assert last["messages"][0] == {"role": "system", "content": "You are helpful."}
    tool_messages = [m for m in last["messages"] if m["role"] == "tool"]
    loaded = [m for m in tool_messages if m["content"].startswith(LOADED_HEADER)]
    assert loaded
    definitions = [json.loads(line) for line in loaded[0]["content"].splitlines()[1:]]
    assert "mcp__slack__send_message" in [d["name"] for d in definitions]
    assert all("parameters" in d for d in definitions)
    # the runtime adds the discovered tools to the request, inline
    names = {t["function"]["name"] for t in last["tools"]}
    assert requests[-1].loaded <= names
    assert "defer_loading" not in json.dumps(last["tools"])
