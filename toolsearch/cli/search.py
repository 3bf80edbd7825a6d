"""``toolsearch search``: run one ToolSearch query against a catalogue.

The query is an argument, or read whole from a file (``--query-file``) or standard input
(``-``), for queries longer than a command line may be (about 128 KB for one argument on Linux).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from toolsearch.catalog import load_nonempty_catalog
from toolsearch.cli._output import console, print_json, shorten
from toolsearch.cli._scope import (
    CATALOG_HELP,
    add_backend_argument,
    add_scope_arguments,
    scoped_tools,
)
from toolsearch.engine import DEFAULT_MAX_RESULTS, ToolSearch
from toolsearch.errors import ConfigError

__all__ = ["read_query", "register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "search",
        help="search a catalogue's deferred tools as the ToolSearch tool would",
        description="Run one ToolSearch query. Every catalogue tool is deferred (searchable) "
        "unless its record says always_load: true or should_defer: false; MCP tools are always "
        "deferred unless always_load. select: and exact names find any tool.",
    )
    parser.add_argument(
        "query",
        nargs="?",
        help='the query, e.g. "slack send message" or "select:a,b"; - reads it from stdin',
    )
    parser.add_argument(
        "--query-file",
        metavar="PATH",
        help="read the query from this UTF-8 file instead (- for stdin); one final newline is "
        "dropped",
    )
    parser.add_argument("--catalog", required=True, help=CATALOG_HELP)
    add_backend_argument(parser)
    parser.add_argument(
        "--max-results",
        type=int,
        default=DEFAULT_MAX_RESULTS,
        help=f"results to return (default {DEFAULT_MAX_RESULTS})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_scope_arguments(parser)
    parser.set_defaults(func=run)


def read_query(args: argparse.Namespace) -> str:
    """The query from the argument, ``--query-file`` or stdin (``-``); exactly one of them."""
    if args.query is None and args.query_file is None:
        raise ConfigError("no query: give it as an argument or with --query-file PATH (- is stdin)")
    if args.query is not None and args.query_file is not None:
        raise ConfigError("give the query as an argument or with --query-file, not both")
    source = args.query_file if args.query is None else args.query
    if args.query is not None and source != "-":
        return str(args.query)
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        name = "standard input" if source == "-" else source
        raise ConfigError(f"cannot read the query from {name}: {exc}") from exc
    return text.removesuffix("\n").removesuffix("\r") if text.endswith("\n") else text


def run(args: argparse.Namespace) -> int:
    query = read_query(args)
    tools = scoped_tools(load_nonempty_catalog(args.catalog), args)
    engine = ToolSearch(tools, backend=args.backend)
    result = engine.search(query, args.max_results)
    if args.json:
        print_json(result.to_json())
        return 0
    out = console()
    if not result.matches:
        for line in filter(None, (result.text(), result.not_found_text())):
            out.print(escape(line))
        return 0
    title = f"{shorten(query)!r} — {result.total_deferred_tools} deferred tools"
    table = Table(title=escape(title))
    table.add_column("#", justify="right")
    table.add_column("tool")
    table.add_column("score", justify="right")
    table.add_column("via")
    for rank, match in enumerate(result.matches, start=1):
        score = "—" if match.score is None else f"{match.score:g}"
        table.add_row(str(rank), escape(match.name), score, match.source)
    out.print(table)
    if result.not_found:
        out.print(escape(result.not_found_text()))
    return 0
