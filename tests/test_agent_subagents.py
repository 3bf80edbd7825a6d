"""Subagent definitions and tool resolution (denylist → allowlist → disallowed).

The rules tested: docs/reference-behaviour.md §6.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.agent.assemble import assemble_request
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.pool import resolve_tools
from toolsearch.agent.subagents import load_agent, parse_agent
from toolsearch.engine import ToolSearch
from toolsearch.errors import ConfigError
from toolsearch.tool import Tool

ON = ModeSettings()


def names(tools: object) -> list[str]:
    return [t.name for t in tools]  # type: ignore[attr-defined]


def test_markdown_front_matter(tmp_path: Path) -> None:
    path = tmp_path / "triage.md"
    path.write_text(
        "---\nname: triage\ndescription: Files issues\ntools: ToolSearch, Read, mcp__github\n"
        "disallowedTools: mcp__github__delete_repo\nmodel: sonnet\ncolor: blue\n---\n"
        "You triage bug reports.\n"
    )
    agent = load_agent(path)
    assert agent.name == "triage"
    assert agent.description == "Files issues"
    assert [r.text for r in agent.tools or ()] == ["ToolSearch", "Read", "mcp__github"]
    assert [r.text for r in agent.disallowed_tools] == ["mcp__github__delete_repo"]
    assert agent.prompt == "You triage bug reports."
    assert agent.model == "sonnet"
    assert agent.metadata == {"color": "blue"}
    assert agent.source == str(path)


def test_yaml_and_toml(tmp_path: Path) -> None:
    yaml_path = tmp_path / "a.yaml"
    yaml_path.write_text(
        "name: a\ntools: [ToolSearch, 'mcp__slack__*']\ndisallowed_tools: [Bash]\nprompt: hi\n"
    )
    toml_path = tmp_path / "a.toml"
    toml_path.write_text(
        'name = "a"\ntools = ["ToolSearch", "mcp__slack__*"]\ndisallowed_tools = ["Bash"]\n'
        'prompt = "hi"\n'
    )
    a, b = load_agent(yaml_path), load_agent(toml_path)
    assert (a.name, a.prompt) == (b.name, b.prompt) == ("a", "hi")
    assert [r.text for r in a.tools or ()] == [r.text for r in b.tools or ()]
    assert [r.text for r in a.disallowed_tools] == ["Bash"]


@pytest.mark.parametrize("tools", [None, "*", ["*"]])
def test_absent_or_star_allows_everything(tools: object) -> None:
    data: dict[str, object] = {"name": "x"}
    if tools is not None:
        data["tools"] = tools
    assert parse_agent(data).tools is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "'name' is required"),
        ({"name": ""}, "'name' is required"),
        ({"name": "x", "tools": 3}, "'tools' must be a list"),
        ({"name": "x", "tools": ["*", "Read"]}, "mixes '\\*'"),
        ({"name": "x", "tools": ["mcp__a*"]}, "'tools'"),
        ({"name": "x", "disallowed_tools": [1]}, "entries must be strings"),
        ({"name": "x", "disallowed_tools": [], "disallowedTools": []}, "only one of"),
        ({"name": "x", "description": 5}, "'description' must be a string"),
        ({"name": "x", "model": 5}, "'model' must be a string"),
    ],
)
def test_bad_definitions_are_clear_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_agent(data, source="agent.yaml")


def test_bad_files(tmp_path: Path) -> None:
    (tmp_path / "no_front.md").write_text("name: x\n")
    (tmp_path / "open.md").write_text("---\nname: x\n")
    (tmp_path / "bad.toml").write_text("name = \n")
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    (tmp_path / "x.json").write_text("{}")
    (tmp_path / "both.md").write_text("---\nname: x\nprompt: p\n---\nbody\n")
    for name, message in [
        ("no_front.md", "must start with a '---'"),
        ("open.md", "no closing '---'"),
        ("bad.toml", "invalid TOML"),
        ("bad.yaml", "invalid YAML"),
        ("x.json", "unknown agent file type"),
        ("both.md", "both as 'prompt' and as the body"),
        ("missing.md", "cannot read"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_agent(tmp_path / name)


POOL = [
    Tool("Read"),
    Tool("Bash"),
    Tool("mcp__github__create_issue", "Create an issue"),
    Tool("mcp__github__delete_repo", "Delete a repository"),
    Tool("mcp__slack__send_message", "Send a message"),
    Tool("mcp__slack__read_channel", "Read a channel"),
]


def test_resolution_order_denylist_allowlist_disallowed() -> None:
    agent = parse_agent(
        {
            "name": "x",
            "tools": ["ToolSearch", "Read", "Bash", "mcp__github", "mcp__linear"],
            "disallowed_tools": ["mcp__github__delete_repo"],
        }
    )
    resolved = resolve_tools(POOL, deny=["Bash"], agent=agent)
    assert names(resolved.tools) == ["Read", "ToolSearch", "mcp__github__create_issue"]
    assert resolved.denied == ("Bash",)
    assert set(resolved.excluded) == {
        "mcp__github__delete_repo",
        "mcp__slack__read_channel",
        "mcp__slack__send_message",
    }
    # Bash is denied globally: the allowlist cannot bring it back
    assert "Bash" in resolved.unknown and "mcp__linear" in resolved.unknown


def test_allowlist_cannot_override_the_denylist() -> None:
    agent = parse_agent({"name": "x", "tools": ["mcp__github__delete_repo", "ToolSearch"]})
    resolved = resolve_tools(POOL, deny=["mcp__github__*"], agent=agent)
    assert names(resolved.tools) == ["ToolSearch"]


def test_search_inside_a_subagent_covers_only_its_pool() -> None:
    agent = parse_agent({"name": "x", "tools": ["ToolSearch", "mcp__slack"]})
    resolved = resolve_tools(POOL, agent=agent)
    engine = ToolSearch(resolved.tools, backend="keyword")
    assert engine.search("create issue").names == []
    assert engine.search("select:mcp__github__create_issue").names == []
    assert engine.search("mcp__github").names == []
    assert engine.search("send message").names[0] == "mcp__slack__send_message"
    request = assemble_request(resolved, [{"role": "user", "content": "hi"}], settings=ON)
    assert request.search_enabled
    assert "mcp__github__create_issue" not in (request.announcement or "")
    assert "mcp__slack__send_message" in (request.announcement or "")


def test_subagent_without_tool_search_gets_its_tools_inline() -> None:
    agent = parse_agent({"name": "x", "tools": "mcp__slack"})
    request = assemble_request(
        POOL, [{"role": "user", "content": "hi"}], agent=agent, settings=ON, provider="anthropic"
    )
    assert not request.search_enabled
    assert "ToolSearch" in request.decision.reason
    assert request.tool_names == ["mcp__slack__read_channel", "mcp__slack__send_message"]
    assert all("defer_loading" not in t for t in request.payload["tools"])
    assert request.announcement is None
