"""Retrieval-quality metrics named as strings, with ranx's definitions.

A metric name is ``<family>@<k>`` (``"recall@5"``) or ``false_positive_rate``. A query's gold
tools come in *groups* of alternatives (see :mod:`toolsearch.dataset`): the query needs one
tool from each group; without groups every gold tool is a group of its own. Per query, with
``G`` its groups and ``top_k`` the first ``k`` tools ToolSearch returned, a group is
*satisfied* when one of its tools is in ``top_k``:

``recall@k``    satisfied groups / ``|G|`` (ranx ``recall@k`` when every group is one tool)
``hit@k``       1 if any group is satisfied, else 0 — "success" in trec_eval (ranx
                ``hit_rate@k``)
``complete@k``  1 if every group is satisfied, else 0: the query can be served with ``k``
                loaded tools. ranx has no such metric; it is read off the per-query
                ``recall@k`` (complete exactly when recall is 1)
``mrr@k``       reciprocal rank of the first gold tool within ``top_k``, 0 if none (ranx
                ``mrr@k``; Voorhees, TREC-8 QA, 1999)
``ndcg@k``      DCG of ``top_k`` with linear gains ``grade / log2(rank + 1)`` over the ideal
                DCG (ranx ``ndcg@k``; Järvelin & Kekäläinen, TOIS 2002). With groups, each
                group is one relevant item whose grade is its best member's: the first of its
                tools returned earns that gain, a second alternative earns nothing (it is
                redundant), and the ideal ranking holds one tool per group

Groups are evaluated on a *group view* of each query (:func:`group_view`): the qrels judge
one item per group and the run names a group at the rank of its first tool returned, later
alternatives replaced by never-relevant placeholders so no rank moves. Every metric above is
then ranx's own, and so are the significance tests on them.

The per-query values are computed here, in plain Python, by ranx's definitions (the tests
check them equal to ranx's on every bundled query): ranx builds numba typed containers that
are compiled anew in every process, about a minute on two cores, which a benchmark of a
ten-tool catalogue should not wait for. ranx runs the significance tests
(:mod:`toolsearch.bench.significance`).

Each is averaged over the *positive* queries (those with at least one gold tool).
``false_positive_rate`` is measured on the *negative* queries instead (no tool answers them):
the share of them whose top result is not abstained from — see :func:`is_false_positive`.
Lower is better for it, higher for every other metric.

ranx re-sorts a run by score, so runs are handed to it with rank-derived scores
(:func:`rank_scores`): the order ToolSearch returned is exactly the order evaluated, whatever
ties the backend's own scores had.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from toolsearch.bench.errors import BenchError
from toolsearch.engine import Match

__all__ = [
    "FALSE_POSITIVE_RATE",
    "FAMILIES",
    "RUN_DEPTH",
    "Groups",
    "Metric",
    "abstention_threshold",
    "default_metrics",
    "false_positive_rate",
    "group_view",
    "is_false_positive",
    "mean",
    "parse_k_list",
    "parse_metric",
    "parse_metrics",
    "per_query_scores",
    "rank_scores",
]

#: How many results each benchmark query asks ToolSearch for (its ``max_results``).
RUN_DEPTH = 100

#: Ranked-metric families and the ranx metric each is computed from.
FAMILIES: Mapping[str, str] = {
    "recall": "recall",
    "hit": "hit_rate",
    "complete": "recall",
    "mrr": "mrr",
    "ndcg": "ndcg",
}

FALSE_POSITIVE_RATE = "false_positive_rate"

#: ``{query id: groups}``, each group the tuple of alternative tools that satisfy it.
Groups = Mapping[str, Sequence[Sequence[str]]]

_NAME = re.compile(r"^([a-z_]+)@(\d+)$")


@dataclass(frozen=True, slots=True)
class Metric:
    """A parsed metric name: its family and cutoff (None for ``false_positive_rate``)."""

    family: str
    k: int | None = None

    @property
    def name(self) -> str:
        """The canonical name, e.g. ``"recall@5"``."""
        return self.family if self.k is None else f"{self.family}@{self.k}"

    @property
    def ranked(self) -> bool:
        """True for metrics of the positive queries' rankings (not the false-positive rate)."""
        return self.k is not None

    @property
    def higher_is_better(self) -> bool:
        """Which way an improvement goes (only the false-positive rate improves downwards)."""
        return self.family != FALSE_POSITIVE_RATE

    @property
    def ranx_name(self) -> str | None:
        """The ranx metric this one is read from (``"hit_rate@5"`` for ``hit@5``)."""
        if self.k is None:
            return None
        return f"{FAMILIES[self.family]}@{self.k}"

    def __str__(self) -> str:
        return self.name


def _known() -> str:
    return ", ".join(f"{family}@k" for family in FAMILIES) + f", {FALSE_POSITIVE_RATE}"


