"""History hygiene: stripping with the placeholders, the sibling, the select hint.

The rules tested: docs/reference-behaviour.md §5.
"""

from __future__ import annotations

import copy

from toolsearch.agent.clients import ScriptedClient
from toolsearch.agent.hygiene import (
    SEARCH_OFF_TEXT,
    TOOL_LOADED_TEXT,
    UNAVAILABLE_TEXT,
    call_error,
    clean_history,
    not_loaded_hint,
)
from toolsearch.agent.loop import AgentLoop
from toolsearch.agent.messages import (
    Message,
    assistant_message,
    reference_block,
    text_block,
    tool_result_block,
    tool_use_block,
    user_message,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.tool import Tool

ON = ModeSettings()


def history(*names: str, extra: list[dict[str, object]] | None = None) -> list[Message]:
    content = [reference_block(n) for n in names] + (extra or [])
    return [
        user_message("hi"),
        assistant_message([tool_use_block("s", "ToolSearch", {"query": "q"})]),
        user_message([tool_result_block("s", content)]),
    ]


def test_search_off_strips_every_reference_with_the_placeholder() -> None:
    cleaned = clean_history(
        history("mcp__a__x", "mcp__a__y"), search_enabled=False, pool_names={"mcp__a__x"}
    )
    result = cleaned[2]["content"][0]
    assert result["content"] == [text_block(SEARCH_OFF_TEXT)]
    assert SEARCH_OFF_TEXT == "[Tool references removed - tool search not enabled]"
    assert TOOL_LOADED_TEXT not in str(cleaned[2])


def test_references_to_tools_that_left_the_pool_are_stripped() -> None:
    cleaned = clean_history(history("mcp__gone__x"), search_enabled=True, pool_names={"Read"})
    assert cleaned[2]["content"][0]["content"] == [text_block(UNAVAILABLE_TEXT)]
    assert UNAVAILABLE_TEXT == "[Tool references removed - tools no longer available]"


def test_partial_strip_keeps_the_rest_without_a_placeholder() -> None:
    cleaned = clean_history(
        history("mcp__a__x", "mcp__gone__y"), search_enabled=True, pool_names={"mcp__a__x"}
    )
    assert cleaned[2]["content"][0]["content"] == [reference_block("mcp__a__x")]


def test_emptied_result_with_other_text_keeps_the_text_only() -> None:
    cleaned = clean_history(
        history("mcp__a__x", extra=[text_block("note")]), search_enabled=False, pool_names=set()
    )
    assert cleaned[2]["content"][0]["content"] == [text_block("note")]


def test_a_result_with_references_gets_a_sibling_never_inside() -> None:
    cleaned = clean_history(history("mcp__a__x"), search_enabled=True, pool_names={"mcp__a__x"})
    content = cleaned[2]["content"]
    assert content[0]["type"] == "tool_result"
    assert content[1] == text_block(TOOL_LOADED_TEXT)
    assert all(b["type"] == "tool_reference" for b in content[0]["content"])
    # idempotent: a second pass does not add another
    assert clean_history(cleaned, search_enabled=True, pool_names={"mcp__a__x"}) == cleaned


def test_sibling_goes_after_the_last_result_and_goes_away_with_the_references() -> None:
    calls = assistant_message(
        [tool_use_block("s", "ToolSearch", {"query": "q"}), tool_use_block("t", "Read", {})]
    )
    message = user_message(
        [
            tool_result_block("s", [reference_block("mcp__a__x")]),
            tool_result_block("t", "plain"),
            text_block("and a user note"),
        ]
    )
    cleaned = clean_history([calls, message], search_enabled=True, pool_names={"mcp__a__x"})
    assert [b.get("text") or b["type"] for b in cleaned[1]["content"]] == [
        "tool_result",
        "tool_result",
        TOOL_LOADED_TEXT,
        "and a user note",
    ]
    off = clean_history(cleaned, search_enabled=False, pool_names=set())
    assert TOOL_LOADED_TEXT not in [b.get("text") for b in off[1]["content"]]


def test_server_side_blocks_are_dropped_unless_the_request_uses_them() -> None:
    assistant = assistant_message(
        [
            {
                "type": "server_tool_use",
                "id": "s",
                "name": "tool_search_tool_regex",
                "input": {"pattern": "x"},
            },
            {
                "type": "tool_search_tool_result",
                "tool_use_id": "s",
                "content": {
                    "type": "tool_search_tool_search_result",
                    "tool_references": [reference_block("mcp__a__x"), reference_block("mcp__b__y")],
                },
            },
            text_block("found it"),
        ]
    )
    client_side = clean_history([assistant], search_enabled=True, pool_names={"mcp__a__x"})
    assert client_side[0]["content"] == [text_block("found it")]
    server = clean_history(
        [assistant], search_enabled=True, pool_names={"mcp__a__x"}, server_side=True
    )
    refs = server[0]["content"][1]["content"]["tool_references"]
    assert refs == [reference_block("mcp__a__x")]


def test_inputs_are_never_mutated() -> None:
    original = history("mcp__a__x", "mcp__gone__y")
    snapshot = copy.deepcopy(original)
    clean_history(original, search_enabled=False, pool_names=set())
    clean_history(original, search_enabled=True, pool_names={"mcp__a__x"})
    assert original == snapshot


def test_call_error_rules() -> None:
    pool = {t.name: t for t in [Tool("Read"), Tool("mcp__a__x"), Tool("ToolSearch")]}
    assert call_error("Read", pool=pool, loaded=set(), search_enabled=True) is None
    assert call_error("mcp__a__x", pool=pool, loaded={"mcp__a__x"}, search_enabled=True) is None
    assert call_error("mcp__a__x", pool=pool, loaded=set(), search_enabled=True) == not_loaded_hint(
        "mcp__a__x"
    )
    assert call_error("mcp__a__x", pool=pool, loaded=set(), search_enabled=False) is None
    assert "No such tool" in str(call_error("Nope", pool=pool, loaded=set(), search_enabled=True))
    assert "No such tool" in str(
        call_error("ToolSearch", pool=pool, loaded=set(), search_enabled=False)
    )


def test_never_loaded_deferred_tool_fails_with_the_select_hint() -> None:
    calls: list[str] = []

    def runner(call: object, tool: Tool) -> str:
        calls.append(tool.name)
        return "ok"

    steps = [
        assistant_message([tool_use_block("c1", "mcp__a__x", {})]),
        assistant_message([tool_use_block("s1", "ToolSearch", {"query": "select:mcp__a__x"})]),
        assistant_message([tool_use_block("c2", "mcp__a__x", {})]),
    ]
    loop = AgentLoop(
        ScriptedClient(steps, final_text="done"),
        [Tool("mcp__a__x", "does x")],
        runner=runner,
        backend="keyword",
        settings=ON,
    )
    result = loop.run("go")
    first = result.turns[0].calls[0]
    assert first.kind == "rejected"
    assert first.result["is_error"] is True
    assert "select:mcp__a__x" in first.result["content"]
    assert calls == ["mcp__a__x"]  # only after loading
