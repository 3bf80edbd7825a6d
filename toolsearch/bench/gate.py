"""The regression gate: compare a run's quality metrics with a saved baseline.

``toolsearch bench --baseline benchmarks/baseline.json --max-drop 0.01`` fails (exit status 1)
when any quality metric of any dataset/backend in the baseline got worse by more than
``max_drop`` (an absolute difference: 0.01 = one point of recall). "Worse" is lower for every
metric except ``false_positive_rate``, where it is higher. The false-positive rate is gated
like every other metric. Latency, index time and memory are never gated: on shared machines
they are too noisy.

Each query style is gated too (``by_style``), so a regression on one style is not diluted by
the others: with ``style_max_drop`` (default: ``max_drop``) as the allowance, for every style
with at least ``min_style_queries`` queries of the kind the metric is measured on — positive
queries for ranked metrics, negative ones for the false-positive rate — counted in the
baseline's ``style_counts``. Smaller styles are listed as not gated: one query of ten moves a
metric by 0.1, so gating them would flap.

A comparison that cannot be made fails too, so a gate never passes by accident: a baseline
entry (dataset, backend, metric or style) the run did not measure, or a dataset whose queries
or judgements (``judgements_sha256``), split or number of queries differ from the baseline's —
regenerate the baseline when they change on purpose. A change to the tools alone (new
descriptions, tools added or removed) is what the gate is for: the metrics are compared, the
changed tools named and every metric's delta listed. When the run was narrowed on purpose
(``--dataset`` / ``--backend``), only the baseline entries inside that selection are expected.
A baseline without ``judgements_sha256`` (written before it existed) still needs the whole
dataset unchanged. See ``docs/benchmark.md``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import FALSE_POSITIVE_RATE, parse_metric

__all__ = [
    "MIN_STYLE_QUERIES",
    "GateResult",
    "Regression",
    "check_gate_settings",
    "check_regressions",
]

_EPSILON = 1e-9

#: The fewest queries (of the kind a metric is measured on) a style needs to be gated.
MIN_STYLE_QUERIES = 50


@dataclass(frozen=True, slots=True)
class Regression:
    """One metric that got worse by more than allowed (``style`` None = all queries)."""

    dataset: str
    backend: str
    metric: str
    baseline: float
    current: float
    style: str | None = None
    allowed: float = 0.0

    @property
    def drop(self) -> float:
        """How much worse, as a positive number."""
        if parse_metric(self.metric).higher_is_better:
            return self.baseline - self.current
        return self.current - self.baseline

    def describe(self) -> str:
        """``dataset/backend[/style]: metric 0.812 → 0.790 (-0.022)``."""
        direction = "-" if parse_metric(self.metric).higher_is_better else "+"
        where = f"{self.dataset}/{self.backend}" + (f" [{self.style}]" if self.style else "")
        return (
            f"{where}: {self.metric} {self.baseline:.4f} → {self.current:.4f} "
            f"({direction}{self.drop:.4f})"
        )


@dataclass
class GateResult:
    """The gate's verdict: regressions, comparisons that could not be made, and counts."""

    max_drop: float
    style_max_drop: float | None = None
    min_style_queries: int = MIN_STYLE_QUERIES
    regressions: list[Regression] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    compared: int = 0
    compared_styles: int = 0
    ungated_styles: dict[str, str] = field(default_factory=dict)
    #: What changed in the tools of datasets whose judgements match the baseline's.
    tool_changes: list[str] = field(default_factory=list)
    #: Each compared metric's change, listed when the tools changed.
    deltas: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when nothing regressed and every expected comparison was made."""
        return not self.regressions and not self.problems

    def lines(self) -> list[str]:
        """Human-readable verdict, one finding a line."""
        out = [f"tools changed: {change}" for change in self.tool_changes]
        out += [f"delta: {delta}" for delta in self.deltas]
        out += [f"regression: {r.describe()} > max drop {r.allowed:g}" for r in self.regressions]
        out += [f"not compared: {p}" for p in self.problems]
        out += [f"style not gated: {where}: {why}" for where, why in self.ungated_styles.items()]
        if self.passed:
            styles = ""
            if self.compared_styles:
                styles = (
                    f", and {self.compared_styles} per-style metrics within "
                    f"{self.style_allowance:g}"
                )
            out.append(
                f"gate passed: {self.compared} quality metrics within {self.max_drop:g} "
                f"of the baseline{styles}"
            )
        return out

    @property
    def style_allowance(self) -> float:
        """The allowance of per-style metrics."""
        return self.max_drop if self.style_max_drop is None else self.style_max_drop


def _check_allowance(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BenchError(f"{name} must be a number, got {value!r}")
    if not 0 <= value < 1:
        raise BenchError(f"{name} must be at least 0 and below 1, got {value}")
    return float(value)


def check_gate_settings(
    max_drop: object, style_max_drop: object, min_style_queries: object
) -> tuple[float, float | None, int]:
    """The gate's allowances and per-style minimum, checked (what ``bench`` checks before a
    run, so a typo does not cost the whole run)."""
    drop = _check_allowance("--max-drop", max_drop)
    style_drop = (
        None if style_max_drop is None else _check_allowance("--style-max-drop", style_max_drop)
    )
    if (
        isinstance(min_style_queries, bool)
        or not isinstance(min_style_queries, int)
        or min_style_queries < 1
    ):
        raise BenchError(
            f"--min-style-queries must be a positive integer, got {min_style_queries!r}"
        )
    return drop, style_drop, min_style_queries


def _compare(
    gate: GateResult,
    where: tuple[str, str, str | None],
    base: Mapping[str, Any],
    now: Mapping[str, Any],
    allowed: float,
    *,
    list_deltas: bool = False,
) -> int:
    """Compare one metrics mapping with its baseline; returns how many were compared."""
    name, backend, style = where
    label = f"{name}/{backend}" + (f" [{style}]" if style else "")
    compared = 0
    for metric_name, base_value in base.items():
        metric = parse_metric(metric_name)
        value = now.get(metric_name)
        if value is None:
            gate.problems.append(
                f"{label}: {metric_name} is in the baseline but was not computed "
                "(run with the same --k / --metrics / --split)"
            )
            continue
        compared += 1
        if list_deltas:
            change = float(value) - float(base_value)
            gate.deltas.append(
                f"{label}: {metric_name} {float(base_value):.4f} → {float(value):.4f} "
                f"({change:+.4f})"
            )
        worse = (
            float(base_value) - float(value)
            if metric.higher_is_better
            else float(value) - float(base_value)
        )
        if worse > allowed + _EPSILON:
            gate.regressions.append(
                Regression(
                    name, backend, metric_name, float(base_value), float(value), style, allowed
                )
            )
    return compared


def _gated_style_metrics(
    gate: GateResult, name: str, style: str, metrics: Mapping[str, Any], counts: Any
) -> dict[str, Any]:
    """The style's baseline metrics that have enough queries to be gated."""
    if not isinstance(counts, Mapping):
        gate.ungated_styles[f"{name} [{style}]"] = (
            "the baseline has no style_counts (regenerate it with this version)"
        )
        return {}
    kept: dict[str, Any] = {}
    for metric_name, value in metrics.items():
        kind = (
            "negatives" if parse_metric(metric_name).family == FALSE_POSITIVE_RATE else "positives"
        )
        have = int(counts.get(kind, 0))
        if have >= gate.min_style_queries:
            kept[metric_name] = value
        else:
            gate.ungated_styles[f"{name} [{style}] {kind}"] = (
                f"{have} < {gate.min_style_queries} queries"
            )
    return kept


