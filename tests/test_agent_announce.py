"""Announcing deferred names: the block, persisted deltas, re-announce, cache prefix.

The rules tested: docs/reference-behaviour.md §5.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from toolsearch.agent.announce import (
    Delta,
    announced_names,
    announcement_block,
    compute_delta,
    delta_message,
)
from toolsearch.agent.assemble import assemble_request
from toolsearch.agent.clients import ScriptedClient
from toolsearch.agent.loop import AgentLoop, echo_runner
from toolsearch.agent.messages import (
    Message,
    assistant_message,
    tool_use_block,
    user_message,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.state import compact
from toolsearch.tool import Tool

ON = ModeSettings()


def test_block_is_sorted_names_one_a_line() -> None:
    assert announcement_block(["mcp__b__x", "Alpha", "mcp__a__y", "Alpha"]) == (
        "<available-deferred-tools>\nAlpha\nmcp__a__y\nmcp__b__x\n</available-deferred-tools>"
    )


def test_block_style_prepends_the_block_to_each_request() -> None:
    pool = [Tool("mcp__s__b"), Tool("mcp__s__a")]
    history = [user_message("hi")]
    request = assemble_request(pool, history, settings=ON, announce="block")
    assert request.messages[0]["content"] == announcement_block(["mcp__s__a", "mcp__s__b"])
    assert request.persist == ()
    assert request.payload["messages"][0]["content"].startswith("<available-deferred-tools>")


def test_delta_added_and_removed_since_earlier_deltas() -> None:
    history: list[Message] = [user_message("hi")]
    first = compute_delta(history, ["b", "a"])
    assert first == Delta(("a", "b"), ())
    history.append(delta_message(first))
    assert announced_names(history) == {"a", "b"}
    assert compute_delta(history, ["a", "b"]).is_empty
    second = compute_delta(history, ["a", "c"])
    assert second == Delta(("c",), ("b",))
    history.append(delta_message(second))
    assert announced_names(history) == {"a", "c"}
    text = delta_message(second)["content"]
    assert "<available-deferred-tools>\nc\n</available-deferred-tools>" in text
    assert "<removed-deferred-tools>\nb\n</removed-deferred-tools>" in text


def test_delta_is_persisted_and_not_repeated() -> None:
    pool = [Tool("mcp__s__a")]
    history: list[Message] = [user_message("hi")]
    first = assemble_request(pool, history, settings=ON)
    assert len(first.persist) == 1
    assert first.messages[-1] == first.persist[0]
    history.extend(first.persist)
    second = assemble_request(pool, history, settings=ON)
    assert second.persist == ()
    assert second.announcement is None


def test_removed_when_a_server_leaves_the_pool() -> None:
    history: list[Message] = [user_message("hi")]
    first = assemble_request([Tool("mcp__s__a"), Tool("mcp__t__b")], history, settings=ON)
    history.extend(first.persist)
    second = assemble_request([Tool("mcp__s__a")], history, settings=ON)
    assert second.delta == Delta((), ("mcp__t__b",))


def test_full_re_announce_after_compaction() -> None:
    pool = [Tool("mcp__s__a"), Tool("mcp__s__b")]
    history: list[Message] = [user_message("hi")]
    history.extend(assemble_request(pool, history, settings=ON).persist)
    history = compact(history, "summary")
    request = assemble_request(pool, history, settings=ON)
    assert request.delta == Delta(("mcp__s__a", "mcp__s__b"), ())


def test_no_announcement_when_search_is_off() -> None:
    pool = [Tool("mcp__s__a")]
    history: list[Message] = [user_message("hi")]
    history.extend(assemble_request(pool, history, settings=ON).persist)
    off = assemble_request(pool, history, settings=ModeSettings(enable_tool_search="false"))
    assert off.announcement is None
    assert all("available-deferred-tools" not in json.dumps(m) for m in off.payload["messages"])


def _dumps(messages: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in messages]


@pytest.mark.parametrize("provider", ["anthropic", "openai", "plain"])
def test_with_deltas_the_request_prefix_stays_byte_identical(provider: str) -> None:
    names = [f"mcp__srv__tool_{i}" for i in range(6)]
    pool = [Tool(n, f"does thing {i}") for i, n in enumerate(names)]
    pool.append(Tool("Read", "read a file", always_load=True))
    steps = [
        assistant_message([tool_use_block("s1", "ToolSearch", {"query": f"select:{names[0]}"})]),
        assistant_message([tool_use_block("c1", names[0], {})]),
        assistant_message([tool_use_block("s2", "ToolSearch", {"query": f"select:{names[3]}"})]),
        assistant_message([tool_use_block("c2", names[3], {})]),
        assistant_message("done"),
    ]
    client = ScriptedClient(steps, provider=provider)
    loop = AgentLoop(client, pool, runner=echo_runner, backend="keyword", settings=ON)
    result = loop.run("use two tools")
    key = "input" if provider == "openai" else "messages"
    rendered = [_dumps(r.payload[key]) for r in client.requests]
    for earlier, later in itertools.pairwise(rendered):
        assert later[: len(earlier)] == earlier
    # the non-deferred part of the tool list never changed while tools were discovered
    plain = [[t for t in r.payload["tools"] if not t.get("defer_loading")] for r in client.requests]
    if provider == "plain":
        plain = [r.payload["tools"][:2] for r in client.requests]
    assert all(p == plain[0] for p in plain)
    assert result.discovered == {names[0], names[3]}
    assert [len(r.persist) for r in client.requests] == [1, 0, 0, 0, 0]


def test_block_style_rewrites_the_prefix_when_the_pool_changes() -> None:
    history: list[Message] = [user_message("hi")]
    before = assemble_request([Tool("mcp__s__a")], history, settings=ON, announce="block")
    after = assemble_request(
        [Tool("mcp__s__a"), Tool("mcp__t__b")], history, settings=ON, announce="block"
    )
    assert _dumps(before.payload["messages"])[0] != _dumps(after.payload["messages"])[0]
    history_delta: list[Message] = [user_message("hi")]
    first = assemble_request([Tool("mcp__s__a")], history_delta, settings=ON)
    history_delta.extend(first.persist)
    second = assemble_request([Tool("mcp__s__a"), Tool("mcp__t__b")], history_delta, settings=ON)
    assert _dumps(second.payload["messages"])[0] == _dumps(first.payload["messages"])[0]
