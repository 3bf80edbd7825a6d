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


# Alternatives: g1 needs (gmail or outlook) and cal; g2 needs a or b.
GROUPED_QRELS = {"g1": {"gmail": 1, "outlook": 1, "cal": 2}, "g2": {"a": 1, "b": 1}}
GROUPS = {"g1": (("gmail", "outlook"), ("cal",)), "g2": (("a", "b"),)}
GROUPED_RANKED = {"g1": ["outlook", "x", "gmail", "cal"], "g2": ["b", "a"]}


def _grouped(*names: str, groups: object = GROUPS) -> dict[str, dict[str, float]]:
    return per_query_scores(
        GROUPED_QRELS,
        GROUPED_RANKED,
        parse_metrics(list(names)),
        groups=groups,  # type: ignore[arg-type]
    )


def test_group_metrics_by_hand() -> None:
    s = _grouped(
        "recall@1", "recall@3", "recall@4", "complete@3", "complete@4", "complete@1", "hit@1"
    )
    # g1: the mail group is satisfied at rank 1 (outlook), cal only at rank 4
    assert s["recall@1"] == {"g1": 0.5, "g2": 1.0}
    assert s["recall@3"] == {"g1": 0.5, "g2": 1.0}
    assert s["recall@4"] == {"g1": 1.0, "g2": 1.0}
    assert s["complete@3"] == {"g1": 0.0, "g2": 1.0}
    assert s["complete@4"] == {"g1": 1.0, "g2": 1.0}
    assert s["complete@1"] == {"g1": 0.0, "g2": 1.0}
    assert s["hit@1"] == {"g1": 1.0, "g2": 1.0}


def test_group_mrr_and_ndcg_by_hand() -> None:
    s = _grouped("mrr@10", "ndcg@10", "ndcg@1")
    assert s["mrr@10"] == pytest.approx({"g1": 1.0, "g2": 1.0})
    # g1: mail group (grade 1) at rank 1, gmail at rank 3 is a redundant alternative (gain 0),
    # cal (grade 2) at rank 4; ideal: cal then one mail tool.
    g1 = (1 + 2 / math.log2(5)) / (2 + 1 / math.log2(3))
    assert s["ndcg@10"] == pytest.approx({"g1": g1, "g2": 1.0})
    assert s["ndcg@1"] == pytest.approx({"g1": 0.5, "g2": 1.0})


def test_without_groups_alternatives_are_all_required() -> None:
    s = _grouped("recall@1", "recall@3", "complete@3", groups=None)
    assert s["recall@1"] == pytest.approx({"g1": 1 / 3, "g2": 0.5})
    assert s["recall@3"] == pytest.approx({"g1": 2 / 3, "g2": 1.0})
    assert s["complete@3"] == {"g1": 0.0, "g2": 1.0}


def test_single_tool_groups_agree_with_ranx_itself() -> None:
    # Where ranx's definition applies (every group one tool), the values are ranx's own.
    from ranx import Qrels, Run, evaluate

    names = ["recall@1", "recall@3", "hit@1", "mrr@10", "ndcg@10", "ndcg@3"]
    singles = {qid: tuple((tool,) for tool in gold) for qid, gold in QRELS.items()}
    with_groups = per_query_scores(QRELS, RANKED, parse_metrics(names), groups=singles)
    assert with_groups == per_query_scores(QRELS, RANKED, parse_metrics(names))
    run = Run({q: rank_scores(r) or {"(none)": 1.0} for q, r in RANKED.items()})
    ranx_names = [n.replace("hit@", "hit_rate@") for n in names]
    evaluate(Qrels(QRELS), run, ranx_names, save_results_in_run=True)
    for ours, theirs in zip(names, ranx_names, strict=True):
        assert with_groups[ours] == pytest.approx(dict(run.scores[theirs]))


def test_group_metrics_match_a_direct_count_on_random_runs() -> None:
    import random

    rng = random.Random(7)
    tools = [f"t{i}" for i in range(12)]
    qrels, groups, ranked = {}, {}, {}
    for n in range(40):
        qid = f"q{n}"
        gold = rng.sample(tools, rng.randint(1, 5))
        cut = sorted(rng.sample(range(1, len(gold)), rng.randint(0, len(gold) - 1)))
        parts = [gold[a:b] for a, b in zip([0, *cut], [*cut, len(gold)], strict=True)]
        qrels[qid] = dict.fromkeys(gold, 1)
        groups[qid] = tuple(tuple(part) for part in parts)
        ranked[qid] = rng.sample(tools, rng.randint(0, 12))
    got = per_query_scores(
        qrels, ranked, parse_metrics("recall@3,complete@5,hit@2,mrr@10"), groups=groups
    )
    for qid, parts in groups.items():

        def satisfied(k: int, qid: str = qid, parts: tuple = parts) -> int:
            return sum(any(t in ranked[qid][:k] for t in part) for part in parts)

        assert got["recall@3"][qid] == pytest.approx(satisfied(3) / len(parts))
        assert got["complete@5"][qid] == float(satisfied(5) == len(parts))
        assert got["hit@2"][qid] == float(satisfied(2) > 0)
        first = next((r for r, t in enumerate(ranked[qid], 1) if t in qrels[qid]), None)
        assert got["mrr@10"][qid] == pytest.approx(1 / first if first and first <= 10 else 0.0)


