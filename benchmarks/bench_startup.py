"""Start-up costs of the default backend: what a new user waits for (docs/speed.md).

* **import s** — ``import toolsearch`` in a fresh interpreter (median of 5);
* **CLI s** — ``toolsearch search "create a github pull request" --catalog datasets/mcp-workbench``
  with the default backend and with ``--backend bm25``, calls interleaved in the same run
  (median of ``--rounds``; the first default call warms the caches and is not counted), their
  ratio, and whether the warm default call imported torch;
* **first call on a new catalogue s** — the default backend on 500 tools it has never seen
  (an empty vector cache; the model's ONNX export is kept, it is made once per model);
* **first-ever call s / MB** — the default backend on the bundled catalogue with an empty cache
  folder, as after installing: the model's ONNX export (in a child process) and the encoding
  of every tool, and the largest resident memory of any process involved;
* **gateway s** — a hybrid updated in the background on a cold vector cache (what the MCP
  gateway does): seconds until it ranks (lexical member) and until the dense member joins.

Run it (the machine is shared: compare the ratio of one run, not absolute seconds across
runs)::

    nice -n 10 python -m benchmarks.bench_startup --out benchmarks/results/bench_startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUERY = "create a github pull request"
CATALOG = ROOT / "datasets" / "mcp-workbench"
TARGETS = {
    "import_s": 0.2,
    "cli_warm_s": 1.0,
    "cli_ratio_to_bm25": 3.0,
    "cli_new_catalogue_s": 10.0,
}

_TIMED_CLI = """
import sys, time
start = time.perf_counter()
from toolsearch.cli import main
code = main(sys.argv[1:])
print("\\nTIMING", time.perf_counter() - start, "torch" in sys.modules, file=sys.stderr)
raise SystemExit(code)
"""


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Wall seconds of a fresh interpreter running ``code``, and its standard error."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True
    )
    return time.perf_counter() - start, out.stderr


def import_seconds(rounds: int = 5) -> float:
    code = "import time; t = time.perf_counter(); import toolsearch; print(time.perf_counter() - t)"
    times = []
    for _ in range(rounds):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        times.append(float(out.stdout))
    return statistics.median(times)


def cli_call(
    backend: str | None, catalog: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    args = ["search", QUERY, "--catalog", str(catalog), "--json"]
    if backend:
        args += ["--backend", backend]
    wall, err = _python(_TIMED_CLI, *args, env=env)
    torch = err.strip().rsplit(" ", 1)[-1] == "True"
    return {"wall_s": wall, "torch_imported": torch}


def cli_warm(rounds: int) -> dict[str, Any]:
    cli_call(None, CATALOG)  # fills the vector cache and the ONNX export if needed
    default, bm25, torch = [], [], []
    for _ in range(rounds):
        call = cli_call(None, CATALOG)
        default.append(call["wall_s"])
        torch.append(call["torch_imported"])
        bm25.append(cli_call("bm25", CATALOG)["wall_s"])
    warm, lexical = statistics.median(default), statistics.median(bm25)
    return {
        "cli_warm_s": round(warm, 3),
        "cli_bm25_s": round(lexical, 3),
        "cli_ratio_to_bm25": round(warm / lexical, 2),
        "cli_warm_imports_torch": any(torch),
    }


def _new_catalogue(folder: Path, n: int = 500) -> Path:
    """``n`` tools of the public catalogues with descriptions no cache has seen."""
    from benchmarks.bench_backends import catalogue

    stamp = time.time_ns()
    path = folder / "catalogue.jsonl"
    with path.open("w") as out:
        for tool in catalogue(n):
            record = {"name": tool.name, "description": f"{tool.description} ({stamp})"}
            record["input_schema"] = dict(tool.input_schema)
            out.write(json.dumps(record) + "\n")
    return path


def _cold_cache_env(folder: Path) -> dict[str, str]:
    """An environment whose vector cache is empty but which keeps the model's ONNX export."""
    from toolsearch.backends.embedding_cache import default_cache_dir

    cache = folder / "cache"
    cache.mkdir()
    exports = default_cache_dir() / "onnx"
    if exports.is_dir():
        shutil.copytree(exports, cache / "onnx")
    return {**os.environ, "TOOLSEARCH_CACHE_DIR": str(cache)}


