"""Regenerate every committed benchmark result, and every published table from those results.

    python -m benchmarks.regenerate                      # run every benchmark, rewrite the tables
    python -m benchmarks.regenerate --only quality-bfcl  # one result (repeatable) and its tables
    python -m benchmarks.regenerate --tables             # rewrite the tables from committed JSON
    python -m benchmarks.regenerate --check              # exit 1 if a table differs from its JSON
    python -m benchmarks.regenerate --list               # the registry

The registry (:data:`REGISTRY`) lists each results file with the command that regenerates it
and the tables rendered from it. The tables live in docs/results.md (every one), README.md (the
headline) and docs/postgres.md (its load benchmarks); a table sits between two markers::

    <!-- table:NAME -->
    ...generated, never edited by hand...
    <!-- /table:NAME -->

and is rewritten from the JSON alone, so the published numbers are always those of the
committed file; ``tests/test_bench_regenerate.py`` fails when they differ. A benchmark (in
``benchmarks/``) or experiment (in ``lab/``, results in ``lab/results/``) joins with one
:class:`Result` entry: its JSON path, its command, and a function that turns the JSON into
Markdown (the module's own, where it has one). Benchmarks take minutes to hours; run this with
``nice -n 10`` on a shared machine. See docs/benchmark.md.
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
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.tables import headline_table, significance_summary, style_table

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LAB_RESULTS = ROOT / "lab" / "results"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results.md"
#: The pages holding generated tables: every table is on the results page, and some also
#: where their subject is described.
PAGES = (RESULTS_PAGE, README, ROOT / "docs" / "postgres.md")

#: Renders a results JSON (already parsed) as Markdown.
Render = Callable[[Any], str]


@dataclass(frozen=True)
class Result:
    """One committed results file: the command that writes it and the tables it feeds.

    ``command`` is run from the repository root; a leading ``toolsearch`` or ``python`` runs
    with this interpreter. ``path`` defaults to ``<name>.json`` in ``lab/results/`` for an
    experiment, else in ``benchmarks/results/``.
    """

    name: str
    command: str
    tables: Mapping[str, Render] = field(default_factory=dict)
    path: Path | None = None

    @property
    def file(self) -> Path:
        return self.path or (LAB_RESULTS if self.name in LAB else RESULTS) / f"{self.name}.json"

    def argv(self) -> list[str]:
        head, *rest = shlex.split(self.command)
        if head == "toolsearch":
            return [sys.executable, "-m", "toolsearch", *rest]
        if head == "python":
            return [sys.executable, *rest]
        return [head, *rest]


#: The experiments, in ``lab/``; every other script is in ``benchmarks/``.
LAB = frozenset(
    {
        "ablation",
        "abstention",
        "action_agreement",
        "broad_lodo",
        "default_model",
        "distractors",
        "fine_tune",
        "fold_budget",
        "learned_fusion",
        "metadata_pairs",
        "query_adapter",
        "reranker",
        "server_index",
        "server_names",
        "stock_bm25",
        "targets",
        "training_passes",
    }
)


def _script(name: str) -> ModuleType:
    """The module of script ``name``: ``lab.<name>`` or ``benchmarks.<name>``."""
    return import_module(f"{'lab' if name in LAB else 'benchmarks'}.{name}")


def _lab(name: str) -> str:
    """The command of experiment ``lab/<name>.py``."""
    return f"python -m lab.{name} --out lab/results/{name}.json"


def script_table(script: str, key: str | None = None) -> Render:
    """The ``markdown`` function of script ``script``, fed the JSON (or its ``key``)."""

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
        _lab("ablation"),
        {
            "ablation": lambda data: _script("ablation").markdown_table(data),
            "ablation-targets": lambda data: _script("ablation").markdown_targets(data),
        },
    ),
    Result(
        "action_agreement",
        _lab("action_agreement"),
        {"action_agreement": script_table("action_agreement")},
    ),
    Result(
        "distractors",
        _lab("distractors"),
        {"distractors": script_table("distractors")},
    ),
    Result(
        "server_names",
        _lab("server_names"),
        {"server_names": script_table("server_names")},
    ),
    Result(
        "server_index",
        _lab("server_index"),
        {
            "server_index": script_table("server_index"),
            "brand_names": lambda data: _script("server_index").reading_table(data),
        },
    ),
    Result(
        "learned_fusion",
        _lab("learned_fusion"),
        {"learned_fusion": script_table("learned_fusion")},
    ),
    Result(
        "reranker",
        _lab("reranker"),
        {"reranker": script_table("reranker")},
    ),
    Result(
        "abstention",
        _lab("abstention"),
        {"abstention": script_table("abstention")},
    ),
    Result(
        "fine_tune",
        _lab("fine_tune"),
        {"fine_tune": script_table("fine_tune")},
    ),
    Result(
        "broad_lodo",
        _lab("broad_lodo"),
        {
            "broad_lodo": script_table("broad_lodo"),
            "siblings": lambda data: _script("broad_lodo").sibling_markdown(data),
        },
    ),
    Result(
        "fold_budget",
        _lab("fold_budget"),
        {"fold_budget": script_table("fold_budget")},
    ),
    Result(
        "default_model",
        _lab("default_model"),
        {"default_model": script_table("default_model")},
    ),
    Result(
        "targets",
        _lab("targets"),
        {"targets": script_table("targets")},
    ),
    Result(
        "stock_bm25",
        _lab("stock_bm25"),
        {"stock_bm25": script_table("stock_bm25")},
    ),
    Result(
        "training_passes",
        _lab("training_passes"),
        {"training_passes": script_table("training_passes")},
    ),
    Result(
        "metadata_pairs",
        _lab("metadata_pairs"),
        {"metadata_pairs": script_table("metadata_pairs")},
    ),
    Result(
        "query_adapter",
        _lab("query_adapter"),
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
        "python -m benchmarks.bench_keyword --tools 10000 "
        "--out benchmarks/results/bench_keyword.json",
        {"bench_keyword": script_table("bench_keyword")},
    ),
    Result(
        "bench_backends",
        "python -m benchmarks.bench_backends --sizes 1000,10000,100000 "
        "--backends keyword,bm25,fts5 --out benchmarks/results/bench_backends.json",
        {"bench_backends": script_table("bench_backends", "results")},
    ),
    Result(
        "bench_startup",
        "python -m benchmarks.bench_startup --out benchmarks/results/bench_startup.json",
        {"bench_startup": script_table("bench_startup")},
    ),
    Result(
        "bench_embedding_10k",
        "python -m benchmarks.bench_embedding --tools 10000 --cache-dir /tmp/emb_cold "
        "--out benchmarks/results/bench_embedding_10k.json",
        {
            "bench_embedding_10k": lambda data: _script("bench_embedding").markdown(
                [data, json.loads((RESULTS / "bench_embedding_10k_warm.json").read_text("utf-8"))]
            )
        },
    ),
    Result(
        "bench_embedding_10k_warm",
        "python -m benchmarks.bench_embedding --tools 10000 --cache-dir /tmp/emb_cold --warm "
        "--out benchmarks/results/bench_embedding_10k_warm.json",
    ),
    Result(
        "bench_embedding_10k_int8",
        "python -m benchmarks.bench_embedding --tools 10000 --precision int8 "
        "--cache-dir /tmp/emb_cold_int8 --out benchmarks/results/bench_embedding_10k_int8.json",
        {"bench_embedding_10k_int8": lambda data: _script("bench_embedding").markdown([data])},
    ),
    Result(
        "bench_export",
        "python -m benchmarks.bench_export --out benchmarks/results/bench_export.json",
        {"bench_export": script_table("bench_export")},
    ),
    Result(
        "embedding_quality",
        "python -m benchmarks.bench_embedding --quality "
        "--out benchmarks/results/embedding_quality.json",
        {"embedding_quality": lambda data: _script("bench_embedding").markdown_quality(data)},
    ),
    Result(
        "bench_hybrid",
        "python -m benchmarks.bench_backends --sizes 10000,100000 --backends hybrid "
        "--embedding-max 100000 --cold-cache-dir /tmp/hyb_cold "
        "--out benchmarks/results/bench_hybrid.json",
        {"bench_hybrid": lambda data: _script("bench_backends").markdown_default(data["results"])},
    ),
    Result(
        "bench_pool_updates",
        "python -m benchmarks.bench_pool_updates --sizes 10000,100000 --repeat 3 "
        "--out benchmarks/results/bench_pool_updates.json",
        {"bench_pool_updates": script_table("bench_pool_updates")},
    ),
    Result(
        "bench_postgres",
        "python -m benchmarks.bench_postgres --only load --tools 100000 --replicas 4 "
        "--clients 32 --duration 30 --out benchmarks/results/bench_postgres.json",
        {"bench_postgres": script_table("bench_postgres")},
    ),
    Result(
        "bench_pg_scale",
        "python -m benchmarks.bench_pg_scale --sizes 10000,100000 --queries 100 "
        "--out benchmarks/results/bench_pg_scale.json",
        {"bench_pg_scale": script_table("bench_pg_scale")},
    ),
    Result(
        "bench_gateway",
        "python -m benchmarks.bench_gateway --out benchmarks/results/bench_gateway.json",
        {"bench_gateway": script_table("bench_gateway")},
    ),
    Result(
        "bench_server_words",
        "python -m benchmarks.bench_server_words --out benchmarks/results/bench_server_words.json",
    ),
    Result(
        "baseline",
        "toolsearch bench --split all --quiet --json-out benchmarks/baseline.json",
        path=ROOT / "benchmarks" / "baseline.json",
    ),
)

_MARKER = re.compile(r"<!-- (/?)table:([A-Za-z0-9_.-]+) -->")


class TableError(ValueError):
    """A page's table markers are malformed or name an unknown table."""


