"""Result tables, the Markdown report and its PNG plots.

The same :class:`TextTable` values feed the terminal (the CLI renders them with rich) and the
Markdown report, so both always show the same numbers. ``--report DIR`` writes:

``report.md``              the tables of every dataset, the significance tests, the plots
``results.json``           the ``--json-out`` object of the same run
``recall_<dataset>.png``   recall@k for k = 1..20, one curve per backend
``latency_scale.png``      p50 query latency (and index time) against catalogue size, when a
                           scaling measurement was made (:mod:`toolsearch.bench.scaling`)
``scaling.json``           the numbers behind that plot, and the sizes skipped with why
``significance.json``      every paired test: backends, metric, means, p-value, test, n

Plots use matplotlib's object API (no pyplot, no global backend switch).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsearch.bench.artefacts import result_to_json
from toolsearch.bench.confidence import CONFIDENCE
from toolsearch.bench.costs import TOKEN_K
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import FALSE_POSITIVE_RATE, RUN_DEPTH, Metric, mean, per_query_scores
from toolsearch.bench.runner import BenchResult, DatasetResult
from toolsearch.bench.scaling import ScalingResult

__all__ = [
    "CURVE_MAX_K",
    "TextTable",
    "cost_table",
    "dataset_tables",
    "plot_recall_curves",
    "plot_scaling",
    "quality_notes",
    "quality_table",
    "recall_curve",
    "render_markdown",
    "significance_table",
    "style_table",
    "write_report",
]

#: The recall curves run from k = 1 to this.
CURVE_MAX_K = 20


@dataclass
class TextTable:
    """A titled table of strings, rendered by the CLI (rich) and the report (Markdown)."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""
    align_left: int = 1  # leading columns that are labels, not numbers
    #: Lines read after the caption: what the numbers mean and what they cannot say.
    notes: list[str] = field(default_factory=list)

    def width(self) -> int:
        """Characters a plain rendering needs (cell padding and borders included)."""
        columns = [self.headers, *self.rows]
        return sum(max(len(row[i]) for row in columns) + 3 for i in range(len(self.headers))) + 1

    def transposed(self) -> TextTable:
        """Columns as rows (e.g. one row per metric, one column per backend), for narrow
        terminals; the label columns of a row are joined into one header."""
        labels = [" vs ".join(row[: self.align_left]) for row in self.rows]
        corner = ""
        rows = [
            [self.headers[j], *[row[j] for row in self.rows]]
            for j in range(self.align_left, len(self.headers))
        ]
        return TextTable(self.title, [corner, *labels], rows, self.caption, 1, self.notes)

    def markdown(self) -> str:
        """A GitHub-flavoured Markdown table with its title and caption."""

        def cell(text: str) -> str:
            return text.replace("|", "\\|")

        align = [":---" if i < self.align_left else "---:" for i in range(len(self.headers))]
        lines = [f"**{self.title}**", ""]
        lines.append("| " + " | ".join(cell(h) for h in self.headers) + " |")
        lines.append("| " + " | ".join(align) + " |")
        lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in self.rows]
        if self.caption:
            lines += ["", self.caption]
        if self.notes:
            lines += ["", *[f"- {note}" for note in self.notes]]
        return "\n".join(lines)


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def quality_table(entry: DatasetResult, metrics: Sequence[Metric]) -> TextTable:
    """Quality metrics of every backend on one dataset (means over its queries)."""
    names = [m.name for m in metrics if m.ranked]
    has_fpr = any(FALSE_POSITIVE_RATE in r.metrics for r in entry.backends.values())
    headers = ["backend", *names] + (["false pos."] if has_fpr else [])
    table = TextTable(
        f"{entry.name}: retrieval quality",
        headers,
        caption=(
            f"{entry.n_queries} queries of split {entry.split!r} ({len(entry.qrels)} with "
            f"gold tools, {len(entry.negative_ids)} negative), {entry.n_tools} tools, all "
            f"deferred; every query through ToolSearch at depth {RUN_DEPTH}; ± = half the "
            f"width of the {CONFIDENCE:.0%} bootstrap interval over queries"
            + (f"; deterministic sample of {entry.limit}" if entry.limit else "")
            + (
                "; false pos. = share of negative queries whose top result is not abstained "
                "from (lower is better)"
                if has_fpr
                else ""
            )
            + f"; dataset sha256 {entry.sha256[:12]}"
        ),
    )
    for backend, run in entry.backends.items():
        row = [backend] + [_with_interval(run, name) for name in names]
        if has_fpr:
            row.append(_with_interval(run, FALSE_POSITIVE_RATE))
        table.rows.append(row)
    table.notes = quality_notes(entry, metrics)
    return table


