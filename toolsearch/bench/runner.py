"""Running backends over labeled datasets through the full ToolSearch path.

For each dataset and backend the runner

1. builds the backend, then a :class:`toolsearch.engine.ToolSearch` over the catalogue with
   **every tool deferred** (``always_load`` cleared, ``should_defer`` set), then sends one
   warm-up query (:data:`WARM_UP_QUERY`) — together the timed *index* step, so lazy set-up
   such as loading a model on first use is counted once there and not in a query's latency;
2. sends every query, one by one, through ``ToolSearch.search(text, max_results=100)``: the
   fixed dispatch (``select:``, exact name, ``mcp__`` prefix) runs before the backend ranks,
   exactly as for a model; each call is timed;
3. evaluates the returned names against the qrels (:mod:`toolsearch.bench.metrics`), the
   negative queries' false positives, latency percentiles and request tokens.

Peak memory is the growth of the process's resident set over the backend's build and queries:
on Linux the kernel's high-water mark is reset first (``/proc/self/clear_refs``), elsewhere the
lifetime maximum (``ru_maxrss``) is used, which can only under-report.

``split`` (``dev``, ``test`` or ``all``) keeps the queries of that half of each dataset
(:func:`toolsearch.splits.split_of`) before anything else; published tables score ``test``,
tuning reads ``dev``. Each headline mean carries a bootstrap confidence interval over its
queries (:mod:`toolsearch.bench.confidence`).

Every query is run: an error in a backend stops the run with the query named, and no query is
ever dropped. ``limit`` takes a deterministic sample: the ``limit`` queries whose SHA-256 of the
id is smallest, in file order — the same sample on every machine, for every backend and on
every run, whatever order the file lists the queries in.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import inspect
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toolsearch.backend import SearchBackend
from toolsearch.bench.confidence import bootstrap_interval
from toolsearch.bench.costs import latency_summary, request_tokens
from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import (
    FALSE_POSITIVE_RATE,
    RUN_DEPTH,
    Metric,
    abstention_threshold,
    is_false_positive,
    mean,
    per_query_scores,
)
from toolsearch.bench.progress import NoProgress, Progress
from toolsearch.bench.significance import (
    Significance,
    compare_backends,
    default_significance_metrics,
    significance_metrics,
)
from toolsearch.dataset import Dataset, Query, load_dataset
from toolsearch.engine import Match, ToolSearch
from toolsearch.errors import BackendError, ToolSearchError
from toolsearch.registry import available_backends, backend_info, load_backend
from toolsearch.splits import SPLITS, split_of
from toolsearch.tool import Tool, is_deferred

__all__ = [
    "WARM_UP_QUERY",
    "BackendResult",
    "BackendSpec",
    "BenchResult",
    "DatasetResult",
    "QueryOutcome",
    "deferred_catalog",
    "evaluate_backend",
    "installed_backends",
    "resolve_dataset",
    "run_backend",
    "run_benchmark",
    "sample_queries",
    "split_queries",
]


#: Sent once after indexing and before the timed queries (its result is discarded).
WARM_UP_QUERY = "warm up the search index"


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What ToolSearch returned for one query and how long it took."""

    query_id: str
    matches: tuple[Match, ...]
    latency_ms: float

    @property
    def names(self) -> list[str]:
        """Returned tool names, best first."""
        return [m.name for m in self.matches]


