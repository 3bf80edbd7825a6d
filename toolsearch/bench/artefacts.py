"""Benchmark artefacts: the results JSON and TREC run files.

The JSON (``--json-out``) is one object::

    {"toolsearch_version": "0.1.0", "split": "test",
     "datasets": {NAME: {"n_queries": int, "n_positives": int, "n_negatives": int,
       "n_tools": int, "sha256": str,         # of every dataset file
       "judgements_sha256": str,              # of the queries and qrels only
       "tools": {TOOL: str},                  # a short content hash of each tool
       "split": "dev" | "test" | "all",       # which half of the queries was scored
       "style_counts": {STYLE: {"queries": int, "positives": int, "negatives": int}},
       "significance": {...} | null,          # the paired tests (Significance.to_dict())
       "backends": {BACKEND: {
         "params": {...},                       # the backend's params()
         "metrics": {"recall@5": float, ...},   # over the dataset's queries
         "ci95": {"recall@5": [low, high], ...},  # bootstrap interval over the queries
         "by_style": {STYLE: {"recall@5": float, ...}},
         "latency_ms": {"p50": float, "p95": float, "p99": float},
         "index_seconds": float, "peak_mb": float,
         "tokens": {"all_tools": int, "with_search": int}}}}}}

TREC run files (``--run-dir``) are named ``<dataset>.<backend>.trec``, one line per returned
tool: ``qid Q0 tool rank score tag`` (tag = the backend's name). The score column is
rank-derived (``100`` for rank 1, ``99`` for rank 2, ... at run depth 100), so trec_eval and
ranx, which re-sort by score, evaluate exactly the order ToolSearch returned — backends' own
scores tie often (the keyword scorer's are small integers) and fast-path matches have none.
A query that returned nothing has no line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from toolsearch.bench.errors import BenchError
from toolsearch.bench.metrics import RUN_DEPTH, rank_scores
from toolsearch.bench.runner import BenchResult, DatasetResult

__all__ = ["load_results", "result_to_json", "trec_lines", "write_json", "write_trec"]


def _plain(value: Any) -> Any:
    """JSON-ready copy of backend params (paths and other objects become strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def result_to_json(result: BenchResult) -> dict[str, Any]:
    """The results object, in the documented schema."""
    datasets: dict[str, Any] = {}
    for name, entry in result.datasets.items():
        backends: dict[str, Any] = {}
        for backend, run in entry.backends.items():
            backends[backend] = {
                "params": _plain(run.params),
                "metrics": dict(run.metrics),
                "ci95": {metric: list(bounds) for metric, bounds in run.intervals.items()},
                "by_style": {style: dict(values) for style, values in run.by_style.items()},
                "latency_ms": dict(run.latency_ms),
                "index_seconds": run.index_seconds,
                "peak_mb": run.peak_mb,
                "tokens": dict(run.tokens),
            }
        datasets[name] = {
            "n_queries": entry.n_queries,
            "n_positives": len(entry.qrels),
            "n_negatives": len(entry.negative_ids),
            "n_tools": entry.n_tools,
            "sha256": entry.sha256,
            "judgements_sha256": entry.dataset.judgements_sha256(),
            "tools": entry.dataset.tool_hashes(),
            "split": entry.split,
            "style_counts": entry.style_counts(),
            "significance": entry.significance.to_dict() if entry.significance else None,
            "backends": backends,
        }
    return {
        "toolsearch_version": result.toolsearch_version,
        "split": result.split,
        "datasets": datasets,
    }


def write_json(result: BenchResult, path: str | Path) -> Path:
    """Write :func:`result_to_json` to ``path`` (parent folders are created)."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            json.dumps(result_to_json(result), indent=2, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
    except OSError as exc:
        raise BenchError(f"cannot write results: {exc.strerror or exc}", path=target) from exc
    return target


def trec_lines(entry: DatasetResult, backend: str, *, depth: int = RUN_DEPTH) -> Iterator[str]:
    """The TREC run lines of one backend on one dataset, in query order."""
    run = entry.backends[backend]
    for outcome in run.outcomes:
        scores = rank_scores(outcome.names, depth)
        for rank, (tool, score) in enumerate(scores.items(), start=1):
            yield f"{outcome.query_id} Q0 {tool} {rank} {score:g} {backend}"


def write_trec(result: BenchResult, run_dir: str | Path, *, depth: int = RUN_DEPTH) -> list[Path]:
    """One ``<dataset>.<backend>.trec`` file per dataset and backend, in ``run_dir``."""
    folder = Path(run_dir)
    written: list[Path] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, entry in result.datasets.items():
            for backend in entry.backends:
                target = folder / f"{name}.{backend}.trec"
                lines = list(trec_lines(entry, backend, depth=depth))
                target.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
                written.append(target)
    except OSError as exc:
        raise BenchError(f"cannot write run files: {exc.strerror or exc}", path=folder) from exc
    return written


def _expect(value: Any, kind: type | tuple[type, ...], path: Path, where: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise BenchError(
            f"expected {names}, got {type(value).__name__} (is this a `toolsearch bench "
            "--json-out` file?)",
            path=path,
            field=where,
        )
    return value


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and check a results JSON (e.g. a saved baseline); errors name the file and key."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"cannot read results: {exc.strerror or exc}", path=source) from exc
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text: {exc}", path=source) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BenchError(f"invalid JSON: {exc.msg}", path=source, line=exc.lineno) from exc
    _expect(data, dict, source, "(top level)")
    datasets = _expect(data.get("datasets"), dict, source, "datasets")
    for name, entry in datasets.items():
        where = f"datasets.{name}"
        _expect(entry, dict, source, where)
        backends = _expect(entry.get("backends"), dict, source, f"{where}.backends")
        for backend, run in backends.items():
            at = f"{where}.backends.{backend}"
            _expect(run, dict, source, at)
            metrics = _expect(run.get("metrics"), dict, source, f"{at}.metrics")
            for metric, value in metrics.items():
                _expect(value, (int, float), source, f"{at}.metrics.{metric}")
    checked: dict[str, Any] = data
    return checked