def test_every_metric_equals_ranx_on_the_bundled_queries_with_random_runs() -> None:
    """The values are computed without ranx (whose numba containers compile for about a minute
    in every process); on every judged query of the bundled dataset, with random runs and
    graded, grouped qrels, they equal ranx's own on the same group view."""
    import random

    from ranx import Qrels, Run, evaluate

    from toolsearch.bench.metrics import group_view
    from toolsearch.dataset import load_dataset
    from toolsearch.datasets import bundled_dataset

    dataset = load_dataset(bundled_dataset("mcp-workbench"))
    tools = [t.name for t in dataset.tools]
    rng = random.Random(52)
    qrels = {
        qid: {t: rng.choice([1, 1, 2, 3]) for t in gold}
        for qid, gold in dataset.qrels.items()
        if gold
    }
    groups = {qid: dataset.groups(qid) for qid in qrels}
    ranked = {}
    for qid, gold in qrels.items():
        picked = rng.sample(tools, rng.randint(0, 30)) + rng.sample(sorted(gold), len(gold) // 2)
        ranked[qid] = list(dict.fromkeys(rng.sample(picked, len(picked))))
    names = [f"{f}@{k}" for f in ("recall", "hit", "complete", "mrr", "ndcg") for k in (1, 3, 10)]
    ours = per_query_scores(qrels, ranked, parse_metrics(names), groups=groups)
    view_qrels, views = group_view(qrels, groups, {"run": ranked})
    run = Run({q: rank_scores(r) or {"(none)": 1.0} for q, r in views["run"].items()})
    ranx_names = sorted({parse_metric(n).ranx_name or "" for n in names})
    evaluate(Qrels(view_qrels), run, ranx_names, save_results_in_run=True)
    for name in names:
        metric = parse_metric(name)
        theirs = dict(run.scores[metric.ranx_name or ""])
        if metric.family == "complete":
            theirs = {q: float(v >= 1.0 - 1e-9) for q, v in theirs.items()}
        assert ours[name] == pytest.approx(theirs, abs=1e-12), name
    assert len(ours["ndcg@10"]) > 1000


def test_significance_equals_ranx_compare_on_the_bundled_queries() -> None:
    """The paired tests run ranx's test functions on these per-query values instead of ranx
    ``compare`` (whose containers compile for about a minute in every process): the t-test's
    p-values and the means are ranx's to the last digit. (ranx's Fisher test draws its
    permutations on parallel threads, so its p-values vary by a few hundredths between runs
    of ranx itself, and are not compared here.)"""
    import random

    from ranx import Qrels, Run, compare

    from toolsearch.bench.metrics import group_view
    from toolsearch.bench.significance import compare_backends
    from toolsearch.dataset import load_dataset
    from toolsearch.datasets import bundled_dataset

    dataset = load_dataset(bundled_dataset("mcp-workbench"))
    tools = [t.name for t in dataset.tools]
    rng = random.Random(53)
    qrels = {q: dict(g) for q, g in list(dataset.qrels.items())[:400] if g}
    groups = {q: dataset.groups(q) for q in qrels}
    ranked: dict[str, dict[str, list[str]]] = {}
    for name in ("a", "b", "c"):
        ranked[name] = {}
        for qid, gold in qrels.items():
            picked = rng.sample(tools, rng.randint(0, 15)) + rng.sample(sorted(gold), len(gold))
            ranked[name][qid] = list(dict.fromkeys(rng.sample(picked, len(picked))))[:20]
    metrics = parse_metrics("recall@5,hit@3,mrr@10,ndcg@10")
    ours = compare_backends(qrels, ranked, metrics, groups=groups, correction="none")
    view_qrels, views = group_view(qrels, groups, ranked)
    runs = [Run({q: rank_scores(r) for q, r in views[n].items()}, name=n) for n in ranked]
    report = compare(Qrels(view_qrels), runs, [m.ranx_name or "" for m in metrics], max_p=0.05)
    for pair in ours.pairs:
        ranx_name = parse_metric(pair.metric).ranx_name or ""
        theirs = report.comparisons[pair.a, pair.b][ranx_name]["p_value"]
        assert pair.p_value == pytest.approx(theirs, abs=1e-12), pair
        assert pair.mean_a == pytest.approx(report.results[pair.a][ranx_name], abs=1e-12)
        assert pair.mean_b == pytest.approx(report.results[pair.b][ranx_name], abs=1e-12)
    assert len(ours.pairs) == 3 * 4
