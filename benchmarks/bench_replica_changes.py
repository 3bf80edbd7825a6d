"""How soon a ``postgres`` holder hears a change of its view written by another process.

    python -m benchmarks.bench_replica_changes                 # 20 rounds, a throwaway server
    python -m benchmarks.bench_replica_changes --rounds 50 --url postgresql://...

:meth:`PostgresBackend.on_change` promises that a write under a holder's name (a restarted
pod taking the name over) reaches every process holding under it "within about a second". The
tests only check that the change is heard; this measures the delay: a writer process indexes a
changed pool under the holder's name, and a listener in this process times the callback from
the moment the write returned. Results go to ``benchmarks/results/bench_replica_changes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.bench_postgres import database
from toolsearch.tool import Tool

RESULTS = Path(__file__).resolve().parent / "results" / "bench_replica_changes.json"
HOLDER = "pod-1"


def pool(version: int) -> list[Tool]:
    """A small pool whose last tool's description changes with ``version``."""
    tools = [
        Tool(f"mcp__bench__tool_{i}", f"Tool number {i} of the bench server.") for i in range(20)
    ]
    return [*tools, Tool("mcp__bench__changing", f"A tool at revision {version}.")]


def _writer(url: str, namespace: str) -> None:
    """The writing process: one ``index`` per line of stdin, ``done`` on stdout after each."""
    from toolsearch.backends.postgres import PostgresBackend

    with PostgresBackend(url=url, namespace=namespace, holder=HOLDER, encoder="hashing") as backend:
        for line in sys.stdin:
            backend.index(pool(int(line)))
            print("done", flush=True)


def measure(url: str, rounds: int) -> list[float]:
    """Seconds from each write's return to the listener's callback, one per round."""
    from toolsearch.backends.postgres import PostgresBackend

    namespace = f"bench-changes-{uuid.uuid4()}"
    heard: queue.Queue[float] = queue.Queue()
    listener = PostgresBackend(url=url, namespace=namespace, holder=HOLDER, encoder="hashing")
    writer = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_replica_changes", "--writer", url, namespace],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert writer.stdin is not None and writer.stdout is not None
    delays: list[float] = []
    try:
        listener.index(pool(0))
        listener.on_change(lambda _generation: heard.put(time.monotonic()))
        time.sleep(1.0)  # the listener connects
        while not heard.empty():
            heard.get()
        for version in range(1, rounds + 1):
            writer.stdin.write(f"{version}\n")
            writer.stdin.flush()
            writer.stdout.readline()
            written = time.monotonic()
            delays.append(max(0.0, heard.get(timeout=60) - written))
    finally:
        writer.stdin.close()
        writer.wait(30)
        listener.close()
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--url", default=os.environ.get("TOOLSEARCH_POSTGRES_URL"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--writer", nargs=2, metavar=("URL", "NAMESPACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        _writer(*args.writer)
        return 0
    with database(args.url) as db:
        delays = sorted(measure(db.url, args.rounds))
    result: dict[str, Any] = {
        "rounds": len(delays),
        "median_s": round(statistics.median(delays), 3),
        "p90_s": round(delays[int(0.9 * (len(delays) - 1))], 3),
        "max_s": round(delays[-1], 3),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