def _check_dataset(
    gate: GateResult,
    name: str,
    base_entry: Mapping[str, Any],
    entry: Mapping[str, Any],
    backends: Collection[str] | None,
) -> None:
    tools_changed = _check_comparable(gate, name, base_entry, entry)
    counts = base_entry.get("style_counts", {})
    for backend, base_run in base_entry.get("backends", {}).items():
        if backends is not None and backend not in backends:
            continue
        run = entry.get("backends", {}).get(backend)
        if run is None:
            gate.problems.append(
                f"{name}/{backend}: in the baseline but not measured (is the backend installed?)"
            )
            continue
        gate.compared += _compare(
            gate,
            (name, backend, None),
            base_run.get("metrics", {}),
            run.get("metrics", {}),
            gate.max_drop,
            list_deltas=tools_changed,
        )
        for style, base_metrics in base_run.get("by_style", {}).items():
            wanted = _gated_style_metrics(gate, name, style, base_metrics, counts.get(style))
            if wanted:
                gate.compared_styles += _compare(
                    gate,
                    (name, backend, style),
                    wanted,
                    run.get("by_style", {}).get(style, {}),
                    gate.style_allowance,
                )


def _check_comparable(
    gate: GateResult, name: str, base_entry: Mapping[str, Any], entry: Mapping[str, Any]
) -> bool:
    """Note what makes the dataset's numbers unlike the baseline's as problems; returns True
    when only its tools changed (same queries and judgements), which is compared."""
    keys = ["split", "n_queries"]
    same_judgements = "judgements_sha256" in base_entry and base_entry[
        "judgements_sha256"
    ] == entry.get("judgements_sha256")
    keys.insert(0, "judgements_sha256" if "judgements_sha256" in base_entry else "sha256")
    for key in keys:
        if key in base_entry and base_entry[key] != entry.get(key):
            what = f"queries or judgements changed: {key}" if key == "judgements_sha256" else key
            gate.problems.append(
                f"dataset {name!r}: {what} {entry.get(key)!r} differs from the baseline's "
                f"{base_entry[key]!r}; the numbers are not like for like — regenerate the "
                "baseline if the data changed on purpose"
            )
    if not same_judgements or base_entry.get("sha256") == entry.get("sha256"):
        return False
    gate.tool_changes.append(f"{name}: {_tool_diff(base_entry.get('tools'), entry.get('tools'))}")
    return True


