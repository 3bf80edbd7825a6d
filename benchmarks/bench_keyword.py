"""The keyword backend against the naive transcription of the rules at 10,000 tools.

Both must return identical results, and the indexed backend must be at least
:data:`MIN_SPEEDUP` times faster over the whole query set; the one-shot run exits 1 otherwise.

    pytest benchmarks/bench_keyword.py                      # pytest-benchmark tables
    python -m benchmarks.bench_keyword --tools 10000        # one-shot comparison, JSON out
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

# the naive transcription of the rules is test code: it lives in tests/, outside the package
from tests.keyword_reference import naive_keyword_search
from toolsearch.backends.keyword import KeywordBackend
from toolsearch.catalog import load_catalog
from toolsearch.query import parse_query
from toolsearch.synth import scale_catalog
from toolsearch.tool import Tool, pool_order

ROOT = Path(__file__).resolve().parents[1]
#: How much faster than the naive transcription the indexed backend must be (total time).
MIN_SPEEDUP = 10.0
SHARED = ROOT.parent / "shared" / "datasets"
QUERIES = [
    "slack send message", "+slack send", "create issue", "github pull request", "list files",
    "read file", "search code", "notebook jupyter", "calendar event", "send email",
    "database query", "sql", "delete", "get user", "update page", "weather forecast",
    "payment refund", "+stripe invoice", "kubernetes pods logs", "browser screenshot",
    "upload to bucket", "dns record", "create branch", "merge", "translate text",
    "mcp", "x", "a.b", "c++", "fetch url", "book a flight", "convert currency",
    "Get the current weather in Boston", "Find restaurants near me that are open now",
    "calculate the area of a circle with radius 5", "what's on my calendar tomorrow",
]  # fmt: skip


def base_catalogue() -> list[Tool]:
    """Real tool definitions: the public MCP catalogues and BFCL when present, else bundled."""
    folders = [SHARED / n for n in ("mcp-docker-catalog", "mcp-github-catalog", "bfcl")]
    present = [f for f in folders if (f / "tools.jsonl").is_file()]
    if not present:
        present = [ROOT / "datasets" / "starter"]
    return [tool for folder in present for tool in load_catalog(folder)]


def catalogue(n: int) -> list[Tool]:
    return pool_order(scale_catalog(base_catalogue(), n, seed=0))


@pytest.fixture(scope="module")
def tools() -> list[Tool]:
    return catalogue(10_000)


@pytest.fixture(scope="module")
def backend(tools: list[Tool]) -> KeywordBackend:
    indexed = KeywordBackend()
    indexed.index(tools)
    return indexed


def test_results_equal_naive(tools: list[Tool], backend: KeywordBackend) -> None:
    for query in QUERIES:
        assert backend.search(parse_query(query), 5) == naive_keyword_search(tools, query, 5)


def test_keyword_indexed(benchmark: BenchmarkFixture, backend: KeywordBackend) -> None:
    parsed = [parse_query(q) for q in QUERIES]
    benchmark(lambda: [backend.search(q, 5) for q in parsed])


def test_keyword_naive(benchmark: BenchmarkFixture, tools: list[Tool]) -> None:
    benchmark.pedantic(  # type: ignore[no-untyped-call]
        lambda: [naive_keyword_search(tools, q, 5) for q in QUERIES], rounds=3, iterations=1
    )


def compare(n: int) -> dict[str, object]:
    """Per-query latency of both implementations on ``n`` tools, and whether results agree."""
    tools = catalogue(n)
    backend = KeywordBackend()
    start = time.perf_counter()
    backend.index(tools)
    build = time.perf_counter() - start
    fast: list[float] = []
    naive: list[float] = []
    equal = True
    for query in QUERIES:
        parsed = parse_query(query)
        start = time.perf_counter()
        got = backend.search(parsed, 5)
        fast.append(time.perf_counter() - start)
        start = time.perf_counter()
        want = naive_keyword_search(tools, query, 5)
        naive.append(time.perf_counter() - start)
        equal = equal and got == want
    return {
        "tools": n,
        "queries": len(QUERIES),
        "index_seconds": round(build, 4),
        "indexed_p50_ms": round(statistics.median(fast) * 1e3, 3),
        "naive_p50_ms": round(statistics.median(naive) * 1e3, 3),
        "indexed_total_ms": round(sum(fast) * 1e3, 2),
        "naive_total_ms": round(sum(naive) * 1e3, 2),
        "speedup": round(sum(naive) / sum(fast), 1),
        "results_equal": equal,
    }


def markdown(rows: list[dict[str, object]]) -> str:
    """The results (``--out`` JSON) as the Markdown table of docs/results.md."""
    lines = [
        "| tools | indexed p50 ms | naive p50 ms | speed-up (total) | equal |",
        "|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tools']} | {r['indexed_p50_ms']} | {r['naive_p50_ms']} | "
            f"{r['speedup']}x | {'yes' if r['results_equal'] else 'NO'} |"
        )
    return "\n".join(lines)


def _sizes(text: str) -> list[int]:
    """``--tools``: comma-separated catalogue sizes, each a whole number of at least 1."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) >= 1 for part in parts):
        raise argparse.ArgumentTypeError(f"expected sizes such as 1000,10000, got {text!r}")
    return [int(part) for part in parts]


def failures(rows: list[dict[str, object]]) -> list[str]:
    """What a run fell short of: results that differ, or a speed-up below :data:`MIN_SPEEDUP`."""
    out: list[str] = []
    for row in rows:
        if not row["results_equal"]:
            out.append(f"{row['tools']} tools: results differ from the naive transcription")
        speedup = row["speedup"]
        if not isinstance(speedup, int | float) or speedup < MIN_SPEEDUP:
            out.append(f"{row['tools']} tools: speed-up {speedup}x < {MIN_SPEEDUP:g}x")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--tools", type=_sizes, default=[10_000], help="comma-separated catalogue sizes"
    )
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    rows = [compare(n) for n in args.tools]
    print(markdown(rows))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    for problem in failures(rows):
        print(f"bench_keyword: {problem}", file=sys.stderr)
    return 1 if failures(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
