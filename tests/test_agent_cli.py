"""``toolsearch request``, ``toolsearch demo`` and the agent options of ``toolsearch search``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolsearch.cli import main
from toolsearch.cli.demo import default_catalog, example_arguments

STARTER = str(Path(__file__).resolve().parents[1] / "datasets" / "starter")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENABLE_TOOL_SEARCH", "TOOLSEARCH_DISABLE_TOOL_SEARCH", "TOOLSEARCH_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def test_request_prints_tools_and_announcement(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "request", "--catalog", STARTER)
    assert data["tool_search"]["enabled"] is True
    assert [t["name"] for t in data["tools"]] == ["Bash", "Edit", "Read", "ToolSearch"]
    lines = data["announcement"].splitlines()
    assert lines[0] == "<available-deferred-tools>" and lines[-1] == "</available-deferred-tools>"
    assert "mcp__slack__send_message" in lines
    assert data["delta"]["added"] == lines[1:-1]


def test_request_with_deny_agent_and_history(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    agent = tmp_path / "agent.md"
    agent.write_text("---\nname: chat\ntools: ToolSearch, Read, mcp__slack, mcp__github\n---\nHi\n")
    history = tmp_path / "history.json"
    history.write_text(
        json.dumps(
            [
                {"role": "user", "content": "send"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "s",
                            "name": "ToolSearch",
                            "input": {"query": "q"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "s",
                            "content": [
                                {"type": "tool_reference", "tool_name": "mcp__slack__send_message"},
                                {
                                    "type": "tool_reference",
                                    "tool_name": "mcp__github__create_issue",
                                },
                            ],
                        }
                    ],
                },
            ]
        )
    )
    data = run_json(
        capsys,
        "request", "--catalog", STARTER, "--deny", "mcp__github__*", "--agent", str(agent),
        "--history", str(history), "--messages",
    )  # fmt: skip
    names = [t["name"] for t in data["tools"]]
    assert names == ["Read", "ToolSearch", "mcp__slack__send_message"]
    assert data["tools"][-1]["defer_loading"] is True
    assert data["discovered"] == ["mcp__slack__send_message"]
    assert "mcp__github" not in data["announcement"]
    assert data["pool"]["agent"] == "chat"
    assert "mcp__github__create_issue" in data["pool"]["denied"]
    refs = data["messages"][2]["content"][0]["content"]
    assert refs == [{"type": "tool_reference", "tool_name": "mcp__slack__send_message"}]
    assert data["messages"][2]["content"][1] == {"type": "text", "text": "Tool loaded."}


@pytest.mark.parametrize("provider", ["openai", "plain"])
def test_request_other_providers(capsys: pytest.CaptureFixture[str], provider: str) -> None:
    data = run_json(capsys, "request", "--catalog", STARTER, "--provider", provider)
    assert data["provider"] == provider
    if provider == "openai":
        assert {"type", "execution"} <= set(data["tools"][-1])
        assert data["tools"][-1]["execution"] == "client"
    else:
        assert data["tools"][-1]["function"]["name"] == "ToolSearch"


def test_request_search_off_and_server_side(capsys: pytest.CaptureFixture[str]) -> None:
    off = run_json(capsys, "request", "--catalog", STARTER, "--mode", "false")
    assert off["tool_search"]["enabled"] is False
    assert len(off["tools"]) == 22 and off["announcement"] is None
    server = run_json(capsys, "request", "--catalog", STARTER, "--server-search", "bm25")
    assert server["tools"][0] == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }
    assert sum(1 for t in server["tools"] if t.get("defer_loading")) == 19


def test_request_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["request", "--catalog", STARTER, "--deny", "mcp__x*"]) == 2
    assert "invalid rule" in capsys.readouterr().err
    bad = tmp_path / "h.json"
    bad.write_text('[{"role": "robot", "content": "x"}]')
    assert main(["request", "--catalog", STARTER, "--history", str(bad)]) == 2
    assert "role must be" in capsys.readouterr().err
    assert (
        main(["request", "--catalog", STARTER, "--provider", "openai", "--server-search", "regex"])
        == 2
    )
    assert "--server-search applies only" in capsys.readouterr().err


def test_search_with_deny_and_agent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = run_json(capsys, "search", "send message", "--catalog", STARTER, "--backend", "keyword",
                    "--deny", "mcp__slack", "--json")  # fmt: skip
    assert all(not m["name"].startswith("mcp__slack__") for m in data["matches"])
    name = "mcp__slack__send_message"
    selected = run_json(capsys, "search", f"select:{name}", "--catalog", STARTER,
                        "--backend", "keyword", "--deny", name, "--json")  # fmt: skip
    assert selected["matches"] == []
    agent = tmp_path / "a.yaml"
    agent.write_text("name: gh\ntools: [ToolSearch, mcp__github]\n")
    scoped = run_json(capsys, "search", "send message", "--catalog", STARTER, "--backend",
                      "keyword", "--agent", str(agent), "--json")  # fmt: skip
    assert all(m["name"].startswith("mcp__github__") for m in scoped["matches"])
    assert scoped["total_deferred_tools"] == 4
    no_search = tmp_path / "b.yaml"
    no_search.write_text("name: plain\ntools: [mcp__github]\n")
    assert main(["search", "x", "--catalog", STARTER, "--agent", str(no_search)]) == 2
    assert "tool search is off" in capsys.readouterr().err


def test_demo_measures_the_saving(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "demo", "--catalog", STARTER, "--backend", "keyword", "--json")
    turns = data["turns"]
    assert len(turns) == 12
    assert turns[0]["action"].startswith("ToolSearch(")
    assert turns[1]["action"].startswith("call mcp__")
    for turn in turns:
        assert turn["request_tokens"] < turn["request_tokens_without_search"]
        assert turn["tools_sent"] < turn["tools_without_search"]
    assert data["totals"]["saved_tokens"] == sum(
        t["request_tokens_without_search"] - t["request_tokens"] for t in turns
    )
    assert turns[-1]["discovered"]


def test_demo_table_and_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["demo", "--catalog", STARTER, "--backend", "keyword", "--task", "create issue"]) == 0
    )
    out = capsys.readouterr().out
    assert "ToolSearch(" in out  # the table may wrap in a narrow terminal
    assert "saved" in out
    assert "mcp__github__create_issue" in out


def test_default_catalog_and_example_arguments() -> None:
    assert (default_catalog() / "tools.jsonl").is_file()
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer"},
            "c": {"type": ["null", "boolean"]},
            "d": {"enum": ["x", "y"]},
            "e": {"type": "array"},
        },
        "required": ["a", "b", "c", "d", "e"],
    }
    assert example_arguments(schema) == {"a": "example", "b": 1, "c": True, "d": "x", "e": []}
