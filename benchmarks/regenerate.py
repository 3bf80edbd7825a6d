"""Regenerate every committed benchmark result, and every README table from those results.

    python benchmarks/regenerate.py                      # run every benchmark, rewrite the tables
    python benchmarks/regenerate.py --only quality-bfcl  # one result (repeatable) and its tables
    python benchmarks/regenerate.py --tables             # rewrite the tables from committed JSON
    python benchmarks/regenerate.py --check              # exit 1 if a table differs from its JSON
    python benchmarks/regenerate.py --list               # the registry

The registry (:data:`REGISTRY`) lists each results file with the command that regenerates it
and the README tables rendered from it. A README table sits between two markers::

    <!-- table:NAME -->
    ...generated, never edited by hand...
    <!-- /table:NAME -->

and is rewritten from the JSON alone, so the published numbers are always those of the
committed file; ``tests/test_bench_regenerate.py`` fails when they differ. A benchmark script
joins with one :class:`Result` entry: its JSON path, its command, and a function that turns the
JSON into Markdown (the script's own, where it has one). Benchmarks take minutes; run this
with ``nice -n 10`` on a shared machine. See ``docs/benchmark.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from toolsearch.bench.scripts import load_script
from toolsearch.bench.tables import headline_table, significance_summary, style_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"

#: Renders a results JSON (already parsed) as Markdown.
Render = Callable[[Any], str]


@dataclass(frozen=True)
class Result:
    """One committed results file: the command that writes it and the tables it feeds.

    ``command`` is run from the repository root; a leading ``toolsearch`` or ``python`` runs
    with this interpreter. ``path`` defaults to ``benchmarks/results/<name>.json``.
    """

    name: str
    command: str
    tables: Mapping[str, Render] = field(default_factory=dict)
    path: Path | None = None

    @property
    def file(self) -> Path:
        return self.path or RESULTS / f"{self.name}.json"

    def argv(self) -> list[str]:
        head, *rest = shlex.split(self.command)
        if head == "toolsearch":
            return [sys.executable, "-m", "toolsearch", *rest]
        if head == "python":
            return [sys.executable, *rest]
        return [head, *rest]


def _script(name: str) -> ModuleType:
    """A script of ``benchmarks/`` imported as a module (they are not a package)."""
    return load_script(ROOT / "benchmarks" / f"{name}.py")


def script_table(script: str, key: str | None = None) -> Render:
    """The ``markdown`` function of ``benchmarks/<script>.py``, fed the JSON (or its ``key``)."""

    def draw(data: Any) -> str:
        table: str = _script(script).markdown(data if key is None else data[key])
        return table

    return draw


def _quality(dataset: str, extra: str = "") -> str:
    return (
        f"toolsearch bench --dataset {dataset} --split test {extra}--quiet "
        f"--json-out benchmarks/results/quality-{dataset}.json"
    )


REGISTRY: tuple[Result, ...] = (
    Result(
        "ablation",
        "python benchmarks/ablation.py --out benchmarks/results/ablation.json",
        {
            "ablation": lambda data: _script("ablation").markdown_table(data),
            "ablation-targets": lambda data: _script("ablation").markdown_targets(data),
        },
    ),
    Result(
        "distractors",
        "python benchmarks/distractors.py --out benchmarks/results/distractors.json",
        {"distractors": script_table("distractors")},
    ),
    Result(
        "server_names",
        "python benchmarks/server_names.py --out benchmarks/results/server_names.json",
        {"server_names": script_table("server_names")},
    ),
    Result(
        "learned_fusion",
        "python benchmarks/learned_fusion.py --out benchmarks/results/learned_fusion.json",
        {"learned_fusion": script_table("learned_fusion")},
    ),
    Result(
        "reranker",
        "python benchmarks/reranker.py --out benchmarks/results/reranker.json",
        {"reranker": script_table("reranker")},
    ),
    Result(
        "fine_tune",
        "python benchmarks/fine_tune.py --out benchmarks/results/fine_tune.json",
        {"fine_tune": script_table("fine_tune")},
    ),
    Result(
        "training_passes",
        "python benchmarks/training_passes.py --out benchmarks/results/training_passes.json",
        {"training_passes": script_table("training_passes")},
    ),
    Result(
        "metadata_pairs",
        "python benchmarks/metadata_pairs.py --out benchmarks/results/metadata_pairs.json",
        {"metadata_pairs": script_table("metadata_pairs")},
    ),
    Result(
        "query_adapter",
        "python benchmarks/query_adapter.py --out benchmarks/results/query_adapter.json",
        {"query_adapter": script_table("query_adapter")},
    ),
    Result(
        "quality-mcp-workbench",
        _quality("mcp-workbench"),
        {
            "quality-mcp-workbench": partial(headline_table, dataset="mcp-workbench"),
            "quality-mcp-workbench-styles": partial(style_table, dataset="mcp-workbench"),
            "quality-mcp-workbench-significance": partial(
                significance_summary, dataset="mcp-workbench"
            ),
        },
    ),
    Result(
        "quality-metatool",
        _quality("metatool", "--limit 1000 "),
        {"quality-metatool": partial(headline_table, dataset="metatool", tokens=False)},
    ),
    Result(
        "quality-bfcl",
        _quality("bfcl", "--limit 500 "),
        {"quality-bfcl": partial(headline_table, dataset="bfcl", tokens=False)},
    ),
    Result(
        "bench_keyword",
        "python benchmarks/bench_keyword.py --tools 10000 "
        "--out benchmarks/results/bench_keyword.json",
        {"bench_keyword": script_table("bench_keyword")},
    ),
    Result(
        "bench_backends",
        "python benchmarks/bench_backends.py --sizes 1000,10000,100000 "
        "--backends keyword,bm25,fts5 --out benchmarks/results/bench_backends.json",
        {"bench_backends": script_table("bench_backends", "results")},
    ),
    Result(
        "bench_startup",
        "python benchmarks/bench_startup.py --out benchmarks/results/bench_startup.json",
        {"bench_startup": script_table("bench_startup")},
    ),
    Result(
        "bench_embedding_10k",
        "python benchmarks/bench_embedding.py --tools 10000 --cache-dir /tmp/emb_cold "
        "--out benchmarks/results/bench_embedding_10k.json",
        {
            "bench_embedding_10k": lambda data: _script("bench_embedding").markdown(
                [data, json.loads((RESULTS / "bench_embedding_10k_warm.json").read_text("utf-8"))]
            )
        },
    ),
    Result(
        "bench_embedding_10k_warm",
        "python benchmarks/bench_embedding.py --tools 10000 --cache-dir /tmp/emb_cold --warm "
        "--out benchmarks/results/bench_embedding_10k_warm.json",
    ),
    Result(
        "bench_embedding_10k_int8",
        "python benchmarks/bench_embedding.py --tools 10000 --precision int8 "
        "--cache-dir /tmp/emb_cold_int8 --out benchmarks/results/bench_embedding_10k_int8.json",
        {"bench_embedding_10k_int8": lambda data: _script("bench_embedding").markdown([data])},
    ),
    Result(
        "bench_export",
        "python benchmarks/bench_export.py --out benchmarks/results/bench_export.json",
        {"bench_export": script_table("bench_export")},
    ),
    Result(
        "embedding_quality",
        "python benchmarks/bench_embedding.py --quality "
        "--out benchmarks/results/embedding_quality.json",
        {"embedding_quality": lambda data: _script("bench_embedding").markdown_quality(data)},
    ),
    Result(
        "bench_hybrid",
        "python benchmarks/bench_backends.py --sizes 10000,100000 --backends hybrid "
        "--embedding-max 100000 --cold-cache-dir /tmp/hyb_cold "
        "--out benchmarks/results/bench_hybrid.json",
        {"bench_hybrid": lambda data: _script("bench_backends").markdown_default(data["results"])},
    ),
    Result(
        "bench_pool_updates",
        "python benchmarks/bench_pool_updates.py --sizes 10000,100000 --repeat 3 "
        "--out benchmarks/results/bench_pool_updates.json",
        {"bench_pool_updates": script_table("bench_pool_updates")},
    ),
    Result(
        "bench_postgres",
        "python benchmarks/bench_postgres.py --only load --tools 100000 --replicas 4 "
        "--clients 32 --duration 30 --out benchmarks/results/bench_postgres.json",
        {"bench_postgres": script_table("bench_postgres")},
    ),
    Result(
        "bench_server_words",
        "python benchmarks/bench_server_words.py --out benchmarks/results/bench_server_words.json",
    ),
    Result(
        "baseline",
        "toolsearch bench --split all --quiet --json-out benchmarks/baseline.json",
        path=ROOT / "benchmarks" / "baseline.json",
    ),
)

_MARKER = re.compile(r"<!-- (/?)table:([A-Za-z0-9_.-]+) -->")


class TableError(ValueError):
    """The README's table markers are malformed or name an unknown table."""


