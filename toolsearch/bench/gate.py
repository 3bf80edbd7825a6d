"""The regression gate: compare a run's quality metrics with a saved baseline.

``toolsearch bench --baseline benchmarks/baseline.json --max-drop 0.01`` fails (exit status 1)
when any quality metric of any dataset/backend in the baseline got worse by more than
``max_drop`` (an absolute difference: 0.01 = one point of recall). "Worse" is lower for every
metric except ``false_positive_rate``, where it is higher. Latency, index time and memory are
never gated: on shared machines they are too noisy.

A comparison that cannot be made fails too, so a gate never passes by accident: a baseline
entry (dataset, backend or metric) the run did not measure, or a dataset whose content (its
SHA-256) or number of queries differs from the baseline's — regenerate the baseline when the
data changes on purpose. When the run was narrowed on purpose (``--dataset`` / ``--backend``),
only the baseline entries inside that selection are expected.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import parse_metric

__all__ = ["GateResult", "Regression", "check_regressions"]

_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Regression:
    """One metric that got worse by more than allowed."""

    dataset: str
    backend: str
    metric: str
    baseline: float
    current: float

    @property
    def drop(self) -> float:
        """How much worse, as a positive number."""
        if parse_metric(self.metric).higher_is_better:
            return self.baseline - self.current
        return self.current - self.baseline

    def describe(self) -> str:
        """``dataset/backend: metric 0.812 → 0.790 (-0.022)``."""
        direction = "-" if parse_metric(self.metric).higher_is_better else "+"
        return (
            f"{self.dataset}/{self.backend}: {self.metric} {self.baseline:.4f} → "
            f"{self.current:.4f} ({direction}{self.drop:.4f})"
        )


@dataclass
class GateResult:
    """The gate's verdict: regressions, comparisons that could not be made, and counts."""

    max_drop: float
    regressions: list[Regression] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    compared: int = 0

    @property
    def passed(self) -> bool:
        """True when nothing regressed and every expected comparison was made."""
        return not self.regressions and not self.problems

    def lines(self) -> list[str]:
        """Human-readable verdict, one finding a line."""
        out = [f"regression: {r.describe()} > max drop {self.max_drop:g}" for r in self.regressions]
        out += [f"not compared: {p}" for p in self.problems]
        if self.passed:
            out.append(
                f"gate passed: {self.compared} quality metrics within {self.max_drop:g} "
                "of the baseline"
            )
        return out


def check_regressions(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    max_drop: float,
    *,
    datasets: Collection[str] | None = None,
    backends: Collection[str] | None = None,
) -> GateResult:
    """Compare two results objects (the ``--json-out`` schema).

    ``datasets`` / ``backends`` narrow what the baseline is expected to cover (None = all of
    it). Metric names in the baseline must be known quality metrics.
    """
    if isinstance(max_drop, bool) or not isinstance(max_drop, int | float):
        raise BenchError(f"--max-drop must be a number, got {max_drop!r}")
    if not 0 <= max_drop < 1:
        raise BenchError(f"--max-drop must be at least 0 and below 1, got {max_drop}")
    gate = GateResult(float(max_drop))
    now = current.get("datasets", {})
    for name, base_entry in baseline.get("datasets", {}).items():
        if datasets is not None and name not in datasets:
            continue
        entry = now.get(name)
        if entry is None:
            gate.problems.append(f"dataset {name!r} is in the baseline but was not run")
            continue
        for key in ("sha256", "n_queries"):
            if key in base_entry and base_entry[key] != entry.get(key):
                gate.problems.append(
                    f"dataset {name!r}: {key} {entry.get(key)!r} differs from the baseline's "
                    f"{base_entry[key]!r}; the numbers are not like for like — regenerate the "
                    "baseline if the data changed on purpose"
                )
        for backend, base_run in base_entry.get("backends", {}).items():
            if backends is not None and backend not in backends:
                continue
            run = entry.get("backends", {}).get(backend)
            if run is None:
                gate.problems.append(
                    f"{name}/{backend}: in the baseline but not measured "
                    "(is the backend installed?)"
                )
                continue
            for metric_name, base_value in base_run.get("metrics", {}).items():
                metric = parse_metric(metric_name)
                value = run.get("metrics", {}).get(metric_name)
                if value is None:
                    gate.problems.append(
                        f"{name}/{backend}: {metric_name} is in the baseline but was not "
                        "computed (run with the same --k / --metrics)"
                    )
                    continue
                gate.compared += 1
                worse = (
                    float(base_value) - float(value)
                    if metric.higher_is_better
                    else float(value) - float(base_value)
                )
                if worse > max_drop + _EPSILON:
                    gate.regressions.append(
                        Regression(name, backend, metric_name, float(base_value), float(value))
                    )
    if gate.compared == 0 and not gate.problems:
        gate.problems.append("the baseline and this run have no quality metric in common")
    return gate