@dataclass(frozen=True)
class BackendSpec:
    """A backend to benchmark: its name and how to build a fresh instance.

    ``draws_progress`` says the instance shows its own progress (e.g. while encoding), so the
    harness does not draw a competing one around its index step. ``options`` are the
    constructor options it was given; they are reported with the backend's own ``params()``.
    """

    name: str
    factory: Callable[[], SearchBackend]
    draws_progress: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def registered(
        cls, name: str, options: Mapping[str, Any] | None = None, *, progress: bool = False
    ) -> BackendSpec:
        """The registry's backend ``name`` with constructor ``options``.

        Raises :class:`toolsearch.errors.UnknownBackendError` for an unknown name and
        :class:`toolsearch.errors.MissingExtraError` (with the pip line) when not installed.
        A backend whose constructor takes ``progress`` is passed ``progress`` (unless the
        options set it).
        """
        info = backend_info(name)
        opts = dict(options or {})
        if info.missing:
            load_backend(name, **opts)  # raises MissingExtraError with the install line
        given = dict(opts)
        draws = False
        if "progress" not in opts and _accepts(info.target, "progress"):
            opts["progress"] = progress
            draws = progress
        return cls(name, lambda: load_backend(name, **opts), draws_progress=draws, options=given)


def _accepts(target: str, parameter: str) -> bool:
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return parameter in inspect.signature(obj).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


@dataclass
class BackendResult:
    """One backend on one dataset: raw outcomes and everything measured from them."""

    name: str
    params: dict[str, Any]
    outcomes: tuple[QueryOutcome, ...]
    index_seconds: float
    peak_mb: float
    abstain_below: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    by_style: dict[str, dict[str, float]] = field(default_factory=dict)
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    def ranked(self) -> dict[str, list[str]]:
        """``{query id: returned tool names}``."""
        return {o.query_id: o.names for o in self.outcomes}