def tables() -> dict[str, tuple[Result, Render]]:
    """Every README table name, with the result it is rendered from."""
    found: dict[str, tuple[Result, Render]] = {}
    for result in REGISTRY:
        for name, render in result.tables.items():
            if name in found:
                raise TableError(f"table {name!r} is registered twice")
            found[name] = (result, render)
    return found


def _shown_path(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def render(name: str) -> str:
    """The content of table ``name`` from its committed JSON, with where it comes from."""
    result, draw = tables()[name]
    source = f"`{_shown_path(result.file)}`"
    again = f"`python benchmarks/regenerate.py --only {result.name}`"
    if not result.file.is_file():
        return f"*Not generated yet: run {again} (it runs `{result.command}`).*"
    try:
        data = json.loads(result.file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TableError(f"table {name!r}: cannot read {source}: {exc}") from exc
    return f"{draw(data)}\n\nFrom {source}, written by `{result.command}`; regenerate: {again}."


def blocks(text: str) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of each table's content (between its markers) in ``text``."""
    found: list[tuple[str, int, int]] = []
    open_name: str | None = None
    start = 0
    for match in _MARKER.finditer(text):
        closing, name = match.group(1) == "/", match.group(2)
        line = text.count("\n", 0, match.start()) + 1
        if not closing:
            if open_name is not None:
                raise TableError(f"line {line}: table {name!r} opens inside {open_name!r}")
            open_name, start = name, match.end()
        elif open_name != name:
            raise TableError(f"line {line}: closing marker of {name!r} without its opening one")
        else:
            found.append((name, start, match.start()))
            open_name = None
    if open_name is not None:
        raise TableError(f"table {open_name!r} is never closed (<!-- /table:{open_name} -->)")
    names = [name for name, _, _ in found]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise TableError(f"tables appear more than once: {', '.join(repeated)}")
    unknown = sorted(set(names) - set(tables()))
    if unknown:
        raise TableError(f"unknown tables {', '.join(unknown)}; registered: {', '.join(tables())}")
    return found


def rewrite(text: str, only: Sequence[str] | None = None) -> str:
    """``text`` with every table (or those named in ``only``) rendered afresh."""
    out, last = [], 0
    for name, start, end in blocks(text):
        out.append(text[last:start])
        out.append(f"\n{render(name)}\n" if only is None or name in only else text[start:end])
        last = end
    out.append(text[last:])
    return "".join(out)


def stale(path: Path = README) -> list[str]:
    """Names of the tables in ``path`` that differ from their committed JSON."""
    text = path.read_text(encoding="utf-8")
    new = rewrite(text)
    fresh = {name: new[s:e] for name, s, e in blocks(new)}
    return [name for name, s, e in blocks(text) if text[s:e] != fresh[name]]


def _selected(only: Sequence[str]) -> list[Result]:
    if not only:
        return list(REGISTRY)
    by_name = {r.name: r for r in REGISTRY}
    owners = {table: result for table, (result, _) in tables().items()}
    chosen: list[Result] = []
    for name in only:
        result = by_name.get(name) or owners.get(name)
        if result is None:
            known = ", ".join(by_name)
            raise SystemExit(f"regenerate: unknown result {name!r}; known: {known}")
        if result not in chosen:
            chosen.append(result)
    return chosen


def _run(results: Sequence[Result]) -> list[str]:
    """Run each result's command; the names of those that failed."""
    failed = []
    for result in results:
        print(f"regenerate: {result.name}: {result.command}", file=sys.stderr, flush=True)
        before = _modified(result.file)
        started = time.perf_counter()
        status = subprocess.run(result.argv(), cwd=ROOT, check=False).returncode
        took = time.perf_counter() - started
        written = _modified(result.file)
        if status != 0 or written is None or written == before:
            failed.append(result.name)
            why = f"exit {status}" if status != 0 else f"{_shown_path(result.file)} not written"
            print(f"regenerate: {result.name} FAILED ({why})", file=sys.stderr)
        else:
            print(f"regenerate: {result.name} done in {took:.0f} s", file=sys.stderr)
    return failed


def _modified(path: Path) -> int | None:
    """When ``path`` was last written (ns), or None when it does not exist."""
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    """The command line; a malformed README marker or unreadable results file is one line on
    stderr and exit status 2."""
    try:
        return _main(argv)
    except TableError as exc:
        print(f"regenerate: {_shown_path(README)}: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--only", action="append", default=[], metavar="NAME", help="result or table name")
    add("--tables", action="store_true", help="only rewrite the README tables from the JSON")
    add("--check", action="store_true", help="exit 1 if a README table differs from its JSON")
    add("--list", action="store_true", help="print the registry")
    args = parser.parse_args(argv)
    if args.list:
        for result in REGISTRY:
            shown = ", ".join(result.tables) or "no README table"
            print(f"{result.name}: {_shown_path(result.file)} ← {result.command} [{shown}]")
        return 0
    if args.check:
        old = stale(README)
        for name in old:
            print(f"stale README table: {name}", file=sys.stderr)
        return 1 if old else 0
    chosen = _selected(args.only)
    failed = [] if args.tables else _run(chosen)
    names = [t for r in chosen for t in r.tables]
    README.write_text(rewrite(README.read_text(encoding="utf-8"), names), encoding="utf-8")
    print(f"regenerate: README tables rewritten: {', '.join(names) or 'none'}", file=sys.stderr)
    if failed:
        print(f"regenerate: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