#: One line each for the metrics a reader is least likely to know.
METRIC_DEFINITIONS: dict[str, str] = {
    "hit": "hit@k: share of queries with at least one needed tool in the first k results",
    "complete": "complete@k: share of queries with every needed tool (one of each group of "
    "alternatives) in the first k results, so k loaded tools serve the whole request",
}
#: Where the published tables' numbers come from.
PUBLISHED_SPLIT = "test"


def quality_notes(entry: DatasetResult, metrics: Sequence[Metric]) -> list[str]:
    """What a quality table scored and means: the split, the less common metrics, the best
    backend per metric, and whether the default model was trained on these queries."""
    notes = [_split_note(entry)]
    families = dict.fromkeys(m.family for m in metrics if m.ranked)
    notes += [METRIC_DEFINITIONS[f] for f in families if f in METRIC_DEFINITIONS]
    best = _best_note(entry, metrics)
    if best:
        notes.append(best)
    trained = _trained_note(entry)
    if trained:
        notes.append(trained)
    return notes


def _split_note(entry: DatasetResult) -> str:
    if entry.split == PUBLISHED_SPLIT:
        return f"split: {entry.split}, the queries the published tables score"
    halves = "dev and test halves" if entry.split == "all" else "the dev half"
    return (
        f"split: {entry.split} ({halves}); the published tables score only the "
        f"{PUBLISHED_SPLIT} half (--split {PUBLISHED_SPLIT}), so these numbers differ from theirs"
    )


def _best_note(entry: DatasetResult, metrics: Sequence[Metric]) -> str | None:
    """The best backend per metric by its mean (every backend tied with it as shown)."""
    if len(entry.backends) < 2:
        return None
    parts = []
    for metric in metrics:
        values = {
            b: r.metrics[metric.name] for b, r in entry.backends.items() if metric.name in r.metrics
        }
        if not values:
            continue
        pick = max if metric.higher_is_better else min
        top = _num(pick(values.values()))
        leaders = [b for b, v in values.items() if _num(v) == top]
        label = "false pos." if metric.name == FALSE_POSITIVE_RATE else metric.name
        parts.append(f"{label} {' = '.join(leaders)}")
    if not parts:
        return None
    return (
        "best by mean: " + "; ".join(parts) + " (whether a lead is more than chance: the "
        "paired tests)"
    )


def _trained_note(entry: DatasetResult) -> str | None:
    """When the shipped embedding model learnt from some of these queries (its dev half)."""
    if entry.split == PUBLISHED_SPLIT:
        return None
    record = _shipped_training_record()
    if entry.name not in record.get("datasets", ()) or record.get("split") != "dev":
        return None
    return (
        f"the default embedding model ({record['model']}, used by embedding, hybrid and "
        f"postgres unless configured) was trained on {entry.name}'s dev queries, which this "
        "split includes: there it ranks better than on a catalogue it never saw, and the "
        "embedding backend, ranking by it alone, gains the most; compare backends with "
        f'--split {PUBLISHED_SPLIT} (docs/cli.md, "What toolsearch bench prints")'
    )


def _shipped_training_record() -> dict[str, Any]:
    """The shipped model's ``toolsearch-training.json`` (empty when it cannot be read)."""
    try:
        from toolsearch.backends.encoders import SHIPPED_MODEL_PATH, TUNED_MODEL
    except ImportError:
        return {}
    try:
        text = (SHIPPED_MODEL_PATH / "toolsearch-training.json").read_text(encoding="utf-8")
        record = json.loads(text)
    except (OSError, ValueError):
        return {}
    return {**record, "model": TUNED_MODEL} if isinstance(record, dict) else {}


def _with_interval(run: Any, name: str) -> str:
    """``.812±.021``: the mean and half the width of its bootstrap interval (leading zeros
    dropped so the cell stays narrow)."""
    value = run.metrics.get(name)
    bounds = run.intervals.get(name)
    if value is None or bounds is None:
        return _num(value)
    half = (bounds[1] - bounds[0]) / 2
    return f"{_num(value).removeprefix('0')}±{_num(half).removeprefix('0')}"