def _tool_diff(before: Any, after: Any) -> str:
    """Which tools were changed, added and removed, by name (the first few of each)."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return "the dataset's files differ (the baseline does not list its tools)"
    parts = []
    for label, names in (
        ("changed", [t for t in after if t in before and before[t] != after[t]]),
        ("added", [t for t in after if t not in before]),
        ("removed", [t for t in before if t not in after]),
    ):
        if names:
            shown = ", ".join(sorted(names)[:10]) + (", ..." if len(names) > 10 else "")
            parts.append(f"{len(names)} {label} ({shown})")
    return "; ".join(parts) or "the same tools, the files differ (order or formatting)"


def check_regressions(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    max_drop: float,
    *,
    style_max_drop: float | None = None,
    min_style_queries: int = MIN_STYLE_QUERIES,
    datasets: Collection[str] | None = None,
    backends: Collection[str] | None = None,
) -> GateResult:
    """Compare two results objects (the ``--json-out`` schema).

    ``style_max_drop`` is the allowance of per-style metrics (None: ``max_drop``);
    ``min_style_queries`` the fewest queries a style needs to be gated. ``datasets`` /
    ``backends`` narrow what the baseline is expected to cover (None = all of it). Metric
    names in the baseline must be known quality metrics.
    """
    drop, style_drop, min_style_queries = check_gate_settings(
        max_drop, style_max_drop, min_style_queries
    )
    gate = GateResult(drop, style_drop, min_style_queries)
    now = current.get("datasets", {})
    for name, base_entry in baseline.get("datasets", {}).items():
        if datasets is not None and name not in datasets:
            continue
        entry = now.get(name)
        if entry is None:
            gate.problems.append(f"dataset {name!r} is in the baseline but was not run")
            continue
        _check_dataset(gate, name, base_entry, entry, backends)
    if gate.compared == 0 and not gate.problems:
        gate.problems.append(
            "the baseline and this run have no quality metric in common (baseline datasets: "
            f"{_names(baseline.get('datasets', {}))}; this run: {_names(now)}; the gate "
            "compares datasets of the same name)"
        )
    return gate


def _names(datasets: Mapping[str, Any]) -> str:
    return ", ".join(sorted(datasets)) or "none"
