"""What "no tool fits" is decided from, per request and catalogue, computed once and cached.

For every dataset (the bundled mcp-workbench and the ten public sets with queries), the default
hybrid with abstention off searches its catalogue for:

* ``test``: the test split's benchmark sample (at most :data:`LIMIT`, hash order);
* ``dev``: dev requests the shipped model never trained on (:func:`unseen_dev`), at most
  :data:`LIMIT` — a model scores the requests it learnt from higher than a user's, so the
  classifier learns from the others;
* ``cross``: :data:`CROSS_PER_SOURCE` of every *other* dataset's unseen dev requests: requests
  whose tools this catalogue does not have (out-of-catalogue negatives for training; a few may
  still fit, as a weather request may on another weather API);
* ``probes``: the project's out-of-catalogue probe set (``datasets/abstention-probes``), each
  catalogue's reference.

Each record keeps each member's best hits (name, raw score), the default's first five tools and,
for a request with gold tools, its recall@5. Runs are cached under
``$TOOLSEARCH_CACHE_DIR/abstention_runs`` keyed by the dataset's hash, the query ids and the
hybrid's settings.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lab.broad_model import PER_SOURCE, SOURCES, source_queries
from lab.member_runs import load_sample
from toolsearch.backends.embedding import default_cache_dir
from toolsearch.bench.metrics import parse_metrics, per_query_scores
from toolsearch.bench.runner import sample_queries
from toolsearch.dataset import Dataset, Query
from toolsearch.query import parse_query

#: Every labelled dataset, bundled first (the shipped model's sources).
DATASETS: tuple[str, ...] = tuple(SOURCES)
#: Test requests per dataset: the benchmarks' 1,000 for the three the ablation reads, fewer for
#: the others (two cores); unseen dev requests per dataset.
TEST_LIMITS: Mapping[str, int] = {"mcp-workbench": 1000, "metatool": 1000, "bfcl": 1000}
TEST_LIMIT = 500
LIMIT = 500
#: Out-of-catalogue requests taken from each other dataset.
CROSS_PER_SOURCE = 40
#: Hits kept per member.
KEEP = 10
#: The datasets whose whole dev sample the shipped model trained on (``broad_model.FULL``).
FULL_SAMPLES = ("mcp-workbench", "metatool", "bfcl")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def runs_dir() -> Path:
    return Path(default_cache_dir()) / "abstention_runs"


def unseen_dev(name: str, limit: int | None = LIMIT) -> tuple[Dataset, list[Query]]:
    """Dataset ``name`` and its dev requests the shipped model never trained on (every
    negative: none makes a training pair), at most ``limit`` in the benchmarks' hash order."""
    sample = load_sample(name, "dev", None)
    dataset, trained = source_queries(name, PER_SOURCE, FULL_SAMPLES)
    seen = {q.id for q in trained if dataset.qrels.get(q.id)}  # a negative makes no pair
    kept = [q for q in sample.queries if q.id not in seen]
    return sample.dataset, sample_queries(kept, limit)


def test_queries(name: str) -> tuple[Dataset, list[Query]]:
    sample = load_sample(name, "test", TEST_LIMITS.get(name, TEST_LIMIT))
    return sample.dataset, list(sample.queries)


def cross_queries(name: str, per_source: int = CROSS_PER_SOURCE) -> list[Query]:
    """Unseen dev requests of every dataset but ``name``, ids prefixed by their dataset."""
    out: list[Query] = []
    for other in DATASETS:
        if other == name:
            continue
        dataset, queries = unseen_dev(other)
        positives = [q for q in queries if dataset.qrels.get(q.id)]
        for query in positives[:per_source]:
            out.append(Query(f"{other}:{query.id}", query.text, query.style))
    return out


def _record(backend: Any, query: Query, dataset: Dataset | None) -> dict[str, Any]:
    parsed = parse_query(query.text)
    hits = backend.member_hits(parsed, backend.depth)
    record: dict[str, Any] = {
        "id": query.id,
        "text": query.text,
        "style": query.style,
        "hits": {
            m: [(h.name, round(h.score, 6)) for h in found[:KEEP]] for m, found in hits.items()
        },
    }
    if dataset is not None and dataset.qrels.get(query.id):
        ranked = [h.name for h in backend.search(parsed, 5)]
        qrels = {query.id: dict(dataset.qrels[query.id])}
        got = per_query_scores(
            qrels,
            {query.id: ranked},
            parse_metrics(("recall@5",)),
            groups={query.id: dataset.groups(query.id)},
        )
        record["recall@5"] = got["recall@5"][query.id]
        record["top"] = ranked
    return record


def hybrid_for(dataset: Dataset) -> Any:
    """The default hybrid, abstention off, with ``dataset``'s tools indexed."""
    from toolsearch.backends.hybrid import HybridBackend

    backend = HybridBackend(min_member_score={})
    backend.index(list(dataset.tools))
    return backend


def records(
    name: str, part: str, dataset: Dataset, queries: Sequence[Query], *, gold: bool = True
) -> list[dict[str, Any]]:
    """Cached records of ``queries`` searched in ``dataset``'s catalogue (``gold``: score the
    default's recall@5 against the dataset's qrels)."""
    from toolsearch.backends.hybrid import HybridBackend

    settings = json.dumps(HybridBackend(min_member_score={}).params(), sort_keys=True, default=str)
    ids = "\n".join(f"{q.id}\t{q.text}" for q in queries)
    key = hashlib.sha256(f"{dataset.sha256()}|{ids}|{settings}".encode()).hexdigest()[:16]
    file = runs_dir() / f"{name}.{part}.{key}.json.gz"
    if file.is_file():
        with gzip.open(file, "rt", encoding="utf-8") as handle:
            stored: list[dict[str, Any]] = json.load(handle)
            return stored
    log(f"searching {len(queries)} {part} requests in {name}")
    backend = hybrid_for(dataset)
    for member in backend.members.values():
        remember = getattr(member, "remember_queries", None)
        if remember is not None:
            remember([q.text for q in queries])
    out = [_record(backend, q, dataset if gold else None) for q in queries]
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as handle:
        json.dump(out, handle)
    tmp.replace(file)
    return out


def dataset_records(name: str, probes: Iterable[str]) -> dict[str, Any]:
    """Every part's records for dataset ``name`` (``probes``: the probe set's requests)."""
    dataset, test = test_queries(name)
    _, dev = unseen_dev(name)
    probe_queries = [Query(f"probe-{i}", text, "probe") for i, text in enumerate(probes)]
    return {
        "dataset": dataset,
        "test": records(name, "test", dataset, test),
        "dev": records(name, "dev", dataset, dev),
        "cross": records(name, "cross", dataset, cross_queries(name), gold=False),
        "probes": records(name, "probes", dataset, probe_queries, gold=False),
    }


if __name__ == "__main__":
    from lab.abstention_features import probe_requests

    for dataset_name in sys.argv[1:] or DATASETS:
        found, tested = test_queries(dataset_name)
        records(dataset_name, "test", found, tested)
        records(dataset_name, "dev", found, unseen_dev(dataset_name)[1])
        records(dataset_name, "cross", found, cross_queries(dataset_name), gold=False)
        probes = [Query(f"probe-{i}", t, "probe") for i, t in enumerate(probe_requests())]
        records(dataset_name, "probes", found, probes, gold=False)