def cost_table(entry: DatasetResult) -> TextTable:
    """Latency, index time, memory and request tokens of every backend on one dataset."""
    table = TextTable(
        f"{entry.name}: cost",
        [
            "backend",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "index s",
            "peak MB",
            "tokens, all tools",
            f"tokens, search + top {TOKEN_K}",
            "saving",
        ],
        caption=(
            "latency per ToolSearch call; peak MB = resident memory growth while building and "
            "querying; tokens estimated at 2.5 characters a token (with search: the ToolSearch "
            f"tool, the deferred-names block and the top {TOKEN_K} tools a query loaded, "
            "averaged over the queries)"
        ),
    )
    for backend, run in entry.backends.items():
        tokens_all = run.tokens.get("all_tools", 0)
        tokens_search = run.tokens.get("with_search", 0)
        saving = 1 - tokens_search / tokens_all if tokens_all else 0.0
        table.rows.append(
            [
                backend,
                _num(run.latency_ms.get("p50"), 2),
                _num(run.latency_ms.get("p95"), 2),
                _num(run.latency_ms.get("p99"), 2),
                _num(run.index_seconds, 2),
                _num(run.peak_mb, 1),
                f"{tokens_all:,}",
                f"{tokens_search:,}",
                f"{saving:.0%}",
            ]
        )
    return table


def _primary(metrics: Sequence[Metric]) -> str | None:
    names = [m.name for m in metrics if m.ranked]
    if "recall@5" in names:
        return "recall@5"
    return names[0] if names else None


def style_table(entry: DatasetResult, metrics: Sequence[Metric]) -> TextTable | None:
    """The primary metric (recall@5 when measured) per query style; None without styles."""
    styles = list(dict.fromkeys(s for r in entry.backends.values() for s in r.by_style))
    if not styles:
        return None
    primary = _primary(metrics)
    counts = {s: sum(1 for q in entry.queries if q.style == s) for s in styles}
    table = TextTable(
        f"{entry.name}: by query style",
        ["backend", *[f"{s} ({counts[s]})" for s in styles]],
        caption=(
            f"{primary or 'no ranked metric'} per style (query count in brackets); a style of "
            "negative queries only shows its false-positive rate, marked 'fp'"
        ),
    )
    for backend, run in entry.backends.items():
        row = [backend]
        for style in styles:
            values = run.by_style.get(style, {})
            if primary is not None and primary in values:
                row.append(_num(values[primary]))
            elif FALSE_POSITIVE_RATE in values:
                row.append(f"fp {_num(values[FALSE_POSITIVE_RATE])}")
            else:
                row.append("—")
        table.rows.append(row)
    return table


def significance_table(entry: DatasetResult) -> TextTable | None:
    """Paired tests between backends; None when none were run."""
    sig = entry.significance
    if sig is None:
        return None
    table = TextTable(
        f"{entry.name}: paired significance tests",
        ["a", "b", *[f"Δ {m} (b - a)" for m in sig.metrics]],
        caption=f"{sig.describe()}; * = significant after the correction",
        align_left=2,
    )
    by_pair: dict[tuple[str, str], dict[str, str]] = {}
    for pair in sig.pairs:
        mark = "*" if pair.significant else ""
        p_text = f"p={pair.p_value:.3g}"
        if sig.correction != "none":
            p_text += f" adj={pair.p_adjusted:.3g}"
        by_pair.setdefault((pair.a, pair.b), {})[pair.metric] = f"{pair.delta:+.3f} {p_text}{mark}"
    for (a, b), cells in by_pair.items():
        table.rows.append([a, b, *[cells.get(m, "—") for m in sig.metrics]])
    return table


def dataset_tables(entry: DatasetResult, metrics: Sequence[Metric]) -> list[TextTable]:
    """Every table of one dataset, in display order."""
    tables = [quality_table(entry, metrics), cost_table(entry)]
    for extra in (style_table(entry, metrics), significance_table(entry)):
        if extra is not None:
            tables.append(extra)
    return tables


# --------------------------------------------------------------------------- plots


