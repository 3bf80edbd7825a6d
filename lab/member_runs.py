"""Member rankings of the quality benchmarks, computed once and cached on disk.

Fusion, abstention and multi-step merging only re-combine what the member backends return, so
``lab/ablation.py`` runs each member once per dataset and split at depth :data:`DEPTH`
and explores everything else offline. A run is cached under
``--cache`` (default ``$TOOLSEARCH_CACHE_DIR/quality_runs``, outside the repository) keyed by
the dataset's hash, the split, the sample, the member and its options, so a changed dataset or
backend option is never served a stale ranking.

Samples: the queries of a split (:func:`toolsearch.splits.split_of`), at most ``limit`` of
them chosen by :func:`toolsearch.bench.runner.sample_queries` (the smallest SHA-256 of the id),
negatives included.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolsearch.backends.embedding import default_cache_dir
from toolsearch.backends.hybrid import DEFAULT_MEMBER_OPTIONS
from toolsearch.bench.runner import resolve_dataset, sample_queries
from toolsearch.dataset import Dataset, Query, load_dataset
from toolsearch.query import parse_query
from toolsearch.registry import load_backend
from toolsearch.splits import split_of

__all__ = [
    "DATASETS",
    "DEPTH",
    "MemberSpec",
    "Sample",
    "Scored",
    "load_sample",
    "member_hits",
]

#: Hits kept per member and query.
DEPTH = 100
#: The datasets every quality benchmark reads (bundled first, then the public sets).
DATASETS: tuple[str, ...] = ("mcp-workbench", "metatool", "bfcl")

#: ``[(tool, score), ...]`` best first.
Scored = list[tuple[str, float]]


@dataclass(frozen=True)
class MemberSpec:
    """A member backend to run: a label, the registry name and constructor options."""

    label: str
    backend: str
    options: Mapping[str, Any]

    def key(self, backend: Any = None) -> str:
        """A hash of the options and of the built ``backend``'s settings (its ``params()``), so
        a changed default (a new fusion, multi-step on) never reuses an old ranking."""
        settings = _settings(backend.params()) if hasattr(backend, "params") else None
        text = json.dumps([self.backend, dict(self.options), settings], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def hybrid_member(label: str, member: str) -> MemberSpec:
    """The default hybrid's member ``member`` as a spec labelled ``label``: its backend and the
    options it starts from (``hybrid.DEFAULT_MEMBER_OPTIONS``), so an experiment runs the
    member as the default does."""
    options = dict(DEFAULT_MEMBER_OPTIONS[member])
    backend = options.pop("backend", member)
    return MemberSpec(label, backend, options)


@dataclass(frozen=True)
class Sample:
    """The queries of one dataset split used by the quality benchmarks."""

    dataset: Dataset
    split: str
    queries: tuple[Query, ...]

    @property
    def name(self) -> str:
        return f"{self.dataset.name}/{self.split}"

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        return {q.id: dict(self.dataset.qrels[q.id]) for q in self.queries if self.is_positive(q)}

    @property
    def groups(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Each positive query's groups of alternative gold tools: every quality benchmark
        scores with them, as ``toolsearch bench`` does (docs/benchmark.md)."""
        return {qid: self.dataset.groups(qid) for qid in self.qrels}

    def is_positive(self, query: Query) -> bool:
        return bool(self.dataset.qrels.get(query.id))

    def key(self, limit: int | None) -> str:
        ids = "\n".join(q.id for q in self.queries)
        return hashlib.sha256(
            f"{self.dataset.sha256()}|{self.split}|{limit}|{ids}".encode()
        ).hexdigest()[:16]


def _settings(params: Any) -> Any:
    """``params`` without what describes the moment rather than the ranking (member states)."""
    if isinstance(params, dict):
        return {k: _settings(v) for k, v in params.items() if k != "member_states"}
    return params


def load_sample(name: str, split: str, limit: int | None) -> Sample:
    """The ``split`` queries of dataset ``name`` (at most ``limit``, hash-ordered sample)."""
    dataset = load_dataset(resolve_dataset(name))
    queries = [q for q in dataset.queries if split_of(q.id) == split]
    return Sample(dataset, split, tuple(sample_queries(queries, limit)))


def default_runs_dir() -> Path:
    return Path(default_cache_dir()) / "quality_runs"


def member_hits(
    sample: Sample,
    member: MemberSpec,
    *,
    limit: int | None,
    cache: Path | None = None,
    texts: Mapping[str, str] | None = None,
) -> dict[str, Scored]:
    """``{query id: hits}`` of ``member`` over ``sample`` (from the cache when present).

    ``texts`` (``{id: text}``) replaces the sample's queries, e.g. by the steps of split
    requests; the cache key then covers the texts.
    """
    folder = cache or default_runs_dir()
    extra = ""
    if texts is not None:
        joined = "\n".join(f"{k}\t{v}" for k, v in texts.items())
        extra = "." + hashlib.sha256(joined.encode()).hexdigest()[:12]
    stem = f"{sample.dataset.name}.{sample.split}.{sample.key(limit)}"
    backend = load_backend(member.backend, **dict(member.options))
    file = folder / f"{stem}.{member.label}.{member.key(backend)}{extra}.json.gz"
    if file.is_file():
        with gzip.open(file, "rt", encoding="utf-8") as handle:
            stored: dict[str, Scored] = {
                k: [tuple(p) for p in v] for k, v in json.load(handle).items()
            }
            return stored
    print(
        f"running {member.label} on {sample.name} ({len(sample.queries)} queries)",
        file=sys.stderr,
        flush=True,
    )
    backend.index(list(sample.dataset.tools))
    wanted = dict(texts) if texts is not None else {q.id: q.text for q in sample.queries}
    _encode_queries_in_batches(backend, list(wanted.values()))
    hits: dict[str, Scored] = {}
    for qid, text in wanted.items():
        hits[qid] = [(h.name, h.score) for h in backend.search(parse_query(text), DEPTH)]
    folder.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        json.dump(hits, handle)
    tmp.replace(file)
    return hits


def _encode_queries_in_batches(backend: Any, texts: list[str]) -> None:
    """Fill the query-vector memory of an embedding backend (or of a hybrid's embedding
    members) in batches: the vectors it would compute per query, many times faster."""
    from toolsearch.backends.embedding import EmbeddingBackend

    members = getattr(backend, "members", {"": backend})
    for member in members.values():
        if isinstance(member, EmbeddingBackend):
            member.remember_queries(texts)
