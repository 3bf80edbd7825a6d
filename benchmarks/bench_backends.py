"""Speed of the search backends on 1k, 10k and 100k tools.

Catalogues are :func:`toolsearch.synth.scale_catalog` grown from the real public catalogues
(mcp-docker-catalog, mcp-github-catalog and the BFCL functions in ``../shared/datasets``; the
bundled starter catalogue when those are absent). For every backend and size:

* **index s** — ``backend.index(tools)`` from nothing;
* **peak MB** — the rise of the process's peak resident memory while building and querying
  (each measurement runs in a fresh process, so allocations of one backend do not hide another's);
* **p50 / p95 ms** — one ``ToolSearch.search(query, 5)`` call, for three query sets: *keyword*,
  the ToolSearch-style phrases of ``bench_keyword.py`` (what a model sends), *natural*, user
  requests sampled from the BFCL and MetaTool query sets (long, full of common words), and
  *task*, 100-word task descriptions joined from those requests (:func:`task_queries`; several
  steps each, so the default's multi-step search has work to do);
* **re-index 1 ms** — ``backend.upsert([one changed tool])`` on the built index;
* **layer** — p50 through ``ToolSearch.search`` over p50 of the same ranking called directly
  (keyword queries without ``+required`` terms, calls interleaved):
  rank-bm25-style scoring with our numpy index (``bm25``), the plain FTS5 ``MATCH ... ORDER BY
  bm25()`` SQL on the same database (``fts5``), ``backend.search`` for the others.

Run it::

    python -m benchmarks.bench_backends --sizes 1000,10000,100000 --out results.json
    pytest benchmarks/bench_backends.py          # pytest-benchmark tables; sizes and backends
                                                 # from TOOLSEARCH_BENCH_SIZES / _BACKENDS

The embedding backend encodes every tool with the real model, which takes minutes at 10k on a
CPU; the script runs it only up to ``--embedding-max`` tools (default 10,000).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import toolsearch
from benchmarks.bench_keyword import QUERIES as KEYWORD_QUERIES
from toolsearch.backend import SearchBackend
from toolsearch.catalog import load_catalog
from toolsearch.dataset import load_dataset
from toolsearch.datasets import BUNDLED_DIR, shared_datasets_dir
from toolsearch.engine import ToolSearch
from toolsearch.query import parse_query
from toolsearch.registry import load_backend
from toolsearch.synth import scale_catalog
from toolsearch.tokenize import FIELDS, tokenize
from toolsearch.tool import Tool, pool_order

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = ("mcp-docker-catalog", "mcp-github-catalog", "bfcl")
QUERY_SETS = ("bfcl", "metatool")
NATURAL_PER_SET = 100
DEFAULT_SIZES = (1_000, 10_000, 100_000)
DEFAULT_BACKENDS = ("keyword", "bm25", "fts5")
TARGETS = {
    "lexical_p50_ms_10k": 1.0,
    "lexical_p50_ms_100k": 5.0,
    "embedding_p50_ms_10k": 15.0,
    "reindex_one_ms_10k": 50.0,
    "layer_ratio": 1.3,
}


# ----------------------------------------------------------------------------- inputs


def _shared() -> Path | None:
    found: Path | None = shared_datasets_dir()
    if found is None and (ROOT.parent / "shared" / "datasets").is_dir():
        found = ROOT.parent / "shared" / "datasets"
    return found


def base_folders() -> list[Path]:
    """The real catalogues the scaled ones grow from (bundled starter when absent)."""
    shared = _shared()
    folders = [shared / name for name in CATALOGUES] if shared is not None else []
    present = [folder for folder in folders if (folder / "tools.jsonl").is_file()]
    return present or [BUNDLED_DIR / "starter"]


def catalogue(size: int) -> list[Tool]:
    """``size`` tools in pool order, the same on every run."""
    base = [tool for folder in base_folders() for tool in load_catalog(folder)]
    return pool_order(scale_catalog(base, size, seed=0))


def natural_queries() -> list[str]:
    """User requests from the public query sets (a fixed sample), or none when absent."""
    shared = _shared()
    texts: list[str] = []
    for name in QUERY_SETS:
        folder = shared / name if shared is not None else None
        if folder is None or not (folder / "queries.jsonl").is_file():
            continue
        queries = [q.text for q in load_dataset(folder).queries]
        texts += random.Random(0).sample(queries, min(NATURAL_PER_SET, len(queries)))
    return texts


def task_queries(n: int = 36, words: int = 100) -> list[str]:
    """Task descriptions of about ``words`` words, joined from consecutive user requests."""
    pool = natural_queries()
    out: list[str] = []
    current: list[str] = []
    for request in pool * 2:
        current.append(request)
        if sum(len(r.split()) for r in current) >= words:
            out.append(" ".join(" ".join(current).split()[:words]))
            current = []
            if len(out) == n:
                break
    return out


def datasets_used() -> list[dict[str, str]]:
    """Name and content hash of every dataset folder read, for the results file."""
    shared = _shared()
    folders = list(base_folders())
    if shared is not None:
        folders += [shared / n for n in QUERY_SETS if (shared / n / "queries.jsonl").is_file()]
    unique = list(dict.fromkeys(folders))
    return [{"name": f.name, "sha256": load_dataset(f).sha256()} for f in unique]


# ----------------------------------------------------------------------------- backends


def make_backend(name: str) -> SearchBackend:
    """A fresh backend as benchmarked: defaults, in-memory FTS5, the real embedding model with
    its query-vector cache off (every timed search encodes its query)."""
    if name == "embedding":
        return load_backend("embedding", progress=False, query_cache_size=0)
    if name == "hybrid":
        from toolsearch.backends.hybrid import DEFAULT_MEMBERS

        options = {"embedding": {"progress": False, "query_cache_size": 0}}
        return load_backend(
            "hybrid", member_options={m: o for m, o in options.items() if m in DEFAULT_MEMBERS}
        )
    return load_backend(name)


def direct_call(name: str, backend: Any) -> tuple[str, Callable[[str], object]]:
    """What the backend's ranking costs without the toolsearch layer: a label and a callable
    taking the raw query text."""
    if name == "bm25":
        scorer = backend.scorer

        def bm25_direct(text: str) -> object:
            return scorer.top(tokenize(text), 5)

        return "numpy BM25 index: top(tokenize(text), 5)", bm25_direct
    if name == "fts5":
        from toolsearch.backends.fts5 import match_expression

        conn = backend.db.conn
        weights = tuple(backend.field_weights[f] for f in FIELDS)
        sql = (
            "SELECT t.tool_name, -bm25(tools_fts, ?, ?, ?, ?, ?) AS s FROM tools_fts "
            "JOIN tools t ON t.id = tools_fts.rowid WHERE tools_fts MATCH ? "
            "ORDER BY s DESC, t.mcp, t.tool_name LIMIT 5"
        )

        def fts5_direct(text: str) -> object:
            expression = match_expression(tokenize(text))
            return conn.execute(sql, (*weights, expression)).fetchall() if expression else []

        return "sqlite3: MATCH quoted tokens ORDER BY bm25() LIMIT 5", fts5_direct

    def backend_direct(text: str) -> object:
        return backend.search(parse_query(text), 5)

    return "backend.search(parse_query(text), 5)", backend_direct


# ----------------------------------------------------------------------------- measuring


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 4)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latencies(call: Callable[[str], object], queries: Sequence[str], rounds: int) -> list[float]:
    """Seconds of each call of ``call`` on ``queries``, ``rounds`` times over, after ten
    warm-up calls."""
    for text in queries[:10]:
        call(text)
    out = []
    for _ in range(rounds):
        for text in queries:
            start = time.perf_counter()
            call(text)
            out.append(time.perf_counter() - start)
    return out


def _rss_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Return freed heap to the system, then reset the peak-RSS counter to the current RSS, so
    the peak afterwards shows what the measured code added (Linux; False elsewhere)."""
    import gc

    from toolsearch.backends.embedding_cache import release_freed_heap

    gc.collect()
    release_freed_heap()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def measure(name: str, size: int, *, rounds: int = 3) -> dict[str, Any]:
    """Every number of one (backend, size) cell, measured in this process."""
    tools = catalogue(size)
    natural = natural_queries()
    tasks = task_queries()
    keyword = list(KEYWORD_QUERIES)
    backend = make_backend(name)
    peak_reset = _reset_peak()
    rss_before = _rss_kb("VmRSS")

    start = time.perf_counter()
    backend.index(tools)
    build = time.perf_counter() - start
    engine = ToolSearch(tools, backend=_Indexed(backend))

    def through_toolsearch(text: str) -> object:
        return engine.search(text, 5)

    label, direct = direct_call(name, backend)
    layered_kw = latencies(through_toolsearch, keyword, rounds)
    direct_kw = latencies(direct, keyword, rounds)
    layered_nl = latencies(through_toolsearch, natural, 1) if natural else []
    layered_task = latencies(through_toolsearch, tasks, 1) if tasks else []
    # The layer ratio from interleaved calls, so both sides see the same machine load, taking
    # turns at going first (the first call of a query meets colder caches); over the queries
    # without +required terms, whose filter the direct call does not apply.
    layer: list[float] = []
    plain: list[float] = []
    for turn in range(2 * rounds):
        for text in [q for q in keyword if "+" not in q]:
            for first in (True, False) if turn % 2 else (False, True):
                start = time.perf_counter()
                (through_toolsearch if first else direct)(text)
                (layer if first else plain).append(time.perf_counter() - start)

    reindex: list[float] = []
    after: list[float] = []
    upsert = getattr(backend, "upsert", None)
    if upsert is not None:
        step = max(1, len(tools) // 20)
        began = time.perf_counter()
        for i in range(20):
            if i >= 3 and time.perf_counter() - began > 10:
                break  # a backend that rebuilds on every change: a few samples will do
            changed = replace(tools[i * step], description=tools[i * step].description + f" v{i}")
            start = time.perf_counter()
            upsert([changed])
            reindex.append(time.perf_counter() - start)
            start = time.perf_counter()
            backend.search(parse_query(keyword[i % len(keyword)]), 5)
            after.append(time.perf_counter() - start)

    peak = _rss_kb("VmHWM")
    result: dict[str, Any] = {
        "backend": name,
        "tools": size,
        "params": getattr(backend, "params", dict)(),
        "index_s": round(build, 4),
        "peak_rss_mb": round(peak / 1024, 1) if peak is not None else None,
        "peak_mb": round((peak - rss_before) / 1024, 1)
        if peak is not None and rss_before is not None and peak_reset
        else None,
        "keyword_queries": len(keyword),
        "keyword_p50_ms": _ms(statistics.median(layered_kw)),
        "keyword_p95_ms": _ms(_percentile(layered_kw, 0.95)),
        "direct_p50_ms": _ms(statistics.median(direct_kw)),
        "natural_queries": len(natural),
        "natural_p50_ms": _ms(statistics.median(layered_nl)) if layered_nl else None,
        "natural_p95_ms": _ms(_percentile(layered_nl, 0.95)) if layered_nl else None,
        "task_queries": len(tasks),
        "task_p50_ms": _ms(statistics.median(layered_task)) if layered_task else None,
        "task_p95_ms": _ms(_percentile(layered_task, 0.95)) if layered_task else None,
        "layer_ratio": round(statistics.median(layer) / statistics.median(plain), 3),
        "direct_call": label,
        "reindex_one_p50_ms": _ms(statistics.median(reindex)) if reindex else None,
        "first_query_after_reindex_p50_ms": _ms(statistics.median(after)) if after else None,
    }
    return result


class _Indexed:
    """Hands an already-built backend to ToolSearch without indexing it a second time."""

    def __init__(self, backend: SearchBackend) -> None:
        self.backend = backend
        self._first = True

    def index(self, tools: Sequence[Tool]) -> None:
        if self._first:
            self._first = False
            return
        self.backend.index(tools)

    def search(self, query: Any, k: int) -> Any:
        return self.backend.search(query, k)


# ----------------------------------------------------------------------------- script mode


def fresh_cache_dir(parent: Path | None = None) -> Path:
    """An empty vector cache (under ``parent``, else the temporary folder) that keeps the
    model's ONNX export, made once per model, so a cold build does not include the export."""
    from toolsearch.backends.embedding import default_cache_dir

    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="toolsearch-bench-", dir=parent))
    exports = default_cache_dir() / "onnx"
    if exports.is_dir():
        shutil.copytree(exports, folder / "onnx")
    return folder


