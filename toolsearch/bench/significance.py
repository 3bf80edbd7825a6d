"""Paired significance tests between backends, with ranx's tests.

Every pair of backends is tested on every chosen metric over the same positive queries (the
tests are paired: query by query). Two tests are offered, both two-sided:

``student``  paired Student's t-test on the per-query differences (ranx ``"student"``);
``fisher``   Fisher's randomization (permutation) test, 1,000 permutations, seed 42 (ranx
             ``"fisher"``; recommended for IR by Smucker, Allan & Carterette, CIKM 2007).

With more than two backends each metric is tested on several pairs, so the p-values of one
metric's pairs are corrected for multiple comparisons: Holm's step-down method by default
(Holm, Scand. J. Statistics 1979; it controls the family-wise error rate like Bonferroni's
and rejects at least as often), or Bonferroni's, or none. The family is one metric's pairs on
one dataset. ranx 0.3 has no correction, so it is applied here to ranx's p-values. Each result
says which test, which correction, how many queries and which threshold were used.
``complete@k`` has no ranx implementation, so the tests cover the ranx metrics (recall, hit,
mrr, ndcg). Queries with alternative tools are tested on their group view (see
:mod:`toolsearch.bench.metrics`).

The tests are ranx's own functions, run on the per-query values of
:func:`~toolsearch.bench.metrics.per_query_scores` (equal to ranx's), pair by pair as ranx
``compare`` runs them: building ranx's ``Qrels`` and ``Run`` would compile numba containers
for about a minute in every process, even for ten queries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from toolsearch.bench._ranx import import_ranx, quiet
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import RUN_DEPTH, Groups, Metric, per_query_scores

__all__ = [
    "CORRECTIONS",
    "STAT_TESTS",
    "PairTest",
    "Significance",
    "adjust_p_values",
    "check_max_p",
    "check_testable",
    "compare_backends",
    "default_significance_metrics",
    "significance_metrics",
]

#: ranx test ids and the names printed with their results.
STAT_TESTS: Mapping[str, str] = {
    "student": "two-sided paired Student's t-test",
    "fisher": "two-sided Fisher's randomization test (1,000 permutations)",
}

#: Multiple-comparison corrections and the names printed with their results.
CORRECTIONS: Mapping[str, str] = {
    "holm": "Holm-Bonferroni correction",
    "bonferroni": "Bonferroni correction",
    "none": "no multiple-comparison correction",
}


@dataclass(frozen=True, slots=True)
class PairTest:
    """One metric compared between two backends: their means, the test's p-value and the
    p-value after the multiple-comparison correction (what ``significant`` is decided on)."""

    a: str
    b: str
    metric: str
    mean_a: float
    mean_b: float
    p_value: float
    significant: bool
    p_adjusted: float

    @property
    def delta(self) -> float:
        """``mean_b - mean_a``."""
        return self.mean_b - self.mean_a


@dataclass(frozen=True, slots=True)
class Significance:
    """The paired tests of one dataset."""

    test: str
    test_name: str
    n_queries: int
    max_p: float
    metrics: tuple[str, ...]
    pairs: tuple[PairTest, ...]
    correction: str = "none"

    @property
    def family_size(self) -> int:
        """How many pairs each metric's correction covers."""
        return len(self.pairs) // max(1, len(self.metrics))

    def describe(self) -> str:
        """One line: the test, the correction, the number of queries and the threshold."""
        correction = CORRECTIONS[self.correction]
        if self.correction != "none" and self.family_size == 1:
            correction = "one pair per metric, so no multiple-comparison correction applies"
        elif self.correction != "none":
            correction += f" over the {self.family_size} pairs of each metric"
        return (
            f"{self.test_name} (ranx compare), n = {self.n_queries} queries, "
            f"significant at p < {self.max_p:g}, {correction}"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "test": self.test,
            "test_name": self.test_name,
            "correction": self.correction,
            "n_queries": self.n_queries,
            "max_p": self.max_p,
            "metrics": list(self.metrics),
            "pairs": [
                {
                    "a": p.a,
                    "b": p.b,
                    "metric": p.metric,
                    "mean_a": p.mean_a,
                    "mean_b": p.mean_b,
                    "p_value": p.p_value,
                    "p_adjusted": p.p_adjusted,
                    "significant": p.significant,
                }
                for p in self.pairs
            ],
        }


def significance_metrics(metrics: Sequence[Metric]) -> list[Metric]:
    """The metrics among ``metrics`` that ranx can test (all ranked ones but complete@k)."""
    return [m for m in metrics if m.ranked and m.family != "complete"]


def default_significance_metrics(metrics: Sequence[Metric]) -> list[Metric]:
    """The few metrics tested by default: recall@5 (else the deepest recall@k measured),
    ndcg@10 and mrr@10 when measured — every pair on every metric would bury the signal."""
    testable = significance_metrics(metrics)
    recalls = [m for m in testable if m.family == "recall"]
    chosen: list[Metric] = []
    five = [m for m in recalls if m.k == 5]
    if five or recalls:
        chosen.append(five[0] if five else max(recalls, key=lambda m: m.k or 0))
    chosen += [m for m in testable if m.name in ("ndcg@10", "mrr@10")]
    return chosen or testable


def adjust_p_values(p_values: Sequence[float], correction: str) -> list[float]:
    """The p-values of one family after ``correction`` (``holm``, ``bonferroni``, ``none``),
    in the given order. Holm: the i-th smallest of m is multiplied by ``m - i + 1``, kept
    non-decreasing in that order, capped at 1."""
    if correction not in CORRECTIONS:
        raise BenchError(f"unknown correction {correction!r}; choose from {', '.join(CORRECTIONS)}")
    m = len(p_values)
    if correction == "none":
        return list(p_values)
    if correction == "bonferroni":
        return [min(1.0, p * m) for p in p_values]
    adjusted = [0.0] * m
    running = 0.0
    for step, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - step) * p_values[index]))
        adjusted[index] = running
    return adjusted