def cli_new_catalogue() -> float:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        catalog = _new_catalogue(folder)
        return round(cli_call(None, catalog, env=_cold_cache_env(folder))["wall_s"], 2)


_PEAK_OF_CHILDREN = """
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], capture_output=True, check=True)
wall = time.perf_counter() - start
print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""


def cli_first_ever() -> dict[str, float]:
    """The default backend's first call with nothing cached: seconds, and the peak resident
    memory (MB) of the search and its export child (ru_maxrss of the waited-for children)."""
    with tempfile.TemporaryDirectory() as scratch:
        env = {**os.environ, "TOOLSEARCH_CACHE_DIR": str(Path(scratch) / "cache")}
        command = [sys.executable, "-m", "toolsearch", "search", QUERY, "--catalog", str(CATALOG)]
        out = subprocess.run(
            [sys.executable, "-c", _PEAK_OF_CHILDREN, *command],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    wall, peak = (float(x) for x in out.stdout.split())
    return {"cli_first_ever_s": round(wall, 1), "cli_first_ever_peak_mb": round(peak)}


def gateway_readiness() -> dict[str, float]:
    """Seconds until a background-updated hybrid ranks, and until its dense member is ready."""
    code = """
import json, sys, time
from toolsearch.backends.hybrid import HybridBackend
from toolsearch.catalog import load_catalog
from toolsearch.query import parse_query
tools = load_catalog(sys.argv[1])
start = time.perf_counter()
hybrid = HybridBackend(background=True)
hybrid.index(tools)
hits = hybrid.search(parse_query("create a github pull request"), 5)
ranks = time.perf_counter() - start
states = hybrid.member_states()
hybrid.wait_ready()
print(json.dumps({"ranks_s": ranks, "dense_ready_s": time.perf_counter() - start,
                  "states_at_first_search": states, "hits": len(hits)}))
"""
    with tempfile.TemporaryDirectory() as scratch:
        env = _cold_cache_env(Path(scratch))
        out = subprocess.run(
            [sys.executable, "-c", code, str(CATALOG)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "gateway_ranks_s": round(result["ranks_s"], 2),
        "gateway_dense_ready_s": round(result["dense_ready_s"], 2),
        "gateway_states_at_first_search": result["states_at_first_search"],
    }


def measure(rounds: int = 5) -> dict[str, Any]:
    result: dict[str, Any] = {"import_s": round(import_seconds(), 3)}
    result.update(cli_warm(rounds))
    result["cli_new_catalogue_s"] = cli_new_catalogue()
    result.update(cli_first_ever())
    result.update(gateway_readiness())
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    result["targets"] = TARGETS
    return result


def markdown(result: dict[str, Any]) -> str:
    """The start-up table of docs/results.md."""
    rows = [
        ("`import toolsearch`", f"{result['import_s']:.3f} s", "≤ 0.2 s"),
        (
            "warm `toolsearch search` (default) / bm25 in the same run",
            f"{result['cli_warm_s']:.2f} s / {result['cli_bm25_s']:.2f} s "
            f"(x{result['cli_ratio_to_bm25']:.2f})",
            "≤ 1.0 s, ≤ x3",
        ),
        (
            "warm call imports torch",
            "yes" if result["cli_warm_imports_torch"] else "no",
            "no",
        ),
        (
            "first call on a new 500-tool catalogue",
            f"{result['cli_new_catalogue_s']:.1f} s",
            "≤ 10 s",
        ),
        (
            "gateway, cold vector cache: ranks (lexical) / dense member ready",
            f"{result['gateway_ranks_s']:.2f} s / {result['gateway_dense_ready_s']:.1f} s",
            "at once / —",
        ),
    ]
    if "cli_first_ever_s" in result:  # results written before it was measured lack it
        rows.insert(
            -1,
            (
                "first-ever call: ONNX export + encoding 495 tools (peak memory)",
                f"{result['cli_first_ever_s']:.1f} s ({result['cli_first_ever_peak_mb']:,} MB)",
                "once; said on stderr",
            ),
        )
    lines = ["| what | measured | target |", "|---|---:|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    result = measure(args.rounds)
    text = json.dumps(result, indent=2)
    print(text)
    print(markdown(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
