"""The embedding backend with the shipped model at 10,000 tools: query latency including query
encoding (target p50 <= 15 ms on two cores), index build from an empty and from a warm vector
cache, and re-indexing one changed tool (target <= 50 ms).

    pytest benchmarks/bench_embedding.py                          # pytest-benchmark tables
    python benchmarks/bench_embedding.py --tools 10000 --threads 1   # one-shot numbers, JSON out

Queries are the ToolSearch-style phrases of ``bench_keyword.py``, each encoded afresh (the
query cache is cleared before every timed call). The first build encodes every tool and can
take minutes on a CPU; later runs read the vectors from the persistent cache (``--cache-dir``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_keyword import QUERIES, catalogue

from toolsearch.backends.embedding import EmbeddingBackend, default_cache_dir
from toolsearch.query import parse_query
from toolsearch.tool import Tool

pytest.importorskip("sentence_transformers")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build(
    tools: list[Tool], cache_dir: Path, threads: int | None
) -> tuple[EmbeddingBackend, float]:
    backend = EmbeddingBackend(cache_dir=cache_dir, progress=None, threads=threads)
    start = time.perf_counter()
    backend.index(tools)
    return backend, time.perf_counter() - start


def query_latencies(backend: EmbeddingBackend, rounds: int = 3) -> list[float]:
    parsed = [parse_query(q) for q in QUERIES]
    backend.search(parsed[0], 5)  # model already loaded by index(); warm the kernels
    latencies = []
    for _ in range(rounds):
        for query in parsed:
            backend._query_vectors.clear()  # time the query encoding too
            start = time.perf_counter()
            backend.search(query, 5)
            latencies.append((time.perf_counter() - start) * 1e3)
    return latencies


def reindex_one(backend: EmbeddingBackend, tools: list[Tool], rounds: int = 10) -> list[float]:
    times = []
    for i in range(rounds):
        tool = tools[(i * 997) % len(tools)]
        changed = replace(tool, description=f"{tool.description} (revision {time.time_ns()})")
        start = time.perf_counter()
        backend.upsert([changed])
        times.append((time.perf_counter() - start) * 1e3)
    return times


def measure(n: int, cache_dir: Path, threads: int | None) -> dict[str, Any]:
    tools = catalogue(n)
    backend, first = build(tools, cache_dir, threads)
    backend2, warm = build(tools, cache_dir, threads)
    latencies = query_latencies(backend2)
    reindex = reindex_one(backend2, tools)
    return {
        "tools": n,
        "threads": threads,
        "encoder": backend.encoder.name,
        "fields": list(backend.fields),
        "index_seconds_first": round(first, 2),
        "index_seconds_warm_cache": round(warm, 2),
        "query_p50_ms": round(statistics.median(latencies), 2),
        "query_p95_ms": round(_percentile(latencies, 0.95), 2),
        "queries_timed": len(latencies),
        "reindex_one_p50_ms": round(statistics.median(reindex), 2),
        "reindex_one_max_ms": round(max(reindex), 2),
    }


@pytest.fixture(scope="module")
def indexed() -> tuple[EmbeddingBackend, list[Tool]]:
    tools = catalogue(10_000)
    backend, _ = build(tools, default_cache_dir(), None)
    return backend, tools


def test_embedding_query(benchmark: Any, indexed: tuple[EmbeddingBackend, list[Tool]]) -> None:
    backend, _ = indexed
    parsed = [parse_query(q) for q in QUERIES]
    state = {"i": 0}

    def one() -> None:
        backend._query_vectors.clear()
        backend.search(parsed[state["i"] % len(parsed)], 5)
        state["i"] += 1

    benchmark(one)


def test_embedding_reindex_one(
    benchmark: Any, indexed: tuple[EmbeddingBackend, list[Tool]]
) -> None:
    backend, tools = indexed
    benchmark.pedantic(lambda: reindex_one(backend, tools, rounds=1), rounds=10, iterations=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    result = measure(args.tools, args.cache_dir or default_cache_dir(), args.threads)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
