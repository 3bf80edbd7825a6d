"""Request assembly: which tools a request carries, and the history it is given.

The rules tested: docs/reference-behaviour.md §5.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from toolsearch.agent.assemble import assemble_request, select_tools
from toolsearch.agent.messages import (
    HistoryError,
    Message,
    assistant_message,
    load_history,
    reference_block,
    tool_result_block,
    tool_use_block,
    user_message,
    validate_history,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.pool import resolve_tools
from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

ON = ModeSettings()
OFF = ModeSettings(enable_tool_search="false")
POOL = [
    Tool("Read", "read", always_load=True),
    Tool("Bash", "run"),
    Tool("NotebookEdit", "edit notebooks", should_defer=True),
    Tool("mcp__s__one", "one"),
    Tool("mcp__s__two", "two"),
]


def loaded(*names: str) -> list[Message]:
    return [
        user_message("hi"),
        assistant_message([tool_use_block("s", "ToolSearch", {"query": "q"})]),
        user_message([tool_result_block("s", [reference_block(n) for n in names])]),
    ]


def test_on_sends_non_deferred_tool_search_and_discovered_deferred() -> None:
    request = assemble_request(POOL, loaded("mcp__s__two"), settings=ON)
    assert [(s.name, s.defer_loading) for s in request.tools] == [
        ("Bash", False),
        ("Read", False),
        ("ToolSearch", False),
        ("mcp__s__two", True),
    ]
    assert request.loaded == {"mcp__s__two"}


def test_undiscovered_deferred_tools_are_not_sent() -> None:
    request = assemble_request(POOL, [user_message("hi")], settings=ON)
    assert "NotebookEdit" not in request.tool_names
    assert not any(s.defer_loading for s in request.tools)


def test_off_drops_tool_search_and_sends_everything_plainly() -> None:
    request = assemble_request(POOL, loaded("mcp__s__two"), settings=OFF)
    assert request.tool_names == ["Bash", "NotebookEdit", "Read", "mcp__s__one", "mcp__s__two"]
    assert not any(s.defer_loading for s in request.tools)
    assert "defer_loading" not in json.dumps(request.payload["tools"])
    result = request.payload["messages"][2]["content"][0]
    assert result["content"] == [
        {"type": "text", "text": "[Tool references removed - tool search not enabled]"}
    ]


def test_discovered_tools_that_left_the_pool_are_not_sent() -> None:
    request = assemble_request(POOL[:3], loaded("mcp__s__two"), settings=ON)
    assert "mcp__s__two" not in request.tool_names
    assert request.loaded == frozenset()
    assert request.discovered == {"mcp__s__two"}  # still in the history, just not present


def test_select_tools_server_side_sends_every_deferred_tool() -> None:
    pool = resolve_tools(POOL)
    sent = select_tools(pool, set(), enabled=True, server_side=True)
    assert [s.name for s in sent if s.defer_loading] == [
        "NotebookEdit",
        "mcp__s__one",
        "mcp__s__two",
    ]
    assert "ToolSearch" not in [s.name for s in sent]


def test_an_own_tool_search_tool_is_kept() -> None:
    custom = Tool("ToolSearch", "my own search", always_load=True)
    request = assemble_request([*POOL, custom], [user_message("hi")], settings=ON)
    assert request.pool.get("ToolSearch") is custom


def test_history_is_not_mutated_and_persist_is_returned() -> None:
    history = loaded("mcp__s__one")
    snapshot = copy.deepcopy(history)
    request = assemble_request(POOL, history, settings=ON)
    assert history == snapshot
    assert len(request.persist) == 1 and request.messages[-1] == request.persist[0]


def test_delta_messages_are_not_sent_while_search_is_off() -> None:
    history: list[Message] = [user_message("hi")]
    history.extend(assemble_request(POOL, history, settings=ON).persist)
    off = assemble_request(POOL, history, settings=OFF)
    assert len(off.messages) == 1


def test_system_prompt_and_bad_arguments() -> None:
    request = assemble_request(POOL, [user_message("hi")], settings=ON, system="Be terse.")
    assert request.payload["system"] == "Be terse."
    with pytest.raises(ConfigError, match="announce"):
        assemble_request(POOL, [], settings=ON, announce="loud")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="resolved pool"):
        assemble_request(resolve_tools(POOL), [], settings=ON, deny=["Bash"])
    with pytest.raises(ConfigError, match="unknown provider"):
        assemble_request(POOL, [], settings=ON, provider="gemini")


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([3], "expected an object"),
        ([{"role": "robot", "content": "x"}], "role must be"),
        ([{"role": "user", "content": 5}], "content must be"),
        ([{"role": "user", "content": [{"text": "x"}]}], "string 'type'"),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}],
                }
            ],
            "assistant",
        ),
        ([{"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]}], "needs 'name'"),
        ([{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]}], "user"),
        (
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "a",
                            "content": [{"type": "tool_reference"}],
                        }
                    ],
                }
            ],
            "tool_name",
        ),
        ([{"role": "user", "content": "x", "toolsearch": 1}], "'toolsearch' must be"),
    ],
)
def test_bad_histories_name_the_message(history: list[object], message: str) -> None:
    with pytest.raises(HistoryError, match=message):
        validate_history(history)


def test_load_history_json_and_jsonl(tmp_path: Path) -> None:
    messages = loaded("mcp__s__one")
    array = tmp_path / "h.json"
    array.write_text(json.dumps(messages))
    lines = tmp_path / "h.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in messages))
    wrapped = tmp_path / "w.json"
    wrapped.write_text(json.dumps({"messages": messages}))
    empty = tmp_path / "e.json"
    empty.write_text("")
    assert (
        load_history(str(array))
        == load_history(str(lines))
        == load_history(str(wrapped))
        == messages
    )
    assert load_history(str(empty)) == []
    broken = tmp_path / "b.json"
    broken.write_text("[{")
    with pytest.raises(HistoryError, match="invalid JSON"):
        load_history(str(broken))
    with pytest.raises(HistoryError, match="cannot read"):
        load_history(str(tmp_path / "missing.json"))