def run_cell(name: str, size: int, rounds: int, cold_cache: Path | None = None) -> dict[str, Any]:
    """Measure one cell in a fresh interpreter (clean peak-memory figure); with ``cold_cache``
    an embedding or hybrid cell starts from an empty vector cache made under it."""
    worker = ["--worker", name, str(size), "--rounds", str(rounds)]
    # as a module from the project root, as every benchmark runs: run as a file, the worker
    # could not import the ``benchmarks`` package
    command = [sys.executable, "-m", "benchmarks.bench_backends", *worker]
    env = dict(os.environ)
    if cold_cache is not None and name in ("embedding", "hybrid"):
        env["TOOLSEARCH_CACHE_DIR"] = str(fresh_cache_dir(cold_cache))
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{name} at {size} tools failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The results as the Markdown table of docs/results.md."""
    lines = [
        "| backend | tools | index s | peak MB | keyword p50 ms | keyword p95 ms | "
        "natural p50 ms | natural p95 ms | re-index 1 tool ms | layer ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['tools']} | {r['index_s']} | {_cell(r['peak_mb'])} | "
            f"{r['keyword_p50_ms']} | {r['keyword_p95_ms']} | {_cell(r['natural_p50_ms'])} | "
            f"{_cell(r['natural_p95_ms'])} | {_cell(r['reindex_one_p50_ms'])} | "
            f"{r['layer_ratio']} |"
        )
    return "\n".join(lines)


def _one(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def markdown_default(rows: Sequence[dict[str, Any]]) -> str:
    """The docs/results.md table of the default backend at scale: build from an empty vector
    cache, the process's whole peak memory, and latency with query encoding."""
    lines = [
        "| tools | index s (cold cache) | peak RSS MiB | keyword p50 / p95 ms | "
        "natural p50 / p95 ms | 100-word task p50 / p95 ms | re-index 1 tool ms | multi-step |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        multistep = r["params"].get("multistep")
        lines.append(
            f"| {r['tools']:,} | {r['index_s']:.1f} | {_one(r.get('peak_rss_mb'))} | "
            f"{_one(r['keyword_p50_ms'])} / {_one(r['keyword_p95_ms'])} | "
            f"{_one(r['natural_p50_ms'])} / {_one(r['natural_p95_ms'])} | "
            f"{_one(r.get('task_p50_ms'))} / {_one(r.get('task_p95_ms'))} | "
            f"{_one(r['reindex_one_p50_ms'])} | {'on' if multistep else 'off'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS))
    parser.add_argument("--embedding-max", type=int, default=10_000)
    parser.add_argument(
        "--cold-cache-dir",
        type=Path,
        default=None,
        help="give each embedding/hybrid cell an empty vector cache under this folder "
        "(default: the user's cache, warm after the first run)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="passes over the keyword queries")
    parser.add_argument("--out", help="write the results (and run metadata) as JSON here")
    parser.add_argument("--worker", nargs=2, metavar=("BACKEND", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(measure(args.worker[0], int(args.worker[1]), rounds=args.rounds)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    names = [b for b in args.backends.split(",") if b]
    rows, skipped = [], []
    for name in names:
        for size in sizes:
            if name in ("embedding", "hybrid") and size > args.embedding_max:
                skipped.append(f"{name} at {size} (above --embedding-max {args.embedding_max})")
                continue
            print(f"measuring {name} at {size} tools ...", file=sys.stderr, flush=True)
            rows.append(run_cell(name, size, args.rounds, args.cold_cache_dir))
    table = markdown(rows)
    print(table)
    for note in skipped:
        print(f"skipped: {note}")
    if args.out:
        meta = {
            "toolsearch_version": toolsearch.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": "python -m benchmarks.bench_backends " + " ".join(argv or sys.argv[1:]),
            "datasets": datasets_used(),
            "targets": TARGETS,
            "skipped": skipped,
        }
        Path(args.out).write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    return 0


# ----------------------------------------------------------------------------- pytest mode


def _env_list(var: str, default: Sequence[object]) -> list[str]:
    raw = os.environ.get(var, "")
    return [item for item in raw.split(",") if item] or [str(d) for d in default]


BENCH_SIZES = [int(s) for s in _env_list("TOOLSEARCH_BENCH_SIZES", DEFAULT_SIZES)]
BENCH_BACKENDS = _env_list("TOOLSEARCH_BENCH_BACKENDS", DEFAULT_BACKENDS)
CELLS = [(b, n) for b in BENCH_BACKENDS for n in BENCH_SIZES]
CELL_IDS = [f"{b}-{n}" for b, n in CELLS]
_BUILT: dict[tuple[str, int], tuple[SearchBackend, ToolSearch, list[Tool]]] = {}


def _built(name: str, size: int) -> tuple[SearchBackend, ToolSearch, list[Tool]]:
    key = (name, size)
    if key not in _BUILT:
        tools = catalogue(size)
        backend = make_backend(name)
        backend.index(tools)
        _BUILT[key] = (backend, ToolSearch(tools, backend=_Indexed(backend)), tools)
    return _BUILT[key]


def _info(benchmark: Any, name: str, size: int, backend: SearchBackend) -> None:
    benchmark.extra_info.update(
        backend=name,
        tools=size,
        params=getattr(backend, "params", dict)(),
        version=toolsearch.__version__,
        catalogues=[f.name for f in base_folders()],
    )


@pytest.mark.parametrize(("name", "size"), CELLS, ids=CELL_IDS)
def test_index_build(benchmark: Any, name: str, size: int) -> None:
    tools = catalogue(size)
    backend = make_backend(name)
    benchmark.pedantic(backend.index, args=(tools,), rounds=1, iterations=1)
    _info(benchmark, name, size, backend)


@pytest.mark.parametrize(("name", "size"), CELLS, ids=CELL_IDS)
def test_query_through_toolsearch(benchmark: Any, name: str, size: int) -> None:
    backend, engine, _ = _built(name, size)
    queries = itertools.cycle(KEYWORD_QUERIES)
    benchmark(lambda: engine.search(next(queries), 5))
    _info(benchmark, name, size, backend)


@pytest.mark.parametrize(("name", "size"), CELLS, ids=CELL_IDS)
def test_query_direct(benchmark: Any, name: str, size: int) -> None:
    backend, _, _ = _built(name, size)
    label, direct = direct_call(name, backend)
    queries = itertools.cycle(KEYWORD_QUERIES)
    benchmark(lambda: direct(next(queries)))
    _info(benchmark, name, size, backend)
    benchmark.extra_info["direct_call"] = label


@pytest.mark.parametrize(("name", "size"), CELLS, ids=CELL_IDS)
def test_query_natural(benchmark: Any, name: str, size: int) -> None:
    texts = natural_queries()
    if not texts:
        pytest.skip("the public query sets are not present")
    backend, engine, _ = _built(name, size)
    queries = itertools.cycle(texts)
    benchmark(lambda: engine.search(next(queries), 5))
    _info(benchmark, name, size, backend)


@pytest.mark.parametrize(("name", "size"), CELLS, ids=CELL_IDS)
def test_reindex_one_tool(benchmark: Any, name: str, size: int) -> None:
    backend, _, tools = _built(name, size)
    upsert = getattr(backend, "upsert", None)
    if upsert is None:
        pytest.skip(f"{name} has no upsert")
    versions = itertools.count()

    def change_one() -> None:
        i = next(versions)
        tool = tools[(i * 7919) % len(tools)]
        upsert([replace(tool, description=f"{tool.description} v{i}")])

    benchmark.pedantic(change_one, rounds=20, iterations=1)
    _info(benchmark, name, size, backend)


if __name__ == "__main__":
    sys.exit(main())