def compare_backends(
    qrels: Mapping[str, Mapping[str, int]],
    ranked: Mapping[str, Mapping[str, Sequence[str]]],
    metrics: Sequence[Metric],
    *,
    test: str = "student",
    max_p: float = 0.05,
    depth: int = RUN_DEPTH,
    groups: Groups | None = None,
    correction: str = "holm",
) -> Significance:
    """Test every pair of backends of ``ranked`` (``{backend: {qid: tool names}}``) on the
    ``metrics`` over the queries of ``qrels`` (with ``groups`` of alternatives, if any), and
    correct each metric's p-values with ``correction``.

    A pair whose per-query values are identical has p = 1 (the t-test is undefined there).
    """
    testable = _check_request(qrels, ranked, metrics, test, max_p, correction)
    scores = {
        name: per_query_scores(qrels, run, testable, depth=depth, groups=groups)
        for name, run in ranked.items()
    }
    with quiet():
        pairs = _pair_tests(scores, list(qrels), test, correction, max_p)
    return Significance(
        test=test,
        test_name=STAT_TESTS[test],
        n_queries=len(qrels),
        max_p=max_p,
        metrics=tuple(m.name for m in testable),
        pairs=tuple(pairs),
        correction=correction,
    )


def check_max_p(max_p: object) -> float:
    """The significance threshold, checked: a number strictly between 0 and 1."""
    if isinstance(max_p, bool) or not isinstance(max_p, int | float) or not 0 < max_p < 1:
        raise BenchError(f"--max-p: the p-value threshold must be between 0 and 1, got {max_p}")
    return float(max_p)


def check_testable(metrics: Sequence[Metric]) -> list[Metric]:
    """``metrics`` when every one can be tested for significance, else an error naming those
    that cannot."""
    testable = significance_metrics(metrics)
    untestable = [m.name for m in metrics if m not in testable]
    if untestable or not testable:
        raise BenchError(
            f"cannot test {', '.join(untestable) or 'an empty metric list'} for significance: "
            "the paired tests cover ranx's recall@k, hit@k, mrr@k and ndcg@k "
            "(complete@k and false_positive_rate have no ranx implementation)"
        )
    return testable


def _check_request(
    qrels: Mapping[str, Mapping[str, int]],
    ranked: Mapping[str, Mapping[str, Sequence[str]]],
    metrics: Sequence[Metric],
    test: str,
    max_p: float,
    correction: str,
) -> list[Metric]:
    """Validate a :func:`compare_backends` call; the metrics to test."""
    if correction not in CORRECTIONS:
        raise BenchError(f"unknown correction {correction!r}; choose from {', '.join(CORRECTIONS)}")
    if test not in STAT_TESTS:
        raise BenchError(f"unknown significance test {test!r}; choose from {', '.join(STAT_TESTS)}")
    check_max_p(max_p)
    testable = check_testable(metrics)
    if len(ranked) < 2:
        raise BenchError("significance tests need at least two backends")
    if len(qrels) < 2:
        raise BenchError("significance tests need at least two judged queries")
    for name, run in ranked.items():
        missing = [qid for qid in qrels if qid not in run]
        if missing:
            raise BenchError(f"backend {name!r} has no result for query {missing[0]!r}")
    return testable


def _pair_tests(
    scores: Mapping[str, Mapping[str, Mapping[str, float]]],
    query_ids: Sequence[str],
    test: str,
    correction: str,
    max_p: float,
) -> list[PairTest]:
    """Every pair's result (``scores``: ``{backend: {metric: {qid: value}}}``), each metric's
    p-values corrected. Each pair is tested as ranx ``compare`` leaves it: the later backend
    as control, 1,000 permutations and seed 42 for Fisher's test."""
    import numpy as np

    raw: dict[tuple[str, str, str], float] = {}
    means: dict[tuple[str, str], float] = {}
    for name, by_metric in scores.items():
        for metric, values in by_metric.items():
            means[name, metric] = float(np.mean([values[q] for q in query_ids]))
    for a, b in combinations(scores, 2):
        for metric in scores[a]:
            treatment = np.array([scores[a][metric][q] for q in query_ids], dtype=np.float64)
            control = np.array([scores[b][metric][q] for q in query_ids], dtype=np.float64)
            if np.array_equal(control, treatment):
                raw[a, b, metric] = 1.0  # the t-test is undefined on identical values
                continue
            if test == "fisher":
                p_value, _ = import_ranx().statistical_tests.fisher_randomization_test(
                    control, treatment, 1000, max_p, 42
                )
            else:
                # ranx's paired_student_t_test is this call; scipy alone imports in a second
                from scipy.stats import ttest_rel

                p_value = ttest_rel(control, treatment, alternative="two-sided").pvalue
            raw[a, b, metric] = 1.0 if math.isnan(p_value) else float(p_value)
    adjusted: dict[tuple[str, str, str], float] = {}
    for metric in {key[2] for key in raw}:
        family = [key for key in raw if key[2] == metric]
        adjusted.update(
            zip(family, adjust_p_values([raw[key] for key in family], correction), strict=True)
        )
    return [
        PairTest(
            a=a,
            b=b,
            metric=metric,
            mean_a=means[a, metric],
            mean_b=means[b, metric],
            p_value=p_value,
            significant=adjusted[a, b, metric] < max_p,
            p_adjusted=adjusted[a, b, metric],
        )
        for (a, b, metric), p_value in raw.items()
    ]