def parse_metric(name: str, *, max_k: int = RUN_DEPTH) -> Metric:
    """Parse ``"recall@5"`` and the like; anything else raises :class:`BenchError` naming the
    known metrics. ``k`` must be between 1 and ``max_k`` (the run depth)."""
    if not isinstance(name, str):
        raise BenchError(f"a metric name must be a string, got {name!r}")
    text = name.strip().lower()
    if text == FALSE_POSITIVE_RATE:
        return Metric(FALSE_POSITIVE_RATE)
    match = _NAME.match(text)
    if match is None or match.group(1) not in FAMILIES:
        family = text.split("@", 1)[0]
        if family in FAMILIES and "@" not in text:
            raise BenchError(f"metric {name!r} needs a cutoff, e.g. '{family}@10'")
        raise BenchError(f"unknown metric {name!r}; known metrics: {_known()}")
    k = int(match.group(2))
    if not 1 <= k <= max_k:
        raise BenchError(f"metric {name!r}: k must be between 1 and the run depth {max_k}")
    return Metric(match.group(1), k)


def parse_metrics(names: Iterable[str], *, max_k: int = RUN_DEPTH) -> list[Metric]:
    """Parse several names (a comma-separated string is split), dropping repeats."""
    if isinstance(names, str):
        names = [part for part in names.split(",") if part.strip()]
    parsed = [parse_metric(name, max_k=max_k) for name in names]
    if not parsed:
        raise BenchError(f"no metric given; known metrics: {_known()}")
    return list(dict.fromkeys(parsed))


def parse_k_list(text: str, *, max_k: int = RUN_DEPTH) -> list[int]:
    """``"1,3,5,10"`` → ``[1, 3, 5, 10]`` (sorted, repeats dropped, each 1..max_k)."""
    ks: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            k = int(part)
        except ValueError:
            raise BenchError(f"--k: {part!r} is not an integer (expected e.g. 1,3,5,10)") from None
        if not 1 <= k <= max_k:
            raise BenchError(f"--k: {k} is out of range; k must be between 1 and {max_k}")
        ks.add(k)
    if not ks:
        raise BenchError(f"--k: no cutoff in {text!r} (expected e.g. 1,3,5,10)")
    return sorted(ks)


def default_metrics(ks: Sequence[int] = (1, 3, 5, 10)) -> list[Metric]:
    """``recall@k``, ``hit@k`` and ``complete@k`` for each ``k``, then ``mrr@10``, ``ndcg@10``."""
    metrics = [Metric(family, k) for family in ("recall", "hit", "complete") for k in ks]
    return [*metrics, Metric("mrr", 10), Metric("ndcg", 10)]


def rank_scores(names: Sequence[str], depth: int = RUN_DEPTH) -> dict[str, float]:
    """``{tool: depth + 1 - rank}``: strictly decreasing scores that keep the returned order
    through any tool (ranx, trec_eval) that re-sorts by score."""
    if len(names) > depth:
        raise BenchError(f"a run has {len(names)} results, more than its depth {depth}")
    return {name: float(depth - i) for i, name in enumerate(names)}


def _grouped(query_groups: Sequence[Sequence[str]]) -> bool:
    return any(len(group) > 1 for group in query_groups)


def group_view(
    qrels: Mapping[str, Mapping[str, int]],
    groups: Groups | None,
    runs: Mapping[str, Mapping[str, Sequence[str]]],
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[str]]]]:
    """Qrels and runs (``{run name: {qid: tool names}}``) with each group of alternatives
    folded into one item (see the module docstring). Queries whose groups are single tools
    are passed through unchanged, so without alternatives this is the identity."""
    view_qrels: dict[str, dict[str, int]] = {}
    view_runs: dict[str, dict[str, list[str]]] = {name: {} for name in runs}
    for qid, gold in qrels.items():
        query_groups = groups.get(qid) if groups is not None else None
        if not query_groups or not _grouped(query_groups):
            view_qrels[qid] = dict(gold)
            for name, run in runs.items():
                view_runs[name][qid] = list(run[qid])
            continue
        item_of: dict[str, str] = {}
        view_qrels[qid] = {}
        for number, members in enumerate(query_groups, start=1):
            item = f"(group {number})"  # contains a space: never a tool's name
            view_qrels[qid][item] = max(gold.get(tool, 0) for tool in members)
            item_of.update(dict.fromkeys(members, item))
        for name, run in runs.items():
            seen: set[str] = set()
            names: list[str] = []
            for rank, tool in enumerate(run[qid], start=1):
                group_item = item_of.get(tool)
                if group_item is None:
                    names.append(tool)
                elif group_item in seen:
                    names.append(f"(alternative at rank {rank})")
                else:
                    seen.add(group_item)
                    names.append(group_item)
            view_runs[name][qid] = names
    return view_qrels, view_runs


