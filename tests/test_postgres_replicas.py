"""Replicas of the ``postgres`` backend in separate processes sharing one database.

Each replica is this file run as a script (``python test_postgres_replicas.py URL NAMESPACE
[OPTIONS]``): a backend (a holder, docs/postgres.md) on one namespace driven by JSON lines on
stdin, answering on stdout, and printing a ``change`` event for every change of its view it
hears. The tests start, kill and race them against
the real server of tests/conftest.py, whose ``restart()`` stops PostgreSQL at once and starts it
again. Long tests are marked ``slow``.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from toolsearch.tool import Tool, pool_order

HERE = Path(__file__).resolve()

#: How long a test waits for something that happens in well under a second on an idle machine
#: (a change heard, a lease collected): the speed is a benchmark's business, a test asserts
#: only that it happens, on a busy two-core machine too.
CHANGE_DEADLINE = 30.0


def catalogue(size: int, *, version: int = 0) -> list[Tool]:
    """``size`` distinct tools over a few services; ``version`` changes every description."""
    services = ["github", "slack", "jira", "drive", "stripe", "docker", "calendar"]
    verbs = ["create", "list", "update", "delete", "search", "archive"]
    return pool_order(
        Tool(
            f"mcp__{services[i % 7]}__{verbs[i % 6]}_item_{i}",
            f"{verbs[i % 6].title()} item {i} in {services[i % 7]} (revision {version}).",
            {"type": "object", "properties": {"item_id": {}, "note": {}}},
        )
        for i in range(size)
    )


# ---------------------------------------------------------------------------- the replica side


def _replica(url: str, namespace: str, options: dict[str, Any]) -> None:
    from toolsearch.backends.postgres import PostgresBackend
    from toolsearch.catalog import tool_from_dict
    from toolsearch.errors import BackendError
    from toolsearch.query import parse_query

    backend = PostgresBackend(
        url=url, namespace=namespace, **{"encoder": "hashing", "connect_timeout": 3, **options}
    )
    lock = threading.Lock()

    def say(record: dict[str, Any]) -> None:
        with lock:
            print(json.dumps(record), flush=True)

    def search_loop(seconds: float, query: str) -> dict[str, Any]:
        """Search for ``seconds``; the wall-clock end of every answered search, and the
        number of searches that failed."""
        answered: list[float] = []
        errors = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                backend.search(parse_query(query), 5)
            except BackendError:
                errors += 1
                time.sleep(0.05)
                continue
            answered.append(time.time())
        return {"ok": len(answered), "errors": errors, "answered": answered}

    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        tools = [tool_from_dict(d) for d in command.get("tools", [])]
        try:
            if op == "index":
                backend.index(tools)
            elif op == "upsert":
                backend.upsert(tools)
            elif op == "count":
                say({"count": len(backend)})
                continue
            elif op == "holder":
                say({"holder": backend.holder})
                continue
            elif op == "tools":
                say({"tools": [t.to_dict() for t in backend.tools.values()]})
                continue
            elif op == "subscribe":
                backend.on_change(lambda g: say({"event": "change", "generation": g}))
            elif op == "search":
                hits = backend.search(parse_query(command["query"]), command.get("k", 5))
                say({"hits": [[h.name, h.score] for h in hits]})
                continue
            elif op == "search_loop":
                say(search_loop(command["seconds"], command["query"]))
                continue
            elif op == "storm":
                rng = random.Random(command["seed"])
                base = catalogue(command["size"])
                for _ in range(command["rounds"]):
                    version = rng.randrange(1000)
                    pick = rng.sample(base, k=max(1, len(base) // 3))
                    changed = {t.name: t for t in catalogue(command["size"], version=version)}
                    backend.upsert([changed[t.name] for t in pick])
        except BackendError as exc:
            say({"error": str(exc)})
            continue
        say({"done": op, "encoded": backend.encoded, "written": backend.written})


# ---------------------------------------------------------------------------- the test side


class Replica:
    """One replica process; answers and change events arrive on separate queues."""

    def __init__(self, url: str, namespace: str, **options: Any) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE), url, namespace, json.dumps(options)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        self.changes: queue.Queue[tuple[float, int]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            record = json.loads(line)
            if record.get("event") == "change":
                self.changes.put((time.monotonic(), record["generation"]))
            else:
                self.answers.put(record)

    def send(self, op: str, tools: Sequence[Tool] = (), **fields: Any) -> None:
        assert self.process.stdin is not None
        record = {"op": op, "tools": [t.to_dict() for t in tools], **fields}
        self.process.stdin.write(json.dumps(record) + "\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 120) -> dict[str, Any]:
        found = self.answers.get(timeout=timeout)
        assert "error" not in found, found["error"]
        return found

    def call(self, op: str, tools: Sequence[Tool] = (), **fields: Any) -> dict[str, Any]:
        self.send(op, tools, **fields)
        return self.answer()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        self.process.wait(10)
        self._reader.join(10)  # it stops at the end of the output
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None and not stream.closed:
                stream.close()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.send_signal(signal.SIGKILL)
        self._reap()


@pytest.fixture
def replicas(postgres_url: str) -> Any:
    """A factory of replica processes on one fresh namespace; all are stopped afterwards."""
    pytest.importorskip("psycopg")
    namespace = f"replicas-{uuid.uuid4()}"
    started: list[Replica] = []

    def start(count: int, **options: Any) -> list[Replica]:
        new = [Replica(postgres_url, namespace, **options) for _ in range(count)]
        started.extend(new)
        return new

    start.namespace = namespace  # type: ignore[attr-defined]
    yield start
    for replica in started:
        replica.close()


def test_replicas_share_one_index_and_restarts_encode_nothing(replicas: Any) -> None:
    tools = catalogue(300)
    first, second, third = replicas(3)
    assert first.call("index", tools)["encoded"] == len(tools)
    assert second.call("index", tools)["encoded"] == 0
    assert third.call("index", tools)["encoded"] == 0
    answers = [r.call("search", query="archive item in docker") for r in (first, second, third)]
    assert answers[0]["hits"] and answers[0] == answers[1] == answers[2]
    first.kill()
    (restarted,) = replicas(1)
    assert restarted.call("index", tools)["encoded"] == 0


def test_replicas_starting_together_encode_each_tool_once(replicas: Any) -> None:
    tools = catalogue(2500)
    group = replicas(3)
    for replica in group:
        replica.send("index", tools)
    encoded = [replica.answer()["encoded"] for replica in group]
    assert sum(encoded) == len(tools), encoded


def test_a_replica_hears_changes_of_its_own_view_only(replicas: Any) -> None:
    """Another holder's write changes shared content, not this holder's results: nothing is
    reported. A process taking over the holder name (a restarted pod) changes the view of
    every process holding under that name, which hears it (how soon: benchmarks/
    bench_replica_changes.py; a busy machine may take seconds)."""
    tools = catalogue(50)
    (other,) = replicas(1)
    first, second = replicas(2, holder="pod-1")
    first.call("index", tools)
    other.call("index", [*tools, Tool("mcp__billing__charge", "Charge a customer's card.")])
    for replica in (other, first):
        replica.call("subscribe")
    time.sleep(1.0)  # the listeners connect (else `other` would hear nothing for that reason)
    new = Tool("mcp__billing__refund_payment", "Refund a customer's card payment.")
    second.call("index", [*tools, new])
    _, generation = first.changes.get(timeout=CHANGE_DEADLINE)
    assert generation > 0
    assert first.call("search", query="refund a card payment")["hits"][0][0] == new.name
    time.sleep(0.5)
    assert other.changes.empty()


def _answers_again(replica: Replica, query: str, since: float) -> bool:
    """Whether ``replica`` answers a search after wall-clock time ``since``, retrying its
    searches for up to :data:`CHANGE_DEADLINE` seconds."""
    deadline = time.monotonic() + CHANGE_DEADLINE
    while time.monotonic() < deadline:
        report = replica.call("search_loop", seconds=0.5, query=query)
        if any(t > since for t in report["answered"]):
            return True
    return False


def _names(replica: Replica) -> set[str]:
    return {tool["name"] for tool in replica.call("tools")["tools"]}


def test_two_writers_with_different_sets_both_end_complete(replicas: Any) -> None:
    """Two processes indexing 3,000 different tools each at once: each holds all of its own
    (chunks of different holders interleave; none deletes what the other wrote)."""
    mine = catalogue(3000)
    theirs = [replace(t, name=t.name.replace("_item_", "_thing_")) for t in mine]
    first, second = replicas(2)
    first.send("index", mine)
    second.send("index", theirs)
    for replica in (first, second):
        assert replica.answer()["done"] == "index"
    assert _names(first) == {t.name for t in mine}
    assert _names(second) == {t.name for t in theirs}
    assert first.call("count")["count"] == second.call("count")["count"] == 3000


def _holdings(url: str, namespace: str, holder: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM toolsearch.holdings WHERE namespace = %s AND holder = %s",
            (namespace, holder),
        ).fetchone() or (0,)
    return int(count)


def test_a_sigkilled_replica_is_forgotten_after_its_lease(replicas: Any, postgres_url: str) -> None:
    """A replica killed with SIGKILL never changes another's results, and its holdings go
    once its lease has expired (collected by a survivor's heartbeat)."""
    shared = catalogue(120)
    (survivor,) = replicas(1, lease=1.5, retention=0)
    (victim,) = replicas(1, lease=1.5, retention=0)
    survivor.call("index", shared[:100])
    victim.call("index", shared[40:])
    victim_holder = victim.call("holder")["holder"]
    queries = ["update item in jira", "archive item 110 in docker", "list item in slack"]
    before = [survivor.call("search", query=q)["hits"] for q in queries]
    victim.kill()
    assert [survivor.call("search", query=q)["hits"] for q in queries] == before
    deadline = time.monotonic() + CHANGE_DEADLINE
    while (
        _holdings(postgres_url, replicas.namespace, victim_holder) and time.monotonic() < deadline
    ):
        time.sleep(0.25)
    assert _holdings(postgres_url, replicas.namespace, victim_holder) == 0
    assert [survivor.call("search", query=q)["hits"] for q in queries] == before
    assert survivor.call("count")["count"] == 100


def test_a_stalled_replica_restores_its_holdings(replicas: Any, postgres_url: str) -> None:
    """A replica that stops renewing its lease (here SIGSTOP) loses its holdings to the
    others' collection; once it runs again it finds them gone and writes them back."""
    tools = catalogue(80)
    (collector,) = replicas(1, lease=1.0)
    (stalled,) = replicas(1, lease=1.0)
    collector.call("index", tools[:10])
    stalled.call("index", tools)
    holder = stalled.call("holder")["holder"]
    stalled.process.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + CHANGE_DEADLINE
        while _holdings(postgres_url, replicas.namespace, holder) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert _holdings(postgres_url, replicas.namespace, holder) == 0
    finally:
        stalled.process.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + CHANGE_DEADLINE
    while stalled.call("count")["count"] != len(tools) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert stalled.call("count")["count"] == len(tools)
    assert stalled.call("search", query="archive item 5 in docker")["hits"]


@pytest.mark.slow
def test_a_killed_replica_leaves_the_others_working(replicas: Any) -> None:
    tools = catalogue(6000)
    victim, survivor = replicas(2)
    survivor.call("index", tools[:100])
    victim.send("index", tools)  # several chunked transactions
    time.sleep(1.5)
    survivor.send("search_loop", seconds=3.0, query="update item in jira")
    victim.kill()
    report = survivor.answer()
    assert report["errors"] == 0 and report["ok"] > 0, report["errors"]
    finished = survivor.call("index", tools)
    assert finished["done"] == "index"
    assert survivor.call("count")["count"] == len(tools)


@pytest.mark.slow
def test_a_database_restart_loses_no_update(
    replicas: Any, postgres_server: Any, postgres_url: str
) -> None:
    if not postgres_server.restartable:
        pytest.skip("the server is not this test run's to restart")
    from toolsearch.backends.postgres import PostgresBackend
    from toolsearch.errors import BackendError

    group = replicas(2)
    group[0].call("index", catalogue(200))
    for replica in group:
        replica.send("search_loop", seconds=9.0, query="list item in slack")
    acknowledged: list[str] = []
    writer = PostgresBackend(
        url=postgres_url, namespace=replicas.namespace, encoder="hashing", connect_timeout=3
    )
    stop = time.monotonic() + 7.0
    number = 0

    def write() -> None:
        nonlocal number
        while time.monotonic() < stop:
            tool = Tool(f"mcp__ledger__entry_{number}", f"Ledger entry number {number}.")
            try:
                writer.upsert([tool])
            except BackendError:
                time.sleep(0.1)
                continue  # not acknowledged: written again
            acknowledged.append(tool.name)
            number += 1

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(2.0)
    postgres_server.restart()  # returns once the server accepts connections again
    back = time.time()
    thread.join()
    reports = [replica.answer(timeout=60) for replica in group]
    assert all(report["ok"] > 0 for report in reports), reports
    for replica in group:  # each one's own backend answers again (how soon: bench_postgres)
        assert _answers_again(replica, "list item in slack", since=back)
    stored = set(writer.tools)
    writer.close()
    assert acknowledged and set(acknowledged) <= stored


@pytest.mark.slow
def test_conflicting_updates_end_equal_to_a_rebuild(replicas: Any, postgres_url: str) -> None:
    """Two holders storming versions of the same tools: each one's view ends equal to a
    rebuild of the tools it holds, row for row and search for search."""
    import psycopg

    from toolsearch.backends.postgres import PostgresBackend
    from toolsearch.catalog import tool_from_dict
    from toolsearch.query import parse_query

    size = 30
    first, second = replicas(2)
    for replica in (first, second):
        replica.call("index", catalogue(size))
    for seed, replica in enumerate((first, second)):
        replica.send("storm", seed=seed, size=size, rounds=40)
    for replica in (first, second):
        assert replica.answer()["done"] == "storm"
    columns = "t.name, t.hash, t.text_hash, t.document::text, t.embedding::text, t.mcp"
    for replica in (first, second):
        final = [tool_from_dict(d) for d in replica.call("tools")["tools"]]
        holder = replica.call("holder")["holder"]
        rebuilt = PostgresBackend(
            url=postgres_url, namespace=f"rebuild-{uuid.uuid4()}", encoder="hashing"
        )
        rebuilt.index(final)
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            rows = [
                conn.execute(
                    f"SELECT {columns} FROM toolsearch.tools t JOIN toolsearch.holdings h "
                    "ON h.tool = t.id WHERE h.namespace = %s AND h.holder = %s "
                    "ORDER BY t.name",
                    (namespace, who),
                ).fetchall()
                for namespace, who in (
                    (replicas.namespace, holder),
                    (rebuilt.namespace, rebuilt.holder),
                )
            ]
        differing = [(a, b) for a, b in zip(*rows, strict=True) if a != b]
        assert len(rows[0]) == len(rows[1]) == size and not differing, differing[:1]
        for raw in ["create item", "revision 7 slack", "archive docker"]:
            hits = replica.call("search", query=raw, k=10)["hits"]
            assert hits == [[h.name, h.score] for h in rebuilt.search(parse_query(raw), 10)]
        rebuilt.close()


if __name__ == "__main__":
    _replica(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
