"""Golden tests of the reference keyword scorer: exact scores derived by hand from the rules."""

from __future__ import annotations

import pytest

from toolsearch.backends.keyword import KeywordBackend
from toolsearch.engine import ToolSearch
from toolsearch.query import parse_query
from toolsearch.tool import Tool

SLACK_SEND = Tool("mcp__slack__send_message", "Send a message to a Slack channel.")
SLACK_READ = Tool("mcp__slack__read_channel", "Read recent messages of a channel.")
SLACK_SCHEDULE = Tool("mcp__slack__schedule_messages", "Queue posts for later.")
GMAIL_SEND = Tool("mcp__gmail__send_email", "Send an email.")
GITHUB_ISSUE = Tool("mcp__github__create_issue", "Create an issue in a repository.")
GITHUB_PR = Tool("mcp__github__create_pull_request", "Open a pull request.")
NOTEBOOK = Tool(
    "NotebookEdit",
    "Replace the contents of a cell of a .ipynb file.",
    search_hint="edit Jupyter notebook cells",
    should_defer=True,
)
WEB_FETCH = Tool("WebFetch", "Fetch a URL and summarise it.", should_defer=True)
READ = Tool("Read", "Read a file.", always_load=True)

POOL = [
    SLACK_SEND,
    SLACK_READ,
    SLACK_SCHEDULE,
    GMAIL_SEND,
    GITHUB_ISSUE,
    GITHUB_PR,
    NOTEBOOK,
    WEB_FETCH,
    READ,
]


def ranked(query: str, k: int = 10) -> list[tuple[str, float]]:
    backend = KeywordBackend()
    engine = ToolSearch(POOL, backend=backend)
    backend.index(engine.deferred)
    return [(h.name, h.score) for h in backend.search(parse_query(query), k)]


def test_slack_send_message() -> None:
    # send_message: slack 12+2, send 12+2, message 12+2 (whole words in the description).
    # schedule_messages: slack 12, "message" is a substring of the part "messages" → 6;
    # "messages" is not the whole word "message" in its description.
    # read_channel: slack 12; "messages" in its description is not the word "message".
    assert ranked("slack send message") == [
        ("mcp__slack__send_message", 42.0),
        ("mcp__slack__schedule_messages", 18.0),
        ("mcp__gmail__send_email", 14.0),
        ("mcp__slack__read_channel", 12.0),
    ]


def test_required_term_filters_then_scores() -> None:
    # +slack keeps only tools matching "slack"; scoring terms are slack then send.
    assert ranked("+slack send") == [
        ("mcp__slack__send_message", 28.0),
        ("mcp__slack__read_channel", 12.0),
        ("mcp__slack__schedule_messages", 12.0),
    ]


def test_required_term_in_description_only() -> None:
    # "+ipynb" matches NotebookEdit's description as a whole word; "cells" only its hint.
    assert ranked("+ipynb cells") == [("NotebookEdit", 2.0 + 4.0)]


def test_notebook_found_through_search_hint() -> None:
    # notebook: exact part of NotebookEdit (non-MCP, 10) + hint word (4); jupyter: hint (4).
    assert ranked("notebook jupyter") == [("NotebookEdit", 18.0)]


def test_non_mcp_substring_weight() -> None:
    # "note" is a substring of the part "notebook": 5 for a non-MCP tool.
    assert ranked("note") == [("NotebookEdit", 5.0)]


def test_mcp_substring_weight_and_pool_order_ties() -> None:
    # "creat" is a substring of "create" in both GitHub tools (6 each); tie → pool order.
    assert ranked("creat") == [
        ("mcp__github__create_issue", 6.0),
        ("mcp__github__create_pull_request", 6.0),
    ]


def test_repeated_word_counts_twice() -> None:
    assert ranked("gmail gmail") == [("mcp__gmail__send_email", 24.0)]


def test_whole_word_only_in_description() -> None:
    # "mail" is no part and no whole word of "Send an email."; it is a substring of the parts
    # "gmail" and "email", which scores the substring weight once per term: 6.
    assert ranked("mail") == [("mcp__gmail__send_email", 6.0)]


def test_always_loaded_tool_is_not_ranked() -> None:
    # Read (always loaded) is not in the deferred pool, whatever it would score; the only
    # tool ranked is read_channel: "read" is its MCP part (12) and a whole word of its
    # description (2). The exact-name fast path still finds Read itself.
    assert ranked("read") == [("mcp__slack__read_channel", 14.0)]
    assert ToolSearch(POOL, backend="keyword").search("read").names == ["Read"]


@pytest.fixture
def engine() -> ToolSearch:
    return ToolSearch(POOL, backend="keyword")


def test_select_resolves_exact_names_in_request_order(engine: ToolSearch) -> None:
    result = engine.search("select:mcp__github__create_issue,Read,nope,Read")
    assert result.names == ["mcp__github__create_issue", "Read"]
    assert all(m.score is None and m.source == "select" for m in result.matches)


def test_select_is_case_sensitive_and_ignores_max_results(engine: ToolSearch) -> None:
    assert engine.search("SELECT: notebookedit").names == []
    names = "select:" + ",".join(t.name for t in POOL)
    assert len(engine.search(names, max_results=2).matches) == len(POOL)


def test_mcp_prefix_returns_pool_order(engine: ToolSearch) -> None:
    result = engine.search("mcp__github")
    assert result.names == ["mcp__github__create_issue", "mcp__github__create_pull_request"]
    assert [m.source for m in result.matches] == ["prefix", "prefix"]


def test_mcp_prefix_respects_max_results(engine: ToolSearch) -> None:
    assert engine.search("mcp__slack", max_results=2).names == [
        "mcp__slack__read_channel",
        "mcp__slack__schedule_messages",
    ]


def test_exact_name_is_case_insensitive(engine: ToolSearch) -> None:
    result = engine.search("  notebookedit ")
    assert result.names == ["NotebookEdit"]
    assert result.matches[0].source == "exact"


def test_exact_name_finds_loaded_tools_too(engine: ToolSearch) -> None:
    assert engine.search("read").names == ["Read"]


def test_no_match_text_with_pending_servers() -> None:
    engine = ToolSearch(POOL, backend="keyword", pending_servers=["jira", "linear"])
    result = engine.search("zzz")
    assert result.text() == (
        "No matching deferred tools found. Some MCP servers are still connecting: jira, linear. "
        "Their tools will become available shortly — try searching again."
    )
    assert engine.search("slack").text() == ""
    assert ToolSearch(POOL, backend="keyword").search("zzz").text() == (
        "No matching deferred tools found"
    )


def test_record_shape(engine: ToolSearch) -> None:
    record = engine.search("slack send message", max_results=1).to_record()
    assert record == {
        "matches": ["mcp__slack__send_message"],
        "query": "slack send message",
        "total_deferred_tools": 8,
        "pending_mcp_servers": [],
    }