def per_query_scores(
    qrels: Mapping[str, Mapping[str, int]],
    ranked: Mapping[str, Sequence[str]],
    metrics: Sequence[Metric],
    *,
    depth: int = RUN_DEPTH,
    groups: Groups | None = None,
) -> dict[str, dict[str, float]]:
    """``{metric name: {query id: value}}`` for every query of ``qrels`` (positive queries).

    ``ranked[qid]`` is the list of tool names ToolSearch returned, best first. Every query of
    ``qrels`` must have an entry (possibly empty): a missing one is an error, never a skip.
    ``groups`` gives each query's groups of alternatives (None: every gold tool is its own).
    ``false_positive_rate`` is not computed here (see :func:`false_positive_rate`).
    """
    missing = [qid for qid in qrels if qid not in ranked]
    if missing:
        raise BenchError(
            f"the run has no result for {len(missing)} judged queries (first: {missing[0]!r})"
        )
    wanted = [m for m in metrics if m.ranked]
    if not qrels or not wanted:
        return {m.name: {} for m in wanted}
    qrels, views = group_view(qrels, groups, {"run": ranked})
    ranked = views["run"]
    for qid in qrels:
        rank_scores(ranked[qid], depth)  # a run deeper than ``depth`` is an error
    relevant = {qid: {t: g for t, g in gold.items() if g > 0} for qid, gold in qrels.items()}
    out: dict[str, dict[str, float]] = {}
    for metric in wanted:
        score = _SCORERS[FAMILIES[metric.family]]
        k = metric.k or 0
        values = {qid: score(relevant[qid], ranked[qid][:k], k) for qid in qrels}
        if metric.family == "complete":
            values = {q: 1.0 if v >= 1.0 - 1e-9 else 0.0 for q, v in values.items()}
        out[metric.name] = values
    return out


# ranx's definitions (ranx.metrics), on one query: ``relevant`` maps each relevant item
# (grade > 0) to its grade, ``top`` is the first ``k`` items returned.


def _recall(relevant: Mapping[str, int], top: Sequence[str], k: int) -> float:
    if not relevant:
        return 0.0
    return sum(1 for item in top if item in relevant) / len(relevant)


def _hit_rate(relevant: Mapping[str, int], top: Sequence[str], k: int) -> float:
    return 1.0 if any(item in relevant for item in top) else 0.0


def _mrr(relevant: Mapping[str, int], top: Sequence[str], k: int) -> float:
    for rank, item in enumerate(top, start=1):
        if item in relevant:
            return 1.0 / rank
    return 0.0


def _ndcg(relevant: Mapping[str, int], top: Sequence[str], k: int) -> float:
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(grade / math.log2(rank + 1) for rank, grade in enumerate(ideal, start=1))
    if idcg == 0:
        return 0.0
    dcg = sum(relevant.get(item, 0) / math.log2(rank + 1) for rank, item in enumerate(top, start=1))
    return dcg / idcg


_SCORERS: Mapping[str, Callable[[Mapping[str, int], Sequence[str], int], float]] = {
    "recall": _recall,
    "hit_rate": _hit_rate,
    "mrr": _mrr,
    "ndcg": _ndcg,
}


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean (0.0 for no values)."""
    items = list(values)
    return float(sum(items) / len(items)) if items else 0.0


def abstention_threshold(backend: object) -> float | None:
    """The score below which ``backend`` abstains: its ``abstain_below`` attribute, else the
    ``abstain_below`` entry of its ``params()``; None when it has no such threshold."""
    value = getattr(backend, "abstain_below", None)
    if value is None:
        params = getattr(backend, "params", None)
        if callable(params):
            found = params()
            if isinstance(found, Mapping):
                value = found.get("abstain_below")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchError(
            f"backend {type(backend).__name__}: abstain_below must be a number, got {value!r}"
        )
    return float(value)


def is_false_positive(matches: Sequence[Match], threshold: float | None) -> bool:
    """Whether a negative query's result wrongly offers a tool.

    No match → no. With no abstention threshold any match counts. With one, the top match
    counts unless its score is below the threshold; a fast-path match (exact name, ``select:``
    or ``mcp__`` prefix) has no score and always counts.
    """
    if not matches:
        return False
    top = matches[0]
    if threshold is None or top.score is None:
        return True
    return top.score >= threshold


def false_positive_rate(
    results: Mapping[str, Sequence[Match]],
    negatives: Sequence[str],
    threshold: float | None,
) -> float:
    """Share of the ``negatives`` query ids whose result :func:`is_false_positive`."""
    missing = [qid for qid in negatives if qid not in results]
    if missing:
        raise BenchError(
            f"the run has no result for {len(missing)} negative queries (first: {missing[0]!r})"
        )
    return mean(1.0 if is_false_positive(results[q], threshold) else 0.0 for q in negatives)
