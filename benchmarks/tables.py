"""Markdown tables of a saved results JSON (``toolsearch bench --json-out``), for publishing.

The quality tables of docs/results.md and the README are rendered by these functions from the
committed JSON files in ``benchmarks/results/`` (``python -m benchmarks.regenerate``), never
typed by hand, so a table
cannot disagree with the numbers it cites; a test re-renders them and compares. They read the
JSON (the documented schema in :mod:`toolsearch.bench.artefacts`), not live run objects, so
any saved run can be published.

Each table says which split it scores and how many queries, and each mean carries its 95 %
bootstrap interval ``[low, high]``; the significance table gives the corrected p-values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolsearch.bench.costs import TOKEN_K
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import FALSE_POSITIVE_RATE

__all__ = [
    "HEADLINE_METRICS",
    "headline_table",
    "significance_summary",
    "style_table",
]

#: The columns of a headline table, in order, with their short headers.
HEADLINE_METRICS: Mapping[str, str] = {
    "recall@1": "R@1",
    "recall@5": "R@5",
    "recall@10": "R@10",
    "complete@5": "complete@5",
    "mrr@10": "mrr@10",
    "ndcg@10": "ndcg@10",
    FALSE_POSITIVE_RATE: "false pos.",
}


def _dataset(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    entry = data.get("datasets", {}).get(name)
    if not isinstance(entry, Mapping):
        found = ", ".join(data.get("datasets", {})) or "none"
        raise BenchError(f"the results have no dataset {name!r} (found: {found})")
    return entry


def _short(value: float) -> str:
    """``.601`` (three decimals, no leading zero, as in the published tables)."""
    text = f"{value:.3f}"
    return text[1:] if text.startswith("0.") else text


def _cell(run: Mapping[str, Any], metric: str) -> str:
    value = run.get("metrics", {}).get(metric)
    if value is None:
        return "—"
    bounds = run.get("ci95", {}).get(metric)
    if not bounds:
        return _short(value)
    return f"{_short(value)} [{_short(bounds[0])}, {_short(bounds[1])}]"


def _ordered(entry: Mapping[str, Any], by: str) -> list[tuple[str, Mapping[str, Any]]]:
    """Backends best first by ``by`` (then by name, so ties keep a fixed order)."""
    runs = list(entry.get("backends", {}).items())
    return sorted(runs, key=lambda item: (-item[1].get("metrics", {}).get(by, 0.0), item[0]))


def _counts(entry: Mapping[str, Any]) -> tuple[int, int]:
    """Positive and negative queries of the run."""
    return int(entry.get("n_positives", 0)), int(entry.get("n_negatives", 0))


def headline_table(
    data: Mapping[str, Any],
    dataset: str,
    *,
    metrics: Sequence[str] = tuple(HEADLINE_METRICS),
    order_by: str = "ndcg@10",
    tokens: bool = True,
) -> str:
    """Quality of every backend on one dataset: a caption line, then a Markdown table with
    each mean and its 95 % bootstrap interval; backends best first by ``order_by``."""
    entry = _dataset(data, dataset)
    runs = _ordered(entry, order_by)
    present = [m for m in metrics if any(m in run.get("metrics", {}) for _, run in runs)]
    headers = ["backend", *[HEADLINE_METRICS.get(m, m) for m in present]]
    if tokens:
        headers.append("tokens all → with search")
    lines = [
        "| " + " | ".join(headers) + " |",
        "|---|" + "---:|" * (len(headers) - 1),
    ]
    for backend, run in runs:
        cells = [backend, *[_cell(run, m) for m in present]]
        if tokens:
            spent = run.get("tokens", {})
            cells.append(f"{spent.get('all_tools', 0):,} → {spent.get('with_search', 0):,}")
        lines.append("| " + " | ".join(cells) + " |")
    positives, negatives = _counts(entry)
    split = entry.get("split", "all")
    sample = f"{entry.get('n_queries', 0):,} queries of the {split} split"
    caption = (
        f"{sample} ({positives:,} with gold tools, {negatives:,} negative), "
        f"{entry.get('n_tools', 0):,} tools; [low, high] = 95 % bootstrap interval over "
        f"queries; dataset sha256 {str(entry.get('sha256', ''))[:12]}"
    )
    if tokens:
        caption += f"; tokens: every tool definition vs. ToolSearch + top {TOKEN_K}"
    return "\n".join([caption, "", *lines])


def style_table(data: Mapping[str, Any], dataset: str, *, metric: str = "recall@5") -> str:
    """One metric per query style (rows: backends best first on all queries); the negative
    style shows the false-positive rate. Counts per style are in the header."""
    entry = _dataset(data, dataset)
    counts = entry.get("style_counts", {})
    styles = list(counts)
    headers = ["backend"]
    for style in styles:
        c = counts[style]
        shown = "false pos." if not c.get("positives") else metric
        headers.append(f"{style} ({shown}, n = {c.get('queries', 0)})")
    lines = ["| " + " | ".join(headers) + " |", "|---|" + "---:|" * len(styles)]
    for backend, run in _ordered(entry, metric):
        row = [backend]
        for style in styles:
            values = run.get("by_style", {}).get(style, {})
            value = values.get(metric, values.get(FALSE_POSITIVE_RATE))
            row.append("—" if value is None else _short(value))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def significance_summary(data: Mapping[str, Any], dataset: str) -> str:
    """The paired tests of one dataset: Δ (b - a) per pair and metric, with the corrected
    p-value; ``*`` marks a difference significant after the correction."""
    entry = _dataset(data, dataset)
    sig = entry.get("significance")
    if not isinstance(sig, Mapping):
        return "No paired tests in these results (fewer than two backends)."
    metrics = list(sig.get("metrics", []))
    by_pair: dict[tuple[str, str], dict[str, str]] = {}
    for pair in sig.get("pairs", []):
        delta = pair["mean_b"] - pair["mean_a"]
        mark = "*" if pair.get("significant") else ""
        p_value = pair.get("p_adjusted", pair["p_value"])
        by_pair.setdefault((pair["a"], pair["b"]), {})[pair["metric"]] = (
            f"{delta:+.3f} (p {p_value:.2g}){mark}"
        )
    headers = ["a", "b", *[f"Δ {m}" for m in metrics]]
    lines = ["| " + " | ".join(headers) + " |", "|---|---|" + "---:|" * len(metrics)]
    for (a, b), cells in by_pair.items():
        lines.append("| " + " | ".join([a, b, *[cells.get(m, "—") for m in metrics]]) + " |")
    correction = {
        "holm": "Holm-corrected",
        "bonferroni": "Bonferroni-corrected",
    }.get(str(sig.get("correction")), "uncorrected")
    caption = (
        f"{sig.get('test_name', sig.get('test'))}, n = {sig.get('n_queries')} queries; "
        f"p = {correction} p-value over the backend pairs of each metric; "
        f"* = significant at p < {sig.get('max_p')}"
    )
    return "\n".join([caption, "", *lines])
