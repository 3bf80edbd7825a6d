"""Permissions as properties (docs/reference-behaviour.md §6): a denied tool has no path back.

For random pools, deny rules, subagent lists and queries, a tool removed by permissions or
scoping is never announced (block or delta), found by keyword search, ``select:``, exact name
or ``mcp__`` prefix, sent in any provider's request (tools, loaded search outputs, plain-text
schemas), kept as a reference in the history, or run by the loop — even when the model names
it directly or the history loaded it before the rule existed.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolsearch.agent.assemble import assemble_request
from toolsearch.agent.clients import ScriptedClient
from toolsearch.agent.loop import AgentLoop, ToolOutput
from toolsearch.agent.messages import (
    Message,
    ToolCall,
    assistant_message,
    reference_block,
    tool_result_block,
    tool_use_block,
    user_message,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.pool import ResolvedTools, resolve_tools
from toolsearch.agent.subagents import parse_agent
from toolsearch.engine import ToolSearch
from toolsearch.permissions import filter_denied
from toolsearch.tool import Tool, pool_order

ON = ModeSettings()
WORDS = ["send", "message", "issue", "create", "read", "file", "query", "search", "page", "list"]
SERVERS = ["gh", "slack", "db", "notion"]
BUILTINS = ["Read", "Bash", "WebFetch", "NotebookEdit", "Grep"]

word = st.sampled_from(WORDS)
description = st.lists(word, min_size=1, max_size=5).map(" ".join)


@st.composite
def tools(draw: st.DrawFn) -> list[Tool]:
    found: dict[str, Tool] = {}
    for server in draw(st.lists(st.sampled_from(SERVERS), unique=True, max_size=4)):
        for _ in range(draw(st.integers(1, 4))):
            name = f"mcp__{server}__{draw(word)}_{draw(word)}"
            found[name] = Tool(name, draw(description), search_hint=draw(st.none() | description))
    for name in draw(st.lists(st.sampled_from(BUILTINS), unique=True, max_size=4)):
        found[name] = Tool(name, draw(description), should_defer=draw(st.booleans()))
    return list(found.values())


def rule_texts(pool: list[Tool]) -> st.SearchStrategy[list[str]]:
    options: list[str] = [t.name for t in pool] + ["ToolSearch"]
    for server in SERVERS:
        options += [f"mcp__{server}", f"mcp__{server}__*"]
    return st.lists(st.sampled_from(options), max_size=5)


def queries_for(hidden: list[Tool]) -> list[str]:
    """Queries aimed squarely at the hidden tools, by every dispatch path."""
    out: list[str] = []
    for tool in hidden:
        out += [
            f"select:{tool.name}",
            tool.name,
            tool.name.upper(),
            tool.description,
            f"+{tool.description.split()[0]} {tool.name}",
        ]
        if tool.server:
            out.append(f"mcp__{tool.server}")
            out.append(f"mcp__{tool.server}__")
    if hidden:
        out.append("select:" + ",".join(t.name for t in hidden))
    return out


def announced_lines(text: str | None) -> set[str]:
    return set() if text is None else {line.strip() for line in text.splitlines()}


def payload_names(payload: dict[str, Any]) -> set[str]:
    """Every tool name a provider payload defines or loads (tools, search outputs, text)."""
    names: set[str] = set()
    for tool in payload.get("tools", []):
        if "function" in tool:
            names.add(tool["function"]["name"])
        elif "name" in tool:
            names.add(tool["name"])
    for item in payload.get("input", []):
        if item.get("type") == "tool_search_output":
            names.update(t["name"] for t in item["tools"])
    for message in payload.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                    names.update(
                        b["tool_name"] for b in block["content"] if b["type"] == "tool_reference"
                    )
        elif isinstance(content, str) and message.get("role") == "tool":
            for line in content.splitlines()[1:]:
                if line.startswith("{"):
                    names.add(json.loads(line)["name"])
    return names


def history_loading(hidden: list[Tool]) -> list[Message]:
    """A history in which the hidden tools were loaded before the rules changed."""
    refs = [reference_block(t.name) for t in hidden]
    calls = [tool_use_block("s1", "ToolSearch", {"query": "old"})]
    history: list[Message] = [user_message("hi"), assistant_message(calls)]
    if refs:
        history.append(user_message([tool_result_block("s1", refs)]))
    else:
        history.append(user_message([tool_result_block("s1", "No matching deferred tools found")]))
    return history


def check_unreachable(
    resolved: ResolvedTools, hidden: list[Tool], extra_queries: list[str]
) -> None:
    hidden_names = {t.name for t in hidden}
    assert not hidden_names & resolved.names
    engine = ToolSearch(resolved.tools, backend="keyword")
    for query in [*queries_for(hidden), *extra_queries]:
        found = set(engine.search(query, max_results=100).names)
        assert not found & hidden_names, (query, found & hidden_names)
    history = history_loading(hidden)
    for provider in ("anthropic", "openai", "plain"):
        for style in ("delta", "block"):
            request = assemble_request(
                resolved,
                history,
                provider=provider,
                settings=ON,
                announce=style,  # type: ignore[arg-type]
            )
            assert not announced_lines(request.announcement) & hidden_names
            assert not set(request.tool_names) & hidden_names
            assert not payload_names(request.payload) & hidden_names
            assert not request.loaded & hidden_names
    server = assemble_request(resolved, history, provider=_server_adapter(), settings=ON)
    assert not payload_names(server.payload) & hidden_names


def _server_adapter() -> Any:
    from toolsearch.agent.providers.anthropic import AnthropicAdapter

    return AnthropicAdapter(server_search="bm25")


def check_loop_never_runs(pool: list[Tool], hidden: list[Tool], **scope: Any) -> None:
    if not hidden:
        return
    steps = []
    for index, tool in enumerate(hidden[:3]):
        steps.append(
            assistant_message(
                [
                    tool_use_block(f"s{index}", "ToolSearch", {"query": f"select:{tool.name}"}),
                    tool_use_block(f"c{index}", tool.name, {}),
                ]
            )
        )
    ran: list[str] = []

    def runner(call: ToolCall, tool: Tool) -> ToolOutput:
        ran.append(tool.name)
        return ToolOutput("ran")

    loop = AgentLoop(
        ScriptedClient(steps, final_text="done"),
        pool,
        runner=runner,
        backend="keyword",
        settings=ON,
        max_turns=len(steps) + 1,
        **scope,
    )
    result = loop.run("go")
    assert not set(ran) & {t.name for t in hidden}
    assert not result.discovered & {t.name for t in hidden}


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(data=st.data())
def test_denied_tools_are_unreachable_by_every_path(data: st.DataObject) -> None:
    pool = data.draw(tools())
    rules = data.draw(rule_texts(pool))
    queries = data.draw(st.lists(description, max_size=3))
    resolved = resolve_tools(pool, deny=rules)
    kept = {t.name for t in filter_denied(pool, rules)}
    hidden = [t for t in pool if t.name not in kept]
    assert {t.name for t in resolved.tools} - {"ToolSearch"} == kept
    check_unreachable(resolved, hidden, queries)
    check_loop_never_runs(pool, hidden, deny=rules)


@PROPERTY
@given(data=st.data())
def test_subagent_scoping_leaves_no_path_to_excluded_tools(data: st.DataObject) -> None:
    pool = data.draw(tools())
    deny = data.draw(rule_texts(pool))
    allow = data.draw(st.none() | rule_texts(pool))
    disallowed = data.draw(rule_texts(pool))
    queries = data.draw(st.lists(description, max_size=3))
    agent = parse_agent({"name": "sub", "tools": allow, "disallowed_tools": disallowed})
    resolved = resolve_tools(pool, deny=deny, agent=agent)
    outside = [t for t in pool_order(pool) if t.name not in resolved.names]
    for tool in resolved.tools:
        assert agent.allows(tool)
    check_unreachable(resolved, outside, queries)
    check_loop_never_runs(pool, outside, deny=deny, agent=agent)
