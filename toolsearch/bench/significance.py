"""Paired significance tests between backends, with ranx ``compare``.

Every pair of backends is tested on every chosen metric over the same positive queries (the
tests are paired: query by query). Two tests are offered, both two-sided:

``student``  paired Student's t-test on the per-query differences (ranx ``"student"``);
``fisher``   Fisher's randomization (permutation) test, 1,000 permutations, seed 42 (ranx
             ``"fisher"``; recommended for IR by Smucker, Allan & Carterette, CIKM 2007).

No correction for multiple comparisons is applied; each result says which test, how many
queries and which p-value threshold were used. ``complete@k`` has no ranx implementation, so
the tests cover the ranx metrics (recall, hit, mrr, ndcg).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from toolsearch.bench._ranx import import_ranx, quiet, to_ranx
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import RUN_DEPTH, Metric, rank_scores

__all__ = [
    "STAT_TESTS",
    "PairTest",
    "Significance",
    "compare_backends",
    "default_significance_metrics",
    "significance_metrics",
]

#: ranx test ids and the names printed with their results.
STAT_TESTS: Mapping[str, str] = {
    "student": "two-sided paired Student's t-test",
    "fisher": "two-sided Fisher's randomization test (1,000 permutations)",
}


@dataclass(frozen=True, slots=True)
class PairTest:
    """One metric compared between two backends: their means and the test's p-value."""

    a: str
    b: str
    metric: str
    mean_a: float
    mean_b: float
    p_value: float
    significant: bool

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

    def describe(self) -> str:
        """One line: the test, the number of queries and the threshold."""
        return (
            f"{self.test_name} (ranx compare), n = {self.n_queries} queries, "
            f"significant at p < {self.max_p:g}, no multiple-comparison correction"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "test": self.test,
            "test_name": self.test_name,
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


def compare_backends(
    qrels: Mapping[str, Mapping[str, int]],
    ranked: Mapping[str, Mapping[str, Sequence[str]]],
    metrics: Sequence[Metric],
    *,
    test: str = "student",
    max_p: float = 0.05,
    depth: int = RUN_DEPTH,
) -> Significance:
    """Test every pair of backends of ``ranked`` (``{backend: {qid: tool names}}``) on the
    ``metrics`` over the queries of ``qrels``.

    A pair whose per-query values are identical has p = 1 (the t-test is undefined there).
    """
    if test not in STAT_TESTS:
        raise BenchError(f"unknown significance test {test!r}; choose from {', '.join(STAT_TESTS)}")
    if not 0 < max_p < 1:
        raise BenchError(f"the p-value threshold must be between 0 and 1, got {max_p}")
    testable = significance_metrics(metrics)
    untestable = [m.name for m in metrics if m not in testable]
    if untestable or not testable:
        raise BenchError(
            f"cannot test {', '.join(untestable) or 'an empty metric list'} for significance: "
            "the paired tests cover ranx's recall@k, hit@k, mrr@k and ndcg@k "
            "(complete@k and false_positive_rate have no ranx implementation)"
        )
    names = list(ranked)
    if len(names) < 2:
        raise BenchError("significance tests need at least two backends")
    if len(qrels) < 2:
        raise BenchError("significance tests need at least two judged queries")
    for name in names:
        missing = [qid for qid in qrels if qid not in ranked[name]]
        if missing:
            raise BenchError(f"backend {name!r} has no result for query {missing[0]!r}")
    ranx = import_ranx()
    ranx_qrels, ranx_runs = to_ranx(
        qrels,
        {name: {qid: rank_scores(ranked[name][qid], depth) for qid in qrels} for name in names},
    )
    runs = [ranx_runs[name] for name in names]
    metric_of = {m.ranx_name: m.name for m in testable}
    with quiet():
        report = ranx.compare(
            ranx_qrels,
            runs,
            metrics=list(metric_of),
            stat_test=test,
            max_p=max_p,
            n_permutations=1000,
            random_seed=42,
            make_comparable=False,
        )
    pairs: list[PairTest] = []
    for a, b in combinations(names, 2):
        for ranx_name, metric in metric_of.items():
            result = report.comparisons[a, b][ranx_name]
            p_value = float(result["p_value"])
            wtl = report.win_tie_loss[(a, b)][ranx_name]
            if math.isnan(p_value) or wtl["T"] == len(qrels):
                p_value = 1.0
            pairs.append(
                PairTest(
                    a=a,
                    b=b,
                    metric=metric,
                    mean_a=float(report.results[a][ranx_name]),
                    mean_b=float(report.results[b][ranx_name]),
                    p_value=p_value,
                    significant=p_value < max_p,
                )
            )
    return Significance(
        test=test,
        test_name=STAT_TESTS[test],
        n_queries=len(qrels),
        max_p=max_p,
        metrics=tuple(metric_of.values()),
        pairs=tuple(pairs),
    )
