"""Multi-step requests: splitting into steps, round-robin merging, search_many."""

from __future__ import annotations

import pytest

from toolsearch.backend import Hit
from toolsearch.engine import ToolSearch
from toolsearch.errors import QueryError
from toolsearch.multistep import merge_round_robin, search_steps, split_steps
from toolsearch.tool import Tool


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("github create issue", ["github create issue"]),
        ("Can I find academic research papers on this topic?", None),
        (
            "Read Jira issue OPS-200 and create a matching Linear issue for the ENG team.",
            ["Read Jira issue OPS-200", "create a matching Linear issue for the ENG team"],
        ),
        (
            "Find flights to Paris, book a hotel near the Louvre and email the itinerary to Ana",
            ["Find flights to Paris", "book a hotel near the Louvre", "email the itinerary to Ana"],
        ),
        (
            "merge the release branch then tell the team on slack about it",
            ["merge the release branch", "tell the team on slack about it"],
        ),
        # "and" before a one-word phrase is not a step boundary
        ("summarise the latest quarterly report for sales and marketing", None),
    ],
)
def test_split_steps(text: str, steps: list[str] | None) -> None:
    assert split_steps(text) == (steps if steps is not None else [text])


def test_merge_round_robin_interleaves_each_tool_once() -> None:
    whole = [Hit("a", 3.0), Hit("b", 2.0)]
    first = [Hit("b", 1.0), Hit("c", 0.5)]
    second = [Hit("d", 9.0), Hit("a", 1.0)]
    merged = merge_round_robin([whole, first, second], 10)
    assert [h.name for h in merged] == ["a", "b", "d", "c"]
    scores = [h.score for h in merged]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert all(s > 0 for s in scores)
    assert [h.name for h in merge_round_robin([whole, first, second], 2)] == ["a", "b"]
    assert merge_round_robin([[], []], 5) == []


def test_search_steps_only_splits_long_requests() -> None:
    calls: list[str] = []

    def search(text: str, k: int) -> list[Hit]:
        calls.append(text)
        return [Hit(text.split()[0].lower(), 1.0)]

    assert search_steps(search, "send a message", 5, depth=10) == [Hit("send", 1.0)]
    assert calls == ["send a message"]
    calls.clear()
    hits = search_steps(
        search, "Read the Jira issue OPS-200 and then post it on Slack", 5, depth=10
    )
    assert calls == [
        "Read the Jira issue OPS-200 and then post it on Slack",
        "Read the Jira issue OPS-200",
        "post it on Slack",
    ]
    assert [h.name for h in hits] == ["read", "post"]


def _engine() -> ToolSearch:
    tools = [
        Tool("mcp__jira__get_issue", "Read a Jira issue.", should_defer=True),
        Tool("mcp__slack__post_message", "Post a message to a Slack channel.", should_defer=True),
        Tool("mcp__gmail__send_email", "Send an email with Gmail.", should_defer=True),
    ]
    return ToolSearch(tools, backend="keyword")


def test_search_many_merges_the_queries() -> None:
    result = _engine().search_many(["jira issue", "slack message"], 5)
    assert result.names[:2] == ["mcp__jira__get_issue", "mcp__slack__post_message"]
    assert len(set(result.names)) == len(result.names)
    assert _engine().search_many(["jira issue", "select:mcp__gmail__send_email"], 1).names == [
        "mcp__jira__get_issue"
    ]


@pytest.mark.parametrize("bad", [[], "jira issue", None])
def test_search_many_rejects_bad_queries(bad: object) -> None:
    with pytest.raises(QueryError, match="non-empty list"):
        _engine().search_many(bad, 5)  # type: ignore[arg-type]
