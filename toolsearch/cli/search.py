"""``toolsearch search``: run one ToolSearch query against a catalogue."""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from toolsearch.catalog import load_catalog
from toolsearch.cli._output import console, print_json
from toolsearch.cli.request import add_scope_arguments, load_scope
from toolsearch.engine import DEFAULT_MAX_RESULTS, ToolSearch

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "search",
        help="search a catalogue's deferred tools as the ToolSearch tool would",
        description="Run one ToolSearch query. Every catalogue tool counts as deferred unless "
        "the catalogue marks it always_load (or it is a non-MCP tool without should_defer).",
    )
    parser.add_argument("query", help='the query, e.g. "slack send message" or "select:a,b"')
    parser.add_argument("--catalog", required=True, help="JSONL/JSON catalogue or dataset folder")
    parser.add_argument("--backend", help="ranking backend (default: configured or measured best)")
    parser.add_argument(
        "--max-results",
        type=int,
        default=DEFAULT_MAX_RESULTS,
        help=f"results to return (default {DEFAULT_MAX_RESULTS})",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_scope_arguments(parser)
    parser.set_defaults(func=run)


def catalogue_as_deferred(tools: list[Any]) -> list[Any]:
    """Every tool counts as deferred unless the catalogue says otherwise (``always_load``)."""
    from dataclasses import replace

    return [
        t if t.always_load or t.mcp or t.should_defer else replace(t, should_defer=True)
        for t in tools
    ]


def scoped_tools(tools: list[Any], args: argparse.Namespace) -> list[Any]:
    """The tools ``--deny`` and ``--agent`` leave searchable (ToolSearch itself left out).

    Raises :class:`ConfigError` when they take ToolSearch away: search is then off and the
    agent's tools would be sent inline instead.
    """
    deny = getattr(args, "deny", None) or []
    if not deny and not getattr(args, "agent", None):
        return tools
    from toolsearch.agent.pool import resolve_tools
    from toolsearch.errors import ConfigError
    from toolsearch.tool import TOOL_SEARCH_NAME

    agent = load_scope(args)
    resolved = resolve_tools(tools, deny=deny, agent=agent)
    if not resolved.has_tool_search:
        who = f"agent {agent.name!r}" if agent is not None else "these deny rules"
        raise ConfigError(
            f"{TOOL_SEARCH_NAME} is not available to {who}: tool search is off and its "
            f"{len(resolved.tools)} tools are sent inline (see 'toolsearch request')"
        )
    return [t for t in resolved.tools if t.name != TOOL_SEARCH_NAME]


def run(args: argparse.Namespace) -> int:
    tools = scoped_tools(catalogue_as_deferred(load_catalog(args.catalog)), args)
    engine = ToolSearch(tools, backend=args.backend)
    result = engine.search(args.query, args.max_results)
    if args.json:
        print_json(result.to_json())
        return 0
    out = console()
    if not result.matches:
        out.print(result.text())
        return 0
    table = Table(title=f"{args.query!r} — {result.total_deferred_tools} deferred tools")
    table.add_column("#", justify="right")
    table.add_column("tool")
    table.add_column("score", justify="right")
    table.add_column("via")
    for rank, match in enumerate(result.matches, start=1):
        score = "—" if match.score is None else f"{match.score:g}"
        table.add_row(str(rank), match.name, score, match.source)
    out.print(table)
    return 0
