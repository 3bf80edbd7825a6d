"""The discovered set comes from the history and survives compaction.

The rules tested: docs/reference-behaviour.md §5.
"""

from __future__ import annotations

import pytest

from toolsearch.agent.announce import announced_names
from toolsearch.agent.assemble import assemble_request
from toolsearch.agent.clients import ScriptedClient
from toolsearch.agent.loop import AgentLoop, echo_runner
from toolsearch.agent.messages import (
    DELTA_KIND,
    HistoryError,
    Message,
    assistant_message,
    meta_kind,
    reference_block,
    text_block,
    tool_result_block,
    tool_use_block,
    user_message,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.state import compact, discovered_tools, last_boundary_index
from toolsearch.tool import Tool

ON = ModeSettings()


def search_turn(call_id: str, names: list[str]) -> list[Message]:
    return [
        assistant_message([tool_use_block(call_id, "ToolSearch", {"query": "x"})]),
        user_message([tool_result_block(call_id, [reference_block(n) for n in names])]),
    ]


def test_discovered_are_the_names_in_tool_reference_blocks() -> None:
    history = [user_message("hi"), *search_turn("a", ["mcp__x__one", "mcp__x__two"])]
    history.append(user_message([tool_result_block("b", [text_block("mcp__x__three")])]))
    assert discovered_tools(history) == {"mcp__x__one", "mcp__x__two"}


def test_server_side_search_results_count_too() -> None:
    history = [
        user_message("hi"),
        assistant_message(
            [
                {
                    "type": "server_tool_use",
                    "id": "s",
                    "name": "tool_search_tool_bm25",
                    "input": {},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "s",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [reference_block("mcp__x__one")],
                    },
                },
            ]
        ),
    ]
    assert discovered_tools(history) == {"mcp__x__one"}


def test_compaction_boundary_carries_the_discovered_set() -> None:
    history = [user_message("hi"), *search_turn("a", ["mcp__x__one"])]
    compacted = compact(history, "We loaded one tool.")
    assert len(compacted) == 1
    assert compacted[0]["content"] == "We loaded one tool."
    assert compacted[0]["toolsearch"]["discovered_tools"] == ["mcp__x__one"]
    assert discovered_tools(compacted) == {"mcp__x__one"}
    assert last_boundary_index(compacted) == 0
    assert history[1]["content"][0]["type"] == "tool_use"  # input not mutated


def test_compaction_keeps_the_tail_without_splitting_calls_from_results() -> None:
    history = [
        user_message("hi"),
        *search_turn("a", ["mcp__x__one"]),
        *search_turn("b", ["mcp__x__two"]),
    ]
    compacted = compact(history, "summary", keep_last=1)
    # the last message holds results: its call comes along
    assert [m["role"] for m in compacted] == ["user", "assistant", "user"]
    assert compacted[1]["content"][0]["id"] == "b"
    assert discovered_tools(compacted) == {"mcp__x__one", "mcp__x__two"}


def test_compaction_drops_old_deltas_so_the_next_request_re_announces() -> None:
    pool = [Tool("mcp__x__one"), Tool("mcp__x__two")]
    history: list[Message] = [user_message("hi")]
    first = assemble_request(pool, history, settings=ON)
    history.extend(first.persist)
    assert first.delta is not None and first.delta.added == ("mcp__x__one", "mcp__x__two")
    assert assemble_request(pool, history, settings=ON).delta.is_empty  # type: ignore[union-attr]
    compacted = compact(history, "summary", keep_last=2)
    assert not any(meta_kind(m) == DELTA_KIND for m in compacted)
    assert announced_names(compacted) == frozenset()
    again = assemble_request(pool, compacted, settings=ON)
    assert again.delta is not None and again.delta.added == ("mcp__x__one", "mcp__x__two")


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_summary_is_an_error(bad: str) -> None:
    with pytest.raises(HistoryError, match="non-empty"):
        compact([user_message("hi")], bad)


def test_bad_keep_last_is_an_error() -> None:
    with pytest.raises(HistoryError, match="keep_last"):
        compact([user_message("hi")], "s", keep_last=-1)


def test_long_conversation_compacted_several_times_keeps_discovered_tools() -> None:
    servers = ["slack", "github", "linear", "notion", "sentry"]
    pool = [Tool(f"mcp__{s}__do_{i}", f"{s} action {i}") for s in servers for i in range(3)]
    pool.append(Tool("Read", "read a file", always_load=True))
    history: list[Message] = [user_message("start")]
    expected: set[str] = set()
    for round_index, server in enumerate(servers):
        name = f"mcp__{server}__do_{round_index % 3}"
        steps = [
            assistant_message(
                [tool_use_block(f"s{round_index}", "ToolSearch", {"query": f"select:{name}"})]
            ),
            assistant_message([tool_use_block(f"c{round_index}", name, {"n": round_index})]),
            *[
                assistant_message([tool_use_block(f"r{round_index}_{k}", "Read", {"k": k})])
                for k in range(3)
            ],
            assistant_message("done"),
        ]
        loop = AgentLoop(
            ScriptedClient(steps), pool, runner=echo_runner, backend="keyword", settings=ON
        )
        history.append(user_message(f"task {round_index}"))
        result = loop.run(history)
        history = result.messages
        rejected = [c for t in result.turns for c in t.calls if c.kind == "rejected"]
        assert not rejected
        expected.add(name)
        assert discovered_tools(history) == expected
        # compact after every round, keeping a short tail
        history = compact(history, f"summary after round {round_index}", keep_last=2)
        assert discovered_tools(history) == expected
        request = assemble_request(pool, history, settings=ON)
        assert request.loaded == expected
        assert set(request.tool_names) >= expected
        # a tool discovered before any compaction is still callable without a new search
        first = f"mcp__{servers[0]}__do_0"
        check = AgentLoop(
            ScriptedClient([assistant_message([tool_use_block("z", first, {})])], final_text="ok"),
            pool,
            runner=echo_runner,
            backend="keyword",
            settings=ON,
        ).run([*history, user_message("again")])
        assert check.turns[0].calls[0].kind == "tool"
    assert (
        sum(1 for m in history if m.get("toolsearch", {}).get("kind") == "compaction_boundary") == 1
    )
