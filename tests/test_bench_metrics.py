"""Benchmark metrics: values computed by hand on a fixture, names, false positives, costs."""

from __future__ import annotations

import math

import pytest

from toolsearch.bench.costs import announcement_text, latency_summary, percentile, request_tokens
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import (
    FALSE_POSITIVE_RATE,
    Metric,
    abstention_threshold,
    default_metrics,
    false_positive_rate,
    is_false_positive,
    mean,
    parse_k_list,
    parse_metric,
    parse_metrics,
    per_query_scores,
    rank_scores,
)
from toolsearch.engine import Match, tool_search_tool
from toolsearch.tokens import CharEstimate, definition_text
from toolsearch.tool import Tool

# q1: gold alpha at rank 2.  q2: gold gamma (grade 2) at rank 1 and delta (grade 1) at rank 4.
# q3: nothing returned.
QRELS = {
    "q1": {"alpha": 1},
    "q2": {"gamma": 2, "delta": 1},
    "q3": {"zeta": 1},
}
RANKED = {
    "q1": ["beta", "alpha", "gamma"],
    "q2": ["gamma", "epsilon", "zeta", "delta"],
    "q3": [],
}


def _scores(*names: str) -> dict[str, dict[str, float]]:
    return per_query_scores(QRELS, RANKED, parse_metrics(list(names)))


def test_recall_hit_complete_by_hand() -> None:
    s = _scores("recall@1", "recall@3", "recall@5", "hit@1", "hit@3", "complete@3", "complete@5")
    assert s["recall@1"] == {"q1": 0.0, "q2": 0.5, "q3": 0.0}
    assert s["recall@3"] == {"q1": 1.0, "q2": 0.5, "q3": 0.0}
    assert s["recall@5"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert s["hit@1"] == {"q1": 0.0, "q2": 1.0, "q3": 0.0}
    assert s["hit@3"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    # complete@k: every gold tool within the top k
    assert s["complete@3"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0}
    assert s["complete@5"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}


def test_mrr_and_ndcg_by_hand() -> None:
    s = _scores("mrr@10", "mrr@1", "ndcg@10")
    assert s["mrr@10"] == pytest.approx({"q1": 0.5, "q2": 1.0, "q3": 0.0})
    assert s["mrr@1"] == pytest.approx({"q1": 0.0, "q2": 1.0, "q3": 0.0})
    # linear gains: q1 = (1/log2 3) / 1; q2 = (2/log2 2 + 1/log2 5) / (2/log2 2 + 1/log2 3)
    q1 = 1 / math.log2(3)
    q2 = (2 + 1 / math.log2(5)) / (2 + 1 / math.log2(3))
    assert s["ndcg@10"] == pytest.approx({"q1": q1, "q2": q2, "q3": 0.0})
    assert mean(s["ndcg@10"].values()) == pytest.approx((q1 + q2) / 3)


def test_ties_in_backend_scores_do_not_reorder() -> None:
    # rank-derived scores keep the returned order even when ranx re-sorts by score
    qrels = {"q": {"b": 1}}
    s = per_query_scores(qrels, {"q": ["a", "b"]}, parse_metrics(["recall@1", "mrr@10"]))
    assert s["recall@1"]["q"] == 0.0
    assert s["mrr@10"]["q"] == 0.5
    assert rank_scores(["x", "y", "z"]) == {"x": 100.0, "y": 99.0, "z": 98.0}


def test_nothing_retrieved_gives_zero_not_an_error() -> None:
    s = per_query_scores({"q": {"a": 1}, "r": {"b": 1}}, {"q": [], "r": []}, default_metrics())
    assert all(v == 0.0 for values in s.values() for v in values.values())


def test_a_missing_query_is_an_error_never_a_skip() -> None:
    with pytest.raises(BenchError, match=r"no result for 1 judged queries.*'q3'"):
        per_query_scores(QRELS, {"q1": [], "q2": []}, default_metrics())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("recall@5", Metric("recall", 5)),
        ("HIT@1", Metric("hit", 1)),
        (" complete@10 ", Metric("complete", 10)),
        ("ndcg@10", Metric("ndcg", 10)),
        ("false_positive_rate", Metric(FALSE_POSITIVE_RATE)),
    ],
)
def test_parse_metric(name: str, expected: Metric) -> None:
    assert parse_metric(name) == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("recal@5", "unknown metric 'recal@5'; known metrics: recall@k, hit@k"),
        ("map@10", "unknown metric"),
        ("mrr", "needs a cutoff, e.g. 'mrr@10'"),
        ("recall@0", "k must be between 1 and the run depth 100"),
        ("recall@101", "k must be between 1 and the run depth 100"),
        ("recall@x", "unknown metric"),
    ],
)
def test_unknown_or_bad_metric_is_a_clear_error(name: str, message: str) -> None:
    with pytest.raises(BenchError, match=message.replace("(", r"\(")):
        parse_metric(name)


