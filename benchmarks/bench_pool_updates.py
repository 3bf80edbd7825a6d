"""What one MCP server's re-listing costs a large pool: ``ToolSearch.set_tools`` and the first
``+required`` search after it.

A hub re-lists a server when it announces ``tools/list_changed`` and hands the engine the whole
pool again: every other server's tools are the same objects, the changed server's are new
objects (one description edited). For pools of ``--sizes`` tools spread over servers of
``--per-server`` tools each, and each backend:

* **unchanged ms** — ``set_tools`` with exactly the same tool objects;
* **one server ms** — ``set_tools`` after one server re-listed;
* **first +required ms** — the first ``+required`` search after that change.

Each figure is the median of ``--repeat`` runs. Run it::

    nice -n 10 python -m benchmarks.bench_pool_updates --sizes 10000,100000 \\
        --out benchmarks/results/bench_pool_updates.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import toolsearch
from toolsearch.engine import ToolSearch
from toolsearch.tool import Tool, mcp_tool_name

RESULTS = Path(__file__).resolve().parent / "results" / "bench_pool_updates.json"
VERBS = ("create", "list", "get", "update", "delete", "search", "sync", "export")
OBJECTS = ("issue", "page", "file", "message", "record", "event", "ticket", "note")


def server_tools(server: str, count: int, edition: int = 0) -> list[Tool]:
    """``count`` tools of ``server``; ``edition`` changes the first one's description."""
    tools = []
    for i in range(count):
        verb, obj = VERBS[i % len(VERBS)], OBJECTS[(i // len(VERBS)) % len(OBJECTS)]
        text = f"{verb.title()} a {obj} in {server} (variant {i})."
        if i == 0 and edition:
            text += f" Edition {edition}."
        tools.append(Tool(mcp_tool_name(server, f"{verb}_{obj}_{i}"), text, server=server))
    return tools


def _ms(action: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    action(*args)
    return (time.perf_counter() - start) * 1000


def measure(size: int, per_server: int, backend: str, repeat: int) -> dict[str, Any]:
    """The three figures for one pool size and backend."""
    servers = {f"srv{n}": server_tools(f"srv{n}", per_server) for n in range(size // per_server)}
    pool = [tool for tools in servers.values() for tool in tools]
    engine = ToolSearch(pool, backend=backend)
    engine.search("+create issue", 5)
    unchanged, one_server, first_required = [], [], []
    for edition in range(1, repeat + 1):
        unchanged.append(_ms(engine.set_tools, pool))
        servers["srv0"] = server_tools("srv0", per_server, edition)
        pool = [tool for tools in servers.values() for tool in tools]
        one_server.append(_ms(engine.set_tools, pool))
        first_required.append(_ms(engine.search, "+create issue srv0", 5))
    return {
        "tools": size,
        "backend": backend,
        "unchanged_ms": round(statistics.median(unchanged), 1),
        "one_server_ms": round(statistics.median(one_server), 1),
        "first_required_ms": round(statistics.median(first_required), 1),
    }


def markdown(results: dict[str, Any]) -> str:
    """The table of docs/results.md from a results file."""
    lines = [
        "| tools | backend | unchanged set_tools ms | one server re-listed ms "
        "| first +required ms |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['tools']:,} | {row['backend']} | {row['unchanged_ms']} | "
            f"{row['one_server_ms']} | {row['first_required_ms']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--per-server", type=int, default=1000)
    parser.add_argument("--backends", default="bm25,keyword")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = [
        measure(int(size), args.per_server, backend, args.repeat)
        for size in args.sizes.split(",")
        for backend in args.backends.split(",")
    ]
    results = {
        "toolsearch": toolsearch.__version__,
        "python": platform.python_version(),
        "per_server": args.per_server,
        "repeat": args.repeat,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
