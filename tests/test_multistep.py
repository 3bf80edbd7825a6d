"""Multi-step requests: splitting into steps, confidence-gated merging, search_many."""

from __future__ import annotations

import random

import pytest

from toolsearch.backend import Hit
from toolsearch.engine import ToolSearch
from toolsearch.errors import QueryError
from toolsearch.multistep import Ranking, merge_round_robin, merge_steps, search_steps, split_steps
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
            ["Find flights to Paris, book a hotel near the Louvre", "email the itinerary to Ana"],
        ),
        # a bare comma is no step boundary: it separates adjectives and list items
        ("I'm looking for a stylish, affordable handbag with a long strap", None),
        (
            "Export the board to CSV. After that, send it to finance",
            ["Export the board to CSV", "After that, send it to finance"],
        ),
        (
            "merge the release branch then tell the team on slack about it",
            ["merge the release branch", "tell the team on slack about it"],
        ),
        # "and" before a one-word phrase is not a step boundary
        ("summarise the latest quarterly report for sales and marketing", None),
        # list markers start steps and are no part of them; they never count as steps
        (
            "Please:\n1. Find the latest issue in acme/web\n2) post it to #eng\n(3) close it",
            ["Please", "Find the latest issue in acme/web", "post it to #eng", "close it"],
        ),
        (
            "Do this: 1. Export the board to CSV. 2. Send it to finance. 3. Archive the board.",
            ["Do this", "Export the board to CSV", "Send it to finance", "Archive the board"],
        ),
        (
            "- list the open pull requests\n* merge the approved ones\n• notify the team",
            ["list the open pull requests", "merge the approved ones", "notify the team"],
        ),
        (
            "Step 1: query the orders table. Step 2: upload the CSV to the reports bucket",
            ["query the orders table", "upload the CSV to the reports bucket"],
        ),
        # seven numbered steps: the markers do not use up the MAX_STEPS searched steps
        (
            "\n".join(f"{i}. do task number {i} now" for i in range(1, 8)),
            [f"do task number {i} now" for i in range(1, 7)],
        ),
        # a number inside a sentence, a version, a tuple and a hyphen are not markers
        (
            "Meet at 3. Upgrade the re-run job to v1.2. Plot the point (3, 4) - in red",
            ["Meet at 3", "Upgrade the re-run job to v1.2", "Plot the point (3, 4) - in red"],
        ),
        (
            "Look up the customer in Salesforce and after that create an invoice in Stripe",
            ["Look up the customer in Salesforce", "create an invoice in Stripe"],
        ),
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


def test_merge_round_robin_keeps_the_lead_of_the_first_ranking_first() -> None:
    whole = [Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0)]
    step = [Hit("d", 1.0), Hit("e", 0.5)]
    assert [h.name for h in merge_round_robin([whole, step], 10, lead=2)] == [
        "a",
        "b",
        "c",
        "d",
        "e",
    ]
    assert [h.name for h in merge_round_robin([whole, step], 10, lead=1)] == [
        "a",
        "b",
        "d",
        "c",
        "e",
    ]


def test_merge_steps_drops_steps_less_confident_than_the_whole_request() -> None:
    whole = Ranking([Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0)], confidence=0.5)
    sure = Ranking([Hit("d", 1.0)], confidence=0.5)  # as confident: merged in
    vague = Ranking([Hit("e", 1.0)], confidence=0.49)  # an elaboration: left out
    assert [h.name for h in merge_steps(whole, [sure, vague], 10)] == ["a", "b", "d", "c"]
    assert [h.name for h in merge_steps(whole, [vague], 2)] == ["a", "b"]
    assert merge_steps(whole, [vague], 10) == whole.hits


def test_search_steps_only_splits_long_requests() -> None:
    calls: list[str] = []

    def search(text: str, k: int) -> Ranking:
        calls.append(text)
        return Ranking([Hit(text.split()[0].lower(), 1.0)], confidence=1.0)

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
    calls.clear()
    given = Ranking([Hit("whole", 2.0)], confidence=1.0)
    search_steps(search, "Read the Jira issue OPS-200 and then post it", 5, depth=10, whole=given)
    assert calls == ["Read the Jira issue OPS-200", "post it"]  # the whole ranking was given


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


def test_merge_steps_reads_no_deeper_than_k_of_any_ranking() -> None:
    rng = random.Random(7)
    names = [f"t{i}" for i in range(12)]
    for _ in range(500):
        k, lead = rng.randint(1, 6), rng.randint(0, 2)

        def ranking() -> list[Hit]:
            picked = rng.sample(names, rng.randint(0, len(names)))
            return [Hit(n, 1.0 - i / 100) for i, n in enumerate(picked)]

        whole = ranking()
        steps = [(ranking(), rng.choice([0.4, 0.6])) for _ in range(rng.randint(1, 4))]
        full = merge_steps(Ranking(whole, 0.5), [Ranking(h, c) for h, c in steps], k, lead=lead)
        cut = merge_steps(
            Ranking(whole[: k + lead], 0.5), [Ranking(h[:k], c) for h, c in steps], k, lead=lead
        )
        assert cut == full


def test_runs_of_blanks_split_like_one_blank() -> None:
    steps = ["read the open issues of acme/web", "post a summary to the eng channel"]
    for gap in (" " * 50_000, "\n" * 50_000, "\r\n \t" * 20_000, ". " * 20_000):
        assert split_steps(f"{steps[0]}.{gap}{steps[1]}") == steps
    assert split_steps("read the  open issues\tof acme/web.\n\n then post a summary") == [
        "read the open issues of acme/web",
        "then post a summary",
    ]