def tables() -> dict[str, tuple[Result, Render]]:
    """Every table name, with the result it is rendered from."""
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
    again = f"`python -m benchmarks.regenerate --only {result.name}`"
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


def stale(path: Path = RESULTS_PAGE) -> list[str]:
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
    """The command line; a malformed table marker or unreadable results file is one line on
    stderr (naming the page) and exit status 2."""
    try:
        return _main(argv)
    except TableError as exc:
        print(f"regenerate: {exc}", file=sys.stderr)
        return 2


def _on_pages(action: Callable[[Path], list[str]]) -> list[str]:
    """``action`` applied to every page of :data:`PAGES`; a marker error names its page."""
    found: list[str] = []
    for page in PAGES:
        try:
            found += action(page)
        except TableError as exc:
            raise TableError(f"{_shown_path(page)}: {exc}") from exc
    return found


def _rewrite_page(page: Path, names: Sequence[str]) -> list[str]:
    """Rewrite the tables ``names`` that ``page`` shows; the names rewritten."""
    text = page.read_text(encoding="utf-8")
    page.write_text(rewrite(text, names), encoding="utf-8")
    return [f"{_shown_path(page)}:{name}" for name, _, _ in blocks(text) if name in names]


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--only", action="append", default=[], metavar="NAME", help="result or table name")
    add("--tables", action="store_true", help="only rewrite the tables from the JSON")
    add("--check", action="store_true", help="exit 1 if a table differs from its JSON")
    add("--list", action="store_true", help="print the registry")
    args = parser.parse_args(argv)
    if args.list:
        for result in REGISTRY:
            shown = ", ".join(result.tables) or "no table"
            print(f"{result.name}: {_shown_path(result.file)} ← {result.command} [{shown}]")
        return 0
    if args.check:
        old = _on_pages(lambda page: [f"{_shown_path(page)}: {n}" for n in stale(page)])
        for name in old:
            print(f"stale table: {name}", file=sys.stderr)
        return 1 if old else 0
    chosen = _selected(args.only)
    failed = [] if args.tables else _run(chosen)
    names = [t for r in chosen for t in r.tables]
    done = _on_pages(lambda page: _rewrite_page(page, names))
    print(f"regenerate: tables rewritten: {', '.join(done) or 'none'}", file=sys.stderr)
    if failed:
        print(f"regenerate: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
