"""What reading server names by their service costs the default at 10,000 tools.

    python -m benchmarks.bench_server_words --out benchmarks/results/bench_server_words.json

The packaging words of server names (:data:`toolsearch.tokenize.GENERIC_SERVER_WORDS`) are not
server words, so a request can name more of the scaled catalogue's registry-style servers and
the fusion's pruning bound keeps a few more tools. This builds the default backend twice over
the same tools (``bench_backends.catalogue``): as it ships, and with that set empty (the rule
switched off), then times the backend's own ``search`` over the 100-word tasks and the natural
queries of ``bench_backends``, alternating the two builds for ``--rounds`` rounds so that both
meet the same machine. Each round's median per query set is reported; compare the builds
round by round (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks import bench_backends
from toolsearch.backend import SearchBackend
from toolsearch.query import parse_query

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "bench_server_words.json"
BUILDS = ("as shipped", "packaging words kept")


def build(tools: Sequence[Any], *, kept: bool) -> SearchBackend:
    """The default backend over ``tools``, with the rule on or (``kept``) switched off."""
    backend = bench_backends.make_backend("hybrid")
    if kept:
        with mock.patch("toolsearch.tokenize.GENERIC_SERVER_WORDS", frozenset()):
            backend.index(tools)
    else:
        backend.index(tools)
    return backend


def median_ms(backend: SearchBackend, queries: Sequence[str]) -> float:
    """The median time of ``backend.search(query, 5)`` over ``queries``, in ms."""
    times = []
    for text in queries:
        query = parse_query(text)
        started = time.perf_counter()
        backend.search(query, 5)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def measure(size: int, rounds: int) -> dict[str, Any]:
    tools = bench_backends.catalogue(size)
    backends = {label: build(tools, kept=label != BUILDS[0]) for label in BUILDS}
    sets = {"task": bench_backends.task_queries(), "natural": bench_backends.natural_queries()}
    for backend in backends.values():  # warm both before timing
        median_ms(backend, sets["natural"])
    out: dict[str, Any] = {label: {name: [] for name in sets} for label in BUILDS}
    for _ in range(rounds):
        for name, queries in sets.items():
            for label, backend in backends.items():
                out[label][name].append(median_ms(backend, queries))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    data = {
        "tools": args.tools,
        "rounds": args.rounds,
        "median_ms": measure(args.tools, args.rounds),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(data["median_ms"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