def recall_curve(entry: DatasetResult, backend: str, max_k: int = CURVE_MAX_K) -> list[float]:
    """Mean recall@k for k = 1..max_k of one backend on one dataset (via ranx)."""
    qrels = entry.qrels
    if not qrels:
        return []
    curve_metrics = [Metric("recall", k) for k in range(1, max_k + 1)]
    scores = per_query_scores(
        qrels, entry.backends[backend].ranked(), curve_metrics, groups=entry.groups
    )
    return [mean(scores[m.name].values()) for m in curve_metrics]


def _figure(width: float = 7.0, height: float = 4.5) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        from toolsearch.errors import MissingExtraError

        raise MissingExtraError(
            "the bench report's plots", "bench", [exc.name or "matplotlib"]
        ) from exc
    return Figure(figsize=(width, height), layout="constrained")


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def plot_recall_curves(result: BenchResult, out_dir: Path) -> list[Path]:
    """One ``recall_<dataset>.png`` per dataset with judged queries."""
    written: list[Path] = []
    for name, entry in result.datasets.items():
        if not entry.qrels:
            continue
        fig = _figure()
        ax = fig.add_subplot()
        ks = list(range(1, CURVE_MAX_K + 1))
        for backend in entry.backends:
            ax.plot(ks, recall_curve(entry, backend), marker="o", markersize=3, label=backend)
        ax.set_xlabel("k (tools loaded)")
        ax.set_ylabel("recall@k")
        ax.set_ylim(0, 1)
        ax.set_xticks([1, 3, 5, 10, 15, 20])
        ax.grid(alpha=0.3)
        ax.set_title(f"{name}: recall@k ({len(entry.qrels)} queries)")
        ax.legend(loc="lower right")
        target = out_dir / f"recall_{_safe(name)}.png"
        fig.savefig(target, dpi=120)
        written.append(target)
    return written


def _label_points(ax: Any, points: Sequence[Any], values: Sequence[float]) -> None:
    """Mark cached points with a hollow ring and over-budget points with a label."""
    for point, value in zip(points, values, strict=True):
        notes = (["cached vectors"] if point.cached else []) + (
            ["over budget"] if point.over_budget else []
        )
        if point.cached:
            ax.plot([point.size], [value], marker="o", markersize=11, fillstyle="none", color="k")
        if notes:
            ax.annotate(
                ", ".join(notes),
                (point.size, value),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=7,
            )


def _label_skipped(ax: Any, scaling: ScalingResult, backend: str, points: Sequence[Any]) -> None:
    """Name the sizes a backend was not measured at, beside its last point."""
    measured = {p.size for p in points}
    missing = [size for size in scaling.sizes if size not in measured]
    if not missing or not points:
        return
    last = points[-1]
    ax.annotate(
        f"{backend}: {', '.join(f'{s:,}' for s in missing)} skipped (budget)",
        (last.size, last.p50_ms),
        textcoords="offset points",
        xytext=(6, -12),
        fontsize=7,
    )