def test_metric_lists() -> None:
    assert parse_k_list("10,1, 5,5") == [1, 5, 10]
    with pytest.raises(BenchError, match="'x' is not an integer"):
        parse_k_list("1,x")
    with pytest.raises(BenchError, match="out of range"):
        parse_k_list("0")
    assert [m.name for m in parse_metrics("recall@5,ndcg@10,recall@5")] == ["recall@5", "ndcg@10"]
    names = [m.name for m in default_metrics([1, 5])]
    assert names == [
        "recall@1",
        "recall@5",
        "hit@1",
        "hit@5",
        "complete@1",
        "complete@5",
        "mrr@10",
        "ndcg@10",
    ]
    assert not Metric(FALSE_POSITIVE_RATE).higher_is_better
    assert Metric("hit", 3).ranx_name == "hit_rate@3"


class _Abstains:
    abstain_below = 0.5


class _AbstainsByParams:
    def params(self) -> dict[str, object]:
        return {"abstain_below": 2}


def test_abstention_threshold_from_attribute_or_params() -> None:
    assert abstention_threshold(_Abstains()) == 0.5
    assert abstention_threshold(_AbstainsByParams()) == 2.0
    assert abstention_threshold(object()) is None

    class Bad:
        abstain_below = "high"

    with pytest.raises(BenchError, match="abstain_below must be a number"):
        abstention_threshold(Bad())


def test_false_positives() -> None:
    low = (Match("alpha", 0.2, "ranked"),)
    high = (Match("alpha", 0.7, "ranked"),)
    exact = (Match("alpha", None, "exact"),)
    assert not is_false_positive((), None)
    assert is_false_positive(low, None)  # no threshold: any result counts
    assert not is_false_positive(low, 0.5)
    assert is_false_positive(high, 0.5)
    assert is_false_positive(exact, 0.5)  # fast paths have no score and always count
    results = {"n1": low, "n2": (), "n3": high, "n4": exact}
    assert false_positive_rate(results, ["n1", "n2", "n3", "n4"], None) == 0.75
    assert false_positive_rate(results, ["n1", "n2", "n3", "n4"], 0.5) == 0.5
    with pytest.raises(BenchError, match="no result for 1 negative queries"):
        false_positive_rate(results, ["n9"], None)


def test_percentile_and_latency_summary() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([3.0], 99) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(101)), 95) == 95.0
    assert latency_summary([1, 2, 3, 4, 5]) == {"p50": 3.0, "p95": 4.8, "p99": 4.96}
    with pytest.raises(ValueError, match="between 0 and 100"):
        percentile([1], 101)


def test_request_tokens_by_hand() -> None:
    counter = CharEstimate()
    tools = [Tool(f"mcp__s__t{i}", "d" * (10 * i)) for i in range(1, 6)]
    per = {t.name: counter.count(definition_text(t)) for t in tools}
    loaded = {"q1": ["mcp__s__t1", "mcp__s__t2"], "q2": []}
    fixed = counter.count(definition_text(tool_search_tool()))
    fixed += counter.count(announcement_text([t.name for t in tools]))
    expected = round(fixed + (per["mcp__s__t1"] + per["mcp__s__t2"]) / 2)
    got = request_tokens(tools, loaded, counter=counter)
    assert got == {"all_tools": sum(per.values()), "with_search": expected}
    # only the first k loaded tools count
    assert request_tokens(tools, {"q": [t.name for t in tools]}, k=1, counter=counter) == {
        "all_tools": sum(per.values()),
        "with_search": fixed + per["mcp__s__t1"],
    }
    assert announcement_text(["b", "a"]) == (
        "<available-deferred-tools>\na\nb\n</available-deferred-tools>"
    )
