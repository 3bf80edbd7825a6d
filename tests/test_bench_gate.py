"""The regression gate on results objects: pass, fail, direction, missing entries."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolsearch.bench.errors import BenchError
from toolsearch.bench.gate import check_regressions


def results(**metrics: float) -> dict[str, Any]:
    run = {"params": {}, "metrics": dict(metrics), "latency_ms": {"p50": 1.0}}
    other = {"params": {}, "metrics": dict(metrics)}
    return {
        "toolsearch_version": "0",
        "datasets": {
            "ds": {
                "n_queries": 10,
                "n_tools": 5,
                "sha256": "abc",
                "backends": {"keyword": run, "bm25": other},
            }
        },
    }


BASE = results(**{"recall@5": 0.80, "ndcg@10": 0.60, "false_positive_rate": 0.30})


def test_identical_results_pass() -> None:
    gate = check_regressions(BASE, copy.deepcopy(BASE), 0.01)
    assert gate.passed and gate.compared == 6
    assert gate.lines() == ["gate passed: 6 quality metrics within 0.01 of the baseline"]


def test_a_drop_within_the_allowance_passes_and_beyond_fails() -> None:
    now = copy.deepcopy(BASE)
    now["datasets"]["ds"]["backends"]["keyword"]["metrics"]["recall@5"] = 0.795
    assert check_regressions(BASE, now, 0.01).passed
    now["datasets"]["ds"]["backends"]["keyword"]["metrics"]["recall@5"] = 0.78
    gate = check_regressions(BASE, now, 0.01)
    assert not gate.passed
    (reg,) = gate.regressions
    assert (reg.dataset, reg.backend, reg.metric) == ("ds", "keyword", "recall@5")
    assert reg.drop == pytest.approx(0.02)
    assert gate.lines() == [
        "regression: ds/keyword: recall@5 0.8000 → 0.7800 (-0.0200) > max drop 0.01"
    ]


def test_every_regression_is_named() -> None:
    now = copy.deepcopy(BASE)
    for backend in ("keyword", "bm25"):
        now["datasets"]["ds"]["backends"][backend]["metrics"]["ndcg@10"] = 0.5
    gate = check_regressions(BASE, now, 0.01)
    assert {(r.backend, r.metric) for r in gate.regressions} == {
        ("keyword", "ndcg@10"),
        ("bm25", "ndcg@10"),
    }


def test_false_positive_rate_regresses_upwards() -> None:
    now = copy.deepcopy(BASE)
    now["datasets"]["ds"]["backends"]["bm25"]["metrics"]["false_positive_rate"] = 0.1
    assert check_regressions(BASE, now, 0.0).passed  # fewer false positives: better
    now["datasets"]["ds"]["backends"]["bm25"]["metrics"]["false_positive_rate"] = 0.35
    (reg,) = check_regressions(BASE, now, 0.01).regressions
    assert reg.metric == "false_positive_rate" and reg.drop == pytest.approx(0.05)
    assert "(+0.0500)" in reg.describe()


def test_improvements_and_latency_are_not_gated() -> None:
    now = copy.deepcopy(BASE)
    now["datasets"]["ds"]["backends"]["keyword"]["metrics"]["recall@5"] = 0.99
    now["datasets"]["ds"]["backends"]["keyword"]["latency_ms"]["p50"] = 1000.0
    assert check_regressions(BASE, now, 0.0).passed


def test_what_cannot_be_compared_fails() -> None:
    now = copy.deepcopy(BASE)
    del now["datasets"]["ds"]["backends"]["bm25"]
    gate = check_regressions(BASE, now, 0.01)
    assert not gate.passed
    assert gate.problems == [
        "ds/bm25: in the baseline but not measured (is the backend installed?)"
    ]
    # narrowing the run on purpose narrows what is expected
    assert check_regressions(BASE, now, 0.01, backends=["keyword"]).passed

    now = copy.deepcopy(BASE)
    del now["datasets"]["ds"]["backends"]["keyword"]["metrics"]["ndcg@10"]
    gate = check_regressions(BASE, now, 0.01)
    assert "ds/keyword: ndcg@10 is in the baseline but was not computed" in gate.problems[0]

    gate = check_regressions(BASE, {"datasets": {}}, 0.01)
    assert gate.problems == ["dataset 'ds' is in the baseline but was not run"]
    assert check_regressions(BASE, {"datasets": {}}, 0.01, datasets=["other"]).problems == [
        "the baseline and this run have no quality metric in common (baseline datasets: ds; "
        "this run: none; the gate compares datasets of the same name)"
    ]


def test_changed_data_is_not_like_for_like() -> None:
    now = copy.deepcopy(BASE)
    now["datasets"]["ds"]["sha256"] = "def"
    gate = check_regressions(BASE, now, 0.01)
    assert not gate.passed
    assert "sha256 'def' differs from the baseline's 'abc'" in gate.problems[0]


def test_bad_gate_inputs() -> None:
    with pytest.raises(BenchError, match="--max-drop must be at least 0"):
        check_regressions(BASE, BASE, -0.1)
    with pytest.raises(BenchError, match="--max-drop must be a number"):
        check_regressions(BASE, BASE, "0.1")  # type: ignore[arg-type]
    bad = results(**{"recal@5": 0.8})
    with pytest.raises(BenchError, match="unknown metric 'recal@5'"):
        check_regressions(bad, bad, 0.01)


def styled(hard_recall: float, fpr: float, *, hard_n: int = 60, neg_n: int = 60) -> dict[str, Any]:
    data = results(**{"recall@5": 0.80, "false_positive_rate": 0.30})
    entry = data["datasets"]["ds"]
    entry["split"] = "test"
    entry["style_counts"] = {
        "hard": {"queries": hard_n, "positives": hard_n, "negatives": 0},
        "keywords": {"queries": 12, "positives": 12, "negatives": 0},
        "negative": {"queries": neg_n, "positives": 0, "negatives": neg_n},
    }
    for run in entry["backends"].values():
        run["by_style"] = {
            "hard": {"recall@5": hard_recall},
            "keywords": {"recall@5": 0.99},
            "negative": {"false_positive_rate": fpr},
        }
    return data


def test_a_regression_on_one_style_fails_even_when_the_aggregate_holds() -> None:
    base = styled(0.50, 0.30)
    now = styled(0.45, 0.30)  # hard drops 5 points; the aggregate recall@5 is unchanged
    gate = check_regressions(base, now, 0.01)
    assert not gate.passed
    assert {(r.backend, r.style, r.metric) for r in gate.regressions} == {
        ("keyword", "hard", "recall@5"),
        ("bm25", "hard", "recall@5"),
    }
    assert (
        "ds/keyword [hard]: recall@5 0.5000 → 0.4500 (-0.0500) > max drop 0.01" in (gate.lines()[0])
    )
    # the per-style allowance is its own
    assert check_regressions(base, now, 0.01, style_max_drop=0.06).passed


def test_the_false_positive_rate_of_the_negative_style_is_gated() -> None:
    gate = check_regressions(styled(0.5, 0.30), styled(0.5, 0.40), 0.01)
    assert {(r.style, r.metric) for r in gate.regressions} == {("negative", "false_positive_rate")}


def test_small_styles_are_listed_but_not_gated() -> None:
    base, now = styled(0.50, 0.30), styled(0.50, 0.30)
    for run in now["datasets"]["ds"]["backends"].values():
        run["by_style"]["keywords"]["recall@5"] = 0.5  # 12 queries: below the minimum
    gate = check_regressions(base, now, 0.01)
    assert gate.passed
    assert "style not gated: ds [keywords] positives: 12 < 50 queries" in gate.lines()
    assert gate.compared_styles == 4  # hard and negative, two backends
    assert gate.lines()[-1] == (
        "gate passed: 4 quality metrics within 0.01 of the baseline, "
        "and 4 per-style metrics within 0.01"
    )
    # a lower minimum gates it
    assert not check_regressions(base, now, 0.01, min_style_queries=10).passed
    with pytest.raises(BenchError, match="--min-style-queries must be a positive integer"):
        check_regressions(base, now, 0.01, min_style_queries=0)


def test_a_style_missing_from_the_run_and_a_different_split_fail() -> None:
    base, now = styled(0.50, 0.30), styled(0.50, 0.30)
    del now["datasets"]["ds"]["backends"]["bm25"]["by_style"]["hard"]
    gate = check_regressions(base, now, 0.01)
    assert gate.problems == [
        "ds/bm25 [hard]: recall@5 is in the baseline but was not computed "
        "(run with the same --k / --metrics / --split)"
    ]
    now = styled(0.50, 0.30)
    now["datasets"]["ds"]["split"] = "dev"
    gate = check_regressions(base, now, 0.01)
    assert not gate.passed and "split 'dev' differs from the baseline's 'test'" in gate.problems[0]
