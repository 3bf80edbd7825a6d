"""Latency against catalogue size, on deterministic large catalogues.

Real catalogues stop at a few hundred tools, so the curve is measured on catalogues grown from
a dataset's tools by :func:`toolsearch.synth.scale_catalog` (seed 0: the same catalogue on
every machine). At each size every backend is built over the catalogue and runs the same
sample of the dataset's queries through ToolSearch (run depth 100).

Sizes are measured smallest first, under one budget rule: a size's cost is its index time plus
its queries' time. A backend is not measured at a size whose cost, projected linearly from its
previous size, exceeds ``budget_seconds``; a size that was measured but cost more than the
budget is kept, marked *over budget*, and ends the backend's curve. Every size left out is
recorded with why, and the plot labels both kinds (nothing is left out silently).

A backend whose parameters show a persistent vector cache (a ``cache`` or ``cache_dir``
entry, its own or a member's) may index faster than a cold build — the embedding model then
encodes only texts it has not seen. Its points are marked *cached* so the index times are not
read as cold ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolsearch.bench.costs import percentile
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import RUN_DEPTH
from toolsearch.bench.progress import NoProgress, Progress
from toolsearch.bench.runner import BackendResult, BackendSpec, run_backend, sample_queries
from toolsearch.dataset import Query
from toolsearch.synth import scale_catalog
from toolsearch.tool import Tool

__all__ = [
    "DEFAULT_SIZES",
    "ScalePoint",
    "ScalingResult",
    "check_scaling_settings",
    "measure_scaling",
    "parse_sizes",
    "uses_persistent_cache",
]

DEFAULT_SIZES: tuple[int, ...] = (1_000, 10_000, 100_000)


@dataclass(frozen=True, slots=True)
class ScalePoint:
    """One backend at one catalogue size."""

    size: int
    index_seconds: float
    p50_ms: float
    p95_ms: float
    n_queries: int
    seconds: float = 0.0
    over_budget: bool = False
    cached: bool = False


@dataclass
class ScalingResult:
    """Every backend's curve, and the sizes each one was not measured at (with why)."""

    base: str
    sizes: tuple[int, ...]
    n_queries: int
    budget_seconds: float
    points: dict[str, list[ScalePoint]] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"1000,10000"`` → ``(1000, 10000)``, sorted; each at least 1."""
    sizes: set[int] = set()
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        multiplier = 1
        if part[-1:].lower() == "k":
            part, multiplier = part[:-1], 1000
        try:
            size = int(part) * multiplier
        except ValueError:
            raise BenchError(f"--scale-sizes: {part!r} is not an integer (e.g. 1000,10k)") from None
        if size < 1:
            raise BenchError(f"--scale-sizes: sizes must be at least 1, got {size}")
        sizes.add(size)
    if not sizes:
        raise BenchError(f"--scale-sizes: no size in {text!r}")
    return tuple(sorted(sizes))


def check_scaling_settings(n_queries: object, budget_seconds: object) -> None:
    """The latency curve's queries per size (a positive integer) and budget (a positive
    number of seconds), checked."""
    if isinstance(n_queries, bool) or not isinstance(n_queries, int) or n_queries < 1:
        raise BenchError(f"--scale-queries must be a positive integer, got {n_queries!r}")
    if (
        isinstance(budget_seconds, bool)
        or not isinstance(budget_seconds, int | float)
        or not 0 < budget_seconds < math.inf
    ):
        raise BenchError(
            f"--scale-budget must be a positive number of seconds, got {budget_seconds}"
        )


def uses_persistent_cache(params: Mapping[str, Any]) -> bool:
    """Whether backend ``params`` (searched through nested members) name a persistent cache."""
    for key, value in params.items():
        if key in ("cache", "cache_dir") and value not in (None, False, ""):
            return True
        if isinstance(value, Mapping) and uses_persistent_cache(value):
            return True
    return False


def _skip_reason(points: Sequence[ScalePoint], size: int, budget: float) -> str | None:
    """Why ``size`` is not measured after ``points`` (None: measure it)."""
    if not points:
        return None
    last = points[-1]
    if last.over_budget:
        return f"{size:,} tools: skipped, {last.size:,} tools took {last.seconds:.0f} s > budget"
    projected = last.seconds * size / last.size
    if projected > budget:
        return f"{size:,} tools: projected {projected:.0f} s > budget {budget:g} s"
    return None


def _point(run: BackendResult, size: int, budget_seconds: float) -> ScalePoint:
    latencies = [o.latency_ms for o in run.outcomes]
    seconds = run.index_seconds + sum(latencies) / 1000
    return ScalePoint(
        size=size,
        index_seconds=run.index_seconds,
        p50_ms=round(percentile(latencies, 50), 3),
        p95_ms=round(percentile(latencies, 95), 3),
        n_queries=len(latencies),
        seconds=round(seconds, 3),
        over_budget=seconds > budget_seconds,
        cached=uses_persistent_cache(run.params),
    )


def measure_scaling(
    base_tools: Sequence[Tool],
    queries: Sequence[Query],
    backends: Sequence[BackendSpec],
    *,
    base_name: str = "dataset",
    sizes: Sequence[int] = DEFAULT_SIZES,
    n_queries: int = 50,
    budget_seconds: float = 60.0,
    depth: int = RUN_DEPTH,
    progress: Progress | None = None,
) -> ScalingResult:
    """Index and query latency of each backend at each catalogue size."""
    if not base_tools:
        raise BenchError("latency scaling needs a dataset with tools")
    if not queries:
        raise BenchError("latency scaling needs a dataset with queries")
    check_scaling_settings(n_queries, budget_seconds)
    progress = progress or NoProgress()
    ordered = tuple(sorted(set(sizes)))
    sample = sample_queries(queries, n_queries)
    result = ScalingResult(base_name, ordered, len(sample), budget_seconds)
    catalogues: dict[int, list[Tool]] = {}
    for spec in backends:
        points: list[ScalePoint] = []
        skipped: list[str] = []
        for size in ordered:
            reason = (
                f"{size:,} tools: skipped after a smaller size was over budget"
                if skipped
                else _skip_reason(points, size, budget_seconds)
            )
            if reason is not None:
                skipped.append(reason)
                continue
            if size not in catalogues:
                catalogues[size] = scale_catalog(base_tools, size, seed=0)
            run = run_backend(
                catalogues[size],
                sample,
                spec,
                dataset_name=f"{base_name} at {size:,} tools",
                depth=depth,
                progress=progress,
            )
            points.append(_point(run, size, budget_seconds))
        result.points[spec.name] = points
        if skipped:
            result.skipped[spec.name] = skipped
    return result