def plot_scaling(scaling: ScalingResult, target: Path) -> Path:
    """``latency_scale.png``: p50 query latency and index time against catalogue size, with
    cached, over-budget and skipped points labelled."""
    fig = _figure(10.0, 4.5)
    latency, build = fig.subplots(1, 2)
    for backend, points in scaling.points.items():
        if not points:
            continue
        sizes = [p.size for p in points]
        p50 = [p.p50_ms for p in points]
        index = [p.index_seconds for p in points]
        latency.plot(sizes, p50, marker="o", label=backend)
        build.plot(sizes, index, marker="o", label=backend)
        _label_points(latency, points, p50)
        _label_points(build, points, index)
        _label_skipped(latency, scaling, backend, points)
    for ax, label in ((latency, "p50 ms per ToolSearch call"), (build, "index build seconds")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("catalogue size (tools)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.suptitle(
        f"Scaling on catalogues grown from {scaling.base} ({scaling.n_queries} queries each; "
        f"budget {scaling.budget_seconds:g} s per size)"
    )
    fig.savefig(target, dpi=120)
    return target


def _point_cell(point: Any) -> str:
    notes = (["cached"] if point.cached else []) + (["over budget"] if point.over_budget else [])
    text = f"{point.p50_ms:.2f} / {point.index_seconds:.1f}"
    return f"{text} ({', '.join(notes)})" if notes else text


def _scaling_table(scaling: ScalingResult) -> TextTable:
    table = TextTable(
        f"latency against catalogue size (grown from {scaling.base})",
        ["backend", *[f"{s:,} tools" for s in scaling.sizes]],
        caption=(
            f"p50 ms per ToolSearch call / index seconds, {scaling.n_queries} queries per size; "
            f"a size projected to cost (index + queries) over {scaling.budget_seconds:g} s is "
            "not measured, and one measured over it ends the curve (over budget); cached = "
            "index time may reuse vectors from a persistent cache"
        ),
    )
    for backend, points in scaling.points.items():
        at = {p.size: p for p in points}
        row = [backend]
        for size in scaling.sizes:
            point = at.get(size)
            row.append("skipped" if point is None else _point_cell(point))
        table.rows.append(row)
    return table


# --------------------------------------------------------------------------- report


def render_markdown(
    result: BenchResult,
    *,
    scaling: ScalingResult | None = None,
    images: Sequence[Path] = (),
    command: str | None = None,
) -> str:
    """The report's Markdown text."""
    lines = [f"# toolsearch benchmark (toolsearch {result.toolsearch_version})", ""]
    if command:
        lines += ["Produced by:", "", "```", command, "```", ""]
    if result.skipped:
        lines += ["Backends not run:", ""]
        lines += [f"- `{name}`: {why}" for name, why in result.skipped.items()]
        lines.append("")
    image_names = {p.name for p in images}
    for name, entry in result.datasets.items():
        lines += [f"## {name}", ""]
        for table in dataset_tables(entry, result.metrics):
            lines += [table.markdown(), ""]
        if entry.significance_note:
            lines += [f"Significance: {entry.significance_note}.", ""]
        params = {b: r.params for b, r in entry.backends.items()}
        lines += ["Backend parameters:", "", "```json", json.dumps(params, indent=1, default=str)]
        lines += ["```", ""]
        image = f"recall_{_safe(name)}.png"
        if image in image_names:
            lines += [f"![recall@k on {name}]({image})", ""]
    if scaling is not None:
        lines += ["## Latency against catalogue size", "", _scaling_table(scaling).markdown(), ""]
        for backend, reasons in scaling.skipped.items():
            lines += [f"- `{backend}`: " + "; ".join(reasons)]
        if scaling.skipped:
            lines.append("")
        if "latency_scale.png" in image_names:
            lines += ["![latency against catalogue size](latency_scale.png)", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(
    result: BenchResult,
    out_dir: str | Path,
    *,
    scaling: ScalingResult | None = None,
    command: str | None = None,
) -> Path:
    """Write ``report.md``, ``results.json`` and the PNG plots into ``out_dir``."""
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        images = plot_recall_curves(result, folder)
        if scaling is not None and any(scaling.points.values()):
            images.append(plot_scaling(scaling, folder / "latency_scale.png"))
        (folder / "results.json").write_text(
            json.dumps(result_to_json(result), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
        if scaling is not None:
            (folder / "scaling.json").write_text(
                json.dumps(_scaling_json(scaling), indent=2) + "\n", encoding="utf-8"
            )
        significance = {
            name: entry.significance.to_dict()
            for name, entry in result.datasets.items()
            if entry.significance is not None
        }
        if significance:
            (folder / "significance.json").write_text(
                json.dumps(significance, indent=2) + "\n", encoding="utf-8"
            )
        target = folder / "report.md"
        target.write_text(
            render_markdown(result, scaling=scaling, images=images, command=command),
            encoding="utf-8",
        )
    except OSError as exc:
        raise BenchError(f"cannot write the report: {exc.strerror or exc}", path=folder) from exc
    return target


def _scaling_json(scaling: ScalingResult) -> dict[str, Any]:
    return {
        "base": scaling.base,
        "sizes": list(scaling.sizes),
        "n_queries": scaling.n_queries,
        "budget_seconds": scaling.budget_seconds,
        "points": {
            backend: [
                {
                    "size": p.size,
                    "index_seconds": p.index_seconds,
                    "p50_ms": p.p50_ms,
                    "p95_ms": p.p95_ms,
                    "seconds": p.seconds,
                    "over_budget": p.over_budget,
                    "cached": p.cached,
                }
                for p in points
            ]
            for backend, points in scaling.points.items()
        },
        "skipped": scaling.skipped,
    }