@dataclass
class DatasetResult:
    """Every backend's result on one dataset: on the queries of ``split``, sampled when
    ``limit`` is set."""

    dataset: Dataset
    queries: tuple[Query, ...]
    sha256: str
    limit: int | None
    split: str = "all"
    backends: dict[str, BackendResult] = field(default_factory=dict)
    significance: Significance | None = None
    significance_note: str | None = None

    @property
    def name(self) -> str:
        return self.dataset.name

    @property
    def n_queries(self) -> int:
        return len(self.queries)

    @property
    def n_tools(self) -> int:
        return len(self.dataset.tools)

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        """Judgements of the sampled positive queries."""
        return {
            q.id: dict(self.dataset.qrels[q.id])
            for q in self.queries
            if self.dataset.qrels.get(q.id)
        }

    @property
    def groups(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Groups of alternative gold tools of the sampled positive queries."""
        return {qid: self.dataset.groups(qid) for qid in self.qrels}

    @property
    def negative_ids(self) -> list[str]:
        """Ids of the sampled queries no tool answers."""
        return [q.id for q in self.queries if not self.dataset.qrels.get(q.id)]

    def style_counts(self) -> dict[str, dict[str, int]]:
        """``{style: {"queries", "positives", "negatives"}}`` of the sampled queries (what the
        gate's minimum per style reads)."""
        counts: dict[str, dict[str, int]] = {}
        for query in self.queries:
            if not query.style:
                continue
            entry = counts.setdefault(query.style, {"queries": 0, "positives": 0, "negatives": 0})
            entry["queries"] += 1
            entry["positives" if self.dataset.qrels.get(query.id) else "negatives"] += 1
        return counts


@dataclass
class BenchResult:
    """A whole benchmark run."""

    toolsearch_version: str
    metrics: list[Metric]
    split: str = "all"
    datasets: dict[str, DatasetResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- inputs


def resolve_dataset(spec: str | Path) -> Path:
    """A dataset folder from a path, a bundled dataset's name or a public set's name (looked
    up in :func:`toolsearch.datasets.shared_datasets_dir`)."""
    from toolsearch.datasets import (
        bundled_datasets,
        find_dataset,
        shared_datasets_dir,
        where_shared_datasets_are,
    )

    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    text = str(spec)
    found = find_dataset(text)
    if found is not None:
        return Path(found)
    names = [Path(p).name for p in bundled_datasets()]
    shared = shared_datasets_dir()
    if shared is not None:
        names += sorted(p.name for p in shared.iterdir() if (p / "qrels.tsv").is_file())
    listing = ", ".join(names) or "none"
    raise BenchError(
        f"dataset {text!r} not found: not a folder, and not a known name ({listing}); "
        f"{where_shared_datasets_are()}"
    )


def split_queries(queries: Sequence[Query], split: str) -> list[Query]:
    """The queries of ``split``: ``dev`` or ``test`` by :func:`~toolsearch.splits.split_of`,
    or ``all``."""
    if split not in SPLITS:
        raise BenchError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    if split == "all":
        return list(queries)
    return [q for q in queries if split_of(q.id) == split]


def sample_queries(queries: Sequence[Query], limit: int | None) -> list[Query]:
    """All ``queries``, or the ``limit`` with the smallest SHA-256 of their id, in file order."""
    if limit is None or limit >= len(queries):
        return list(queries)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BenchError(f"--limit must be a positive integer, got {limit!r}")
    digest = {q.id: hashlib.sha256(q.id.encode("utf-8")).hexdigest() for q in queries}
    keep = set(sorted(digest, key=lambda qid: (digest[qid], qid))[:limit])
    return [q for q in queries if q.id in keep]


def deferred_catalog(tools: Sequence[Tool]) -> list[Tool]:
    """The catalogue with every tool deferred, as the benchmark treats it: a plain record is
    deferred already (:func:`toolsearch.catalog.catalogue_defers`), and the qrels may name an
    ``always_load`` or ``should_defer: false`` tool too, which must be searchable to be found."""
    return [
        tool if is_deferred(tool) else replace(tool, always_load=False, should_defer=True)
        for tool in tools
    ]


def installed_backends() -> tuple[list[str], dict[str, str]]:
    """Registered backends that can run here, and why each other one cannot (the pip line that
    installs it, or the environment variable that names the server it needs)."""
    ready: list[str] = []
    skipped: dict[str, str] = {}
    for name in available_backends():
        try:
            info = backend_info(name)
        except BackendError as exc:
            skipped[name] = str(exc)
            continue
        if info.installed and info.needs_server:
            skipped[name] = (
                f"needs a server: set ${info.server_env} (or pass --backend {name} "
                f"--option {name}.url=...)"
            )
        elif info.installed:
            ready.append(name)
        else:
            how = info.install_command or "install its dependencies"
            skipped[name] = f"not installed (missing {', '.join(info.missing)}): {how}"
    return ready, skipped


# --------------------------------------------------------------------------- memory


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class _PeakMemory:
    """Growth of the resident set between ``start()`` and ``peak_mb()``."""

    def start(self) -> None:
        self._reset = False
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
                handle.write("5")  # resets the peak resident set size (VmHWM)
            self._reset = True
        except OSError:
            pass
        rss = _status_kb("VmRSS") if self._reset else None
        if rss is None:
            self._reset = False
            self._base_kb = _maxrss_kb()
        else:
            self._base_kb = rss

    def peak_mb(self) -> float:
        peak = _status_kb("VmHWM") if self._reset else _maxrss_kb()
        if peak is None:
            return 0.0
        return round(max(0, peak - self._base_kb) / 1024, 1)


def _maxrss_kb() -> int:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, kB elsewhere


# --------------------------------------------------------------------------- running


def _indexed(
    catalogue: list[Tool],
    backend: SearchBackend,
    spec: BackendSpec,
    dataset_name: str,
    depth: int,
    progress: Progress,
) -> ToolSearch:
    """The ToolSearch over ``catalogue``, built and warmed up (the timed index step)."""
    label = f"{dataset_name}: indexing {len(catalogue)} tools with {spec.name}"
    try:
        if spec.draws_progress:
            engine = ToolSearch(catalogue, backend=backend, max_results_cap=depth)
        else:
            with progress.task(label):
                engine = ToolSearch(catalogue, backend=backend, max_results_cap=depth)
        # One warm-up call, timed with the build: lazy set-up (a model loaded on first use) is
        # charged once, to the index time, whatever state a persistent cache is in.
        engine.search(WARM_UP_QUERY, depth)
    except ToolSearchError:
        raise
    except Exception as exc:
        raise BackendError(
            f"backend {spec.name!r} failed to index {dataset_name}: {_describe(exc)}"
        ) from exc
    return engine


def run_backend(
    tools: Sequence[Tool],
    queries: Sequence[Query],
    spec: BackendSpec,
    *,
    dataset_name: str = "dataset",
    depth: int = RUN_DEPTH,
    progress: Progress | None = None,
) -> BackendResult:
    """Build ``spec``'s backend over ``tools`` (all deferred) and run every query through
    ToolSearch. Metrics are filled in by :func:`evaluate_backend`."""
    progress = progress or NoProgress()
    catalogue = deferred_catalog(tools)
    memory = _PeakMemory()
    gc.collect()
    memory.start()
    backend = spec.factory()
    started = time.perf_counter()
    engine = _indexed(catalogue, backend, spec, dataset_name, depth, progress)
    index_seconds = time.perf_counter() - started
    outcomes: list[QueryOutcome] = []
    clock = time.perf_counter_ns
    with progress.task(f"{dataset_name}: {spec.name} queries", total=len(queries)) as advance:
        for query in queries:
            begin = clock()
            try:
                result = engine.search(query.text, depth)
            except Exception as exc:
                raise BackendError(
                    f"backend {spec.name!r} failed on query {query.id!r} of {dataset_name}: "
                    f"{_describe(exc)}"
                ) from exc
            elapsed_ms = (clock() - begin) / 1e6
            outcomes.append(QueryOutcome(query.id, result.matches, elapsed_ms))
            advance(1)
    peak_mb = memory.peak_mb()
    params_of = getattr(backend, "params", None)
    params = {**spec.options, **(dict(params_of()) if callable(params_of) else {})}
    threshold = abstention_threshold(backend)
    del engine, backend
    gc.collect()
    return BackendResult(
        name=spec.name,
        params=params,
        outcomes=tuple(outcomes),
        index_seconds=round(index_seconds, 4),
        peak_mb=peak_mb,
        abstain_below=threshold,
    )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def evaluate_backend(
    result: BackendResult,
    dataset: Dataset,
    queries: Sequence[Query],
    metrics: Sequence[Metric],
    *,
    depth: int = RUN_DEPTH,
) -> BackendResult:
    """Fill in ``result``'s metrics (means and per style), latency and tokens; returns it."""
    by_id = {o.query_id: o for o in result.outcomes}
    missing = [q.id for q in queries if q.id not in by_id]
    if missing:
        raise BenchError(f"backend {result.name!r} has no result for query {missing[0]!r}")
    qrels = {q.id: dict(dataset.qrels[q.id]) for q in queries if dataset.qrels.get(q.id)}
    groups = {qid: dataset.groups(qid) for qid in qrels}
    ranked = {q.id: by_id[q.id].names for q in queries}
    per_query = per_query_scores(qrels, ranked, metrics, depth=depth, groups=groups)
    if any(m.family == FALSE_POSITIVE_RATE for m in metrics):
        per_query[FALSE_POSITIVE_RATE] = {
            q.id: 1.0 if is_false_positive(by_id[q.id].matches, result.abstain_below) else 0.0
            for q in queries
            if q.id not in qrels
        }

    def summary(ids: Sequence[str]) -> dict[str, float]:
        values: dict[str, float] = {}
        for metric in metrics:
            scored = [per_query[metric.name][q] for q in ids if q in per_query[metric.name]]
            if scored:
                values[metric.name] = round(mean(scored), 6)
        return values

    everything = [q.id for q in queries]
    result.per_query = per_query
    result.metrics = summary(everything)
    result.intervals = {
        name: _rounded(bootstrap_interval([per_query[name][q] for q in per_query[name]]))
        for name in result.metrics
    }
    styles = list(dict.fromkeys(q.style for q in queries if q.style))
    result.by_style = {
        style: summary([q.id for q in queries if q.style == style]) for style in styles
    }
    result.latency_ms = latency_summary([o.latency_ms for o in result.outcomes])
    result.tokens = request_tokens(dataset.tools, ranked)
    return result


def _rounded(interval: tuple[float, float]) -> tuple[float, float]:
    return round(interval[0], 6), round(interval[1], 6)


def run_benchmark(
    datasets: Sequence[Dataset | str | Path],
    backends: Sequence[BackendSpec],
    metrics: Sequence[Metric],
    *,
    limit: int | None = None,
    split: str = "all",
    depth: int = RUN_DEPTH,
    significance_test: str | None = "student",
    significance_on: Sequence[Metric] | None = None,
    max_p: float = 0.05,
    correction: str = "holm",
    skipped: Mapping[str, str] | None = None,
    progress: Progress | None = None,
) -> BenchResult:
    """Run every backend on every dataset's ``split`` and evaluate it; with two or more
    backends, test each pair for significance on ``significance_on`` (default:
    :func:`~toolsearch.bench.significance.default_significance_metrics`; ``significance_test=None``
    skips the tests), corrected for multiple comparisons by ``correction``."""
    from toolsearch import __version__

    if not backends:
        raise BenchError("no backend to benchmark")
    if not metrics:
        raise BenchError("no metric to compute")
    names = [spec.name for spec in backends]
    if len(set(names)) != len(names):
        raise BenchError(f"a backend is listed twice: {names}")
    if split not in SPLITS:
        raise BenchError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    progress = progress or NoProgress()
    bench = BenchResult(__version__, list(metrics), split, skipped=dict(skipped or {}))
    for item in datasets:
        dataset = _benchmarkable(item, bench)
        queries = sample_queries(split_queries(dataset.queries, split), limit)
        if not queries:
            raise BenchError(f"dataset {dataset.name!r} has no query in the {split!r} split")
        entry = DatasetResult(dataset, tuple(queries), dataset.sha256(), limit, split)
        for spec in backends:
            result = run_backend(
                dataset.tools,
                queries,
                spec,
                dataset_name=dataset.name,
                depth=depth,
                progress=progress,
            )
            entry.backends[spec.name] = evaluate_backend(
                result, dataset, queries, metrics, depth=depth
            )
        if significance_test is not None:
            tested = (
                list(significance_on)
                if significance_on is not None
                else default_significance_metrics(metrics)
            )
            _add_significance(entry, tested, significance_test, max_p, depth, correction, progress)
        bench.datasets[dataset.name] = entry
    return bench


def _benchmarkable(item: Dataset | str | Path, bench: BenchResult) -> Dataset:
    """The dataset ``item`` names, loaded, with a name not yet used and some queries."""
    dataset = item if isinstance(item, Dataset) else load_dataset(resolve_dataset(item))
    if dataset.name in bench.datasets:
        raise BenchError(
            f"two datasets are named {dataset.name!r} ({dataset.path}); benchmark them "
            "separately or rename one folder"
        )
    if not dataset.queries:
        where = f" ({dataset.path})" if dataset.path else ""
        raise BenchError(
            f"dataset {dataset.name!r}{where} has no queries: it is a catalogue only, "
            "nothing to benchmark"
        )
    return dataset


def _add_significance(
    entry: DatasetResult,
    metrics: Sequence[Metric],
    test: str,
    max_p: float,
    depth: int,
    correction: str,
    progress: Progress,
) -> None:
    qrels = entry.qrels
    if len(entry.backends) < 2:
        entry.significance_note = "one backend: no pairs to test"
    elif len(qrels) < 2:
        entry.significance_note = "fewer than two judged queries: nothing to test"
    elif not significance_metrics(metrics):
        entry.significance_note = "no ranx-testable metric selected"
    else:
        ranked = {name: result.ranked() for name, result in entry.backends.items()}
        with progress.task(f"{entry.name}: significance tests"):
            entry.significance = compare_backends(
                qrels,
                ranked,
                metrics,
                test=test,
                max_p=max_p,
                depth=depth,
                groups=entry.groups,
                correction=correction,
            )
